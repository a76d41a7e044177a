"""The main window (Segment, Stereo and Flow tabs) and the ``vision-cuts-gui`` entry."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback

from PyQt5.QtWidgets import QApplication, QLabel, QMainWindow, QTabWidget

import vision_cuts

from . import TABS, add_arguments
from .flow_tab import FlowTab
from .segment_tab import SegmentTab
from .stereo_tab import StereoTab
from .widgets import load_image, show_error

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    """Three tabs and a status bar naming the backend (GPU name or CPU)."""

    def __init__(self, backend: str = "auto") -> None:
        super().__init__()
        self.setWindowTitle("vision_cuts")
        self.backend = backend
        self.segment = SegmentTab(backend)
        self.stereo = StereoTab(backend)
        self.flow = FlowTab(backend)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.segment, "Segment")
        self.tabs.addTab(self.stereo, "Stereo")
        self.tabs.addTab(self.flow, "Flow")
        self.setCentralWidget(self.tabs)
        try:
            text = f"Backend: {vision_cuts.describe_backend(backend)}"
        except Exception as exc:  # e.g. backend="gpu" without a device
            text = f"Backend {backend!r} unavailable: {exc}"
        self.backend_label = QLabel(text)
        self.statusBar().addPermanentWidget(self.backend_label)
        for tab in (self.segment, self.stereo, self.flow):
            tab.statusMessage.connect(self._status)
        self.resize(1180, 780)

    def _status(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def show_tab(self, name: str) -> None:
        """Bring ``"segment"``, ``"stereo"`` or ``"flow"`` to the front."""
        self.tabs.setCurrentIndex(TABS.index(name))

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        for tab in (self.segment, self.stereo, self.flow):
            tab.shutdown()
        super().closeEvent(event)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vision-cuts-gui",
        description="Interactive segmentation, stereo and optical flow by graph cuts.",
    )
    add_arguments(p)
    return p


def _install_excepthook(window: MainWindow) -> None:
    """Unexpected errors go to a dialog (and the log), never kill the application."""

    def hook(kind, exc, tb):
        log.error("".join(traceback.format_exception(kind, exc, tb)))
        if issubclass(kind, KeyboardInterrupt):
            QApplication.quit()
            return
        show_error(window, "Unexpected error", exc)

    sys.excepthook = hook


def _no_display() -> str | None:
    """Why Qt would abort the process for want of a display (on Linux, without X11
    or Wayland and no platform chosen), or None."""
    if QApplication.instance() is not None or not sys.platform.startswith("linux"):
        return None
    chosen = ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")
    if not any(os.environ.get(v) for v in chosen):
        return (
            "no display: neither DISPLAY nor WAYLAND_DISPLAY is set; start it in a "
            "desktop session (or over ssh -X)"
        )
    if os.environ.get("QT_QPA_PLATFORM", "").split(":")[0] in ("offscreen", "minimal"):
        return None  # no display needed
    return _qt_start_problem()


def _qt_start_problem() -> str | None:
    """Qt aborts the process (SIGABRT) when the display it was given cannot be
    opened (a DISPLAY with no X server behind it, an unknown QT_QPA_PLATFORM): a
    child process starts Qt first, and its last words are the reason."""
    import subprocess

    code = (
        "import sys; from PyQt5.QtWidgets import QApplication; "
        "QApplication(sys.argv[:1])"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return None  # slow, not failed: let the window try
    if proc.returncode == 0:
        return None
    shown = {v: os.environ[v] for v in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
             if os.environ.get(v)}  # fmt: skip
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "could not" in ln.lower()), lines[0] if lines
                 else f"exit status {proc.returncode}")  # fmt: skip
    where = ", ".join(f"{k}={v!r}" for k, v in shown.items())
    return f"Qt cannot open the display ({where}): {first}"


def _first_picture(image: str) -> tuple:
    """``(picture, name)`` of the command line's IMAGE: a built-in sample (``NAME``
    or ``sample:NAME``) or a file; ``SystemExit`` with the reason otherwise, before
    any window opens."""
    import skimage.data

    from vision_cuts.cli import SAMPLES, is_sample

    if is_sample(image):
        name = image.split(":", 1)[-1]
        if name not in SAMPLES:
            raise SystemExit(f"error: unknown sample {name!r}; choose from {SAMPLES}")
        return getattr(skimage.data, name)(), name
    if not os.path.isfile(image):
        raise SystemExit(f"error: no such picture file {image!r}")
    try:
        return load_image(image), image
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None


def run(image: str | None = None, tab: str = "segment", backend: str = "auto") -> int:
    """Open the main window and run the event loop until it closes. A display that
    is missing, or a picture that cannot be opened, ends in ``SystemExit`` before
    any window opens."""
    reason = _no_display()
    if reason:
        raise SystemExit(f"error: cannot start the GUI: {reason}")
    first = _first_picture(image) if image else None
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl+C in the terminal quits
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("vision_cuts")
    window = MainWindow(backend)
    _install_excepthook(window)
    window.show()
    window.show_tab(tab)
    if first is not None:
        window.segment.set_image(*first)
    return app.exec_()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``vision-cuts-gui``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    return run(args.image, args.tab, args.backend)
