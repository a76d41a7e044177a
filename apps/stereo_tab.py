"""Stereo tab: dense disparity of a rectified pair, colour-coded, value under cursor."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from PyQt5.QtCore import pyqtSignal
from PyQt5.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QWidget,
)

import vision_cuts
from vision_cuts.cli import colorize_disparity
from vision_cuts.stereo import METHODS

from .widgets import ImageView, WorkerTab, as_rgb8, load_image

SCALES = {"full size": 1, "1/2 size": 2, "1/4 size": 4}


def downscale(image: np.ndarray, factor: int) -> np.ndarray:
    """Shrink by an integer factor (area averaging); factor 1 returns the input."""
    if factor == 1:
        return image
    import cv2

    h, w = image.shape[:2]
    size = (max(1, w // factor), max(1, h // factor))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


class StereoTab(WorkerTab):
    """Left/right pair in, colour-coded disparity (turbo, near = warm) out."""

    resultChanged = pyqtSignal()

    def __init__(self, backend: str = "auto", parent: QWidget | None = None) -> None:
        super().__init__(backend, parent)
        self._pair: tuple[np.ndarray, np.ndarray] | None = None
        self.pair_name = ""
        self.left: np.ndarray | None = None
        self.right: np.ndarray | None = None
        self.disparity: np.ndarray | None = None
        self._disparity_max = 0

        self.view = ImageView()
        self.view.hovered.connect(self._on_hover)
        self.open_button = QPushButton("Open pair...")
        self.open_button.clicked.connect(self.open_dialog)
        self.builtin_button = QPushButton("Built-in pair")
        self.builtin_button.clicked.connect(self.load_builtin)
        self.scale_box = QComboBox()
        self.scale_box.addItems(list(SCALES))
        self.scale_box.setCurrentText("1/2 size")
        self.scale_box.currentIndexChanged.connect(self._on_scale)
        self.method_box = QComboBox()
        self.method_box.addItems(list(METHODS))
        self.max_disp = QSpinBox()
        self.max_disp.setRange(1, 1024)
        self.max_disp.setValue(32)
        self.max_disp.setPrefix("max disparity ")
        self.compute_button = QPushButton("Compute")
        self.compute_button.clicked.connect(self.compute)
        self.value_label = QLabel("")
        self.value_label.setMinimumWidth(220)
        self.info = QLabel("Open a rectified pair (or the built-in one), then Compute.")

        tools = QWidget()
        row = QHBoxLayout(tools)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (
            self.open_button,
            self.builtin_button,
            self.scale_box,
            QLabel("method"),
            self.method_box,
            self.max_disp,
            self.compute_button,
        ):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.busy_widgets())
        footer = QWidget()
        frow = QHBoxLayout(footer)
        frow.setContentsMargins(0, 0, 0, 0)
        frow.addWidget(self.info, 1)
        frow.addWidget(self.value_label)
        self.setLayout(self.page(tools, self.view, footer))
        self.compute_button.setEnabled(False)

    # ---- inputs ---------------------------------------------------------------------
    def set_pair(self, left: np.ndarray, right: np.ndarray, name: str = "") -> None:
        """Use a rectified pair (the scale box applies to it)."""
        left, right = as_rgb8(left), as_rgb8(right)
        if left.shape != right.shape:
            raise ValueError(
                f"left and right images must have the same size, got "
                f"{left.shape[1]}x{left.shape[0]} and {right.shape[1]}x{right.shape[0]}"
            )
        self._pair = (left, right)
        self.pair_name = name
        self._on_scale()

    def open_pair(self, left_path: str, right_path: str) -> bool:
        """Load two files; a dialog explains a failure. True on success."""
        try:
            self.set_pair(load_image(left_path), load_image(right_path), str(left_path))
        except Exception as exc:
            self.show_error("Cannot open stereo pair", exc)
            return False
        return True

    def load_builtin(self) -> None:
        """scikit-image's Middlebury 'motorcycle' pair."""
        import skimage.data

        left, right, _ = skimage.data.stereo_motorcycle()
        self.set_pair(left, right, "motorcycle")

    def open_dialog(self) -> None:
        flt = "Pictures (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.ppm *.pgm)"
        left, _ = QFileDialog.getOpenFileName(self, "Left image", "", flt)
        if not left:
            return
        right, _ = QFileDialog.getOpenFileName(self, "Right image", left, flt)
        if right:
            self.read_files(
                lambda: (load_image(left), load_image(right)),
                lambda pair: self.set_pair(*pair, str(left)),
                f"opening {os.path.basename(left)} and {os.path.basename(right)}",
                "Cannot open stereo pair",
            )

    def _on_scale(self, *_: Any) -> None:
        if self.busy:
            self.cancel()
        if self._pair is None:
            return
        f = SCALES[self.scale_box.currentText()]
        self.left, self.right = (downscale(a, f) for a in self._pair)
        self.disparity = None
        self.view.set_picture(self.left)
        h, w = self.left.shape[:2]
        self.info.setText(f"{self.pair_name or 'pair'}: {w}x{h}. Compute.")
        self.compute_button.setEnabled(True)

    # ---- solving --------------------------------------------------------------------
    def compute(self) -> None:
        """Run the stereo matcher with the chosen method and range."""
        if self.left is None:
            return
        left, right = self.left, self.right
        method, dmax, backend = (
            self.method_box.currentText(),
            self.max_disp.value(),
            self.backend,
        )

        def job(callback):
            return vision_cuts.stereo_disparity(
                left,
                right,
                max_disparity=dmax,
                method=method,
                backend=backend,
                callback=callback,
            )

        def done(disp):
            self.disparity = np.asarray(disp)
            self._disparity_max = dmax
            self.view.set_picture(colorize_disparity(self.disparity, dmax))
            self.info.setText(
                f"{method}, disparities 0..{dmax}: range "
                f"{float(np.nanmin(disp)):g}..{float(np.nanmax(disp)):g}"
            )
            self.resultChanged.emit()

        self.start_job(job, done, f"stereo ({method})")

    def value_at(self, x: int, y: int) -> float | None:
        """Disparity at column ``x``, row ``y`` (None outside the map)."""
        d = self.disparity
        if d is None or not (0 <= y < d.shape[0] and 0 <= x < d.shape[1]):
            return None
        return float(d[y, x])

    def _on_hover(self, pt) -> None:
        v = None if pt is None else self.value_at(*pt)
        if v is None:
            self.value_label.setText("")
        else:
            self.value_label.setText(f"x {pt[0]}, y {pt[1]}: disparity {v:g}")
