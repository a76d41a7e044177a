"""``vision-cuts maxflow FILE.max``: maximum flow of a DIMACS max-flow file."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

import numpy as np

#: the name that sends a text output to standard output
STDOUT = "-"


@contextlib.contextmanager
def _text_output(path: str, option: str) -> Iterator[TextIO]:
    """A text file to write ``path`` through (see ``cli._writing``), or standard
    output for ``-``."""
    from .cli import _writing

    if path == STDOUT:
        yield sys.stdout
        sys.stdout.flush()
        return
    with _writing(path, option) as part, open(part, "w", encoding="ascii") as f:
        yield f


#: the signatures of compressed files, which a DIMACS reader takes for text
_COMPRESSED = {
    b"\x1f\x8b": ("gzip", "gunzip"),
    b"BZh": ("bzip2", "bunzip2"),
    b"\xfd7zXZ\x00": ("xz", "unxz"),
    b"\x28\xb5\x2f\xfd": ("zstd", "unzstd"),
    b"PK\x03\x04": ("zip", "unzip"),
}

#: how much of a file is looked at to tell text from binary
_SNIFF = 1 << 16


def _check_text(path: str) -> None:
    """``error: ...`` where the regular file ``path`` is not text (compressed, or
    with NUL bytes), whose first line the reader's error would echo as raw bytes. A
    pipe is not read ahead (its bytes would be lost)."""
    if not os.path.isfile(path):
        return  # (missing: the reader says so; a pipe: read as it comes)
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF)
    except OSError:
        return  # the reader reports it
    for magic, (kind, tool) in _COMPRESSED.items():
        if head.startswith(magic):
            raise SystemExit(
                f"error: {path!r} is {kind}-compressed, not a DIMACS text file; "
                f"decompress it first ({tool})"
            )
    # (bytes that are no UTF-8 alone are taken: the reader replaces them, as in a
    # comment line in Latin-1)
    if b"\x00" in head:
        raise SystemExit(
            f"error: {path!r} is not a text file (a DIMACS max-flow file is text: "
            "p, n and a lines)"
        )


def _printable(text: str) -> str:
    """``text`` with control characters (a binary line quoted in an error) escaped
    as Python writes them."""
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)


def _cmd_maxflow(args: argparse.Namespace) -> int:
    from .cli import _check_distinct, _check_output, check_stdout, open_descriptor
    from .dimacs import read_dimacs
    from .graph import maximum_flow

    if args.flow == STDOUT and args.cut == STDOUT:
        raise SystemExit(
            "error: --flow and --cut both name standard output ('-'); give one of "
            "them a file"
        )
    outputs = [(p, o) for p, o in ((args.flow, "--flow"), (args.cut, "--cut"))
               if p is not None]  # fmt: skip
    for path, option in outputs:
        if path == STDOUT:
            check_stdout(option)
        else:
            _check_output(path, option)
    files = [(p, o) for p, o in outputs if p != STDOUT]
    _check_distinct(files, [args.file])
    if STDOUT in (args.flow, args.cut) and any(open_descriptor(p) == 1
                                               for p, _ in files):  # fmt: skip
        raise SystemExit(
            "error: --flow and --cut both name standard output ('-' and "
            "'/dev/stdout'); give one of them a file"
        )
    _check_text(args.file)
    # with an output on standard output the summary goes to standard error
    report = sys.stderr if STDOUT in (args.flow, args.cut) else sys.stdout
    t0 = time.perf_counter()
    try:
        graph, source, sink = read_dimacs(args.file)
    except OSError as exc:
        raise SystemExit(
            f"error: cannot read {args.file!r}: {exc.strerror or exc}"
        ) from None
    except ValueError as exc:
        raise SystemExit(f"error: {_printable(str(exc))}") from None
    except MemoryError:
        raise SystemExit(
            f"error: {args.file}: not enough memory to read the graph"
        ) from None
    t1 = time.perf_counter()
    try:
        res = maximum_flow(
            graph, source, sink, method=args.method, backend=args.backend
        )
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"error: {exc}") from None
    except MemoryError:
        raise SystemExit(
            f"error: {args.file}: not enough memory to solve a graph of "
            f"{graph.num_nodes} nodes and {graph.num_arcs} arcs"
        ) from None
    t2 = time.perf_counter()
    sink_side = int(res.labels.sum())
    print(
        f"max flow {res.value} from node {source + 1} to node {sink + 1} "
        f"({graph.num_nodes} nodes, {graph.edge_arc.shape[0]} arcs): "
        f"read {t1 - t0:.2f} s, solved in {t2 - t1:.3f} s on {res.stats['backend']}; "
        f"min cut: {graph.num_nodes - sink_side} source-side / {sink_side} sink-side "
        "nodes",
        file=report,
    )
    if args.flow:  # a line for each arc of the file that carries flow, in file order
        per_arc = graph.edge_flow(res.flow)
        pos = np.flatnonzero(per_arc > 0)
        arcs = graph.edge_arc[pos]
        tails = graph.tails[arcs] + 1
        heads = graph.heads[arcs] + 1
        with _text_output(args.flow, "--flow") as f:
            f.write(f"s {res.value}\n")
            for u, v, x in zip(
                tails.tolist(), heads.tolist(), per_arc[pos].tolist(), strict=True
            ):
                f.write(f"f {u} {v} {x}\n")
    if args.cut:
        # one open (np.savetxt given a name opens it twice: a pipe's reader would
        # get the first, empty one)
        with _text_output(args.cut, "--cut") as f:
            np.savetxt(f, np.flatnonzero(res.labels == 0) + 1, fmt="%d")
    return 0


def add_parser(subparsers) -> None:
    """Register ``maxflow`` on the ``vision-cuts`` sub-command parser."""
    from .cli import add_backend_option

    p = subparsers.add_parser(
        "maxflow", help="maximum flow and minimum cut of a DIMACS .max file"
    )
    p.add_argument("file", help="DIMACS max-flow file (p max, n s/t, a lines)")
    p.add_argument(
        "--method",
        choices=("highest", "fifo"),
        default="highest",
        help="active-node selection of the CPU solver",
    )
    add_backend_option(p)
    p.add_argument(
        "--flow",
        help="write the flow: DIMACS 's' and 'f u v x' lines, one for each arc of the "
        "file that carries flow, in file order ('-': standard output)",
    )
    p.add_argument(
        "--cut",
        help="write the source-side nodes (1-based, one a line; '-': standard output)",
    )
    p.set_defaults(func=_cmd_maxflow)
