"""The desktop application, driven through its real widgets (pytest-qt, offscreen).

Mouse input goes through the widgets' event handlers; each solver result the GUI
shows is compared with the library call it stands for. Small pictures and the CPU
backend keep this fast.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import vision_cuts

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000


@pytest.fixture
def window(qtbot):
    from vision_cuts.apps.app import MainWindow

    w = MainWindow(backend="cpu")
    qtbot.addWidget(w)
    w.resize(900, 640)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def _mouse(view, kind: str, x: float, y: float) -> None:
    """Send a left-button mouse event at image pixel (x, y) of an ImageView."""
    from PyQt5.QtCore import QEvent, Qt
    from PyQt5.QtGui import QMouseEvent
    from PyQt5.QtWidgets import QApplication

    pos = view.to_widget(x, y)
    etype = {
        "press": QEvent.MouseButtonPress,
        "move": QEvent.MouseMove,
        "release": QEvent.MouseButtonRelease,
    }[kind]
    button = Qt.NoButton if kind == "move" else Qt.LeftButton
    buttons = Qt.NoButton if kind == "release" else Qt.LeftButton
    event = QMouseEvent(etype, pos, button, buttons, Qt.NoModifier)
    QApplication.sendEvent(view, event)


def _drag(view, points) -> None:
    _mouse(view, "press", *points[0])
    for p in points[1:]:
        _mouse(view, "move", *p)
    _mouse(view, "release", *points[-1])


def _visible_error_boxes():
    from PyQt5.QtWidgets import QApplication, QMessageBox

    return [
        w
        for w in QApplication.topLevelWidgets()
        if isinstance(w, QMessageBox) and w.isVisible()
    ]


@pytest.fixture
def small_coffee():
    import skimage.data

    return np.ascontiguousarray(skimage.data.coffee()[::4, ::4])  # 100 x 150


def test_status_bar_names_the_backend(window):
    text = window.backend_label.text()
    assert text.startswith("Backend: CPU")
    assert text == "Backend: " + vision_cuts.describe_backend("cpu")


def test_unavailable_gpu_backend_is_reported_not_fatal(qtbot, small_coffee):
    from vision_cuts.apps.app import MainWindow

    w = MainWindow(backend="gpu")
    qtbot.addWidget(w)
    w.show()
    if vision_cuts.gpu_available():
        assert w.backend_label.text().startswith("Backend: GPU: ")
        return
    assert w.backend_label.text().startswith("Backend 'gpu' unavailable")
    tab = w.segment
    tab.set_image(small_coffee)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.set_rect((30, 8, 91, 73))
    assert done.args == ["error"]
    assert "backend='gpu'" in tab.last_error.text()
    assert w.isVisible() and tab.mask is None


def test_segment_box_strokes_undo_match_library(window, qtbot, small_coffee, tmp_path):
    from PyQt5.QtCore import Qt

    tab = window.segment
    image = small_coffee
    tab.set_image(image, "coffee")
    assert tab.view.mode == "rect"

    # drag a box: the first cut
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        _drag(tab.view, [(30, 8), (60, 40), (120, 80)])
    assert done.args == ["done"]
    assert tab.rect == (30, 8, 91, 73)
    first = vision_cuts.grabcut(
        image, rect=tab.rect, iterations=tab.iterations, backend="cpu"
    )
    np.testing.assert_array_equal(tab.mask, first.mask)
    assert 0 < tab.mask.sum() < tab.mask[8:81, 30:121].size
    assert not tab.mask[:8].any()  # outside the box: background

    # a background stroke refines it from the previous result
    qtbot.mouseClick(tab.tool_bg, Qt.LeftButton)
    assert tab.view.mode == "brush"
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        _drag(tab.view, [(95, 55), (105, 58), (115, 62)])
    assert done.args == ["done"]
    fg, bg = tab.scribbles()
    assert not fg.any() and bg[55, 95] and bg[62, 115] and bg[58, 105]
    second = vision_cuts.grabcut(
        image,
        rect=tab.rect,
        background=bg,
        init=first,
        iterations=tab.refine_iterations,
        backend="cpu",
    )
    np.testing.assert_array_equal(tab.mask, second.mask)
    assert not tab.mask[bg].any()

    # an object stroke
    qtbot.mouseClick(tab.tool_fg, Qt.LeftButton)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        _drag(tab.view, [(40, 70), (50, 72)])
    assert done.args == ["done"]
    fg2, bg2 = tab.scribbles()
    assert fg2[70, 40] and fg2[72, 50]
    np.testing.assert_array_equal(bg2, bg)
    third = vision_cuts.grabcut(
        image,
        rect=tab.rect,
        foreground=fg2,
        background=bg2,
        init=second,
        iterations=tab.refine_iterations,
        backend="cpu",
    )
    np.testing.assert_array_equal(tab.mask, third.mask)
    assert tab.mask[fg2].all()
    assert len(tab.strokes) == 2

    # undo the last stroke: the previous result comes back at once
    qtbot.mouseClick(tab.undo_button, Qt.LeftButton)
    assert not tab.busy and len(tab.strokes) == 1
    np.testing.assert_array_equal(tab.mask, second.mask)

    # save mask and overlay
    import cv2

    assert tab.save_mask(str(tmp_path / "mask.png"))
    assert tab.save_overlay(str(tmp_path / "overlay.png"))
    saved = cv2.imread(str(tmp_path / "mask.png"), cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(saved, second.mask.astype(np.uint8) * 255)
    over = cv2.imread(str(tmp_path / "overlay.png"))
    assert over.shape == image.shape
    assert not _visible_error_boxes()


def test_segment_cancel_and_batched_strokes(window, qtbot, small_coffee):
    from PyQt5.QtCore import Qt

    tab = window.segment
    tab.set_image(small_coffee, "coffee")
    tab.set_rect((30, 8, 91, 73))
    assert tab.busy and tab.cancel_button.isEnabled()
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        qtbot.mouseClick(tab.cancel_button, Qt.LeftButton)
    assert done.args == ["cancelled"]
    assert not tab.busy and tab.mask is None

    # two strokes while the first cut runs are taken in by one more cut
    tab.set_rect((30, 8, 91, 73))
    tab.add_stroke("background", [(95, 55), (115, 62)], 4)
    tab.add_stroke("foreground", [(40, 70), (50, 72)], 4)
    qtbot.waitUntil(lambda: tab.mask is not None, timeout=TIMEOUT_MS)
    fg, bg = tab.scribbles()
    assert fg[70, 40] and bg[55, 95]
    assert tab.mask[fg].all() and not tab.mask[bg].any()


def test_segment_strokes_during_a_failed_cut_are_used(window, qtbot, small_coffee):
    """A box over the whole picture fails (no background to learn from); the
    background stroke painted while it ran is what it lacked, and was dropped (the
    tab sat idle with a box, a stroke and no cut)."""
    tab = window.segment
    tab.set_image(small_coffee, "coffee")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as failed:
        tab.set_rect((0, 0, 150, 100))
        tab.add_stroke("background", [(5, 5), (140, 5)], 4)
    assert failed.args == ["error"]
    assert "no background" in tab.last_error.text()
    qtbot.waitUntil(lambda: tab.mask is not None, timeout=TIMEOUT_MS)
    _, bg = tab.scribbles()
    assert bg[5, 5] and not tab.mask[bg].any()
    # a failure with nothing queued says so (it read "Drag a box around the object.")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as failed:
        tab.set_rect((0, 0, 150, 100))
    assert failed.args == ["error"] and "cut failed" in tab.info.text()


def test_segment_cancel_reports_unused_strokes(window, qtbot, small_coffee):
    from PyQt5.QtCore import Qt

    tab = window.segment
    tab.set_image(small_coffee, "coffee")
    tab.set_rect((30, 8, 91, 73))
    tab.add_stroke("background", [(95, 55), (115, 62)], 4)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        qtbot.mouseClick(tab.cancel_button, Qt.LeftButton)
    assert done.args == ["cancelled"]
    qtbot.waitUntil(lambda: "not used yet" in tab.info.text(), timeout=5000)
    assert not tab.busy and tab.mask is None


def test_stereo_tab_matches_library_and_reports_value(window, qtbot, rng):
    from PyQt5.QtCore import Qt

    window.show_tab("stereo")
    tab = window.stereo
    texture = rng.integers(0, 256, size=(40, 72, 3)).astype(np.uint8)
    left = texture[:, 8:68]
    right = texture[:, 11:71]  # the left view is shifted by 3 pixels
    tab.set_pair(np.ascontiguousarray(left), np.ascontiguousarray(right), "shifted")
    tab.scale_box.setCurrentText("full size")
    tab.max_disp.setValue(6)
    tab.method_box.setCurrentText("expansion")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        qtbot.mouseClick(tab.compute_button, Qt.LeftButton)
    assert done.args == ["done"]
    ref = vision_cuts.stereo_disparity(
        tab.left, tab.right, max_disparity=6, method="expansion", backend="cpu"
    )
    np.testing.assert_array_equal(tab.disparity, ref)
    assert np.median(tab.disparity[:, 10:]) == 3  # interior of the known shift

    _mouse(tab.view, "move", 30, 20)
    assert tab.value_label.text() == f"x 30, y 20: disparity {ref[20, 30]:g}"

    # Ishikawa through the method box
    tab.method_box.setCurrentText("ishikawa")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        qtbot.mouseClick(tab.compute_button, Qt.LeftButton)
    ref = vision_cuts.stereo_disparity(
        tab.left, tab.right, max_disparity=6, method="ishikawa", backend="cpu"
    )
    np.testing.assert_array_equal(tab.disparity, ref)


def _textured_pair(rng, shift=(2, 1)):
    import cv2

    base = rng.integers(0, 256, size=(24, 24, 3)).astype(np.uint8)
    f0 = cv2.resize(base, (96, 96), interpolation=cv2.INTER_CUBIC)
    f1 = np.roll(f0, shift=(shift[1], shift[0]), axis=(0, 1))
    return f0, f1


def test_flow_tab_matches_library(window, qtbot, rng):
    window.show_tab("flow")
    tab = window.flow
    f0, f1 = _textured_pair(rng)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.set_frames(f0, f1, "rolled")
    assert done.args == ["done"], tab.last_error and tab.last_error.text()
    ref = vision_cuts.optical_flow(f0, f1, backend="cpu", dense=True)
    np.testing.assert_array_equal(tab.result.points, ref.points)
    np.testing.assert_array_equal(tab.result.vectors, ref.vectors)
    np.testing.assert_array_equal(tab.result.dense, ref.dense)
    assert len(ref.points) > 0
    pts, vec = tab.shown_arrows()
    assert 0 < len(pts) <= max(tab.max_arrows, len(ref.points))
    np.testing.assert_array_equal(
        tab.arrows_picture(),
        vision_cuts.draw_flow_arrows(f0, pts, vec, scale=tab.arrow_scale.value()),
    )
    np.testing.assert_array_equal(
        tab.color_picture(), vision_cuts.flow_to_color(ref.dense)
    )
    assert tab.arrows_view.has_picture() and tab.color_view.has_picture()


def test_flow_tab_steps_through_a_video(window, qtbot, rng, tmp_path):
    import cv2

    f0, _ = _textured_pair(rng)
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10, (96, 96))
    assert writer.isOpened()
    frames = [np.roll(f0, 2 * k, axis=1) for k in range(4)]
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()

    tab = window.flow
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        assert tab.open_video(path)
    assert done.args == ["done"], tab.last_error and tab.last_error.text()
    assert tab.index == 0 and tab.frame_label.text() == "frame 0 / 4"
    assert not tab.prev_button.isEnabled() and tab.next_button.isEnabled()
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        from PyQt5.QtCore import Qt

        qtbot.mouseClick(tab.next_button, Qt.LeftButton)
    assert done.args == ["done"]
    assert tab.index == 1
    ref = vision_cuts.optical_flow(tab.frame0, tab.frame1, backend="cpu", dense=True)
    np.testing.assert_array_equal(tab.result.vectors, ref.vectors)
    # the frames shown are the video's frames 1 and 2 as OpenCV decodes them
    cap = cv2.VideoCapture(path)
    decoded = [cv2.cvtColor(cap.read()[1], cv2.COLOR_BGR2RGB) for _ in range(3)]
    cap.release()
    np.testing.assert_array_equal(tab.frame0, decoded[1])
    np.testing.assert_array_equal(tab.frame1, decoded[2])
    assert np.abs(tab.frame0.astype(int) - frames[1]).mean() < 20  # lossy MJPG


def test_video_frames_in_any_order_and_how_many_are_kept(rng, tmp_path):
    """Frames asked for in any order are the video's frames as decoded in order; a
    step back past the kept frames decodes the video again from its start (it froze
    the window every eighth step back on long HD videos: the frames kept now fill
    256 MB, at least 8)."""
    import cv2

    from vision_cuts.apps.flow_tab import VideoFrames

    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10, (48, 32))
    base = rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)
    for k in range(30):
        writer.write(np.roll(base, k, axis=1))
    writer.release()
    cap = cv2.VideoCapture(path)
    decoded = [cv2.cvtColor(cap.read()[1], cv2.COLOR_BGR2RGB) for _ in range(30)]
    cap.release()
    video = VideoFrames(path, keep=4)
    for i in (0, 1, 2, 20, 19, 18, 17, 16, 3, 29, 5, 28):
        np.testing.assert_array_equal(video.get(i), decoded[i])
    assert video.get(30) is None and video.count == 30
    video.close()
    video = VideoFrames(path)
    assert video._keep == 256 * 2**20 // base.nbytes
    video.close()


def test_strokes_rasterize_in_order_later_wins():
    # one label canvas painted stroke by stroke must give the masks that painting each
    # stroke on its own and letting the later one win would give
    import cv2

    from vision_cuts.apps.segment_tab import BACKGROUND, FOREGROUND, Stroke, rasterize

    rng = np.random.default_rng(7)
    shape = (60, 90)
    for _ in range(20):
        strokes = []
        for i in range(int(rng.integers(0, 8))):
            n = int(rng.integers(0, 6))
            pts = tuple(
                (float(x), float(y))
                for x, y in zip(
                    rng.uniform(-10, 100, n), rng.uniform(-10, 70, n), strict=True
                )
            )
            kind = FOREGROUND if rng.random() < 0.5 else BACKGROUND
            strokes.append(Stroke(kind, pts, int(rng.integers(0, 9)), i))
        fg = np.zeros(shape, bool)
        bg = np.zeros(shape, bool)
        for s in strokes:
            m = np.zeros(shape, np.uint8)
            pts = np.floor(np.asarray(s.points, np.float64)).astype(np.int32)
            for x, y in pts:
                cv2.circle(m, (int(x), int(y)), s.radius, 1, -1)
            if len(pts) > 1:
                cv2.polylines(m, [pts.reshape(-1, 1, 2)], False, 1, 2 * s.radius + 1)
            hit = m.astype(bool)
            mine, other = (fg, bg) if s.kind == FOREGROUND else (bg, fg)
            mine |= hit
            other &= ~hit
        got_fg, got_bg = rasterize(strokes, shape)
        np.testing.assert_array_equal(got_fg, fg)
        np.testing.assert_array_equal(got_bg, bg)
        assert not (got_fg & got_bg).any()


def test_bad_files_show_an_error_dialog(window, qtbot, tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"this is not a picture")
    assert not window.segment.open_image(str(bad))
    boxes = _visible_error_boxes()
    assert len(boxes) == 1 and "broken.png" in boxes[0].text()
    assert window.segment.image is None and window.isVisible()
    boxes[0].close()

    assert not window.stereo.open_pair(str(bad), str(bad))
    assert "broken.png" in window.stereo.last_error.text()
    assert not window.flow.open_video(str(tmp_path / "missing.avi"))
    assert "missing.avi" in window.flow.last_error.text()

    # a solver error (max disparity wider than the picture) is a dialog too
    tab = window.stereo
    tab.set_pair(np.zeros((8, 10, 3), np.uint8), np.zeros((8, 10, 3), np.uint8))
    tab.scale_box.setCurrentText("full size")
    tab.max_disp.setValue(50)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.compute()
    assert done.args == ["error"]
    assert "max_disparity" in tab.last_error.text()
    assert window.isVisible()


def test_cli_gui_command_and_entry_point():
    from pathlib import Path

    from vision_cuts.apps import main
    from vision_cuts.cli import build_parser

    args = build_parser().parse_args(["gui", "--tab", "stereo", "--backend", "cpu"])
    assert (args.tab, args.backend, args.image) == ("stereo", "cpu", None)
    assert args.func.__module__ == "vision_cuts.cli_gui"
    # both commands take the same options
    import argparse

    from vision_cuts.apps import add_arguments

    own = argparse.ArgumentParser()
    add_arguments(own)
    assert vars(own.parse_args(["coffee", "--tab", "flow"])) == {
        "image": "coffee",
        "tab": "flow",
        "backend": "auto",
    }
    sub = build_parser().parse_args(["gui", "coffee", "--tab", "flow"])
    assert (sub.image, sub.tab, sub.backend) == ("coffee", "flow", "auto")
    assert callable(main)
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'vision-cuts-gui = "vision_cuts.apps:main"' in pyproject


def _png_claiming(path, width: int, height: int) -> None:
    """A PNG file whose header claims ``width`` x ``height`` RGB pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 10))
        + chunk(b"IEND", b"")
    )


