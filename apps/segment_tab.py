"""Segment tab: GrabCut with a box and brush scribbles, refined stroke by stroke."""

from __future__ import annotations

import itertools
import os
from typing import Any, NamedTuple

import numpy as np
from PyQt5.QtCore import QTimer, pyqtSignal
from PyQt5.QtGui import QColor
from PyQt5.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QWidget,
)

import vision_cuts
from vision_cuts.cli import SAMPLES, overlay

from .widgets import ImageView, WorkerTab, as_rgb8, load_image, save_image

FOREGROUND, BACKGROUND = "foreground", "background"
_COLOURS = {FOREGROUND: (40, 220, 40), BACKGROUND: (60, 120, 255)}
_serial = itertools.count(1)


class Stroke(NamedTuple):
    """One brush stroke: ``kind`` (foreground/background), points (x, y), radius."""

    kind: str
    points: tuple[tuple[float, float], ...]
    radius: int
    serial: int


def rasterize(strokes: list[Stroke], shape: tuple[int, int]):
    """Foreground and background masks of strokes; a later stroke wins on overlap.

    The strokes are painted in order onto one label canvas (1 foreground, 2
    background), so a stroke costs its own pixels, not the picture's."""
    import cv2

    lab = np.zeros(shape, dtype=np.uint8)
    for s in strokes:
        v = 1 if s.kind == FOREGROUND else 2
        pts = np.floor(np.asarray(s.points, dtype=np.float64)).astype(np.int32)
        for x, y in pts:
            cv2.circle(lab, (int(x), int(y)), s.radius, v, -1)
        if len(pts) > 1:
            cv2.polylines(lab, [pts.reshape(-1, 1, 2)], False, v, 2 * s.radius + 1)
    return lab == 1, lab == 2


def _with_suffix(path: str, suffix: str = ".png") -> str:
    """A name typed without an extension gets the dialog's format, as in other
    programs' save dialogs (OpenCV picks the format by the extension)."""
    return path if os.path.splitext(os.path.basename(path))[1] else path + suffix


