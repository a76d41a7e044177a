"""``vision-cuts``: bad outputs, missing backends and tiny images end in ``error: ...``.

Every case asserts the exit status, that stderr starts with ``error:`` and names the
option or the cause, and that no traceback is printed. ``run`` calls ``main`` in
process and does what the interpreter does with the ``SystemExit`` it raises; any
other exception escapes and fails the test (that would be a traceback).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from vision_cuts import _backend
from vision_cuts.cli import main

cv2 = pytest.importorskip("cv2")


def command_inputs(command, image, pair, dimacs) -> list:
    """The positional inputs (and required options) of a subcommand."""
    return {
        "segment": [image],
        "stereo": [*pair, "--max-disparity", "4"],
        "flow": [*pair],
        "maxflow": [dimacs],
    }[command]


def run(argv, capsys) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``vision-cuts ARGV``, in process."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            rc = 1
        else:
            rc = exc.code or 0
    out, err = capsys.readouterr()
    return rc, out, err


def assert_error(rc: int, err: str, *words: str) -> None:
    assert rc == 1, err
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def image(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "img.png"
    cv2.imwrite(str(path), rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
    return path


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(1)
    left = rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)
    paths = tmp_path / "left.png", tmp_path / "right.png"
    cv2.imwrite(str(paths[0]), left)
    cv2.imwrite(str(paths[1]), np.roll(left, -2, axis=1))
    return paths


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine without CuPy, whatever this one has."""
    monkeypatch.delenv("VISION_CUTS_BACKEND", raising=False)
    monkeypatch.setattr(_backend, "has_cupy", lambda: False)
    monkeypatch.setattr(_backend, "gpu_available", lambda: False)


# ------------------------------------------------------------ D14: picture outputs
@pytest.mark.parametrize(
    ("option", "name", "words"),
    [
        ("-o", "mask.xyz", ["unknown image format", "'.xyz'"]),
        ("-o", "mask", ["no file extension"]),
        ("--overlay", ".", ["is a directory"]),
        ("-o", "missing/mask.png", ["does not exist"]),
    ],
)
def test_segment_bad_picture_output_fails_before_the_work(
    option, name, words, image, tmp_path, capsys, monkeypatch
):
    import vision_cuts.segmentation

    def never(*a, **k):
        raise AssertionError("the output should be checked before segmenting")

    monkeypatch.setattr(vision_cuts.segmentation, "grabcut", never)
    path = tmp_path / name if name != "." else tmp_path
    rc, _, err = run(["segment", image, "--backend", "cpu", option, path], capsys)
    flag = "-o/--output" if option == "-o" else option
    assert_error(rc, err, "cannot write", flag, *words)
    assert not (tmp_path / "mask.xyz").exists()


@pytest.mark.parametrize("fail", ["raise", "false"])
def test_segment_picture_writer_failure(fail, image, tmp_path, capsys, monkeypatch):
    def imwrite(path, img, *a):
        if fail == "raise":
            raise cv2.error("no writer for this")
        return False

    monkeypatch.setattr(cv2, "imwrite", imwrite)
    out = tmp_path / "mask.png"
    rc, _, err = run(["segment", image, "--backend", "cpu", "-o", out], capsys)
    assert_error(rc, err, "cannot write", "mask.png", "-o/--output")


@pytest.mark.parametrize(
    ("option", "name", "words"),
    [
        ("-o", "d.xyz", ["unknown image format"]),
        ("--png16", "d.jpg", ["16 bits", ".png"]),
        ("--pfm", "missing/d.pfm", ["does not exist"]),
        ("--pfm", ".", ["is a directory"]),
    ],
)
def test_stereo_bad_outputs(option, name, words, pair, tmp_path, capsys):
    path = tmp_path / name if name != "." else tmp_path
    argv = ["stereo", *pair, "--max-disparity", "4", "--backend", "cpu"]
    rc, _, err = run([*argv, option, path], capsys)
    flag = "-o/--output" if option == "-o" else option
    assert_error(rc, err, "cannot write", flag, *words)


def test_stereo_png16_writes_16_bits(pair, tmp_path, capsys):
    out = tmp_path / "d.png"
    argv = ["stereo", *pair, "--max-disparity", "4", "--backend", "cpu"]
    rc, _, err = run([*argv, "--png16", out], capsys)
    assert rc == 0, err
    assert cv2.imread(str(out), cv2.IMREAD_UNCHANGED).dtype == np.uint16


@pytest.mark.parametrize(
    ("option", "name", "words"),
    [
        ("-o", "f.xyz", ["unknown image format"]),
        ("--color", "c", ["no file extension"]),
        ("--flo", "missing/f.flo", ["does not exist"]),
    ],
)
def test_flow_pair_bad_outputs(option, name, words, pair, tmp_path, capsys):
    argv = ["flow", *pair, "--backend", "cpu", option, tmp_path / name]
    rc, _, err = run(argv, capsys)
    flag = "-o/--output" if option == "-o" else option
    assert_error(rc, err, "cannot write", flag, *words)


# ------------------------------------------------------------ empty output names
@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("segment", "-o"),
        ("segment", "--overlay"),
        ("stereo", "--pfm"),
        ("stereo", "--png16"),
        ("flow", "--flo"),
        ("flow", "--color"),
        ("maxflow", "--cut"),
        ("maxflow", "--flow"),
    ],
)
def test_empty_output_name(command, option, image, pair, dimacs, capsys):
    inputs = command_inputs(command, image, pair, dimacs)
    rc, _, err = run([command, *inputs, "--backend", "cpu", option, ""], capsys)
    flag = "-o/--output" if option == "-o" else option
    assert_error(rc, err, flag, "needs a file name")