def test_picture_over_opencv_pixel_limit_is_an_error_message(window, tmp_path):
    from vision_cuts.apps.app import _first_picture

    huge = tmp_path / "huge.png"
    _png_claiming(huge, 100_000, 100_000)  # past OpenCV's CV_IO_MAX_IMAGE_PIXELS
    with pytest.raises(SystemExit, match=r"^error: cannot read image .*huge\.png"):
        _first_picture(str(huge))
    assert not window.segment.open_image(str(huge))
    assert "huge.png" in window.segment.last_error.text()
    assert window.segment.image is None and window.isVisible()


def _segmented(window, qtbot, small_coffee):
    tab = window.segment
    tab.set_image(small_coffee, "coffee")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.set_rect((30, 8, 91, 73))
    assert done.args == ["done"]
    return tab


def test_failed_save_keeps_the_existing_file(
    window, qtbot, small_coffee, tmp_path, monkeypatch
):
    import cv2

    tab = _segmented(window, qtbot, small_coffee)
    path = tmp_path / "mask.png"
    assert tab.save_overlay(str(path))
    before = path.read_bytes()
    assert len(before) > 0
    real = cv2.imwrite

    def half(name, img):  # a writer that fails part way (a full disk)
        with open(name, "wb") as f:
            f.write(b"half")
        return False

    monkeypatch.setattr(cv2, "imwrite", half)
    assert not tab.save_mask(str(path))
    assert "mask.png" in tab.last_error.text()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mask.png"]
    monkeypatch.setattr(cv2, "imwrite", real)
    # a successful save replaces the file
    assert tab.save_mask(str(path))
    assert path.read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mask.png"]


