"""``vision-cuts gui``: start the desktop application (needs the ``apps`` extra)."""

from __future__ import annotations

import argparse
import importlib.util


def add_parser(subparsers) -> None:
    """Register the ``gui`` sub-command (the same options as ``vision-cuts-gui``)."""
    from .cli import SAMPLES, add_backend_option

    g = subparsers.add_parser(
        "gui",
        help="desktop application: interactive segmentation, stereo and flow (PyQt5)",
    )
    g.add_argument(
        "image",
        nargs="?",
        help="picture to open in the Segment tab: a file or one of "
        + ", ".join(SAMPLES),
    )
    g.add_argument(
        "--tab",
        choices=("segment", "stereo", "flow"),
        default="segment",
        help="tab shown first",
    )
    add_backend_option(g)
    g.set_defaults(func=_cmd_gui)


def _cmd_gui(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("PyQt5") is None:
        raise SystemExit('error: the GUI needs PyQt5: pip install "vision-cuts[apps]"')
    try:
        from .apps.app import run
    except ImportError as exc:  # e.g. Qt's system libraries (libGL, ...) missing
        raise SystemExit(f"error: cannot start the GUI: {exc}") from None
    return run(args.image, args.tab, args.backend)
