"""The main window (Segment, Stereo and Flow tabs) and the ``vision-cuts-gui`` entry."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import traceback

from PyQt5.QtWidgets import QApplication, QLabel, QMainWindow, QTabWidget

import vision_cuts

from . import TABS, add_arguments
from .flow_tab import FlowTab
from .segment_tab import SegmentTab
from .stereo_tab import StereoTab
from .widgets import show_error

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


def run(image: str | None = None, tab: str = "segment", backend: str = "auto") -> int:
    """Open the main window and run the event loop until it closes."""
    from vision_cuts.cli import SAMPLES

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl+C in the terminal quits
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("vision_cuts")
    window = MainWindow(backend)
    _install_excepthook(window)
    window.show()
    window.show_tab(tab)
    if image:
        name = image.split(":", 1)[-1]
        if name in SAMPLES:
            window.segment.load_sample(name)
        else:
            window.segment.open_image(image)
    return app.exec_()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``vision-cuts-gui``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    return run(args.image, args.tab, args.backend)
