"""DIMACS max-flow files (``.max``): reader and writer.

The format: ``c`` comment lines, one problem line ``p max <nodes> <arcs>``, the
terminals ``n <id> s`` and ``n <id> t``, then one ``a <from> <to> <capacity>`` line per
arc. Nodes are numbered from 1 in the file and from 0 in Python.
"""

from __future__ import annotations

import os
import re

import numpy as np

from .graph import (
    _MAX_ARCS,
    _MAX_NODES,
    _MAX_TOTAL,
    MAX_CAPACITY,
    FlowGraph,
    FlowProblem,
    _check_terminals,
    flow_graph,
)

__all__ = ["DimacsFormatError", "read_dimacs", "write_dimacs"]


class DimacsFormatError(ValueError):
    """A malformed DIMACS file; the message names the file and the line number."""


# A numeric field is plain decimal digits with an optional sign (Python's int() would
# also take "1_000" and non-ASCII digits).
_INTEGER = re.compile(r"[+-]?[0-9]+")

# Nodes beyond the 2 * arcs + 2 that the arc lines and the terminals can name are
# isolated; a file may declare this many of them. The bound keeps a few bytes of file
# from claiming gigabytes of node arrays.
MAX_ISOLATED_NODES = 1 << 24


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

    Notes
    -----
    Numeric fields are decimal integers (digits with an optional sign). The limits of
    :func:`~vision_cuts.flow_graph` apply and are reported at the line that breaks
    them: at most 2**31 - 2 nodes and 2**31 - 1 arcs, and capacities whose sum is at
    most 2**61 (so each is too). The node count may exceed ``2 * arcs + 2`` (the nodes
    the arcs and the terminals can name) by at most ``MAX_ISOLATED_NODES`` (2**24)
    isolated nodes. A byte-order mark at the start of the file (as some Windows
    editors write) is skipped.
    """
    name = os.fspath(path)
    n = m = None
    p_line = 0
    s = t = None
    total = 0
    tails: list[int] = []
    heads: list[int] = []
    caps: list[int] = []

    def fail(lineno: int, msg: str) -> DimacsFormatError:
        return DimacsFormatError(f"{name}, line {lineno}: {msg}")

    def integers(lineno: int, line: str, fields: list[str], what: str) -> list[int]:
        for field in fields:
            if not _INTEGER.fullmatch(field):
                raise fail(lineno, f"non-integer {what} in {line.strip()!r}")
        try:
            return [int(field) for field in fields]
        except ValueError:  # more digits than Python converts
            raise fail(lineno, f"{what} with too many digits") from None

    with open(name, encoding="utf-8-sig", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0].startswith("c"):  # a comment ("c", "c---", ...)
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
                u, v, c = integers(lineno, line, parts[1:], "field")
                if not (1 <= u <= n and 1 <= v <= n):
                    raise fail(lineno, f"node out of range 1..{n} in {line.strip()!r}")
                if c < 0:
                    raise fail(lineno, f"negative capacity {c}")
                if c > MAX_CAPACITY:
                    raise fail(
                        lineno,
                        f"capacity {c} beyond 2**62 (the largest arc capacity, so "
                        "that flows fit in int64)",
                    )
                if len(tails) == m:
                    raise fail(
                        lineno,
                        f"more 'a' lines than the {m} arcs announced by the 'p' line "
                        f"(line {p_line})",
                    )
                total += c
                if total > _MAX_TOTAL:
                    raise fail(
                        lineno,
                        f"the capacities up to this line sum to {total}, beyond 2**61 "
                        "(the largest total, so that flows fit in int64)",
                    )
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
                n, m = integers(lineno, line, parts[2:], "field")
                p_line = lineno
                if n < 2 or m < 0:
                    raise fail(
                        lineno, f"need at least 2 nodes and 0 arcs, got n={n}, m={m}"
                    )
                if n > _MAX_NODES:
                    raise fail(
                        lineno,
                        f"node count {n} beyond 2**31 - 2 = {_MAX_NODES} (the most "
                        "nodes a graph can have)",
                    )
                if m > _MAX_ARCS:
                    raise fail(
                        lineno,
                        f"arc count {m} beyond 2**31 - 1 = {_MAX_ARCS} (the most arcs "
                        "a graph can have)",
                    )
                if n > 2 * m + 2 + MAX_ISOLATED_NODES:
                    raise fail(
                        lineno,
                        f"node count {n} too large for {m} arcs: the arcs and the "
                        f"terminals name at most {2 * m + 2} nodes, and at most "
                        f"{MAX_ISOLATED_NODES} more (isolated) nodes are accepted",
                    )
            elif kind == "n":
                if n is None:
                    raise fail(lineno, "an 'n' line before the 'p max' line")
                if len(parts) != 3 or parts[2] not in ("s", "t"):
                    raise fail(
                        lineno,
                        f"expected 'n <id> s' or 'n <id> t', got {line.strip()!r}",
                    )
                (v,) = integers(lineno, line, parts[1:2], "node")
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
            np.array(caps, dtype=np.int64),
            num_nodes=n,
        )
    except ValueError as exc:
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
        0-based terminals, different nodes of the graph.
    comment : str, optional
        ASCII text for leading ``c`` lines.

    Raises
    ------
    TypeError, ValueError
        A bad graph, terminal or comment; these are checked, and the whole text is
        built, before ``path`` is opened, so an existing file is left as it was.
    """
    if not isinstance(graph, FlowGraph):
        raise TypeError(f"graph must be a FlowGraph, got {type(graph).__name__}")
    n = graph.num_nodes
    source, sink = _check_terminals(source, sink, n)
    if comment is not None and not isinstance(comment, str):
        raise TypeError(f"comment must be a string, got {type(comment).__name__}")
    if comment and not comment.isascii():
        i, ch = next((i, ch) for i, ch in enumerate(comment) if not ch.isascii())
        raise ValueError(
            f"comment must be ASCII (DIMACS files are ASCII), got {ch!r} at position "
            f"{i}"
        )
    pos = graph.capacity > 0
    arcs = int(pos.sum())
    if n > 2 * arcs + 2 + MAX_ISOLATED_NODES:
        raise ValueError(
            f"graph has {n} nodes but {arcs} arcs of positive capacity: read_dimacs "
            f"accepts at most {MAX_ISOLATED_NODES} isolated nodes beyond the "
            f"{2 * arcs + 2} that the arcs and the terminals name"
        )
    tails = graph.tails[pos] + 1
    heads = graph.heads[pos] + 1
    caps = graph.capacity[pos]
    lines: list[str] = []
    if comment:
        lines += [f"c {c}" for c in comment.splitlines()]
    lines += [
        f"p max {n} {arcs}",
        f"n {source + 1} s",
        f"n {sink + 1} t",
    ]
    if caps.size:
        body = np.char.add(
            np.char.add(np.char.add("a ", tails.astype(str)), " "),
            np.char.add(np.char.add(heads.astype(str), " "), caps.astype(str)),
        )
        lines += body.tolist()
    text = "\n".join(lines) + "\n"
    with open(os.fspath(path), "w", encoding="ascii") as f:
        f.write(text)