class SegmentTab(WorkerTab):
    """Drag a box, paint scribbles; each stroke refines the previous cut (``init=``).

    The first cut after a box makes ``iterations`` GrabCut iterations; each stroke
    then runs ``refine_iterations`` from the previous result. Strokes made while a cut
    runs are batched into the next one. Undo returns to the result before the last
    stroke without recomputing when it is at hand.
    """

    resultChanged = pyqtSignal()

    def __init__(self, backend: str = "auto", parent: QWidget | None = None) -> None:
        super().__init__(backend, parent)
        self.iterations = 5
        self.refine_iterations = 2
        self.image: np.ndarray | None = None
        self.image_name = ""
        self.rect: tuple[int, int, int, int] | None = None
        self.strokes: list[Stroke] = []
        # results for prefixes of the strokes: (serials of the strokes used, result)
        self._history: list[tuple[tuple[int, ...], Any]] = []
        self._epoch = 0
        self._queued = False
        self.jobFinished.connect(self._after_job)

        self.view = ImageView()
        self.view.rectDrawn.connect(self.set_rect)
        self.view.strokeDrawn.connect(self._on_stroke)

        self.open_button = QPushButton("Open...")
        self.open_button.clicked.connect(self.open_dialog)
        self.sample_box = QComboBox()
        self.sample_box.addItem("Sample picture...")
        self.sample_box.addItems(SAMPLES)
        self.sample_box.activated.connect(self._on_sample)
        self.tool_rect = QRadioButton("Box")
        self.tool_fg = QRadioButton("Object brush")
        self.tool_bg = QRadioButton("Background brush")
        self.tools = QButtonGroup(self)
        for b in (self.tool_rect, self.tool_fg, self.tool_bg):
            self.tools.addButton(b)
            b.toggled.connect(self._on_tool)
        self.brush_size = QSpinBox()
        self.brush_size.setRange(1, 60)
        self.brush_size.setValue(6)
        self.brush_size.setPrefix("radius ")
        self.brush_size.valueChanged.connect(self._on_tool)
        self.undo_button = QPushButton("Undo stroke")
        self.undo_button.clicked.connect(self.undo)
        self.reset_button = QPushButton("Reset")
        self.reset_button.clicked.connect(self.reset)
        self.save_mask_button = QPushButton("Save mask...")
        self.save_mask_button.clicked.connect(self.save_mask_dialog)
        self.save_overlay_button = QPushButton("Save overlay...")
        self.save_overlay_button.clicked.connect(self.save_overlay_dialog)
        self.info = QLabel("Open a picture, drag a box around the object.")

        tools = QWidget()
        row = QHBoxLayout(tools)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (
            self.open_button,
            self.sample_box,
            self.tool_rect,
            self.tool_fg,
            self.tool_bg,
            self.brush_size,
            self.undo_button,
            self.reset_button,
            self.save_mask_button,
            self.save_overlay_button,
        ):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.busy_widgets())
        self.setLayout(self.page(tools, self.view, self.info))
        self.tool_rect.setChecked(True)
        self._update_buttons()

    # ---- state ----------------------------------------------------------------------
    @property
    def result(self) -> Any:
        """The GrabCutResult for the current box and strokes, or None."""
        if self._history and self._history[-1][0] == self._serials():
            return self._history[-1][1]
        return None

    @property
    def mask(self) -> np.ndarray | None:
        """The current mask (uint8, 1 = object) or None."""
        r = self.result
        return None if r is None else np.asarray(r.mask)

    def scribbles(self, strokes: list[Stroke] | None = None):
        """Foreground and background masks of ``strokes`` (default: all strokes)."""
        strokes = self.strokes if strokes is None else strokes
        return rasterize(strokes, self.image.shape[:2])

    def _serials(self) -> tuple[int, ...]:
        return tuple(s.serial for s in self.strokes)

    # ---- inputs ---------------------------------------------------------------------
    def set_image(self, image: np.ndarray, name: str = "") -> None:
        """Start over on a new picture."""
        self.image = as_rgb8(image)
        self.image_name = name
        self.reset()
        h, w = self.image.shape[:2]
        self.statusMessage.emit(f"{name or 'picture'}: {w}x{h}")

    def open_image(self, path: str) -> bool:
        """Load a file; a dialog explains a failure. True on success."""
        try:
            img = load_image(path)
        except Exception as exc:
            self.show_error("Cannot open picture", exc)
            return False
        self.set_image(img, str(path))
        return True

    def load_sample(self, name: str) -> None:
        """Load one of the built-in pictures (``vision_cuts.cli.SAMPLES``)."""
        import skimage.data

        if name not in SAMPLES:
            raise ValueError(f"unknown sample {name!r}; choose from {SAMPLES}")
        self.set_image(getattr(skimage.data, name)(), name)

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open picture", "", "Pictures (*.png *.jpg *.jpeg *.bmp *.tif *.tiff)"
        )
        if path:
            self.read_files(
                lambda: load_image(path),
                lambda img: self.set_image(img, str(path)),
                f"opening {os.path.basename(path)}",
                "Cannot open picture",
            )

    def _on_sample(self, index: int) -> None:
        if index > 0:
            self.load_sample(self.sample_box.itemText(index))
            self.sample_box.setCurrentIndex(0)

    def _on_tool(self, *_: Any) -> None:
        if self.tool_rect.isChecked():
            self.view.mode = "rect"
        else:
            self.view.mode = "brush"
            kind = FOREGROUND if self.tool_fg.isChecked() else BACKGROUND
            self.view.brush_color = QColor(*_COLOURS[kind])
        self.view.brush_radius = self.brush_size.value()

    def set_rect(self, rect: tuple[int, int, int, int]) -> None:
        """A new box: the strokes are dropped and the cut starts over."""
        if self.image is None:
            return
        if self.busy:
            self.cancel()
        self.rect = tuple(int(v) for v in rect)
        self.strokes = []
        self._history = []
        self._epoch += 1
        if self.tool_rect.isChecked():
            self.tool_fg.setChecked(True)  # next: touch up with the brush
        self._refresh()
        self._run()

    def _on_stroke(self, points: list[tuple[float, float]]) -> None:
        kind = FOREGROUND if self.tool_fg.isChecked() else BACKGROUND
        self.add_stroke(kind, points, self.brush_size.value())

    def add_stroke(self, kind: str, points, radius: int) -> None:
        """Add a scribble and refine the cut."""
        if self.image is None:
            return
        if kind not in (FOREGROUND, BACKGROUND):
            raise ValueError(
                f"kind must be {FOREGROUND!r} or {BACKGROUND!r}, got {kind!r}"
            )
        pts = tuple((float(x), float(y)) for x, y in points)
        self.strokes.append(Stroke(kind, pts, int(radius), next(_serial)))
        self._refresh()
        self._run()

    def undo(self) -> None:
        """Remove the last stroke; show the result before it."""
        if not self.strokes:
            return
        self.strokes.pop()
        keep = self._serials()
        self._history = [h for h in self._history if keep[: len(h[0])] == h[0]]
        if self.busy:
            self.cancel()
        self._refresh()
        if self.result is None:
            self._run()
        else:
            self.resultChanged.emit()
        self._update_buttons()

    def reset(self) -> None:
        """Drop the box, the strokes and the results."""
        if self.busy:
            self.cancel()
        self.rect = None
        self.strokes = []
        self._history = []
        self._epoch += 1
        self.tool_rect.setChecked(True)
        self._refresh()
        self.info.setText("Drag a box around the object.")
        self._update_buttons()

    # ---- solving --------------------------------------------------------------------
    def _run(self) -> None:
        if self.busy:
            self._queued = True  # the strokes are taken in when this cut ends
            return
        self._queued = False
        if self.image is None or self.result is not None:
            self._update_buttons()
            return
        fg, bg = self.scribbles()
        if self.rect is None and not (fg.any() and bg.any()):
            self.info.setText(
                "Draw a box, or paint both object and background strokes."
            )
            return
        serials = self._serials()
        init = self._history[-1][1] if self._history else None
        iterations = self.iterations if init is None else self.refine_iterations
        image, rect, backend, epoch = self.image, self.rect, self.backend, self._epoch
        fgm = fg if fg.any() else None
        bgm = bg if bg.any() else None

        def job(callback):
            return vision_cuts.grabcut(
                image,
                rect=rect,
                foreground=fgm,
                background=bgm,
                iterations=iterations,
                init=init,
                backend=backend,
                callback=callback,
            )

        def done(result):
            if epoch != self._epoch:
                return
            if serials == self._serials()[: len(serials)]:
                self._history.append((serials, result))
            self._refresh()
            if self.result is not None:
                m = np.asarray(result.mask)
                self.info.setText(
                    f"{int(m.sum())} object pixels ({100.0 * m.mean():.1f}%), "
                    f"{len(serials)} stroke{'' if len(serials) == 1 else 's'}, "
                    f"{result.iterations} cuts. Paint with the brushes to correct it."
                )
                self.resultChanged.emit()
            self._update_buttons()

        self.start_job(job, done, "segmenting")
        self._update_buttons()

    def _after_job(self, outcome: str) -> None:
        queued, self._queued = self._queued, False
        if outcome in ("done", "error") and queued and self.result is None:
            # strokes (or a box) that came while the cut ran: after a failed cut
            # too, since they may be what it lacked (background strokes for a box
            # that fills the picture)
            self._run()
        elif outcome == "error":
            self.info.setText(
                "The cut failed (see the message): change the box or paint strokes."
            )
        elif outcome == "cancelled" and queued:
            # after the event: a new box or an undo cancels and starts the next cut
            # at once, and only a cancel that leaves the tab idle is reported
            QTimer.singleShot(0, self._report_unused_strokes)
        self._update_buttons()

    def _report_unused_strokes(self) -> None:
        if not self.busy and self.result is None and self.strokes:
            self.info.setText(
                "Cancelled: the strokes painted during the cut are not used yet; "
                "paint another stroke (or undo) to cut again."
            )

    # ---- display and output ---------------------------------------------------------
    def picture(self) -> np.ndarray | None:
        """What the view shows: the overlay of the cut, box and strokes."""
        if self.image is None:
            return None
        fg, bg = self.scribbles()
        mask = self.mask
        if mask is None and self._history:
            mask = np.asarray(self._history[-1][1].mask)  # the previous cut
        if mask is not None:
            return overlay(self.image, mask, self.rect, fg, bg)
        import cv2

        out = self.image.copy()
        if self.rect is not None:
            x, y, w, h = self.rect
            cv2.rectangle(out, (x, y), (x + w - 1, y + h - 1), (255, 60, 60), 2)
        out[fg] = _COLOURS[FOREGROUND]
        out[bg] = _COLOURS[BACKGROUND]
        return out

    def _refresh(self) -> None:
        self.view.set_picture(self.picture())
        self._update_buttons()

    def _update_buttons(self) -> None:
        have = self.mask is not None
        self.save_mask_button.setEnabled(have)
        self.save_overlay_button.setEnabled(have)
        self.undo_button.setEnabled(bool(self.strokes))

    def save_mask(self, path: str) -> bool:
        """Write the mask (PNG, 255 = object); a dialog explains a failure."""
        try:
            if self.mask is None:
                raise ValueError("there is no segmentation to save yet")
            save_image(path, (self.mask > 0).astype(np.uint8) * 255, mask=True)
        except Exception as exc:
            self.show_error("Cannot save mask", exc)
            return False
        self.statusMessage.emit(f"mask -> {path}")
        return True

    def save_overlay(self, path: str) -> bool:
        """Write the overlay picture; a dialog explains a failure."""
        try:
            if self.mask is None:
                raise ValueError("there is no segmentation to save yet")
            save_image(path, self.picture())
        except Exception as exc:
            self.show_error("Cannot save overlay", exc)
            return False
        self.statusMessage.emit(f"overlay -> {path}")
        return True

    def save_mask_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save mask", "mask.png", "PNG (*.png)"
        )
        if path:
            self.save_mask(_with_suffix(path))

    def save_overlay_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save overlay", "overlay.png", "PNG (*.png)"
        )
        if path:
            self.save_overlay(_with_suffix(path))
