"""Flow tab: optical flow between two frames or along a video, arrows and colours."""

from __future__ import annotations

import inspect
import os
from collections import OrderedDict
from typing import Any

import numpy as np
from PyQt5.QtCore import pyqtSignal
from PyQt5.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QWidget,
)

import vision_cuts

from .widgets import ImageView, WorkerTab, as_rgb8, load_image


def builtin_pair() -> tuple[np.ndarray, np.ndarray]:
    """A 256x256 frame pair: scikit-image's astronaut, then turned 3 degrees and moved.

    The second frame is the first rotated about the centre and shifted by (4, -3)
    pixels, so the true flow is a known smooth field.
    """
    import cv2
    import skimage.data

    f0 = cv2.resize(skimage.data.astronaut(), (256, 256), interpolation=cv2.INTER_AREA)
    m = cv2.getRotationMatrix2D((128.0, 128.0), 3.0, 1.0)
    m[:, 2] += (4.0, -3.0)
    f1 = cv2.warpAffine(f0, m, (256, 256), borderMode=cv2.BORDER_REFLECT)
    return f0, f1


#: the memory the decoded frames of a video may hold: going back past them means
#: decoding the video again from its start (exact whatever the codec's seeking), so
#: they are as many as fit (720p: about 90 frames), at least 8
_FRAME_CACHE_BYTES = 256 << 20


