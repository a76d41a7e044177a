"""Tests of ``vision-cuts flow``: image-pair and video modes, bad input."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from vision_cuts.cli import main
from vision_cuts.io import read_flo

cv2 = pytest.importorskip("cv2")


def _frames(count: int, shape=(96, 128)):
    """Frames of one blurred-noise picture moving by (2, 1) px per frame."""
    rng = np.random.default_rng(3)
    h, w = shape
    big = (rng.random((h + 2 * count + 8, w + 2 * count + 8, 3)) * 255).astype(np.uint8)
    big = cv2.GaussianBlur(big, (0, 0), 1.2)
    # frame k shows big[y0 - k : ..., x0 - 2k : ...], so content moves by (+2, +1)
    y0, x0 = count + 4, 2 * count + 4
    return [
        big[y0 - k : y0 - k + h, x0 - 2 * k : x0 - 2 * k + w].copy()
        for k in range(count)
    ]


def _write_video(path, frames, fourcc="mp4v"):
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 10.0, (w, h))
    assert writer.isOpened()
    for f in frames:
        writer.write(f)
    writer.release()


def test_pair_mode(tmp_path, capsys):
    f0, f1 = _frames(2)
    p0, p1 = tmp_path / "a.png", tmp_path / "b.png"
    cv2.imwrite(str(p0), f0)
    cv2.imwrite(str(p1), f1)
    out, col, flo = tmp_path / "arrows.png", tmp_path / "color.png", tmp_path / "d.flo"
    rc = main(
        [
            "flow",
            str(p0),
            str(p1),
            "-o",
            str(out),
            "--color",
            str(col),
            "--flo",
            str(flo),
            "--backend",
            "cpu",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "flow of a 128x96 pair" in text and "matches" in text
    assert cv2.imread(str(out)).shape == (96, 128, 3)
    assert cv2.imread(str(col)).shape == (96, 128, 3)
    dense = read_flo(flo)
    assert dense.shape == (96, 128, 2)
    assert (
        np.abs(np.median(dense[10:-10, 10:-10].reshape(-1, 2), 0) - [2, 1]).max() < 0.1
    )


def test_video_mode_streams_every_pair(tmp_path, capsys):
    src = tmp_path / "in.mp4"
    _write_video(src, _frames(5))
    out = tmp_path / "out.mp4"
    rc = main(["flow", str(src), "-o", str(out), "--view", "both", "--backend", "cpu"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    per_frame = [ln for ln in lines if ln.startswith("frame ")]
    assert [ln.split(":")[0] for ln in per_frame] == [
        f"frame {k}->{k + 1}" for k in range(4)
    ]
    assert lines[-1].startswith("flow of 4 frame pairs (128x96)")
    # codec noise aside, the motion is (2, 1) px per frame: |v| = 2.24
    assert all("median |v| 2.2" in ln for ln in per_frame)
    cap = cv2.VideoCapture(str(out))
    n = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        assert frame.shape == (96, 256, 3)  # arrows | colour side by side
        n += 1
    cap.release()
    assert n == 4


def test_video_max_frames(tmp_path, capsys):
    src = tmp_path / "in.mp4"
    _write_video(src, _frames(5))
    assert main(["flow", str(src), "--max-frames", "2", "--backend", "cpu"]) == 0
    assert "flow of 2 frame pairs" in capsys.readouterr().out


def test_bad_input(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"this is not a video")
    with pytest.raises(SystemExit, match="cannot read video"):
        main(["flow", str(junk)])
    with pytest.raises(SystemExit, match="no such video file"):
        main(["flow", str(tmp_path / "missing.mp4")])
    one = tmp_path / "one.mp4"
    _write_video(one, _frames(1))
    with pytest.raises(SystemExit, match="fewer than two frames"):
        main(["flow", str(one)])
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    cv2.imwrite(str(a), np.zeros((20, 30, 3), np.uint8))
    cv2.imwrite(str(b), np.zeros((21, 30, 3), np.uint8))
    with pytest.raises(SystemExit, match="frames differ in size"):
        main(["flow", str(a), str(b)])
    with pytest.raises(SystemExit, match="cannot read image"):
        main(["flow", str(a), str(tmp_path / "nope.png")])
    with pytest.raises(SystemExit, match="--color and --flo are for an image pair"):
        main(["flow", str(junk), "--flo", str(tmp_path / "x.flo")])
    with pytest.raises(SystemExit, match="--max-features must be positive"):
        main(["flow", str(a), str(a), "--max-features", "0"])


def test_textureless_pair_reports_no_match(tmp_path, capsys):
    a = tmp_path / "flat.png"
    cv2.imwrite(str(a), np.full((40, 50, 3), 90, np.uint8))
    out = tmp_path / "o.png"
    assert main(["flow", str(a), str(a), "-o", str(out), "--backend", "cpu"]) == 0
    assert "0 matches" in capsys.readouterr().out
    assert out.is_file()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("vo.png", "'.png' is an image format"),
        ("vo.jpg", "'.jpg' is an image format"),
        ("vo", "no file extension"),
        ("vo.xyz", "OpenCV has no writer for this container and codec"),
    ],
)
def test_video_output_refused_before_solving(
    tmp_path, capsys, monkeypatch, name, words
):
    """A video written under an image name (FFmpeg writes the raw stream there) or
    with a container OpenCV cannot write is refused before any pair is solved."""
    flow_module = importlib.import_module("vision_cuts.optical_flow")

    def no_solve(*args, **kwargs):
        raise AssertionError("a pair was solved")

    monkeypatch.setattr(flow_module, "optical_flow_frames", no_solve)
    src = tmp_path / "in.avi"
    _write_video(src, _frames(3), "MJPG")
    out = tmp_path / name
    with pytest.raises(SystemExit, match=words) as info:
        main(["flow", str(src), "-o", str(out), "--backend", "cpu"])
    text = str(info.value.code)
    assert text.startswith("error: ") and "-o/--output" in text
    assert "\n" not in text and not out.exists()
    assert capsys.readouterr().out == ""


def test_video_output_not_left_behind(tmp_path):
    """A video with one frame gives no pair: the output opened for it is removed."""
    one = tmp_path / "one.avi"
    _write_video(one, _frames(1), "MJPG")
    out = tmp_path / "o.mp4"
    with pytest.raises(SystemExit, match="fewer than two frames"):
        main(["flow", str(one), "-o", str(out), "--backend", "cpu"])
    assert not out.exists()


@pytest.fixture(scope="module")
def small_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    f0, f1 = _frames(2, (48, 64))
    p0, p1 = folder / "a.png", folder / "b.png"
    cv2.imwrite(str(p0), f0)
    cv2.imwrite(str(p1), f1)
    return str(p0), str(p1)


@pytest.mark.parametrize(
    "options",
    [
        ["--search-radius", "1e-3"],
        ["--arrow-scale", "1e300", "-o", "{tmp}/a.png"],
        ["--detector", "orb", "--max-features", "600000000"],
        ["--detector", "sift", "--max-features", "600000000"],
    ],
)
def test_extreme_option_values_run(small_pair, tmp_path, capsys, options):
    argv = ["flow", *small_pair, "--backend", "cpu"]
    argv += [o.format(tmp=tmp_path) for o in options]
    assert main(argv) == 0
    assert "flow of a 64x48 pair" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--max-features", "3000000000"], "--max-features must be positive and at"),
        (["--search-radius", "nan"], "--search-radius must be positive and finite"),
        (["--arrow-scale", "inf"], "--arrow-scale must be positive and finite"),
        (["--max-magnitude=-inf"], "--max-magnitude must be positive and finite"),
    ],
)
def test_bad_option_values(small_pair, options, words):
    with pytest.raises(SystemExit, match=words):
        main(["flow", *small_pair, "--backend", "cpu", *options])


def test_written_video_is_read_back(tmp_path):
    """OpenCV's video writer reports no failure (a full disk leaves a file nothing
    can play): the command reads the file back, and one short of its frames is an
    error that removes it."""
    from vision_cuts.cli_optical_flow import _check_written

    good = tmp_path / "good.avi"
    _write_video(good, _frames(6, (32, 48)), "MJPG")
    _check_written(str(good), 6)
    assert good.exists()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(SystemExit, match="cut.avi.*-o/--output.*removed it"):
        _check_written(str(cut), 6)
    assert not cut.exists()
    with pytest.raises(SystemExit, match="holds 6 of the 7 frames|does not read back"):
        _check_written(str(good), 7)


def test_failed_video_run_keeps_the_old_output(tmp_path):
    """The video is written beside ``-o`` and moved over it once read back: a run
    that fails leaves the file that was there, and nothing beside it."""
    one = tmp_path / "one.avi"
    _write_video(one, _frames(1), "MJPG")
    out = tmp_path / "o.mp4"
    out.write_bytes(b"old")
    with pytest.raises(SystemExit, match="fewer than two frames"):
        main(["flow", str(one), "-o", str(out), "--backend", "cpu"])
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.mp4", "one.avi"]


def test_video_options_are_refused_for_a_pair(tmp_path, capsys):
    """``--max-frames``, ``--fourcc`` and ``--no-warm-start`` were silently ignored
    for an image pair; ``--fourcc MJPGX`` was cut to MJPG."""
    frames = _frames(2)
    paths = []
    for k, f in enumerate(frames):
        paths.append(str(tmp_path / f"f{k}.png"))
        cv2.imwrite(paths[-1], f)
    for extra, words in (
        (["--max-frames", "3"], "--max-frames"),
        (["--fourcc", "MJPG"], "--fourcc"),
        (["--no-warm-start"], "--no-warm-start"),
    ):
        with pytest.raises(SystemExit, match=f"error: {words}.*for a video"):
            main(["flow", *paths, *extra, "--backend", "cpu"])
    video = tmp_path / "v.mp4"
    _write_video(video, _frames(3))
    with pytest.raises(SystemExit, match="four-character codec code, got 'MJPGX'"):
        main(["flow", str(video), "-o", str(tmp_path / "o.mp4"), "--fourcc", "MJPGX",
              "--backend", "cpu"])  # fmt: skip
    assert not (tmp_path / "o.mp4").exists()


@pytest.mark.parametrize(
    ("extra", "option"),
    [(["--max-frames", "2"], "--max-frames"), (["--fourcc", "MJPG"], "--fourcc"),
     (["--max-magnitude", "-1"], "--max-magnitude")],
)  # fmt: skip
def test_many_file_flow_refuses_what_it_ignored(extra, option, tmp_path):
    """In many-file mode ``--max-frames 2`` still wrote every pair, and
    ``--fourcc`` and ``--max-magnitude`` were ignored."""
    pytest.importorskip("distributed")
    video = tmp_path / "v.mp4"
    _write_video(video, _frames(3))
    with pytest.raises(SystemExit, match=f"many-file mode takes no {option}"):
        main(["flow", str(video), "-o", str(tmp_path / "out"), "--workers", "1",
              *extra, "--backend", "cpu"])  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--view", "color"], "--view chooses what the -o picture"),
        (["--max-magnitude", "3", "--arrow-scale", "4"], "--arrow-scale sizes"),
        (["--max-magnitude", "3"], "--max-magnitude sets"),
        (["--max-magnitude", "3", "-o", "{tmp}/a.png"], "--max-magnitude sets"),
        (["--arrow-scale", "4", "--color", "{tmp}/c.png"], "--arrow-scale sizes"),
        (["--arrow-scale", "4", "-o", "{tmp}/a.png", "--view", "color"],
         "--arrow-scale sizes"),
    ],
)  # fmt: skip
def test_drawing_options_need_an_output_they_change(small_pair, tmp_path, monkeypatch,
                                                    options, words):  # fmt: skip
    """``--view color`` without ``-o`` computed dense flow for nothing, and
    ``--max-magnitude`` / ``--arrow-scale`` without an output drawn with them were
    ignored; refused before the frames are read."""
    module = importlib.import_module("vision_cuts.optical_flow")
    monkeypatch.setattr(module, "optical_flow", None)  # never called
    argv = ["flow", *small_pair, "--backend", "cpu"]
    argv += [o.format(tmp=tmp_path) for o in options]
    with pytest.raises(SystemExit, match=words):
        main(argv)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "options",
    [["--view", "color", "--max-magnitude", "3", "-o", "{tmp}/a.png"],
     ["--view", "both", "--arrow-scale", "2", "--max-magnitude", "3", "-o",
      "{tmp}/a.png"],
     ["--max-magnitude", "3", "--color", "{tmp}/c.png"],
     ["--view", "arrows", "--arrow-scale", "2", "-o", "{tmp}/a.png"]],
)  # fmt: skip
def test_drawing_options_with_their_output(small_pair, tmp_path, capsys, options):
    argv = ["flow", *small_pair, "--backend", "cpu"]
    assert main(argv + [o.format(tmp=tmp_path) for o in options]) == 0
    assert "flow of a 64x48 pair" in capsys.readouterr().out


def test_video_to_dev_stdout(tmp_path, monkeypatch):
    """``-o /dev/stdout`` in video mode: the frame lines and the summary, then the
    video (an .mp4, there being no extension), which reads back with every pair."""
    import io
    import sys

    src = tmp_path / "in.mp4"
    _write_video(src, _frames(4, (48, 64)))
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    assert main(["flow", str(src), "-o", "/dev/stdout", "--backend", "cpu"]) == 0
    sys.stdout.flush()
    data = raw.getvalue()
    end = data.index(b"arrows video -> /dev/stdout\n") + len(
        b"arrows video -> /dev/stdout\n"
    )
    text = data[:end].decode()
    assert text.startswith("frame 0->1: ") and "flow of 3 frame pairs" in text
    video = tmp_path / "out.mp4"
    video.write_bytes(data[end:])
    cap = cv2.VideoCapture(str(video))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    cap.release()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.mp4"]
