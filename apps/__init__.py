"""The vision_cuts desktop application: interactive segmentation, stereo and flow.

Started by ``vision-cuts gui`` or ``vision-cuts-gui``; needs PyQt5 (the ``apps``
extra: ``pip install "vision-cuts[apps]"``). The application uses only the public API
of :mod:`vision_cuts`. PyQt5 is imported by :func:`main`, not by this package, so the
command line can say what is missing when it is absent.
"""

from __future__ import annotations

import argparse

TABS = ("segment", "stereo", "flow")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``vision-cuts-gui`` and ``vision-cuts gui``."""
    from vision_cuts.cli import SAMPLES

    parser.add_argument(
        "image",
        nargs="?",
        help="picture to open in the Segment tab: a file or one of "
        + ", ".join(SAMPLES),
    )
    parser.add_argument(
        "--tab", choices=TABS, default="segment", help="tab shown first"
    )
    parser.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``vision-cuts-gui``: parse ``argv`` and run the application."""
    from .app import main as _main

    return _main(argv)