def test_save_formats_with_one_or_three_channels(window, qtbot, small_coffee, tmp_path):
    import cv2

    tab = _segmented(window, qtbot, small_coffee)
    # the grey mask as .ppm: three equal channels
    assert tab.save_mask(str(tmp_path / "mask.ppm")), tab.last_error.text()
    saved = cv2.imread(str(tmp_path / "mask.ppm"), cv2.IMREAD_UNCHANGED)
    expected = tab.mask.astype(np.uint8) * 255
    assert saved.shape == (*expected.shape, 3)
    for c in range(3):
        np.testing.assert_array_equal(saved[..., c], expected)
    # the mask as .pgm stays one channel
    assert tab.save_mask(str(tmp_path / "mask.pgm"))
    saved = cv2.imread(str(tmp_path / "mask.pgm"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(saved, expected)
    # the colour overlay does not fit a .pgm or a .pbm file
    for ext in (".pgm", ".pbm"):
        assert not tab.save_overlay(str(tmp_path / f"overlay{ext}"))
        text = tab.last_error.text()
        assert f"overlay{ext}" in text and "one grey channel" in text
        assert not (tmp_path / f"overlay{ext}").exists()
    # an extension without a writer is named before OpenCV is asked
    assert not tab.save_mask(str(tmp_path / "mask.unknown"))
    assert "no writer for the extension '.unknown'" in tab.last_error.text()
    # a mask is not written lossily (it came back with values other than 0 and
    # 255); the overlay, a picture, may be
    assert not tab.save_mask(str(tmp_path / "mask.jpg"))
    assert "lossily" in tab.last_error.text()
    assert tab.save_overlay(str(tmp_path / "overlay.jpg")), tab.last_error.text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mask.pgm",
        "mask.ppm",
        "overlay.jpg",
    ]


def test_save_errors_name_the_cause(window, qtbot, small_coffee, tmp_path):
    """A missing folder, a name without an extension and a directory were reported as
    "check that the folder is writable, or use .png" or OpenCV's "no writer"."""
    tab = _segmented(window, qtbot, small_coffee)
    cases = {
        str(tmp_path / "nodir" / "m.png"): "directory .*nodir.* does not exist",
        str(tmp_path / "mask"): "no file extension .* add .png",
        str(tmp_path): "it is a directory",
    }
    for path, reason in cases.items():
        assert not tab.save_mask(path)
        assert re.search(reason, tab.last_error.text()), tab.last_error.text()
    assert os.listdir(tmp_path) == []


def test_save_through_a_link_and_a_long_name(window, qtbot, small_coffee, tmp_path):
    """A symbolic link was replaced by a new file (the file it named kept its old
    content); a legal 244-byte name failed, since the temporary name beside it grew
    past 255 bytes."""
    import cv2

    tab = _segmented(window, qtbot, small_coffee)
    real = tmp_path / "real.png"
    real.write_bytes(b"old")
    link = tmp_path / "link.png"
    os.symlink(real, link)
    assert tab.save_mask(str(link)), tab.last_error.text()
    assert os.path.islink(link)
    np.testing.assert_array_equal(
        cv2.imread(str(real), cv2.IMREAD_UNCHANGED), tab.mask.astype(np.uint8) * 255
    )
    long = tmp_path / ("a" * 240 + ".png")
    assert tab.save_mask(str(long)), tab.last_error.text()
    assert cv2.imread(str(long)) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["real.png", "link.png", long.name]
    )


