"""``vision-cuts``: outputs named through an open descriptor (``/dev/stdout``,
``/dev/stderr``, ``/dev/fd/N``), a named pipe or a device are written in place,
through that descriptor or name, never replaced by a new file.

The pipe and redirection cases run the installed command in a subprocess (the
descriptors are the shell's); the formats run in process with standard output a
byte buffer.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from vision_cuts.cli import main, replacing
from vision_cuts.io import read_flo, read_pfm

cv2 = pytest.importorskip("cv2")

CLI = [sys.executable, "-m", "vision_cuts.cli"]


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(1)
    left = cv2.GaussianBlur(
        rng.integers(0, 255, (40, 56, 3), dtype=np.uint8), (0, 0), 1
    )
    paths = tmp_path / "left.png", tmp_path / "right.png"
    cv2.imwrite(str(paths[0]), left)
    cv2.imwrite(str(paths[1]), np.roll(left, -2, axis=1))
    return paths


def stdout_bytes(monkeypatch) -> io.BytesIO:
    """Standard output as a byte buffer, what a pipe would receive, in order (set in
    the test: pytest's capture sets ``sys.stdout`` again after the fixtures)."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    return raw


def _cli(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *map(str, argv), "--backend", "cpu"], timeout=300, **kw
    )


@pytest.mark.parametrize("option", ["--flow", "--cut"])
def test_maxflow_output_to_dev_stdout_in_a_pipe(option, dimacs):
    """``maxflow G --flow /dev/stdout | cat`` solved, then failed with "cannot write
    '/dev/stdout' (--flow): No such file or directory" (the path resolved to
    /proc/PID/fd/pipe:[N])."""
    proc = _cli(["maxflow", dimacs, option, "/dev/stdout"], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    summary, *data = proc.stdout.decode().splitlines()
    assert summary.startswith("max flow 3 from node 1 to node 2")
    assert data == (["s 3", "f 1 2 3"] if option == "--flow" else ["1"])


def test_maxflow_output_to_dev_stdout_appends_to_a_redirected_file(dimacs, tmp_path):
    """``... --cut /dev/stdout >> r.txt`` replaced r.txt: its earlier content and
    the summary line printed before the data were lost."""
    out = tmp_path / "r.txt"
    out.write_text("earlier\n")
    with open(out, "ab") as f:
        proc = _cli(["maxflow", dimacs, "--cut", "/dev/stdout"], stdout=f,
                    stderr=subprocess.PIPE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "earlier" and lines[1].startswith("max flow 3")
    assert lines[2:] == ["1"]


def test_dev_fd_outputs_go_through_the_descriptor(dimacs, tmp_path):
    """``--flow /dev/fd/N`` with N opened for appending by the caller: written
    through N (appended), the file not replaced."""
    out = tmp_path / "flow.txt"
    out.write_text("earlier\n")
    inode = os.stat(out).st_ino
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    try:
        proc = _cli(["maxflow", dimacs, "--flow", f"/dev/fd/{fd}"], pass_fds=(fd,),
                    capture_output=True)  # fmt: skip
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "earlier\ns 3\nf 1 2 3\n"
    assert os.stat(out).st_ino == inode


def test_dev_stdout_and_dev_stderr_are_two_outputs(dimacs, capsys):
    """Standard output and error on one terminal resolve to the same file; as two
    descriptors they are two outputs, not "the same file"."""
    rc = main(["maxflow", str(dimacs), "--flow", "/dev/stdout", "--cut", "/dev/stderr",
               "--backend", "cpu"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[1:] == ["s 3", "f 1 2 3"] and err == "1\n"
    with pytest.raises(SystemExit, match="--flow and --cut name the same file"):
        main(["maxflow", str(dimacs), "--flow", "/dev/stdout", "--cut", "/dev/fd/1"])
    with pytest.raises(SystemExit, match="--flow and --cut both name standard out"):
        main(["maxflow", str(dimacs), "--flow", "/dev/stdout", "--cut", "-"])


def test_pictures_to_dev_stdout(pair, tmp_path, monkeypatch):
    """A picture named ``/dev/stdout`` (no extension) is a PNG on standard output,
    ahead of the summary line that names it."""
    raw = stdout_bytes(monkeypatch)
    rc = main(["segment", str(pair[0]), "-o", "/dev/stdout", "--backend", "cpu"])
    assert rc == 0
    sys.stdout.flush()
    data = raw.getvalue()
    cut = data.index(b"segmented ")
    assert data[cut:].decode().endswith("mask -> /dev/stdout\n")
    mask = cv2.imdecode(np.frombuffer(data[:cut], np.uint8), cv2.IMREAD_UNCHANGED)
    rc = main(["segment", str(pair[0]), "-o", str(tmp_path / "m.png"),
               "--backend", "cpu"])  # fmt: skip
    assert rc == 0
    assert np.array_equal(mask, cv2.imread(str(tmp_path / "m.png"), -1))


@pytest.mark.parametrize(
    ("argv", "option", "read"),
    [(["stereo", "{left}", "{right}", "--max-disparity", "4"], "--pfm", read_pfm),
     (["flow", "{left}", "{right}"], "--flo", read_flo)],
)  # fmt: skip
def test_float_files_to_dev_stdout(argv, option, read, pair, tmp_path, monkeypatch):
    """``--pfm /dev/stdout`` and ``--flo /dev/stdout``: the file's bytes, then the
    summary line; the same bytes as a file of that name gets."""
    raw = stdout_bytes(monkeypatch)
    args = [a.format(left=pair[0], right=pair[1]) for a in argv]
    assert main([*args, option, "/dev/stdout", "--backend", "cpu"]) == 0
    sys.stdout.flush()
    data = raw.getvalue()
    ref = tmp_path / f"ref.{option[2:]}"
    assert main([*args, option, str(ref), "--backend", "cpu"]) == 0
    want = ref.read_bytes()
    assert data.startswith(want)
    assert data[len(want) :].decode().endswith(" -> /dev/stdout\n")
    assert read(ref).shape[:2] == (40, 56)


def test_replacing_a_descriptor_keeps_what_it_holds(tmp_path):
    """``replacing`` on ``/dev/fd/N`` wrote a new file over N's file (resolved)."""
    path = tmp_path / "log.txt"
    path.write_text("one\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        with replacing(f"/dev/fd/{fd}") as part:
            with open(part, "w") as f:
                f.write("two\n")
    finally:
        os.close(fd)
    assert path.read_text() == "one\ntwo\n"
    assert os.listdir(tmp_path) == ["log.txt"]


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_maxflow_into_a_closed_stdout(name, dimacs, tmp_path):
    """``maxflow G --cut - >&-`` printed NumPy's "fname must be a string or file
    handle"; a closed standard output is named, before the work."""
    proc = _cli(["maxflow", dimacs, "--cut", name], capture_output=True,
                preexec_fn=lambda: os.close(1))  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert err.startswith("error: ") and "standard output is closed" in err, err
    assert "fname" not in err and "Traceback" not in err