def test_many_file_output_must_be_a_folder(image, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    a_file = tmp_path / "out.png"
    a_file.write_bytes(b"")
    rc, _, err = run(["segment", folder, "--workers", "1", "-o", a_file], capsys)
    assert_error(rc, err, "out.png", "-o/--output", "folder")
    rc, _, err = run(["segment", folder, "--workers", "1", "-o", ""], capsys)
    assert_error(rc, err, "-o OUTPUT_FOLDER")
    sub = a_file / "sub"
    rc, _, err = run(["segment", folder, "--workers", "1", "-o", sub], capsys)
    assert_error(rc, err, "cannot create the output folder", "-o/--output")


# ------------------------------------------------------------ D15: --backend gpu
@pytest.mark.parametrize("command", ["segment", "stereo", "flow", "maxflow"])
def test_backend_gpu_without_gpu(command, no_gpu, image, pair, dimacs, capsys):
    inputs = command_inputs(command, image, pair, dimacs)
    rc, _, err = run([command, *inputs, "--backend", "gpu"], capsys)
    assert_error(rc, err, "backend='gpu'", "CuPy is not installed")


# ------------------------------------------------------------ D16: maxflow files
@pytest.mark.parametrize("option", ["--flow", "--cut"])
def test_maxflow_output_in_missing_folder(option, dimacs, tmp_path, capsys):
    out = tmp_path / "missing" / "f.txt"
    rc, _, err = run(["maxflow", dimacs, "--backend", "cpu", option, out], capsys)
    assert_error(rc, err, "cannot write", option, "f.txt", "does not exist")


def test_maxflow_write_failure(dimacs, tmp_path, capsys, monkeypatch):
    def savetxt(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savetxt", savetxt)
    out = tmp_path / "cut.txt"
    rc, _, err = run(["maxflow", dimacs, "--backend", "cpu", "--cut", out], capsys)
    assert_error(rc, err, "cannot write", "--cut", "No space left on device")


def test_unreadable_inputs(tmp_path, capsys):
    missing = tmp_path / "missing"
    rc, _, err = run(["maxflow", f"{missing}.max", "--backend", "cpu"], capsys)
    assert_error(rc, err, "cannot read", "missing.max")
    rc, _, err = run(["maxflow", tmp_path, "--backend", "cpu"], capsys)
    assert_error(rc, err, "cannot read")
    rc, _, err = run(["segment", f"{missing}.png", "--backend", "cpu"], capsys)
    assert_error(rc, err, "cannot read image", "missing.png")


# ------------------------------------------------------------ D17: tiny images
def test_segment_1x1_image_default_box(tmp_path, capsys):
    path = tmp_path / "tiny.png"
    cv2.imwrite(str(path), np.full((1, 1, 3), 90, np.uint8))
    rc, _, err = run(["segment", path, "--backend", "cpu"], capsys)
    assert_error(rc, err, "1x1", "too small", "default box", "--rect")
    assert "(0, 0, 0, 0)" not in err


@pytest.mark.parametrize("shape", [(1, 5), (5, 1), (2, 2)])
def test_segment_thin_image_gets_a_1px_default_box(shape, tmp_path, capsys):
    path = tmp_path / "thin.png"
    cv2.imwrite(str(path), np.full((*shape, 3), 90, np.uint8))
    rc, out, err = run(["segment", path, "--backend", "cpu"], capsys)
    assert rc == 0, err
    assert out.startswith(f"segmented {shape[1]}x{shape[0]} image")


# ------------------------------------------------------------ the real command
def test_console_errors_have_no_traceback(image, dimacs, tmp_path):
    """The installed entry point: exit status 1 and one ``error:`` line."""
    code = "import sys; from vision_cuts.cli import main; sys.exit(main())"
    cases = [
        (["segment", image, "--backend", "cpu", "-o", tmp_path / "m.xyz"], ".xyz"),
        (["segment", image, "--backend", "cpu", "--overlay", tmp_path], "--overlay"),
        (["maxflow", dimacs, "--backend", "cpu", "--flow", tmp_path / "x/f"], "--flow"),
    ]
    for argv, word in cases:
        proc = subprocess.run(
            [sys.executable, "-c", code, *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: cannot write"), proc.stderr
        assert word in proc.stderr
        assert "Traceback" not in proc.stderr


# ------------------------------------------------- what a second hunt of the CLI found
def test_scribble_masks_of_any_depth_and_alpha(tmp_path, capsys):
    """Scribble masks are read as they are: a 16-bit mask of 0 / 1 (a grey
    conversion scales it to 8 bits: all 0) and an RGBA mask whose transparent
    pixels are not scribbled."""
    rng = np.random.default_rng(4)
    img = np.full((40, 60, 3), (200, 80, 40), np.uint8)
    img[10:30, 20:45] = (40, 90, 210)
    img = np.clip(img + rng.integers(0, 12, img.shape), 0, 255).astype(np.uint8)
    cv2.imwrite(str(tmp_path / "img.png"), img)
    forced = np.zeros((40, 60), bool)
    forced[2:8, 2:58] = True  # background-coloured pixels said to be object
    fg16 = forced.astype(np.uint16)  # 0 / 1 in 16 bits
    cv2.imwrite(str(tmp_path / "fg16.png"), fg16)
    rgba = np.zeros((40, 60, 4), np.uint8)
    rgba[..., :3] = 255  # white everywhere, painted only where opaque
    rgba[forced, 3] = 255
    cv2.imwrite(str(tmp_path / "fga.png"), rgba)
    # a signed or float mask scribbles its negative values too ("nonzero"); they
    # were left out
    cv2.imwrite(str(tmp_path / "fgneg.tif"), np.where(forced, -1.0, 0.0).astype(
        np.float32))  # fmt: skip
    for mask in ("fg16.png", "fga.png", "fgneg.tif"):
        rc, _, err = run(
            ["segment", tmp_path / "img.png", "--rect", "15,1,35,35", "--fg",
             tmp_path / mask, "-o", tmp_path / "m.png", "--backend", "cpu"],
            capsys,
        )  # fmt: skip
        assert rc == 0, err
        got = cv2.imread(str(tmp_path / "m.png"), cv2.IMREAD_GRAYSCALE) > 0
        assert got[forced].all(), mask  # every scribbled pixel is object


def test_overlay_of_a_huge_box(image, tmp_path, capsys):
    """A box far beyond the picture is clipped (as grabcut clips it) when the
    overlay draws it, not handed to OpenCV as numbers it cannot hold."""
    for rect in ("0,0,99999999999999999999,5", "-2147483649,0,2147483700,20"):
        rc, out, err = run(
            ["segment", image, f"--rect={rect}", "-o", tmp_path / "m.png",
             "--overlay", tmp_path / "o.png", "--backend", "cpu"],
            capsys,
        )  # fmt: skip
        assert rc == 0, err
        assert cv2.imread(str(tmp_path / "o.png")).shape == (24, 32, 3)


def test_grey_sample_and_its_file_are_the_same_picture(tmp_path, capsys):
    """Built-in samples load as files do, with three channels (camera is grey)."""
    import skimage.data

    small = skimage.data.camera()[::8, ::8]
    path = tmp_path / "cam.png"
    cv2.imwrite(str(path), small)
    from vision_cuts.cli import _load_image

    cam = _load_image("camera")
    assert cam.shape == (512, 512, 3) and cam.dtype == np.uint8
    np.testing.assert_array_equal(cam[..., 1], skimage.data.camera())
    np.testing.assert_array_equal(_load_image(str(path)), np.dstack([small] * 3))


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["segment", "{image}", "-o", "{image}"], ["-o/--output", "is the input file"]),
        (["segment", "{image}", "-o", "{tmp}/x.png", "--overlay", "{tmp}/./x.png"],
         ["-o/--output and --overlay name the same file"]),
        (["stereo", "{left}", "{right}", "--max-disparity", "4", "-o", "{tmp}/d.png",
          "--png16", "{tmp}/d.png"], ["-o/--output and --png16"]),
        (["flow", "{left}", "{right}", "--flo", "{right}"],
         ["--flo", ".flo extension"]),
        (["maxflow", "{dimacs}", "--flow", "{dimacs}"], ["--flow", "is the input"]),
        (["maxflow", "{dimacs}", "--flow", "{tmp}/a.txt", "--cut", "{tmp}/a.txt"],
         ["--flow and --cut name the same file"]),
    ],
)  # fmt: skip
def test_outputs_must_not_overwrite_inputs_or_each_other(
    argv, words, image, pair, dimacs, tmp_path, capsys
):
    before = {p: p.read_bytes() for p in (image, *pair, dimacs)}
    names = {"image": image, "left": pair[0], "right": pair[1], "dimacs": dimacs,
             "tmp": tmp_path}  # fmt: skip
    rc, _, err = run([a.format(**names) for a in argv] + ["--backend", "cpu"], capsys)
    assert_error(rc, err, *words)
    assert all(p.read_bytes() == b for p, b in before.items())


def test_picture_formats_and_channels(image, pair, tmp_path, capsys):
    """A grey mask goes into a colour-only format (.ppm) as three equal channels; a
    colour picture into a grey-only one (.pgm, .pbm) is refused before the work."""
    rc, _, err = run(
        ["segment", image, "-o", tmp_path / "m.ppm", "--backend", "cpu"], capsys
    )
    assert rc == 0, err
    ppm = cv2.imread(str(tmp_path / "m.ppm"), cv2.IMREAD_UNCHANGED)
    assert ppm.shape == (24, 32, 3) and (ppm[..., 0] == ppm[..., 2]).all()
    for argv, words in (
        (["segment", image, "--overlay", tmp_path / "o.pgm"], ["--overlay", "grey"]),
        ([
            "stereo", *pair, "--max-disparity", "4", "--colormap", "-o",
            tmp_path / "d.pbm",
        ], ["-o/--output", "colour picture"]),
    ):  # fmt: skip
        rc, _, err = run([*argv, "--backend", "cpu"], capsys)
        assert_error(rc, err, *words)
    rc, _, err = run(
        ["stereo", *pair, "--max-disparity", "4", "-o", tmp_path / "d.pgm",
         "--backend", "cpu"],
        capsys,
    )  # fmt: skip
    assert rc == 0, err  # a grey disparity picture in a grey format


def _writable(ext: str) -> bool:
    return cv2.haveImageWriter(f"x{ext}")


@pytest.mark.parametrize("ext", [".jpg", ".jpeg", ".jp2", ".avif", ".gif"])
def test_a_mask_is_not_written_lossily(ext, image, tmp_path, capsys):
    """``segment -o m.jpg`` wrote the mask with values other than 0 and 255 (a
    lossy format) and status 0; it is refused before the work. The same format is
    still taken for a picture (the overlay; OpenJPEG cannot code a picture this
    small, so not .jp2)."""
    if not _writable(ext):
        pytest.skip(f"this OpenCV has no {ext} writer")
    mask = tmp_path / f"m{ext}"
    rc, _, err = run(["segment", image, "-o", mask, "--backend", "cpu"], capsys)
    assert_error(rc, err, "-o/--output", "lossily", ".png")
    assert not mask.exists()
    if ext != ".jp2":
        rc, _, err = run(
            ["segment", image, "--overlay", tmp_path / f"o{ext}", "--backend", "cpu"],
            capsys,
        )
        assert rc == 0, err


def test_every_mask_format_taken_reads_back_exactly(tmp_path):
    """Each extension with an OpenCV writer that the mask check lets through holds a
    0 / 255 mask exactly (read back as written; a colour-only format as three
    equal channels). JPEG, which it refuses, does not."""
    from vision_cuts import cli

    rng = np.random.default_rng(5)
    mask = np.where(rng.random((30, 41)) < 0.5, 255, 0).astype(np.uint8)
    exts = (
        ".png .bmp .dib .tif .tiff .pgm .pbm .pnm .ppm .webp .ras .sr .jpg .jpeg "
        ".jpe .jp2 .avif .gif"
    ).split()
    checked = 0
    for ext in exts:
        path = str(tmp_path / f"m{ext}")
        if not _writable(ext):
            continue
        taken = cli.output_problem(path, "mask") is None
        assert taken == (ext not in cli._EXT_LOSSY), ext
        if not cli.imwrite_replacing(path, mask):
            assert not taken, f"{ext}: a format the check takes was not written"
            continue
        back = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if back.ndim == 3:
            assert not taken or (back == back[..., :1]).all(), ext
            back = back[..., 0]
        if taken or ext == ".jpg":
            assert np.array_equal(back, mask) == taken, ext
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("ext", [".ras", ".sr", ".ppm"])
def test_grey_pictures_in_colour_only_formats(ext, pair, tmp_path, capsys):
    """A grey picture written as a Sun raster came out all black (OpenCV's grey
    writer there); it now goes in as three equal channels, as into .ppm."""
    out = tmp_path / f"d{ext}"
    rc, _, err = run(["stereo", *pair, "--max-disparity", "4", "-o", out,
                      "--backend", "cpu"], capsys)  # fmt: skip
    assert rc == 0, err
    back = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    ref = tmp_path / "d.png"
    rc, _, err = run(["stereo", *pair, "--max-disparity", "4", "-o", ref,
                      "--backend", "cpu"], capsys)  # fmt: skip
    assert rc == 0, err
    grey = cv2.imread(str(ref), cv2.IMREAD_UNCHANGED)
    assert grey.any()  # a picture that is not black to begin with
    assert back.shape == (*grey.shape, 3) and (back == grey[..., None]).all()


def test_a_grey_picture_is_not_written_in_one_bit(pair, image, tmp_path, capsys):
    """``stereo -o d.pbm`` kept one bit of a 256-level picture; refused. A mask,
    which has two levels, still goes into .pbm exactly."""
    rc, _, err = run(["stereo", *pair, "--max-disparity", "4", "-o",
                      tmp_path / "d.pbm", "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "-o/--output", "one bit")
    rc, _, err = run(
        ["segment", image, "-o", tmp_path / "m.pbm", "--backend", "cpu"], capsys
    )
    assert rc == 0, err
    assert set(np.unique(cv2.imread(str(tmp_path / "m.pbm"), 0))) <= {0, 255}


class _Tty:
    """A stderr that says it is a terminal and keeps what is written."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def isatty(self):
        return True

    def text(self):
        return "".join(self.parts)


def test_interrupt_is_a_line_and_status_130(monkeypatch, capsys, tmp_path):
    # Ctrl-C during the work (the Ishikawa cuts now stop for it within a second):
    # "interrupted" and the shell's status for SIGINT, no traceback, no output file
    import vision_cuts.segmentation as seg

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(seg, "grabcut", interrupted)
    out = tmp_path / "mask.png"
    assert main(["segment", "coffee", "-o", str(out)]) == 130
    assert capsys.readouterr().err.endswith("interrupted\n")
    assert not out.exists()


def test_progress_bar_and_log_lines(monkeypatch, capsys):
    import logging

    from vision_cuts.cli import _LogHandler, _Progress

    # verbose into a file or pipe: a plain line a step, no carriage returns
    plain = _Progress("grabcut", enabled=True)
    plain(1, 3)
    plain(1, 3)  # a long step reporting again: no second line
    plain(3, 3)
    plain.clear()
    plain.close()
    assert capsys.readouterr().err == "grabcut 1/3\ngrabcut 3/3\n"
    # on a terminal: a log record starts a line of its own after an unfinished bar
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    bar = _Progress("grabcut", enabled=True)
    handler = _LogHandler(tty)
    handler.setFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "changed", None, None)
    bar(1, 5)
    handler.emit(record)
    bar(2, 5)
    bar.clear()
    bar(2, 5)  # the same progress after a clear draws the bar again
    bar.clear()
    bar(5, 5)
    handler.emit(record)
    text = tty.text()
    assert "1/5\nchanged\n\r" in text  # the record after the bar, on its own line
    assert "2/5\r\033[K\r" in text  # cleared, then the bar again
    assert text.count("] 2/5") == 2
    assert text.endswith("5/5\nchanged\n")  # a finished bar ends its line itself
    assert not _Progress.line_open


def test_gui_without_display_or_with_a_bad_picture(tmp_path):
    """Qt aborts the process where it finds no display: the command says why and
    exits 1 instead; a picture that cannot be opened is an error before any window."""
    pytest.importorskip("PyQt5")
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}  # fmt: skip
    code = "from vision_cuts.cli import main; main(['gui', 'coffee'])"
    proc = subprocess.run(  # (away from the sources: the installed package)
        [sys.executable, "-c", code], env=env, capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: cannot start the GUI: no display")
    assert "Traceback" not in proc.stderr
    # a display that Qt cannot open aborted the process (SIGABRT) inside Qt
    for var, value in (("DISPLAY", ":99"), ("QT_QPA_PLATFORM", "bogus")):
        proc = subprocess.run(
            [sys.executable, "-c", code], env={**env, var: value},
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(
            f"error: cannot start the GUI: Qt cannot open the display ({var}="
        ), proc.stderr
    from vision_cuts.apps.app import _first_picture

    text = tmp_path / "x.png"
    text.write_text("not a picture")
    for arg, words in (
        ("sample:nope", "unknown sample 'nope'"),
        (str(tmp_path / "missing.png"), "no such picture file"),
        (str(text), "cannot read image"),
    ):
        with pytest.raises(SystemExit, match=words):
            _first_picture(arg)
    img, name = _first_picture("sample:camera")
    assert name == "camera" and img.shape == (512, 512)


def test_failed_picture_write_keeps_the_old_file(image, tmp_path, capsys, monkeypatch):
    """A writer that fails part way (a full disk) leaves the file it would have
    replaced as it was, and nothing half-written beside it."""
    target = tmp_path / "m.png"
    target.write_bytes(b"old")

    def half(path, img):
        with open(path, "wb") as f:
            f.write(b"half")
        return False

    monkeypatch.setattr(cv2, "imwrite", half)
    rc, _, err = run(["segment", image, "-o", target, "--backend", "cpu"], capsys)
    assert_error(rc, err, "cannot write", "-o/--output")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["img.png", "m.png"]


def test_failed_file_write_keeps_the_old_file(pair, tmp_path, capsys, monkeypatch):
    """The same for the PFM, .flo and maxflow text outputs: written beside the
    target, moved over it at the end."""
    import vision_cuts.io as vio

    target = tmp_path / "d.pfm"
    target.write_bytes(b"old")

    def half(path, image):
        with open(path, "wb") as f:
            f.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vio, "write_pfm", half)
    rc, _, err = run(
        ["stereo", *pair, "--max-disparity", "4", "--pfm", target, "--backend", "cpu"],
        capsys,
    )
    assert_error(rc, err, "--pfm", "No space left on device")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["d.pfm", "left.png", "right.png"]
    )


def test_outputs_replace_the_file_a_link_names(tmp_path):
    """An output through a symbolic link was a new file in the link's place (the
    file it named kept its old content)."""
    from vision_cuts.cli import replacing

    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    os.symlink(real, link)
    with replacing(str(link)) as part:
        with open(part, "w") as f:
            f.write("new")
    assert os.path.islink(link) and real.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "real.txt"]


def test_outputs_with_the_longest_names(tmp_path):
    """The temporary name beside a 250-byte name grew past the 255 bytes a file name
    may have."""
    from vision_cuts.cli import replacing

    path = tmp_path / ("b" * 246 + ".txt")
    with replacing(str(path)) as part:
        with open(part, "w") as f:
            f.write("x")
    assert path.read_text() == "x" and os.listdir(tmp_path) == [path.name]


def test_read_only_outputs_are_refused(tmp_path, monkeypatch):
    """A rename needs only the folder's permission, so a read-only file was replaced
    where a direct write fails (os.access is patched: the tests may run as root, who
    may write anything)."""
    from vision_cuts import cli

    path = tmp_path / "locked.png"
    path.write_bytes(b"keep")
    real_access = os.access
    monkeypatch.setattr(
        os, "access",
        lambda p, mode, **k: False if os.fspath(p) == str(path) and mode & os.W_OK
        else real_access(p, mode, **k),
    )  # fmt: skip
    assert cli.output_problem(str(path), "image") == "the file is read-only"
    with pytest.raises(SystemExit, match=r"locked.png.*-o.*read-only"):
        cli._check_output(str(path), "-o", "image")
    with pytest.raises(PermissionError):
        with cli.replacing(str(path)) as part:
            open(part, "w").close()
    assert path.read_bytes() == b"keep" and os.listdir(tmp_path) == ["locked.png"]


def test_png16_refuses_disparities_it_cannot_hold(pair, capsys, tmp_path):
    """Disparities of 256 and more were clipped to 65535 (255.996) with status 0."""
    wide = tmp_path / "wide.png"
    cv2.imwrite(str(wide), np.zeros((8, 400, 3), np.uint8))
    rc, _, err = run(["stereo", wide, wide, "--max-disparity", "256", "--png16",
                      tmp_path / "d.png", "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "--png16", "below 256", "--pfm")
    assert not (tmp_path / "d.png").exists()


@pytest.mark.parametrize(
    ("argv", "option"),
    [(["stereo", "{left}", "{right}", "--max-disparity", "4", "--pfm", "{tmp}/d.png"],
      "--pfm"),
     (["flow", "{left}", "{right}", "--flo", "{tmp}/f.npy"], "--flo")],
)  # fmt: skip
def test_pfm_and_flo_outputs_need_their_extension(argv, option, pair, capsys, tmp_path):
    args = [a.format(left=pair[0], right=pair[1], tmp=tmp_path) for a in argv]
    rc, _, err = run([*args, "--backend", "cpu"], capsys)
    assert_error(rc, err, option, f"the {option.strip('-')} extension".replace(
        "the pfm", "the .pfm").replace("the flo", "the .flo"))  # fmt: skip


@pytest.mark.timeout(60)
def test_outputs_into_a_pipe_stay_a_pipe(dimacs, capsys, tmp_path):
    """A named pipe (or a device such as /dev/stdout) was replaced by a regular file,
    and its reader got nothing."""
    import threading

    fifo = tmp_path / "cut.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    rc, _, err = run(["maxflow", dimacs, "--cut", fifo, "--backend", "cpu"], capsys)
    reader.join(timeout=30)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].strip()


def test_missing_scribble_mask_says_why(image, capsys, tmp_path):
    rc, _, err = run(["segment", image, "--fg", tmp_path / "nope.png", "--rect",
                      "2,2,20,16", "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "foreground mask", "nope.png", "no such file")
    assert "WARN" not in err


@pytest.mark.parametrize("option", ["--flow", "--cut"])
def test_maxflow_text_outputs_to_standard_output(option, dimacs, tmp_path, capsys,
                                                 monkeypatch):  # fmt: skip
    """``--flow -`` wrote a file named ``-``; ``-`` is standard output now, with the
    summary on standard error, and the text is what the file would hold."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(["maxflow", dimacs, option, "-", "--backend", "cpu"], capsys)
    assert rc == 0, err
    assert "max flow 3" in err and "max flow" not in out
    rc, _, err = run(
        ["maxflow", dimacs, option, tmp_path / "o.txt", "--backend", "cpu"], capsys
    )
    assert rc == 0, err
    assert out == (tmp_path / "o.txt").read_text() and out.strip()
    assert not (tmp_path / "-").exists()
    rc, _, err = run(["maxflow", dimacs, "--flow", "-", "--cut", "-"], capsys)
    assert_error(rc, err, "--flow and --cut", "standard output")


@pytest.mark.timeout(120)
def test_maxflow_into_a_closed_pipe_ends_quietly(tmp_path):
    """``vision-cuts maxflow G --cut - | head -1`` printed ``error: Broken pipe``."""
    n = 20000
    lines = [f"p max {n} {n - 1}", "n 1 s", f"n {n} t"]
    lines += [f"a {i} {i + 1} 1" for i in range(1, n)]
    graph = tmp_path / "chain.max"
    graph.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vision_cuts.cli", "maxflow", str(graph), "--cut", "-",
         "--backend", "cpu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after one line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.wait(timeout=100)
    assert first.strip() == b"1"
    assert "error" not in err and "Traceback" not in err, err
    assert "Exception ignored" not in err, err


def test_a_file_named_like_a_sample_is_read_as_the_file(image, tmp_path, capsys,
                                                        monkeypatch):  # fmt: skip
    """``segment coffee`` ran on the built-in coffee even where ./coffee is a
    picture file; the file wins, and ``sample:coffee`` still names the sample."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "coffee").write_bytes(image.read_bytes())
    rc, out, err = run(["segment", "coffee", "--backend", "cpu"], capsys)
    assert rc == 0, err
    assert "segmented 32x24 image" in out
    from vision_cuts.cli import is_sample

    assert not is_sample("coffee") and is_sample("sample:coffee")
    assert is_sample("chelsea")  # no file of that name here
    # the stereo pair's own sample: "sample:coffee" is not it (it ran the pair)
    assert is_sample("motorcycle", ("motorcycle",))
    assert not is_sample("sample:coffee", ("motorcycle",))
    rc, _, err = run(["stereo", "sample:coffee", "--max-disparity", "4"], capsys)
    assert_error(rc, err, "LEFT and RIGHT")


def test_a_name_too_long_is_refused_before_any_output(image, tmp_path, capsys):
    """``-o m.png --overlay <260 bytes>`` replaced m.png, then failed with "File
    name too long"; the name is checked before the work."""
    mask = tmp_path / "m.png"
    mask.write_bytes(b"old")
    long = tmp_path / ("o" * 252 + ".png")
    rc, _, err = run(["segment", image, "-o", mask, "--overlay", long,
                      "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "--overlay", "256 bytes long", "at most 255")
    assert mask.read_bytes() == b"old"


def test_one_kind_of_scribble_keeps_the_default_box(image, tmp_path, capsys):
    """``--fg`` alone (or ``--bg`` alone) was "without rect, give both ..."; the
    help's default box applies unless both kinds of scribble are given."""
    fg = np.zeros((24, 32), np.uint8)
    fg[10:14, 14:18] = 255
    cv2.imwrite(str(tmp_path / "fg.png"), fg)
    for option in ("--fg", "--bg"):
        argv = ["segment", image, option, tmp_path / "fg.png", "-o", tmp_path / "m.png"]
        rc, out, err = run([*argv, "--backend", "cpu"], capsys)
        assert rc == 0, err
        got = cv2.imread(str(tmp_path / "m.png"), 0)
        assert not got[0].any() and not got[:, 0].any()  # outside the box
        assert bool(got[12, 15]) == (option == "--fg")


@pytest.mark.parametrize("ext", [".hdr", ".pfm"])
def test_a_mask_is_not_written_as_floats(ext, image, tmp_path, capsys):
    rc, _, err = run(["segment", image, "-o", tmp_path / f"m{ext}", "--backend",
                      "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "-o/--output", "floating-point", "8-bit")


def test_stereo_colormap_needs_a_picture(pair, tmp_path, capsys):
    """``--colormap`` without ``-o`` was silently ignored."""
    argv = ["stereo", *pair, "--max-disparity", "4", "--colormap", "--pfm",
            tmp_path / "d.pfm"]  # fmt: skip
    rc, _, err = run([*argv, "--backend", "cpu"], capsys)
    assert_error(rc, err, "--colormap", "-o")


def test_summary_wording(image, dimacs, tmp_path, capsys):
    """ "(1 cuts)"; and a missing DIMACS file named its path twice."""
    rc, out, err = run(["segment", image, "--iterations", "1", "--backend", "cpu"],
                       capsys)  # fmt: skip
    assert rc == 0 and "(1 cut)" in out, err
    rc, _, err = run(["maxflow", tmp_path / "none.max"], capsys)
    assert_error(rc, err, "none.max", "No such file or directory")
    assert err.count("none.max") == 1


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["segment", "{image}", "--iterations", "0"], "--iterations must be"),
     (["segment", "{image}", "--smoothness", "-1"], "--smoothness must be"),
     (["stereo", "{left}", "{right}", "--max-disparity", "40"],
      "--max-disparity must satisfy"),
     (["stereo", "{left}", "{right}", "--max-disparity", "4", "--method",
       "ishikawa_pyramid", "--label-step", "3"], "--label-step must be"),
     (["flow", "{left}", "{right}", "--max-features", "0"], "--max-features must")],
)  # fmt: skip
def test_errors_name_the_option(argv, words, image, pair, capsys):
    """The library's errors named its parameter (``iterations must be ...``), not
    the option that set it."""
    names = {"image": image, "left": pair[0], "right": pair[1]}
    rc, _, err = run([a.format(**names) for a in argv] + ["--backend", "cpu"], capsys)
    assert_error(rc, err, words)


# ------------------------------------- float pictures, scribbles, inputs and messages
def _object_picture(rng) -> np.ndarray:
    """A 40x30 BGR picture: a bright block on a dark ground, with some noise."""
    img = np.full((30, 40, 3), 40, np.int16)
    img[8:22, 12:28] = (200, 180, 60)
    img += rng.integers(-10, 10, img.shape).astype(np.int16)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("ext", [".pfm", ".tif"])
def test_float_pictures_keep_their_values(ext, tmp_path, capsys):
    """A float picture in [0, 1] was read as 8 bits, each value truncated (0.9 ->
    0): ``segment img.pfm`` found no object. It segments, and draws its overlay,
    as the 8-bit picture of the same values does."""
    img = _object_picture(np.random.default_rng(3))
    cv2.imwrite(str(tmp_path / "a.png"), img)
    cv2.imwrite(str(tmp_path / f"a{ext}"), img.astype(np.float32) / 255)
    got = {}
    for name in ("a.png", f"a{ext}"):
        rc, out, err = run(["segment", tmp_path / name, "-o", tmp_path / "m.png",
                            "--overlay", tmp_path / "o.png", "--backend", "cpu"],
                           capsys)  # fmt: skip
        assert rc == 0, err
        got[name] = (cv2.imread(str(tmp_path / "m.png"), -1),
                     cv2.imread(str(tmp_path / "o.png"), -1))  # fmt: skip
    mask, over = got[f"a{ext}"]
    assert mask[15, 20] == 255 and mask.sum() > 0
    assert np.array_equal(mask, got["a.png"][0])
    assert np.array_equal(over, got["a.png"][1])


def test_16_bit_pictures_read_as_8_bits(tmp_path, capsys):
    """A 16-bit picture is read as before: as OpenCV reads it in 8-bit colour."""
    rng = np.random.default_rng(4)
    img16 = _object_picture(rng).astype(np.uint16) * 257
    img16 += rng.integers(0, 200, img16.shape).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "a16.png"), img16)
    cv2.imwrite(str(tmp_path / "a8.png"), cv2.imread(str(tmp_path / "a16.png")))
    masks = []
    for name in ("a16.png", "a8.png"):
        rc, _, err = run(["segment", tmp_path / name, "-o", tmp_path / "m.png",
                          "--backend", "cpu"], capsys)  # fmt: skip
        assert rc == 0, err
        masks.append(cv2.imread(str(tmp_path / "m.png"), -1))
    assert masks[0].any() and np.array_equal(*masks)


@pytest.mark.parametrize("ext", [".pfm", ".hdr", ".exr"])
def test_stereo_picture_is_not_written_as_floats(ext, pair, tmp_path, capsys):
    """``stereo -o x.pfm`` wrote the 8-bit picture (disparity x 255 / max) as
    floats with status 0; refused before the work, pointing to --pfm."""
    out = tmp_path / f"d{ext}"
    rc, _, err = run(["stereo", *pair, "--max-disparity", "4", "-o", out,
                      "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "-o/--output", "floating-point", "--pfm")
    assert not out.exists()
    rc, _, err = run(["segment", pair[0], "--overlay", out, "--backend", "cpu"],
                     capsys)  # fmt: skip
    assert_error(rc, err, "--overlay", "floating-point", "8-bit")


@pytest.mark.parametrize("empty", ["--fg", "--bg"])
def test_a_scribble_mask_that_marks_nothing(empty, image, tmp_path, capsys):
    """An all-zero ``--bg`` with ``--fg`` (no box) said "without rect, give both
    foreground and background scribbles"; the file is named as marking nothing."""
    some = np.zeros((24, 32), np.uint8)
    some[10:14, 14:18] = 255
    cv2.imwrite(str(tmp_path / "some.png"), some)
    cv2.imwrite(str(tmp_path / "none.png"), np.zeros((24, 32), np.uint8))
    masks = {"--fg": tmp_path / "some.png", "--bg": tmp_path / "some.png"}
    masks[empty] = tmp_path / "none.png"
    argv = ["segment", image, "--fg", masks["--fg"], "--bg", masks["--bg"]]
    rc, _, err = run([*argv, "--backend", "cpu"], capsys)
    assert_error(rc, err, empty, "none.png", "marks no pixels")
    rc, _, err = run([*argv, "--rect", "2,2,20,16", "--backend", "cpu"], capsys)
    assert rc == 0, err  # with a box, a scribble file may mark nothing


def test_a_negative_rect_needs_no_equals_sign(image, tmp_path, capsys):
    """``--rect -5,-5,20,20`` failed in argparse ("expected one argument")."""
    outs = []
    for rect in (["--rect", "-5,-5,20,20"], ["--rect=-5,-5,20,20"]):
        rc, out, err = run(["segment", image, *rect, "-o", tmp_path / "m.png",
                            "--backend", "cpu"], capsys)  # fmt: skip
        assert rc == 0, err
        outs.append(cv2.imread(str(tmp_path / "m.png"), -1))
    assert np.array_equal(*outs)
    from vision_cuts.cli import build_parser

    helps = build_parser()._subparsers._group_actions[0].choices["segment"]
    assert "--rect=-5,-5,50,50" in helps.format_help().replace("\n", " ")


def test_directory_and_missing_inputs_say_so(tmp_path, capsys):
    """``flow DIR`` said "no such video file"; ``segment MISSING --workers 1`` said
    that MISSING holds no image files."""
    rc, _, err = run(["flow", tmp_path, "--backend", "cpu"], capsys)
    assert_error(rc, err, repr(str(tmp_path)), "it is a directory")
    missing = tmp_path / "nonexist_dir"
    rc, _, err = run(["segment", missing, "-o", tmp_path / "out", "--workers", "1",
                      "--backend", "cpu"], capsys)  # fmt: skip
    assert_error(rc, err, "nonexist_dir", "no such folder or file")
    assert not (tmp_path / "out").exists()


def test_compressed_dimacs_file_is_named_not_echoed(tmp_path, capsys):
    """``maxflow g.max.gz`` echoed the file's raw bytes in its error."""
    import gzip

    path = tmp_path / "g.max.gz"
    path.write_bytes(gzip.compress(b"p max 2 1\nn 1 s\nn 2 t\na 1 2 3\n"))
    rc, _, err = run(["maxflow", path, "--backend", "cpu"], capsys)
    assert_error(rc, err, "g.max.gz", "gzip-compressed", "gunzip")
    binary = tmp_path / "g.bin"
    binary.write_bytes(b"p max\x00\x01\x02\n")
    rc, _, err = run(["maxflow", binary, "--backend", "cpu"], capsys)
    assert_error(rc, err, "g.bin", "not a text file")
    odd = tmp_path / "odd.max"
    odd.write_bytes(b"\x1b[2Jx 1 2\n")  # a control character in a line quoted
    rc, _, err = run(["maxflow", odd, "--backend", "cpu"], capsys)
    assert_error(rc, err, "odd.max", "\\x1b")
    assert err.strip().isprintable()


def test_opencv_logs_nothing_before_the_error_line(tmp_path):
    """libpng's ``libpng error: Read Error``, FFmpeg's ``[png @ 0x...] Invalid PNG
    signature`` (twice) and OpenCV's ``[ WARN:0@...] imwrite_(...)`` (naming the
    temporary file) came before the command's own error line."""
    rng = np.random.default_rng(0)
    good = tmp_path / "big.png"
    cv2.imwrite(str(good), rng.integers(0, 255, (200, 300, 3), dtype=np.uint8))
    data = good.read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.png").write_text("not a picture\n")
    cases = [["segment", tmp_path / "cut.png"], ["flow", tmp_path / "text.png"]]
    if os.path.isdir("/sys"):  # a folder that takes no new file, even from root
        cases.append(["segment", good, "--overlay", "/sys/o.png"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCV_")}
    for argv in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "vision_cuts.cli", *map(str, argv), "--backend",
             "cpu"], capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: "), proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