def test_save_dialog_adds_the_format(
    window, qtbot, small_coffee, tmp_path, monkeypatch
):
    from PyQt5.QtWidgets import QFileDialog

    tab = _segmented(window, qtbot, small_coffee)
    typed = str(tmp_path / "mask")
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (typed, ""))
    )
    tab.save_mask_dialog()
    assert os.listdir(tmp_path) == ["mask.png"]


def _gated_stereo(monkeypatch):
    """Make the stereo tab's solver wait for a gate and ignore its callback, as a
    solver without progress reports does; returns the gate, the calls made and the
    library function."""
    import threading

    gate = threading.Event()
    calls = []
    real = vision_cuts.stereo_disparity

    def stereo_disparity(left, right, **kw):
        calls.append(left.shape)
        if left.shape[1] > 30:
            gate.wait(20)
        kw["callback"] = None
        return real(left, right, **kw)

    monkeypatch.setattr(vision_cuts, "stereo_disparity", stereo_disparity)
    return gate, calls, real


def _pair(rng, width):
    texture = rng.integers(0, 256, size=(12, width + 2, 3)).astype(np.uint8)
    return (
        np.ascontiguousarray(texture[:, 2:]),
        np.ascontiguousarray(texture[:, :-2]),
    )


def _slow_compute(tab, qtbot, calls, pair) -> list:
    """Start the stereo tab's (gated) solve of ``pair`` at full size, 0..4, and wait
    until it runs; returns the list the tab's ``jobFinished`` outcomes go to."""
    tab.set_pair(*pair, "slow")
    tab.scale_box.setCurrentText("full size")
    tab.max_disp.setValue(4)
    finished = []
    tab.jobFinished.connect(finished.append)
    tab.compute()
    qtbot.waitUntil(lambda: len(calls) == 1, timeout=TIMEOUT_MS)
    return finished


