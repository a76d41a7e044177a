"""DIMACS max-flow files (``.max``): reader and writer.

The format: ``c`` comment lines, one problem line ``p max <nodes> <arcs>``, the
terminals ``n <id> s`` and ``n <id> t``, then one ``a <from> <to> <capacity>`` line per
arc. Nodes are numbered from 1 in the file and from 0 in Python.
"""

from __future__ import annotations

import os

import numpy as np

from .graph import FlowGraph, FlowProblem, flow_graph

__all__ = ["DimacsFormatError", "read_dimacs", "write_dimacs"]


class DimacsFormatError(ValueError):
    """A malformed DIMACS file; the message names the file and the line number."""


_INT64_MAX = 2**63 - 1


def read_dimacs(path: str | os.PathLike) -> FlowProblem:
    """Read a DIMACS max-flow file.

    Parameters
    ----------
    path : str or path-like
        The ``.max`` file.

    Returns
    -------
    FlowProblem
        ``(graph, source, sink)`` with 0-based node indices; the arcs of the file are
        the input edges of the graph in file order (``graph.edge_arc``).

    Raises
    ------
    DimacsFormatError
        (a ValueError) for a malformed file: the message gives the line number.
    """
    name = os.fspath(path)
    n = m = None
    s = t = None
    tails: list[int] = []
    heads: list[int] = []
    caps: list[int] = []

    def fail(lineno: int, msg: str) -> DimacsFormatError:
        return DimacsFormatError(f"{name}, line {lineno}: {msg}")

    with open(name, encoding="ascii", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] == "c":
                continue
            kind = parts[0]
            if kind == "a":
                if n is None:
                    raise fail(lineno, "an 'a' line before the 'p max' line")
                if len(parts) != 4:
                    raise fail(
                        lineno,
                        f"expected 'a <from> <to> <capacity>', got {line.strip()!r}",
                    )
                try:
                    u, v, c = int(parts[1]), int(parts[2]), int(parts[3])
                except ValueError:
                    raise fail(
                        lineno, f"non-integer field in {line.strip()!r}"
                    ) from None
                if not (1 <= u <= n and 1 <= v <= n):
                    raise fail(lineno, f"node out of range 1..{n} in {line.strip()!r}")
                if c < 0:
                    raise fail(lineno, f"negative capacity {c}")
                if c > _INT64_MAX:
                    raise fail(lineno, f"capacity {c} beyond int64 ({_INT64_MAX})")
                tails.append(u - 1)
                heads.append(v - 1)
                caps.append(c)
            elif kind == "p":
                if n is not None:
                    raise fail(lineno, "a second 'p' line")
                if len(parts) != 4 or parts[1] != "max":
                    raise fail(
                        lineno, f"expected 'p max <nodes> <arcs>', got {line.strip()!r}"
                    )
                try:
                    n, m = int(parts[2]), int(parts[3])
                except ValueError:
                    raise fail(
                        lineno, f"non-integer field in {line.strip()!r}"
                    ) from None
                if n < 2 or m < 0:
                    raise fail(
                        lineno, f"need at least 2 nodes and 0 arcs, got n={n}, m={m}"
                    )
            elif kind == "n":
                if n is None:
                    raise fail(lineno, "an 'n' line before the 'p max' line")
                if len(parts) != 3 or parts[2] not in ("s", "t"):
                    raise fail(
                        lineno,
                        f"expected 'n <id> s' or 'n <id> t', got {line.strip()!r}",
                    )
                try:
                    v = int(parts[1])
                except ValueError:
                    raise fail(
                        lineno, f"non-integer node in {line.strip()!r}"
                    ) from None
                if not 1 <= v <= n:
                    raise fail(lineno, f"node {v} out of range 1..{n}")
                if parts[2] == "s":
                    if s is not None:
                        raise fail(lineno, "a second source line")
                    s = v - 1
                else:
                    if t is not None:
                        raise fail(lineno, "a second sink line")
                    t = v - 1
            else:
                raise fail(
                    lineno, f"unknown line type {kind!r} (expected c, p, n or a)"
                )
    if n is None:
        raise DimacsFormatError(f"{name}: no 'p max <nodes> <arcs>' line")
    if s is None or t is None:
        raise DimacsFormatError(
            f"{name}: the source or the sink ('n <id> s/t') is missing"
        )
    if s == t:
        raise DimacsFormatError(
            f"{name}: the source and the sink are the same node {s + 1}"
        )
    if len(tails) != m:
        raise DimacsFormatError(
            f"{name}: the 'p' line announces {m} arcs, the file has {len(tails)}"
        )
    try:
        graph = flow_graph(
            np.array(tails, dtype=np.int64),
            np.array(heads, dtype=np.int64),
            np.array(caps, dtype=object).astype(np.int64)
            if caps
            else np.zeros(0, np.int64),
            num_nodes=n,
        )
    except (ValueError, OverflowError) as exc:
        raise DimacsFormatError(f"{name}: {exc}") from None
    return FlowProblem(graph, s, t)


def write_dimacs(
    path: str | os.PathLike,
    graph: FlowGraph,
    source: int,
    sink: int,
    *,
    comment: str | None = None,
) -> None:
    """Write a graph as a DIMACS max-flow file.

    One ``a`` line per arc of positive capacity (parallel input edges appear merged,
    reverse arcs of capacity 0 are left out), nodes numbered from 1.

    Parameters
    ----------
    path : str or path-like
        Output file.
    graph : FlowGraph
        The graph.
    source, sink : int
        0-based terminals.
    comment : str, optional
        Text for leading ``c`` lines.
    """
    if not isinstance(graph, FlowGraph):
        raise TypeError(f"graph must be a FlowGraph, got {type(graph).__name__}")
    n = graph.num_nodes
    for nm, v in (("source", source), ("sink", sink)):
        if not 0 <= int(v) < n:
            raise ValueError(f"{nm} must lie in [0, {n - 1}], got {v}")
    pos = graph.capacity > 0
    tails = graph.tails[pos] + 1
    heads = graph.heads[pos] + 1
    caps = graph.capacity[pos]
    lines: list[str] = []
    if comment:
        lines += [f"c {c}" for c in str(comment).splitlines()]
    lines += [
        f"p max {n} {int(pos.sum())}",
        f"n {int(source) + 1} s",
        f"n {int(sink) + 1} t",
    ]
    body = (
        np.char.add(
            np.char.add(np.char.add("a ", tails.astype(str)), " "),
            np.char.add(np.char.add(heads.astype(str), " "), caps.astype(str)),
        )
        if caps.size
        else np.zeros(0, dtype=str)
    )
    with open(os.fspath(path), "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
        if body.size:
            f.write("\n".join(body.tolist()) + "\n")
