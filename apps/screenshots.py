"""Screenshots of the three tabs, taken from the running application.

    python -m vision_cuts.apps.screenshots [OUTDIR] [--backend cpu|gpu|auto]

Runs the real main window on Qt's offscreen platform (or the display in
``QT_QPA_PLATFORM``), drives it with the same calls its widgets make, waits for the
worker threads and saves ``segment.png``, ``stereo.png`` and ``flow.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _wait(app, tab, timeout: float = 600.0) -> None:
    t0 = time.monotonic()
    while tab.busy:
        app.processEvents()
        time.sleep(0.02)
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{type(tab).__name__} still busy after {timeout} s")
    for _ in range(5):
        app.processEvents()


def _save(window, path: Path) -> None:
    """Grab the window and write a 256-colour PNG (small enough for the repository)."""
    import numpy as np
    from PIL import Image

    img = window.grab().toImage().convertToFormat(4)  # QImage.Format_RGB32
    w, h = img.width(), img.height()
    ptr = img.constBits()
    ptr.setsize(img.bytesPerLine() * h)
    bgra = np.frombuffer(ptr, np.uint8).reshape(h, img.bytesPerLine() // 4, 4)[:, :w]
    rgb = np.ascontiguousarray(bgra[..., 2::-1])
    Image.fromarray(rgb).quantize(256).save(path, optimize=True)


def _hover(app, view, x: int, y: int) -> None:
    from PyQt5.QtCore import QEvent, Qt
    from PyQt5.QtGui import QMouseEvent

    ev = QMouseEvent(
        QEvent.MouseMove, view.to_widget(x, y), Qt.NoButton, Qt.NoButton, Qt.NoModifier
    )
    app.sendEvent(view, ev)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", nargs="?", default="apps/screenshots")
    p.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto")
    args = p.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PyQt5.QtWidgets import QApplication

    import vision_cuts

    from .app import MainWindow

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    w = MainWindow(args.backend)
    w.resize(1180, 760)
    w.show()

    seg = w.segment
    seg.load_sample("coffee")
    seg.brush_size.setValue(7)
    seg.set_rect((170, 40, 320, 260))
    _wait(app, seg)
    strokes = [
        ("foreground", [(225, 205), (260, 216), (300, 222)]),
        ("foreground", [(330, 224), (360, 220), (392, 212)]),
        ("background", [(190, 290), (225, 293), (260, 292)]),
        ("background", [(335, 276), (358, 281), (380, 285)]),
    ]
    for kind, points in strokes:
        seg.add_stroke(kind, points, seg.brush_size.value())
        _wait(app, seg)
    seg.tool_bg.setChecked(True)
    w.show_tab("segment")
    _save(w, out / "segment.png")

    st = w.stereo
    w.show_tab("stereo")
    st.load_builtin()
    st.max_disp.setValue(40)
    st.compute()
    _wait(app, st)
    _hover(app, st.view, 180, 120)
    _save(w, out / "stereo.png")

    saved = ["segment.png", "stereo.png"]
    if hasattr(vision_cuts, "optical_flow"):
        fl = w.flow
        w.show_tab("flow")
        fl.load_builtin()
        _wait(app, fl)
        _hover(app, fl.color_view, 60, 200)
        _save(w, out / "flow.png")
        saved.append("flow.png")
    else:
        print("optical flow is not available: flow.png not taken", file=sys.stderr)
    w.close()
    print(f"{', '.join(saved)} -> {out} ({w.backend_label.text()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