def test_closing_does_not_wait_for_a_running_solve(window, qtbot, rng, monkeypatch):
    import threading
    import time

    gate, calls, real = _gated_stereo(monkeypatch)
    tab = window.stereo
    finished = _slow_compute(tab, qtbot, calls, _pair(rng, 40))
    worker = next(t for t in threading.enumerate() if t.name.endswith("StereoTab"))
    assert worker.daemon  # a solve still running does not keep the process alive

    t0 = time.perf_counter()
    window.close()
    assert time.perf_counter() - t0 < 2.0
    assert not tab.busy

    gate.set()  # the solve ends; its result is dropped
    worker.join(TIMEOUT_MS / 1000)
    assert not worker.is_alive()
    qtbot.wait(100)
    assert finished == [] and tab.disparity is None


def test_next_job_waits_for_a_cancelled_solve_visibly(window, qtbot, rng, monkeypatch):
    window.show_tab("stereo")
    gate, calls, real = _gated_stereo(monkeypatch)
    tab = window.stereo
    _slow_compute(tab, qtbot, calls, _pair(rng, 40))
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.cancel()
    assert done.args == ["cancelled"]

    left, right = _pair(rng, 20)
    tab.set_pair(left, right, "quick")
    tab.scale_box.setCurrentText("full size")
    tab.compute()
    status = window.statusBar().currentMessage()
    assert status == f"stereo ({tab.method_box.currentText()}): waiting, " + (
        "finishing the cancelled job..."
    )
    assert tab.busy and tab.cancel_button.isEnabled()
    qtbot.wait(200)
    assert len(calls) == 1  # still behind the cancelled solve

    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        gate.set()
    assert done.args == ["done"]
    assert (
        window.statusBar()
        .currentMessage()
        .startswith(f"stereo ({tab.method_box.currentText()}): done in")
    )
    ref = real(
        left,
        right,
        max_disparity=4,
        method=tab.method_box.currentText(),
        backend="cpu",
    )
    np.testing.assert_array_equal(tab.disparity, ref)


