"""Building blocks shared by the tabs: image view, background task, dialogs, I/O."""

from __future__ import annotations

import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from PyQt5.QtCore import QObject, QPointF, QRectF, Qt, pyqtSignal
from PyQt5.QtGui import QColor, QImage, QPainter, QPen
from PyQt5.QtWidgets import (
    QHBoxLayout,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from vision_cuts.cli import imwrite_replacing, output_problem

# ---- images ---------------------------------------------------------------------


def as_rgb8(image: np.ndarray) -> np.ndarray:
    """(M, N, 3) uint8 RGB from grey, RGB or RGBA input of any numeric dtype."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        if a.dtype.kind == "f":
            a = np.clip(a * 255.0, 0, 255)
        elif a.dtype.kind in "ui" and a.dtype.itemsize > 1:
            a = a / (np.iinfo(a.dtype).max / 255.0)
        a = a.astype(np.uint8)
    if a.ndim == 2:
        a = np.stack([a, a, a], axis=-1)
    if a.ndim != 3 or a.shape[-1] not in (1, 3, 4):
        raise ValueError(f"expected a grey or colour picture, got shape {a.shape}")
    if a.shape[-1] == 1:
        a = np.repeat(a, 3, axis=-1)
    return np.ascontiguousarray(a[..., :3])


def load_image(path: str) -> np.ndarray:
    """Read an image file as (M, N, 3) uint8 RGB; ValueError naming the file if not."""
    import cv2

    try:
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    except cv2.error as exc:  # e.g. a header claiming more than OpenCV's pixel limit
        raise ValueError(
            f"cannot read image {str(path)!r}: OpenCV refused it "
            f"({exc.err or str(exc).strip()})"
        ) from None
    if img is None:
        raise ValueError(
            f"cannot read image {str(path)!r}: not a picture OpenCV can decode "
            "(PNG, JPEG, TIFF, BMP, ...)"
        )
    return np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB))


def save_image(path: str, picture: np.ndarray, *, mask: bool = False) -> None:
    """Write an RGB or grey uint8 picture; ValueError naming the file on failure.

    The picture goes to a temporary file in the same folder first and then replaces
    ``path``, so a failed write leaves an existing file as it was. A grey picture is
    written to ``.ppm`` as three equal channels; a colour picture is refused for
    ``.pgm`` and ``.pbm``, which hold one grey channel. A ``mask`` must read back
    exactly: a lossy format (``.jpg``, ...) is refused for it.
    """
    import cv2

    path = str(path)
    folder = os.path.dirname(os.path.abspath(path))
    ext = os.path.splitext(path)[1]
    kind = "grey" if picture.ndim == 2 else "colour"
    # the command line's checks: a missing folder, a directory, no or an unknown
    # extension, a colour picture for a grey-only format, a read-only file
    reason = output_problem(
        path, "mask" if mask else "image" if picture.ndim == 2 else "colour"
    )
    if reason is not None:
        raise ValueError(f"cannot write {path!r}: {reason}")
    img = picture if picture.ndim == 2 else cv2.cvtColor(picture, cv2.COLOR_RGB2BGR)
    try:
        ok = imwrite_replacing(path, img)
    except cv2.error as exc:
        raise ValueError(
            f"cannot write {path!r}: OpenCV refused it ({exc.err or str(exc).strip()})"
        ) from None
    except OSError as exc:
        raise ValueError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    if not ok:
        raise ValueError(
            f"cannot write {path!r}: OpenCV could not write a {kind} picture of "
            f"shape {picture.shape} as {ext} into {folder!r} (is the disk full?)"
        )


def to_qimage(rgb: np.ndarray) -> QImage:
    """A QImage that owns a copy of an (M, N, 3) uint8 picture."""
    rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    return QImage(rgb.data, w, h, 3 * w, QImage.Format_RGB888).copy()


# ---- dialogs ----------------------------------------------------------------------


def show_error(parent: QWidget | None, title: str, error: Any) -> QMessageBox:
    """Show ``error`` (an exception or a text) in a non-blocking error dialog."""
    if isinstance(error, BaseException):
        text = str(error) or type(error).__name__
        if not isinstance(error, (ValueError, TypeError, OSError)):
            text = f"{type(error).__name__}: {text}"
        detail = "".join(
            traceback.format_exception(type(error), error, error.__traceback__)
        )
    else:
        text, detail = str(error), ""
    box = QMessageBox(QMessageBox.Critical, title, text, QMessageBox.Ok, parent)
    if detail:
        box.setDetailedText(detail)
    box.setAttribute(Qt.WA_DeleteOnClose)
    box.open()
    return box


# ---- the image view ---------------------------------------------------------------


class ImageView(QWidget):
    """A picture scaled to fit, with rectangle and brush input in image pixels.

    ``mode`` is ``"none"``, ``"rect"`` (drag a box: ``rectDrawn((x, y, w, h))``) or
    ``"brush"`` (press, move, release: ``strokeDrawn([(x, y), ...])``). The pixel under
    the cursor is reported by ``hovered((col, row))`` or ``hovered(None)``.
    """

    rectDrawn = pyqtSignal(object)
    strokeDrawn = pyqtSignal(object)
    hovered = pyqtSignal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumSize(240, 180)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self._qimage: QImage | None = None
        self._shape: tuple[int, int] | None = None
        self.mode = "none"
        self.brush_radius = 5
        self.brush_color = QColor(40, 220, 40)
        self._drag_start: tuple[float, float] | None = None
        self._drag_now: tuple[float, float] | None = None
        self._stroke: list[tuple[float, float]] = []

    # geometry
    def set_picture(self, rgb: np.ndarray | None) -> None:
        """Show an (M, N, 3) uint8 picture (None clears the view)."""
        if rgb is None:
            self._qimage, self._shape = None, None
        else:
            self._qimage = to_qimage(rgb)
            self._shape = rgb.shape[:2]
        self.update()

    def has_picture(self) -> bool:
        return self._qimage is not None

    def picture_rect(self) -> QRectF:
        """Where the picture is drawn, in widget coordinates (aspect kept)."""
        if self._shape is None:
            return QRectF()
        h, w = self._shape
        s = min(self.width() / w, self.height() / h)
        dw, dh = w * s, h * s
        return QRectF((self.width() - dw) / 2, (self.height() - dh) / 2, dw, dh)

    def to_image(self, pos: QPointF) -> tuple[float, float] | None:
        """Widget position -> (x, y) in image pixels, or None outside the picture."""
        r = self.picture_rect()
        if r.isEmpty():
            return None
        h, w = self._shape
        x = (pos.x() - r.left()) * w / r.width()
        y = (pos.y() - r.top()) * h / r.height()
        if not (0 <= x < w and 0 <= y < h):
            return None
        return x, y

    def to_widget(self, x: float, y: float) -> QPointF:
        """(x, y) in image pixels -> widget position (centre of that pixel)."""
        r = self.picture_rect()
        h, w = self._shape
        return QPointF(
            r.left() + (x + 0.5) * r.width() / w, r.top() + (y + 0.5) * r.height() / h
        )

    def _clamped(self, pos: QPointF) -> tuple[float, float]:
        r = self.picture_rect()
        h, w = self._shape
        x = (pos.x() - r.left()) * w / r.width()
        y = (pos.y() - r.top()) * h / r.height()
        return min(max(x, 0.0), w - 1e-3), min(max(y, 0.0), h - 1e-3)

    # painting
    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(48, 48, 48))
        if self._qimage is None:
            p.setPen(QColor(200, 200, 200))
            p.drawText(self.rect(), Qt.AlignCenter, "no picture")
            return
        r = self.picture_rect()
        p.setRenderHint(QPainter.SmoothPixmapTransform, True)
        p.drawImage(r, self._qimage)
        scale = r.width() / self._shape[1]
        if self._drag_start is not None and self._drag_now is not None:
            a = self.to_widget(*self._drag_start)
            b = self.to_widget(*self._drag_now)
            p.setPen(QPen(QColor(255, 60, 60), 2, Qt.DashLine))
            p.drawRect(QRectF(a, b).normalized())
        if len(self._stroke) > 0:
            c = QColor(self.brush_color)
            c.setAlpha(170)
            pen = QPen(c, max(1.0, (2 * self.brush_radius + 1) * scale))
            pen.setCapStyle(Qt.RoundCap)
            pen.setJoinStyle(Qt.RoundJoin)
            p.setPen(pen)
            pts = [self.to_widget(x - 0.5, y - 0.5) for x, y in self._stroke]
            if len(pts) == 1:
                p.drawPoint(pts[0])
            for a, b in zip(pts[:-1], pts[1:], strict=True):
                p.drawLine(a, b)

    # mouse: the drag state is kept here (QTest moves carry no button state)
    def mousePressEvent(self, event) -> None:  # noqa: N802
        if event.button() != Qt.LeftButton or self._qimage is None:
            return
        pt = self.to_image(QPointF(event.pos()))
        if pt is None:
            return
        if self.mode == "rect":
            self._drag_start = self._drag_now = pt
        elif self.mode == "brush":
            self._stroke = [pt]
        self.update()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        pos = QPointF(event.pos())
        pt = self.to_image(pos)
        self.hovered.emit(None if pt is None else (int(pt[0]), int(pt[1])))
        if self._qimage is None:
            return
        if self._drag_start is not None:
            self._drag_now = self._clamped(pos)
            self.update()
        elif self._stroke:
            self._stroke.append(self._clamped(pos))
            self.update()

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if event.button() != Qt.LeftButton or self._qimage is None:
            return
        pos = QPointF(event.pos())
        if self._drag_start is not None:
            (xa, ya), (xb, yb) = self._drag_start, self._clamped(pos)
            self._drag_start = self._drag_now = None
            x0, y0 = int(min(xa, xb)), int(min(ya, yb))
            x1, y1 = int(max(xa, xb)) + 1, int(max(ya, yb)) + 1
            self.update()
            if x1 - x0 >= 2 and y1 - y0 >= 2:
                self.rectDrawn.emit((x0, y0, x1 - x0, y1 - y0))
        elif self._stroke:
            stroke = self._stroke
            last = self._clamped(pos)
            if stroke[-1] != last:
                stroke.append(last)
            self._stroke = []
            self.update()
            self.strokeDrawn.emit(stroke)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.hovered.emit(None)


# ---- background work --------------------------------------------------------------


class Cancelled(Exception):
    """Raised inside a job's progress callback once the job was cancelled."""


class Job(QObject):
    """``fn(callback)`` to run on a :class:`Runner`'s worker thread.

    ``callback(done, total)`` reports progress and raises :class:`Cancelled` once
    :meth:`cancel` was called, so a solver that reports progress stops at its next
    step. ``started()`` is emitted when the worker takes the job up; exactly one of
    ``succeeded(result)`` / ``failed(exception)`` is emitted, unless the job was
    cancelled.
    """

    started = pyqtSignal()
    progressed = pyqtSignal(int, int)
    succeeded = pyqtSignal(object)
    failed = pyqtSignal(object)

    def __init__(
        self,
        fn: Callable[[Callable[[int, int], None]], Any],
        on_done: Callable[[Any], None],
        label: str,
        error_title: str = "Error",
    ) -> None:
        super().__init__()
        self._fn = fn
        self.on_done = on_done
        self.label = label
        self.error_title = error_title  # of the dialog that shows a failure
        self.started_at = time.perf_counter()
        self.waiting = False  # queued behind a cancelled job that is still running
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _callback(self, done: int, total: int) -> None:
        if self._cancel.is_set():
            raise Cancelled
        self.progressed.emit(int(done), int(total))

    def execute(self) -> None:
        """Run the job (on the worker thread); signals reach the GUI thread queued."""
        if self._cancel.is_set():
            return
        self.started_at = time.perf_counter()
        self.started.emit()
        try:
            result = self._fn(self._callback)
        except Cancelled:
            return
        except BaseException as exc:  # shown in a dialog by the receiving tab
            if not self._cancel.is_set():
                self.failed.emit(exc)
            return
        if not self._cancel.is_set():
            self.succeeded.emit(result)


class Runner:
    """One long-lived worker thread that runs jobs one after the other.

    Keeping the same thread matters: the solvers keep per-thread state between calls
    (on the GPU, the buffers and CUDA graphs of the last grid shape), so the stroke
    after a stroke does not pay the set-up again. The thread is a daemon: a solve
    still running when the application quits does not keep the process alive.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.running: Job | None = None  # the job the worker is executing now

    def submit(self, job: Job) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._loop, args=(self._queue,), name=self._name, daemon=True
            )
            self._thread.start()
        self._queue.put(job)

    def _loop(self, jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            self.running = job
            try:
                job.execute()
            finally:
                if self.running is job:
                    self.running = None

    def stop(self, timeout: float | None = 30.0) -> None:
        """Finish after the queued jobs (cancel them first) and join the thread.

        ``timeout`` is how long to wait for the thread, in seconds (None: until it
        ends; 0: not at all, the thread ends by itself after its jobs). A later
        :meth:`submit` starts a new thread with a queue of its own.
        """
        thread = self._thread
        self._thread = None
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            self._queue = queue.SimpleQueue()
            if timeout is None or timeout > 0:
                thread.join(timeout)


class WorkerTab(QWidget):
    """A tab whose solver runs on its own worker thread, with a busy bar and Cancel.

    ``jobFinished(outcome)`` is emitted when a job ends: ``"done"``, ``"error"`` or
    ``"cancelled"``; ``statusMessage(text)`` feeds the window's status bar.
    """

    jobFinished = pyqtSignal(str)
    statusMessage = pyqtSignal(str)

    def __init__(self, backend: str = "auto", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.backend = backend
        self._task: Job | None = None
        self._runner = Runner(f"vision_cuts {type(self).__name__}")
        # files are read on a thread of their own: a read neither waits for the
        # running solve nor cancels it (a picture that fails to open leaves it be)
        self._reader = Runner(f"vision_cuts {type(self).__name__} reader")
        self._reading: Job | None = None
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.last_error: QMessageBox | None = None

    def busy_widgets(self) -> QWidget:
        """The busy bar and the Cancel button, laid out for a tool row."""
        box = QWidget()
        lay = QHBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.progress)
        lay.addWidget(self.cancel_button)
        return box

    @staticmethod
    def page(tools: QWidget, body: QWidget, footer: QWidget | None = None):
        lay = QVBoxLayout()
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(tools)
        lay.addWidget(body, 1)
        if footer is not None:
            lay.addWidget(footer)
        return lay

    @property
    def busy(self) -> bool:
        """True while a job runs (and was not cancelled)."""
        return self._task is not None

    def start_job(
        self,
        fn: Callable[[Callable[[int, int], None]], Any],
        on_done: Callable[[Any], None],
        label: str,
    ) -> Job:
        """Run ``fn(callback)`` on the worker thread; ``on_done(result)`` on success.

        A job still running is cancelled first (it stops at its next progress report).
        """
        if self._task is not None:
            self._task.cancel()
        task = Job(fn, on_done, label)
        self._task = task
        # bound methods of this (GUI-thread) object: the signals arrive queued
        task.started.connect(self._on_started)
        task.progressed.connect(self._on_progress)
        task.succeeded.connect(self._on_succeeded)
        task.failed.connect(self._on_failed)
        self.progress.setRange(0, 0)  # indeterminate until the first report
        self.progress.setVisible(True)
        self.cancel_button.setEnabled(True)
        behind = self._runner.running
        if behind is not None and behind.cancelled:
            # a solver without progress reports cannot stop: it finishes first
            task.waiting = True
            self.statusMessage.emit(f"{label}: waiting, finishing the cancelled job...")
        else:
            self.statusMessage.emit(label + " ...")
        self._runner.submit(task)
        return task

    def read_files(
        self,
        read: Callable[[], Any],
        use: Callable[[Any], None],
        label: str,
        title: str,
    ) -> Job:
        """``read()`` on a reader thread, then ``use(what it read)`` here: decoding a
        large picture takes seconds, which the window must not freeze for. The
        running solve goes on meanwhile (``use`` replaces the inputs, and with them
        the solve, as the direct ``open_*`` calls do); a failure is a dialog titled
        ``title`` and leaves the solve be. A read still queued or running when the
        next one starts is dropped."""
        if self._reading is not None:
            self._reading.cancel()
        job = Job(lambda _callback: read(), use, label, title)
        self._reading = job
        job.succeeded.connect(self._on_read)  # bound methods: queued to this thread
        job.failed.connect(self._on_read_failed)
        self.statusMessage.emit(label + " ...")
        self._reader.submit(job)
        return job

    @property
    def reading(self) -> bool:
        """True while files are being read for this tab."""
        return self._reading is not None

    def _on_read(self, result: Any) -> None:
        job = self.sender()
        if job is not self._reading or job.cancelled:
            return
        self._reading = None
        try:
            job.on_done(result)
        except Exception as exc:  # e.g. a pair of two sizes
            self.show_error(job.error_title, exc)
            return
        self.statusMessage.emit(f"{job.label}: done")

    def _on_read_failed(self, exc: BaseException) -> None:
        job = self.sender()
        if job is not self._reading or job.cancelled:
            return
        self._reading = None
        self.show_error(job.error_title, exc)

    def cancel(self) -> None:
        """Stop the running job (its result, if it still comes, is dropped)."""
        task = self._task
        if task is None:
            return
        task.cancel()
        self._idle()
        self.statusMessage.emit("cancelled")
        self.jobFinished.emit("cancelled")

    def shutdown(self, timeout: float | None = 0.0) -> None:
        """Cancel the job and end the worker thread after it (before closing).

        By default this does not wait for a running solve, so closing never freezes
        the window; the cancelled job's result is dropped. ``timeout`` is how long
        to wait for the worker thread, in seconds (None: until it ends).
        """
        task = self._task
        if task is not None:
            task.cancel()
            for signal in (task.started, task.progressed, task.succeeded, task.failed):
                try:
                    signal.disconnect()
                except TypeError:  # nothing connected
                    pass
            self._idle()
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None
        self._reader.stop(0)
        self._runner.stop(timeout)

    def show_error(self, title: str, error: Any) -> QMessageBox:
        self.last_error = show_error(self, title, error)
        self.statusMessage.emit(f"error: {self.last_error.text()}")
        return self.last_error

    def _on_started(self) -> None:
        task = self.sender()
        if task is self._task and task.waiting and not task.cancelled:
            task.waiting = False
            self.statusMessage.emit(task.label + " ...")

    def _on_progress(self, done: int, total: int) -> None:
        if self.sender() is not self._task:
            return
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, total))

    def _idle(self) -> None:
        self._task = None
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)

    def _on_succeeded(self, result: Any) -> None:
        task = self.sender()
        if task is not self._task or task.cancelled:
            return
        self._idle()
        seconds = time.perf_counter() - task.started_at
        try:
            task.on_done(result)
        except Exception as exc:  # displaying failed: tell the user, keep running
            self.show_error("Error", exc)
            self.jobFinished.emit("error")
            return
        self.statusMessage.emit(f"{task.label}: done in {seconds:.2f} s")
        self.jobFinished.emit("done")

    def _on_failed(self, exc: BaseException) -> None:
        task = self.sender()
        if task is not self._task or task.cancelled:
            return
        self._idle()
        self.show_error("Error", exc)
        self.jobFinished.emit("error")
