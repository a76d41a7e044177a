"""Batch mode of ``vision-cuts segment|stereo|flow`` on a Dask cluster
(``vision_cuts.distributed``): ``--workers N`` starts a local cluster (one worker per
GPU with dask-cuda where GPUs exist, else N processes), ``--scheduler ADDRESS`` joins a
running one. The inputs are folders, glob patterns or a video; ``-o`` names the output
folder."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def add_options(parser: argparse.ArgumentParser, videos: bool = False) -> None:
    """The batch-mode options of a sub-command (``videos``: it takes videos too)."""
    inputs = "folders or glob patterns of " + ("frames, or videos" if videos else
                                                "pictures")  # fmt: skip
    g = parser.add_argument_group(
        "many files (Dask)",
        f"with --workers or --scheduler the inputs are {inputs}, and -o is the "
        "output folder; existing outputs are skipped",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=None,
        help="start a local cluster: one worker per GPU where GPUs exist (dask-cuda), "
        "else this many processes",
    )
    g.add_argument("--scheduler", help="address of a running Dask scheduler")


def wanted(args: argparse.Namespace) -> bool:
    return args.workers is not None or args.scheduler is not None


def _check_cluster_options(args: argparse.Namespace) -> None:
    if args.workers is not None and args.scheduler is not None:
        raise SystemExit("error: give --workers or --scheduler, not both")
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"error: --workers must be >= 1, got {args.workers}")


def _dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise SystemExit(
            'error: many-file mode needs Dask: pip install "vision-cuts[distributed]"'
        ) from None
    return distributed


def _client(args: argparse.Namespace) -> Any:
    _check_cluster_options(args)
    distributed = _dask()
    from .distributed import local_client

    if args.scheduler is not None:
        return distributed.Client(args.scheduler)
    return local_client(args.workers)


def _finish(summary: Any, out: str) -> int:
    first, *failures = str(summary).split("\n")
    where = f"; outputs in {out}" if os.path.isdir(out) else "; no output folder made"
    print("\n".join([first + where, *failures]))
    return 1 if summary.failed else 0


def _need_output(args: argparse.Namespace) -> str:
    if args.output is None or not args.output.strip():
        got = "" if args.output is None else f", got {args.output!r}"
        raise SystemExit(f"error: many-file mode needs -o OUTPUT_FOLDER{got}")
    out = args.output
    if os.path.exists(out) and not os.path.isdir(out):
        raise SystemExit(
            f"error: cannot write to {out!r} (-o/--output): it is a file, and "
            "many-file mode needs an output folder"
        )
    base = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(base):  # the folder is made later, after the cluster
        base = os.path.dirname(base)
    if not os.path.isdir(base) or not os.access(base, os.W_OK | os.X_OK):
        why = "is not a directory" if not os.path.isdir(base) else "is not writable"
        raise SystemExit(
            f"error: cannot create the output folder {out!r} (-o/--output): "
            f"{base!r} {why}"
        )
    return out


def _run(args: argparse.Namespace, fn, *a: Any, inputs: Any = None, **kw: Any) -> int:
    """``fn(*a, out, client=..., **kw)`` into the output folder; ``inputs()``, where
    given, lists the input files, which must not lie in that folder. The folder is
    made by ``fn`` once its inputs are checked, and removed by it when nothing was
    written (:func:`vision_cuts.distributed._run`)."""
    out = _need_output(args)
    _check_cluster_options(args)
    if inputs is not None:
        _not_in_output(out, inputs(), "input")
    # --workers: the many-file function starts the cluster itself, once it has
    # checked the inputs and options (and only where there is work)
    client = _client(args) if args.scheduler is not None else None
    if client is None:
        _dask()
        kw["workers"] = args.workers
    try:
        summary = fn(*a, out, client=client, progress=sys.stderr.isatty(), **kw)
    except (ValueError, TypeError) as exc:
        from .cli import cli_error

        raise cli_error(exc) from None
    except OSError as exc:  # an input that cannot be read, a full disk, ...
        raise SystemExit(f"error: {exc}") from None
    finally:
        if client is not None:
            client.close()
    return _finish(summary, out)


def _not_in_output(out: str, inputs: list, option: str) -> None:
    """The output folder must not hold the inputs: their outputs would land among
    them (and be read as inputs by the next run), and an input of the output's name
    would count as done."""
    folder = os.path.realpath(out)
    for item in inputs:
        if isinstance(item, (str, os.PathLike)):
            if os.path.realpath(os.path.dirname(os.path.abspath(item))) == folder:
                raise SystemExit(
                    f"error: -o {out!r} holds the {option} {str(item)!r}; give the "
                    "outputs a folder of their own"
                )


def _check_exists(spec: str, what: str) -> None:
    """An input that is no glob pattern must exist (the library would say that a
    missing folder holds no image files)."""
    if any(c in spec for c in "*?[") or os.path.exists(spec):
        return
    raise SystemExit(f"error: cannot read the {what} {spec!r}: no such folder or file")


def _refuse(args: argparse.Namespace, names: tuple, why: str) -> None:
    """Single-file options given in many-file mode are an error, not ignored."""
    given = [n for n in names if getattr(args, n.lstrip("-").replace("-", "_"), None)]
    if given:
        raise SystemExit(f"error: many-file mode takes no {', '.join(given)} ({why})")


def segment(args: argparse.Namespace) -> int:
    from .distributed import _expand, segment_many

    if args.fg or args.bg or args.overlay or args.rect:
        raise SystemExit(
            "error: many-file mode takes no --fg, --bg, --overlay or --rect (each "
            "image gets the central box)"
        )
    _check_exists(args.image, "images")
    return _run(
        args,
        segment_many,
        args.image,
        inputs=lambda: _expand(args.image, "images"),
        iterations=args.iterations,
        smoothness=args.smoothness,
        connectivity=args.connectivity,
        backend=args.backend,
    )


def stereo(args: argparse.Namespace) -> int:
    from .distributed import _expand, stereo_many

    if args.right is None:
        raise SystemExit(
            "error: many-file mode needs LEFT and RIGHT folders (or glob patterns)"
        )
    _refuse(
        args, ("--png16", "--pfm", "--colormap"),
        "each pair gets <left name>.pfm in the output folder",
    )  # fmt: skip
    _check_exists(args.left, "left images")
    _check_exists(args.right, "right images")
    left = _expand(args.left, "left")
    right = _expand(args.right, "right")
    if len(left) != len(right):
        raise SystemExit(
            f"error: {len(left)} left images but {len(right)} right images"
        )

    return _run(
        args,
        stereo_many,
        list(zip(left, right, strict=True)),
        inputs=lambda: left + right,
        max_disparity=args.max_disparity,
        method=args.method,
        backend=args.backend,
        label_step=args.label_step,
    )


def flow(args: argparse.Namespace) -> int:
    from .distributed import _expand, _is_video, flow_many

    _refuse(
        args, ("--flo", "--color", "--max-magnitude"),
        "each frame pair gets <sequence>_<i>.flo in the output folder",
    )  # fmt: skip
    if args.max_frames is not None:
        raise SystemExit(
            "error: many-file mode takes no --max-frames (every frame pair of each "
            "sequence is written)"
        )
    from .cli_optical_flow import _FOURCC

    if args.fourcc != _FOURCC:
        raise SystemExit(
            "error: many-file mode takes no --fourcc (it writes .flo files, no video)"
        )
    if args.view is not None or args.arrow_scale is not None:
        raise SystemExit(
            "error: many-file mode takes no --view or --arrow-scale (it writes .flo "
            "files, no pictures)"
        )
    for spec in args.inputs:
        _check_exists(spec, "frames or video")
    sequences: dict = {}
    if len(args.inputs) > 1 and all(
        os.path.isfile(s) and not _is_video(s) for s in args.inputs
    ):  # frame files given one by one: one sequence, in the order given
        sequences["frames"] = list(args.inputs)
    for i, spec in enumerate(args.inputs if not sequences else ()):
        if _is_video(spec):
            name = Path(spec).stem
        elif Path(spec).is_dir():
            name = Path(spec).resolve().name or "frames"  # "." names its folder
        else:
            name = "frames"
        sequences[name if name not in sequences else f"{name}{i}"] = spec

    def inputs() -> list:
        files: list = []
        for seq in sequences.values():
            if isinstance(seq, str):
                seq = [seq] if _is_video(seq) else _expand(seq, "frames")
            files += seq
        return files

    return _run(
        args,
        flow_many,
        sequences,
        inputs=inputs,
        detector=args.detector,
        max_features=args.max_features,
        search_radius=args.search_radius,
        warm_start=not args.no_warm_start,
        backend=args.backend,
    )