class VideoFrames:
    """Frames of a video file by index, decoded on demand; the latest ones are kept
    in memory (``keep`` of them; by default as many as ``_FRAME_CACHE_BYTES``
    hold)."""

    def __init__(self, path: str, keep: int | None = None) -> None:
        import cv2

        self.path = str(path)
        self._cap = cv2.VideoCapture(self.path)
        if not self._cap.isOpened():
            raise ValueError(
                f"cannot open video {self.path!r}: not a video OpenCV reads"
            )
        n = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self.count: int | None = n if n > 0 else None
        self._next = 0
        self._keep = 8 if keep is None else keep
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        first = self.get(0)
        if first is None:
            raise ValueError(f"cannot read a frame from video {self.path!r}")
        if keep is None:
            self._keep = max(8, _FRAME_CACHE_BYTES // max(1, first.nbytes))

    def get(self, index: int) -> np.ndarray | None:
        """Frame ``index`` as RGB uint8, or None past the end."""
        import cv2

        if index < 0:
            return None
        if index in self._cache:
            return self._cache[index]
        if index < self._next:  # going back beyond the cache: start over
            self._cap.release()
            self._cap = cv2.VideoCapture(self.path)
            self._next = 0
        frame = None
        while self._next <= index:
            if self._next < index - self._keep + 1:  # not kept: no colour conversion
                ok, bgr = self._cap.grab(), None
            else:
                ok, bgr = self._cap.read()
            if not ok:
                self.count = self._next
                return None
            if bgr is not None:
                frame = np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
                self._cache[self._next] = frame
                while len(self._cache) > self._keep:
                    self._cache.popitem(last=False)
            self._next += 1
        return frame

    def close(self) -> None:
        self._cap.release()


class FlowTab(WorkerTab):
    """Two frames (or a video stepped frame by frame) -> flow arrows + dense colours."""

    resultChanged = pyqtSignal()

    def __init__(self, backend: str = "auto", parent: QWidget | None = None) -> None:
        super().__init__(backend, parent)
        self.frame0: np.ndarray | None = None
        self.frame1: np.ndarray | None = None
        self.result: Any = None
        self.video: VideoFrames | None = None
        self.index = 0
        self.source_name = ""
        self.max_arrows = 300

        self.arrows_view = ImageView()
        self.color_view = ImageView()
        for v in (self.arrows_view, self.color_view):
            v.hovered.connect(self._on_hover)
        split = QSplitter()
        split.addWidget(self.arrows_view)
        split.addWidget(self.color_view)

        self.frames_button = QPushButton("Open frames...")
        self.frames_button.clicked.connect(self.open_frames_dialog)
        self.video_button = QPushButton("Open video...")
        self.video_button.clicked.connect(self.open_video_dialog)
        self.builtin_button = QPushButton("Built-in pair")
        self.builtin_button.clicked.connect(self.load_builtin)
        self.prev_button = QPushButton("< Prev")
        self.prev_button.clicked.connect(lambda: self.step(-1))
        self.next_button = QPushButton("Next >")
        self.next_button.clicked.connect(lambda: self.step(1))
        self.frame_label = QLabel("")
        self.arrow_scale = QDoubleSpinBox()
        self.arrow_scale.setRange(0.5, 20.0)
        self.arrow_scale.setSingleStep(0.5)
        self.arrow_scale.setValue(2.0)
        self.arrow_scale.setPrefix("arrows x")
        self.arrow_scale.valueChanged.connect(self._show)
        self.value_label = QLabel("")
        self.value_label.setMinimumWidth(280)
        self.info = QLabel("Open two frames, a video or the built-in pair.")

        tools = QWidget()
        row = QHBoxLayout(tools)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (
            self.frames_button,
            self.video_button,
            self.builtin_button,
            self.prev_button,
            self.next_button,
            self.frame_label,
            self.arrow_scale,
        ):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.busy_widgets())
        footer = QWidget()
        frow = QHBoxLayout(footer)
        frow.setContentsMargins(0, 0, 0, 0)
        frow.addWidget(self.info, 1)
        frow.addWidget(self.value_label)
        self.setLayout(self.page(tools, split, footer))
        self._update_buttons()

    # ---- inputs ---------------------------------------------------------------------
    def set_frames(
        self, frame0: np.ndarray, frame1: np.ndarray, name: str = ""
    ) -> None:
        """Compute the flow from ``frame0`` to ``frame1``."""
        frame0, frame1 = as_rgb8(frame0), as_rgb8(frame1)
        if frame0.shape != frame1.shape:
            raise ValueError(
                f"the two frames must have the same size, got "
                f"{frame0.shape[1]}x{frame0.shape[0]} and "
                f"{frame1.shape[1]}x{frame1.shape[0]}"
            )
        self._close_video()
        self.source_name = name
        self._set(frame0, frame1)

    def load_builtin(self) -> None:
        self.set_frames(*builtin_pair(), name="astronaut, turned and moved")

    def open_frames(self, path0: str, path1: str) -> bool:
        """Load two picture files; a dialog explains a failure. True on success."""
        try:
            self.set_frames(load_image(path0), load_image(path1), str(path0))
        except Exception as exc:
            self.show_error("Cannot open frames", exc)
            return False
        return True

    def open_video(self, path: str) -> bool:
        """Open a video and show the flow from its frame 0 to frame 1."""
        try:
            video = VideoFrames(path)
            f1 = video.get(1)
            if f1 is None:
                video.close()
                raise ValueError(f"video {str(path)!r} has fewer than two frames")
        except Exception as exc:
            self.show_error("Cannot open video", exc)
            return False
        self._close_video()
        self.video, self.index, self.source_name = video, 0, str(path)
        self._set(video.get(0), f1)
        return True

    def step(self, delta: int) -> bool:
        """Move along the video by ``delta`` frames; False at either end."""
        if self.video is None:
            return False
        i = self.index + delta
        f0 = self.video.get(i)
        f1 = self.video.get(i + 1) if f0 is not None else None
        if f0 is None or f1 is None:
            self._update_buttons()
            return False
        self.index = i
        self._set(f0, f1)
        return True

    def open_frames_dialog(self) -> None:
        flt = "Pictures (*.png *.jpg *.jpeg *.bmp *.tif *.tiff)"
        p0, _ = QFileDialog.getOpenFileName(self, "First frame", "", flt)
        if not p0:
            return
        p1, _ = QFileDialog.getOpenFileName(self, "Second frame", p0, flt)
        if p1:
            self.read_files(
                lambda: (load_image(p0), load_image(p1)),
                lambda frames: self.set_frames(*frames, str(p0)),
                f"opening {os.path.basename(p0)} and {os.path.basename(p1)}",
                "Cannot open frames",
            )

    def open_video_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open video", "", "Videos (*.mp4 *.avi *.mov *.mkv *.webm)"
        )
        if path:
            self.open_video(path)

    def _close_video(self) -> None:
        if self.video is not None:
            self.video.close()
        self.video, self.index = None, 0

    def _set(self, f0: np.ndarray, f1: np.ndarray) -> None:
        self.frame0, self.frame1, self.result = f0, f1, None
        self.arrows_view.set_picture(f0)
        self.color_view.set_picture(None)
        self._update_buttons()
        self.compute()

    # ---- solving --------------------------------------------------------------------
    def compute(self) -> None:
        """Flow from frame0 to frame1 (sparse vectors and the dense field)."""
        if self.frame0 is None:
            return
        f0, f1, backend = self.frame0, self.frame1, self.backend
        index = self.index

        def job(callback):
            flow = getattr(vision_cuts, "optical_flow", None)
            if flow is None:
                raise ValueError(
                    f"optical flow is not available in vision_cuts "
                    f"{vision_cuts.__version__}"
                )
            kwargs: dict[str, Any] = {"backend": backend, "dense": True}
            if "callback" in inspect.signature(flow).parameters:
                kwargs["callback"] = callback
            return flow(f0, f1, **kwargs)

        def done(result):
            self.result = result
            self._show()
            n = len(result.points)
            where = f"frames {index}-{index + 1}, " if self.video is not None else ""
            self.info.setText(f"{where}{n} matched points")
            self.resultChanged.emit()

        self.start_job(job, done, "optical flow")

    def shown_arrows(self) -> tuple[np.ndarray, np.ndarray]:
        """The matches drawn as arrows: at most one per cell of a grid sized to show
        about ``max_arrows`` (the first match of each cell)."""
        pts = np.asarray(self.result.points)
        vec = np.asarray(self.result.vectors)
        if len(pts) <= self.max_arrows:
            return pts, vec
        h, w = self.frame0.shape[:2]
        cell = max(4.0, float(np.sqrt(h * w / self.max_arrows)))
        cx = np.floor(pts[:, 0] / cell).astype(np.int64)
        cy = np.floor(pts[:, 1] / cell).astype(np.int64)
        _, first = np.unique(cy * (w + 1) + cx, return_index=True)
        keep = np.sort(first)
        return pts[keep], vec[keep]

    def arrows_picture(self) -> np.ndarray | None:
        """Frame 0 with the flow arrows (scaled by the arrow spin box)."""
        if self.result is None:
            return None
        pts, vec = self.shown_arrows()
        return vision_cuts.draw_flow_arrows(
            self.frame0, pts, vec, scale=self.arrow_scale.value()
        )

    def color_picture(self) -> np.ndarray | None:
        """The dense flow, colour-coded (hue = direction, saturation = length)."""
        if self.result is None or self.result.dense is None:
            return None
        return vision_cuts.flow_to_color(self.result.dense)

    def _show(self, *_: Any) -> None:
        if self.result is None:
            return
        self.arrows_view.set_picture(self.arrows_picture())
        self.color_view.set_picture(self.color_picture())

    def _update_buttons(self) -> None:
        has_video = self.video is not None
        self.prev_button.setEnabled(has_video and self.index > 0)
        count = self.video.count if has_video else None
        self.next_button.setEnabled(
            has_video and (count is None or self.index + 2 < count)
        )
        if has_video:
            total = "?" if count is None else str(count)
            self.frame_label.setText(f"frame {self.index} / {total}")
        else:
            self.frame_label.setText("")

    def _on_hover(self, pt) -> None:
        r = self.result
        if pt is None or r is None or r.dense is None:
            self.value_label.setText("")
            return
        x, y = pt
        d = np.asarray(r.dense)
        if 0 <= y < d.shape[0] and 0 <= x < d.shape[1]:
            u, v = (float(c) for c in d[y, x])
            self.value_label.setText(f"x {x}, y {y}: flow ({u:+.1f}, {v:+.1f})")