def test_cancel_stops_a_cpu_ishikawa_cut(window, qtbot, rng, monkeypatch):
    # the plain Ishikawa method is one cut: Cancel now stops it (the search starts
    # here only once its stop flag is set, so it must stop, not finish), and the next
    # job runs at once
    from _helpers import gate_cpu_search_on_its_stop

    seen, first = gate_cpu_search_on_its_stop(monkeypatch, once=True)
    window.show_tab("stereo")
    tab = window.stereo
    tab.method_box.setCurrentText("ishikawa")
    tab.set_pair(*_pair(rng, 40), "cancelled")
    tab.scale_box.setCurrentText("full size")
    tab.max_disp.setValue(4)
    tab.compute()
    qtbot.waitUntil(first.is_set, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.cancel()
    assert done.args == ["cancelled"]
    qtbot.waitUntil(lambda: seen == ["stopped"], timeout=TIMEOUT_MS)

    left, right = _pair(rng, 20)
    tab.set_pair(left, right, "next")
    tab.scale_box.setCurrentText("full size")
    with qtbot.waitSignal(tab.jobFinished, timeout=TIMEOUT_MS) as done:
        tab.compute()
    assert done.args == ["done"]
    ref = vision_cuts.stereo_disparity(
        left, right, max_disparity=4, method="ishikawa", backend="cpu"
    )
    np.testing.assert_array_equal(tab.disparity, ref)


def test_open_dialogs_read_files_off_the_gui_thread(
    window, qtbot, small_coffee, tmp_path, monkeypatch
):
    """Decoding a large picture takes seconds: the Open dialogs read the files on a
    reader thread and use them on the GUI thread; a file that cannot be read is the
    same dialog as the direct call's."""
    import threading

    import cv2

    import vision_cuts.apps.flow_tab as flow_mod
    import vision_cuts.apps.segment_tab as seg_mod
    import vision_cuts.apps.stereo_tab as stereo_mod

    path = tmp_path / "coffee.png"
    cv2.imwrite(str(path), cv2.cvtColor(small_coffee, cv2.COLOR_RGB2BGR))
    readers = []
    real = seg_mod.load_image

    def load_image(p):
        readers.append(threading.current_thread())
        return real(p)

    for mod in (seg_mod, stereo_mod, flow_mod):
        monkeypatch.setattr(mod, "load_image", load_image)
        monkeypatch.setattr(mod.QFileDialog, "getOpenFileName",
                            staticmethod(lambda *a, **k: (str(path), "")))  # fmt: skip

    seg = window.segment
    seg.open_dialog()
    assert seg.reading
    qtbot.waitUntil(lambda: seg.image is not None and not seg.reading,
                    timeout=TIMEOUT_MS)  # fmt: skip
    np.testing.assert_array_equal(seg.image, small_coffee)
    assert seg.image_name == str(path)

    window.stereo.open_dialog()
    qtbot.waitUntil(lambda: window.stereo.left is not None, timeout=TIMEOUT_MS)
    np.testing.assert_array_equal(window.stereo._pair[0], small_coffee)

    window.flow.open_frames_dialog()
    qtbot.waitUntil(lambda: window.flow.source_name == str(path), timeout=TIMEOUT_MS)
    assert len(readers) == 5
    assert all(t is not threading.main_thread() for t in readers)

    path.write_bytes(b"this is not a picture")
    seg.open_dialog()
    qtbot.waitUntil(lambda: seg.last_error is not None and not seg.reading,
                    timeout=TIMEOUT_MS)  # fmt: skip
    assert seg.last_error.windowTitle() == "Cannot open picture"
    assert "coffee.png" in seg.last_error.text()
    np.testing.assert_array_equal(seg.image, small_coffee)  # the picture stays
    seg.last_error.close()


def test_a_file_that_fails_to_open_leaves_the_running_solve(
    window, qtbot, rng, tmp_path, monkeypatch
):
    """Reading files does not touch the running solve: a picture that fails to
    open leaves it to finish and show its result (the read first cancelled it,
    and the error said nothing of it)."""
    import vision_cuts.apps.stereo_tab as stereo_mod

    window.show_tab("stereo")
    gate, calls, real = _gated_stereo(monkeypatch)
    tab = window.stereo
    left, right = _pair(rng, 40)
    finished = _slow_compute(tab, qtbot, calls, (left, right))
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"this is not a picture")
    monkeypatch.setattr(stereo_mod.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(bad), "")))  # fmt: skip
    tab.open_dialog()
    qtbot.waitUntil(lambda: tab.last_error is not None and not tab.reading,
                    timeout=TIMEOUT_MS)  # fmt: skip
    assert tab.last_error.windowTitle() == "Cannot open stereo pair"
    assert tab.busy  # the solve goes on
    tab.last_error.close()
    gate.set()
    qtbot.waitUntil(lambda: finished == ["done"], timeout=TIMEOUT_MS)
    want = real(left, right, max_disparity=4, method=tab.method_box.currentText(),
                backend="cpu")  # fmt: skip
    np.testing.assert_array_equal(tab.disparity, want)
