"""vision_cuts.distributed on a local Dask cluster of two worker processes: every
output equals the single-process call's, reruns skip what exists, bad items fail alone,
and a worker killed mid-run loses nothing."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from vision_cuts import distributed as vd  # noqa: E402
from vision_cuts import grabcut, optical_flow_frames, stereo_disparity  # noqa: E402
from vision_cuts.io import read_flo, read_pfm  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    with vd.local_client(2, gpu=False) as c:
        yield c


def _picture(seed, h=60, w=80):
    rng = np.random.default_rng(seed)
    img = np.empty((h, w, 3), np.uint8)
    img[...] = rng.integers(0, 80, 3)
    y, x = rng.integers(10, 25), rng.integers(15, 35)
    img[y : y + 25, x : x + 30] = rng.integers(150, 256, 3)  # the object
    noise = rng.integers(0, 20, img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


def _write_pngs(folder, images):
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, img in enumerate(images):
        p = folder / f"img{i:02d}.png"
        cv2.imwrite(str(p), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
        paths.append(p)
    return paths


def _read_png(path):
    import cv2

    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED)


def test_segment_many_equals_single_calls_and_reruns_skip(client, tmp_path):
    images = [_picture(s) for s in range(5)]
    _write_pngs(tmp_path / "in", images)
    out = tmp_path / "out"
    summary = vd.segment_many(
        tmp_path / "in", out, client=client, iterations=2, backend="cpu",
        progress=False,
    )  # fmt: skip
    assert sorted(summary.written) == [f"img{i:02d}" for i in range(5)]
    assert not summary.failed and not summary.skipped
    for i, img in enumerate(images):
        h, w = img.shape[:2]
        rect = (w // 8, h // 16, w * 3 // 4, h * 7 // 8)
        want = grabcut(img, rect=rect, iterations=2, backend="cpu").mask * 255
        np.testing.assert_array_equal(_read_png(out / f"img{i:02d}.png"), want)
    # no partial files; a rerun computes nothing
    names = [f"img{i:02d}.png" for i in range(5)]
    assert sorted(p.name for p in out.iterdir()) == names
    again = vd.segment_many(tmp_path / "in", out, client=client, progress=False)
    assert len(again.skipped) == 5 and not again.written
    assert "0 written, 5 skipped" in str(again)


def test_bad_items_fail_alone(client, tmp_path):
    good = _write_pngs(tmp_path / "in", [_picture(7)])[0]
    broken = tmp_path / "in" / "broken.png"
    broken.write_bytes(b"not a picture")
    tiny = np.zeros((1, 1, 3), np.uint8)  # grabcut refuses a box outside it
    summary = vd.segment_many(
        [good, broken, tiny], tmp_path / "out", client=client, rects=[None, None,
        (5, 5, 10, 10)], backend="cpu", progress=False, retries=1,
    )  # fmt: skip
    assert summary.written == ["img00"]
    failed = {e.name: e.error for e in summary.failed}
    assert set(failed) == {"broken", "item000002"}
    assert "cannot read an image" in failed["broken"]
    assert "does not overlap the 1x1 image" in failed["item000002"]
    assert (tmp_path / "out" / "img00.png").exists()


def test_items_batched_into_tasks(client, tmp_path, monkeypatch):
    """Several items a task (given, or chosen from the first tasks' times): the same
    outputs as single calls, and a bad item in a batch fails alone (after its
    retry)."""
    images = [_picture(s) for s in range(23)]
    paths = _write_pngs(tmp_path / "in", images)
    broken = tmp_path / "in" / "broken.png"
    broken.write_bytes(b"not a picture")
    items = [*paths[:3], broken, *paths[3:]]
    want = {}
    for i, img in enumerate(images):
        h, w = img.shape[:2]
        rect = (w // 8, h // 16, w * 3 // 4, h * 7 // 8)
        want[f"img{i:02d}"] = grabcut(img, rect=rect, iterations=2, backend="cpu").mask
    calls = []
    real_submit = client.submit

    def counting_submit(fn, *args, **kwargs):
        calls.append(len(args[1]))  # the batch
        return real_submit(fn, *args, **kwargs)

    monkeypatch.setattr(client, "submit", counting_submit)
    # a task should take at least 100 s: once timed, the items go 16 a task whatever
    # this machine's speed
    monkeypatch.setattr(vd, "_TASK_SECONDS", 100.0)
    for per_task, out in ((3, "out3"), (None, "auto")):
        calls.clear()
        summary = vd.segment_many(
            items, tmp_path / out, client=client, iterations=2, backend="cpu",
            progress=False, items_per_task=per_task,
        )  # fmt: skip
        assert sorted(summary.written) == sorted(want)
        assert [e.name for e in summary.failed] == ["broken"]
        assert "cannot read an image" in summary.failed[0].error
        for name, mask in want.items():
            got = _read_png(tmp_path / out / f"{name}.png")
            np.testing.assert_array_equal(got, mask * 255)
        assert sum(calls) == len(items)
        if per_task == 3:
            assert calls == [3] * 8
        else:  # single items until 8 tasks are timed (4 a worker; 7 more go out
            # meanwhile), then the rest in tasks of at most half of what is left a
            # worker (9 left: 3, then 2, then single items)
            assert calls == [1] * 15 + [3, 2, 1, 1, 1, 1]
    # long items stay one a task
    monkeypatch.setattr(vd, "_TASK_SECONDS", 1e-9)
    calls.clear()
    vd.segment_many(
        items, tmp_path / "long", client=client, iterations=2, backend="cpu",
        progress=False, max_in_flight=2,
    )  # fmt: skip
    assert calls == [1] * len(items)


def test_workers_share_the_cores(client):
    """Each of the two CPU workers gets half the cores for its threads (the nannies
    set OMP_NUM_THREADS=1 otherwise)."""
    want = str(max(1, vd._cores() // 2))
    keys = ("VISION_CUTS_THREADS", "OMP_NUM_THREADS")
    seen = client.run(lambda: [os.environ.get(k) for k in keys])
    assert list(seen.values()) == [[want] * 2, [want] * 2]

    def numba_threads():
        import numba

        vd._numba_threads()  # what each task does first
        return numba.get_num_threads()

    seen = client.run(numba_threads)
    assert list(seen.values()) == [int(want)] * 2


def test_stereo_many_equals_single_calls(client, tmp_path):
    rng = np.random.default_rng(3)
    pairs = []
    for _ in range(3):
        right = rng.integers(0, 256, (40, 64, 3), dtype=np.uint8)
        left = np.roll(right, 4, axis=1)
        pairs.append((left, right))
    summary = vd.stereo_many(
        pairs, tmp_path / "out", max_disparity=8, client=client, backend="cpu",
        progress=False,
    )  # fmt: skip
    assert sorted(summary.written) == ["item000000", "item000001", "item000002"]
    for i, (left, right) in enumerate(pairs):
        want = stereo_disparity(left, right, max_disparity=8, backend="cpu")
        got = read_pfm(tmp_path / "out" / f"item{i:06d}.pfm")
        np.testing.assert_array_equal(got, np.asarray(want, np.float32))


def test_flow_many_chunks_overlap_by_one_frame(client, tmp_path):
    import skimage.data

    from vision_cuts.datasets.synthetic import panning_clip

    frames, _ = panning_clip(skimage.data.astronaut(), 6, shape=(96, 128))
    summary = vd.flow_many(
        {"clip": frames}, tmp_path / "out", chunk=2, client=client, backend="cpu",
        progress=False,
    )  # fmt: skip
    # 5 pairs in three chunks of at most 2, as equal as possible: [0:2], [1:4], [3:6]
    assert sorted(summary.written) == ["clip[0:2]", "clip[1:4]", "clip[3:6]"]
    # the summary counted the chunks as "3 written": it says so, and the files
    assert summary.files_written == 5 == len(list((tmp_path / "out").glob("*.flo")))
    assert str(summary).startswith("3 chunks written (5 files), 0 skipped")
    assert "chunks/s" in str(summary)
    for start, stop in ((0, 2), (1, 4), (3, 6)):
        want = [
            r.dense
            for r in optical_flow_frames(frames[start:stop], dense=True, backend="cpu")
        ]
        for i, flow in enumerate(want):
            got = read_flo(tmp_path / "out" / f"clip_{start + i:06d}.flo")
            np.testing.assert_array_equal(got, flow)


@pytest.mark.parametrize("frames", [2, 3, 33, 34, 65, 301, 1000])
@pytest.mark.parametrize("chunk", [1, 7, 32])
def test_chunk_ranges_cover_every_pair_once(frames, chunk):
    ranges = vd._chunk_ranges(frames, chunk)
    pairs = [i for start, stop in ranges for i in range(start, stop - 1)]
    assert pairs == list(range(frames - 1))  # each pair once, in order
    sizes = [stop - 1 - start for start, stop in ranges]
    assert len(ranges) == -(-(frames - 1) // chunk)  # no more chunks than needed
    assert max(sizes) <= chunk and max(sizes) - min(sizes) <= 1
    assert all(
        b[0] == a[1] - 1 for a, b in zip(ranges[:-1], ranges[1:], strict=True)
    )  # shared frame
    if (frames, chunk) == (301, 32):
        assert sizes == [30] * 10


@pytest.mark.parametrize("per_task", [None, 3])
def test_a_killed_worker_loses_nothing(client, tmp_path, per_task):
    """Single items, and tasks of several items (the killed worker's task is run
    again elsewhere, items it had written included)."""
    images = [_picture(s, h=240, w=320) for s in range(8)]
    _write_pngs(tmp_path / "in", images)
    out = tmp_path / "out"
    result = {}

    def run():
        result["summary"] = vd.segment_many(
            tmp_path / "in", out, client=client, backend="cpu", progress=False,
            max_in_flight=8, items_per_task=per_task,
        )  # fmt: skip

    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 120
    while not any(out.glob("*.png")) and time.time() < deadline:
        time.sleep(0.05)
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)  # killed mid-run; its nanny starts a new one
    at_kill = len(list(out.glob("img*.png")))
    t.join(300)
    assert at_kill < 8  # the run was not over
    assert victim not in client.scheduler_info()["workers"]  # it did die
    summary = result["summary"]
    assert not summary.failed, str(summary)
    assert len(summary.written) == 8
    names = [f"img{i:02d}.png" for i in range(8)]
    assert sorted(p.name for p in out.iterdir()) == names


class _FakeFuture:
    """A future as the run loop sees it: a status, and result() that waits."""

    def __init__(self, key, status, outcome):
        self.key, self.status, self._outcome = key, status, outcome

    def result(self):
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def release(self):
        pass


@pytest.mark.parametrize("fail", [False, True])
def test_run_reads_results_not_statuses(tmp_path, monkeypatch, fail):
    """A task that finished on a worker killed before its result was fetched reads
    "lost" when the run loop gets it, and its result comes once Dask has computed it
    again: its items are written, not failed (they were reported failed with
    "NoneType: None"). A task that raises is reported for each of its items."""

    class Done:  # as_completed, in submission order
        def __init__(self):
            self.queue = []

        def add(self, fut):
            self.queue.append(fut)

        def __iter__(self):
            while self.queue:
                yield self.queue.pop(0)

    class Client:
        def scheduler_info(self):
            return {"workers": {"w0": {}, "w1": {}}}

        def submit(self, fn, *args, key, pure, retries):
            if fail:
                return _FakeFuture(key, "error", RuntimeError("worker died 3 times"))
            return _FakeFuture(key, "lost", fn(*args))  # run here, read as lost

    monkeypatch.setattr(distributed, "as_completed", Done)
    jobs = [(f"n{i}", i, [tmp_path / f"n{i}.npy"]) for i in range(5)]
    summary = vd._run(
        "test", jobs, lambda x: [np.array([x])], {}, Client(), None, retries=0,
        overwrite=False, progress=False, max_in_flight=None,
    )  # fmt: skip
    if fail:
        assert not summary.written
        assert [e.name for e in summary.failed] == [f"n{i}" for i in range(5)]
        assert all(
            e.error == "RuntimeError: worker died 3 times" for e in summary.failed
        )
    else:
        assert summary.written == [f"n{i}" for i in range(5)] and not summary.failed
        for i in range(5):
            assert np.load(tmp_path / f"n{i}.npy").tolist() == [i]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="retries must be an integer >= 0"):
        vd.segment_many([_picture(1)], tmp_path, retries=-1, progress=False)
    with pytest.raises(ValueError, match="max_in_flight must be a positive integer"):
        vd.segment_many([_picture(1)], tmp_path, max_in_flight=0, progress=False)
    with pytest.raises(ValueError, match="items_per_task must be a positive integer"):
        vd.segment_many([_picture(1)], tmp_path, items_per_task=0, progress=False)
    with pytest.raises(ValueError, match="rects must hold one box per image"):
        vd.segment_many([_picture(1)], tmp_path, rects=[], progress=False)
    with pytest.raises(ValueError, match="no image files"):
        vd.segment_many(tmp_path / "empty*", tmp_path, progress=False)
    with pytest.raises(ValueError, match="chunk must be a positive integer"):
        vd.flow_many([_picture(1), _picture(2)], tmp_path, chunk=0, progress=False)
    with pytest.raises(ValueError, match="needs at least 2 frames"):
        vd.flow_many([_picture(1)], tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"pairs\[0\] must be \(left, right\)"):
        vd.stereo_many([_picture(1)], tmp_path, max_disparity=4, progress=False)
    with pytest.raises(TypeError, match="out_dir must be a path"):
        vd.stereo_many([], None, max_disparity=4, progress=False)


def test_gpu_workers_without_dask_cuda_see_one_gpu_each():
    """Without dask-cuda, GPU workers are one process a GPU, each seeing its own
    device alone through CUDA_VISIBLE_DEVICES (checked here by what the worker
    processes see; no device is needed)."""
    with vd._gpu_spec_cluster(distributed, 2) as cluster:
        with distributed.Client(cluster) as c:
            seen = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
            threads = c.nthreads()
            opencv = c.run(lambda: os.environ.get("OPENCV_FOR_THREADS_NUM"))
    assert sorted(seen.values()) == ["0", "1"]
    assert sorted(threads.values()) == [1, 1]
    share = max(1, vd._cores() // 2)
    want = str(min(share, vd._GPU_WORKER_OPENCV_THREADS))
    assert list(opencv.values()) == [want, want]


def test_opencv_threads_only_in_gpu_workers(monkeypatch):
    """GPU workers run OpenCV on a few threads (it works beside the device there),
    never more than their share of the cores; CPU workers keep OpenCV's default."""
    monkeypatch.setattr(vd, "_cores", lambda: 32)
    assert vd._thread_env(2, gpu=True)["OPENCV_FOR_THREADS_NUM"] == "4"
    assert vd._thread_env(16, gpu=True)["OPENCV_FOR_THREADS_NUM"] == "2"
    assert vd._thread_env(64, gpu=True)["OPENCV_FOR_THREADS_NUM"] == "1"
    assert "OPENCV_FOR_THREADS_NUM" not in vd._thread_env(2)
    assert vd._thread_env(2, gpu=True)["VISION_CUTS_THREADS"] == "16"


def test_import_does_not_import_dask():
    import subprocess
    import sys

    code = "import sys, vision_cuts; print('distributed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# ---- the command line ----------------------------------------------------------------


def _cli(argv):
    from vision_cuts import cli

    return cli.main(argv)


def test_cli_segment_and_stereo_folders(tmp_path, capsys):
    images = [_picture(s) for s in range(3)]
    _write_pngs(tmp_path / "in", images)
    rc = _cli(
        ["segment", str(tmp_path / "in"), "-o", str(tmp_path / "masks"),
         "--workers", "2", "--iterations", "2", "--backend", "cpu"]
    )  # fmt: skip
    assert rc == 0
    assert "3 written, 0 skipped (existing), 0 failed" in capsys.readouterr().out
    for i, img in enumerate(images):
        h, w = img.shape[:2]
        rect = (w // 8, h // 16, w * 3 // 4, h * 7 // 8)
        want = grabcut(img, rect=rect, iterations=2, backend="cpu").mask * 255
        np.testing.assert_array_equal(
            _read_png(tmp_path / "masks" / f"img{i:02d}.png"), want
        )
    rng = np.random.default_rng(5)
    rights = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(2)]
    _write_pngs(tmp_path / "R", rights)
    _write_pngs(tmp_path / "L", [np.roll(r, 3, axis=1) for r in rights])
    rc = _cli(
        ["stereo", str(tmp_path / "L" / "*.png"), str(tmp_path / "R"), "-o",
         str(tmp_path / "disp"), "--max-disparity", "6", "--workers", "1",
         "--backend", "cpu"]
    )  # fmt: skip
    assert rc == 0
    for i in range(2):
        left = _read_png(tmp_path / "L" / f"img{i:02d}.png")[..., ::-1]
        right = _read_png(tmp_path / "R" / f"img{i:02d}.png")[..., ::-1]
        want = stereo_disparity(left, right, max_disparity=6, backend="cpu")
        got = read_pfm(tmp_path / "disp" / f"img{i:02d}.pfm")
        np.testing.assert_array_equal(got, np.asarray(want, np.float32))


def test_cli_flow_video(tmp_path, capsys):
    import cv2
    import skimage.data

    from vision_cuts.datasets.synthetic import panning_clip

    frames, _ = panning_clip(skimage.data.astronaut(), 5, shape=(96, 128))
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (128, 96))
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()
    rc = _cli(["flow", str(video), "-o", str(tmp_path / "out"), "--workers", "2",
               "--backend", "cpu"])  # fmt: skip
    assert rc == 0
    cap = cv2.VideoCapture(str(video))
    decoded = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        decoded.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    assert len(decoded) == 5
    # a chunk's frames, decoded as the flow asks for them
    part = vd._video_frames(str(video), 1, 4)
    np.testing.assert_array_equal(next(part), decoded[1])
    np.testing.assert_array_equal(np.stack(list(part)), np.stack(decoded[2:4]))
    with pytest.raises(ValueError, match="has fewer than 9 frames"):
        list(vd._video_frames(str(video), 2, 9))
    want = [r.dense for r in optical_flow_frames(decoded, dense=True, backend="cpu")]
    for i, flow in enumerate(want):
        np.testing.assert_array_equal(
            read_flo(tmp_path / "out" / f"clip_{i:06d}.flo"), flow
        )


def test_cli_batch_errors(tmp_path):
    with pytest.raises(SystemExit, match="needs -o OUTPUT_FOLDER"):
        _cli(["segment", str(tmp_path), "--workers", "1"])
    with pytest.raises(SystemExit, match="--workers or --scheduler, not both"):
        _cli(["segment", str(tmp_path), "-o", str(tmp_path / "o"), "--workers", "1",
              "--scheduler", "tcp://127.0.0.1:1"])  # fmt: skip
    with pytest.raises(SystemExit, match="takes no --fg"):
        _cli(["segment", str(tmp_path), "-o", str(tmp_path / "o"), "--workers", "1",
              "--fg", "x.png"])  # fmt: skip
    with pytest.raises(SystemExit, match="LEFT and RIGHT"):
        _cli(["stereo", str(tmp_path), "-o", str(tmp_path / "o"), "--workers", "1",
              "--max-disparity", "4"])  # fmt: skip
    # an error before any output leaves no output folder behind
    for extra in (["--workers", "0"], ["--workers", "1", "--scheduler", "x"]):
        with pytest.raises(SystemExit):
            _cli(["segment", str(tmp_path), "-o", str(tmp_path / "o" / "p"), *extra])
        assert not (tmp_path / "o").exists()


def test_assignment_many_from_a_npy_file(client, tmp_path):
    from vision_cuts import linear_sum_assignment_batched

    rng = np.random.default_rng(11)
    costs = rng.integers(0, 50, (10, 6, 8)).astype(np.float64)
    np.save(tmp_path / "stack.npy", costs)
    summary = vd.assignment_many(
        tmp_path / "stack.npy", tmp_path / "out", batch=3, client=client,
        backend="cpu", progress=False,
    )  # fmt: skip
    assert sorted(summary.written) == ["[0:3]", "[3:6]", "[6:9]", "[9:10]"]
    out = tmp_path / "out"
    parts = [np.load(out / f"assignment_{s:09d}.npy") for s in (0, 3, 6, 9)]
    got = np.concatenate(parts, axis=1)
    rows, cols = linear_sum_assignment_batched(costs, backend="cpu")
    np.testing.assert_array_equal(got[0], rows)
    np.testing.assert_array_equal(got[1], cols)
    with pytest.raises(ValueError, match=r"\(B, n, m\) stack"):
        vd.assignment_many(costs[0], tmp_path / "o2", progress=False)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        vd.assignment_many(costs, tmp_path / "o2", batch=0, progress=False)


def test_inputs_that_would_share_an_output_are_refused(tmp_path):
    """sceneA/im0.png and sceneB/im0.png would both write im0: refused before any
    work (which file stayed depended on timing)."""
    import cv2

    for scene in ("sceneA", "sceneB"):
        (tmp_path / scene).mkdir()
        for name in ("im0.png", "im1.png"):
            cv2.imwrite(str(tmp_path / scene / name), np.zeros((8, 8, 3), np.uint8))
    pairs = [
        (tmp_path / s / "im0.png", tmp_path / s / "im1.png")
        for s in ("sceneA", "sceneB")
    ]
    with pytest.raises(ValueError, match="would both write the output 'im0'"):
        vd.stereo_many(pairs, tmp_path / "out", max_disparity=2, client=object())
    images = [tmp_path / "sceneA" / "im0.png", tmp_path / "sceneB" / "im0.png"]
    with pytest.raises(ValueError, match="sceneA.*sceneB.*'im0'"):
        vd.segment_many(images, tmp_path / "out", client=object())


def test_frame_files_in_natural_order_and_literal_names(tmp_path):
    import cv2

    for k in (0, 1, 2, 10, 11):
        cv2.imwrite(str(tmp_path / f"frame_{k}.png"), np.zeros((4, 4, 3), np.uint8))
    order = [p.name for p in vd._expand(tmp_path, "frames")]
    assert order == [f"frame_{k}.png" for k in (0, 1, 2, 10, 11)]
    order = [p.name for p in vd._expand(str(tmp_path / "frame_*.png"), "frames")]
    assert order == [f"frame_{k}.png" for k in (0, 1, 2, 10, 11)]
    odd = tmp_path / "img[1].png"  # a name that is also a glob pattern
    cv2.imwrite(str(odd), np.zeros((4, 4, 3), np.uint8))
    cv2.imwrite(str(tmp_path / "img1.png"), np.zeros((4, 4, 3), np.uint8))
    assert vd._expand(str(odd), "images") == [odd]


@pytest.mark.parametrize("name", ["../escaped", "cam/left", "", ".", 3])
def test_flow_sequence_names_are_file_names(name, tmp_path):
    """A sequence name starts its output file names: one with a path in it (which
    wrote outside the output folder, or failed after all the work) is refused."""
    frames = [np.zeros((8, 8, 3), np.uint8)] * 2
    with pytest.raises(ValueError, match="sequence name .* without path separators"):
        vd.flow_many({name: frames}, tmp_path / "out", client=object())


def test_workers_share_the_callers_threads(monkeypatch):
    """The workers' threads add up to the caller's budget: VISION_CUTS_THREADS where
    it is set, else the cores this process may run on (not the machine's count)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setenv("VISION_CUTS_THREADS", "8")
    assert vd._cores() == 8
    assert vd._thread_env(2)["VISION_CUTS_THREADS"] == "4"
    assert vd._thread_env(2)["OMP_NUM_THREADS"] == "4"
    assert vd._thread_env(16)["VISION_CUTS_THREADS"] == "1"
    assert "NUMBA_NUM_THREADS" not in vd._thread_env(2)  # see _numba_threads
    monkeypatch.setenv("VISION_CUTS_THREADS", "0")
    with pytest.raises(ValueError, match="VISION_CUTS_THREADS"):
        vd._thread_env(2)
    monkeypatch.delenv("VISION_CUTS_THREADS")
    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
        assert vd._cores() == 3
        assert vd._thread_env(1)["VISION_CUTS_THREADS"] == "3"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda out: vd.segment_many([_picture(1)], out, iteration=3),
         r"segment_many\(\) got the keyword 'iteration', which grabcut\(\)"),
        (lambda out: vd.segment_many([_picture(1)], out, rect=(1, 1, 4, 4)),
         r"segment_many\(\) sets 'rect' itself"),
        (lambda out: vd.stereo_many([], out, max_disparity=4, methd="ishikawa"),
         r"'methd', which stereo_disparity\(\) does not take"),
        (lambda out: vd.flow_many([_picture(1)] * 2, out, dense=False),
         r"flow_many\(\) sets 'dense' itself"),
        (lambda out: vd.flow_many([_picture(1)] * 2, out, detectr="x"),
         r"'detectr', which optical_flow_frames\(\)"),
        (lambda out: vd.assignment_many(np.zeros((2, 3, 3)), out, return_stats=True),
         r"assignment_many\(\) sets 'return_stats' itself"),
        (lambda out: vd.assignment_many(np.zeros((2, 3, 3)), out, maximise=True),
         r"'maximise', which linear_sum_assignment_batched\(\)"),
    ],
)  # fmt: skip
def test_front_end_keywords_are_checked_before_any_worker(call, match, tmp_path):
    """A keyword the front end does not take (or one the many-file function sets for
    each item) is refused at the call: before, a cluster started and every item
    failed with it in turn. No output folder is left behind."""
    with pytest.raises(TypeError, match=match):
        call(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_input_error_leaves_no_output_folder(tmp_path):
    with pytest.raises(ValueError, match="needs at least 2 frames"):
        vd.flow_many([_picture(1)], tmp_path / "a" / "b", progress=False)
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="out_dir .*file.* is a file"):
        vd.segment_many([_picture(1)], tmp_path / "file", progress=False)
    # a folder to make below a file: NotADirectoryError when made, named here
    with pytest.raises(ValueError, match=r"out_dir .*sub.* cannot be made: .*file.* "
                       r"is a file, not a folder"):
        vd.segment_many([_picture(1)], tmp_path / "file" / "sub", progress=False)


def test_flow_errors_name_the_frame_in_the_sequence(client, tmp_path):
    """A frame of another shape in the second chunk is named by its index in the whole
    sequence and by its file (it was frames[i] of its chunk)."""
    import cv2

    folder = tmp_path / "frames"
    folder.mkdir()
    for k in range(6):
        shape = (40, 48, 3) if k != 4 else (40, 40, 3)
        cv2.imwrite(str(folder / f"f{k}.png"), _picture(k)[: shape[0], : shape[1]])
    summary = vd.flow_many(
        folder, tmp_path / "out", chunk=2, client=client, backend="cpu",
        progress=False, retries=0,
    )  # fmt: skip
    assert sorted(summary.written) == ["frames[0:2]", "frames[1:4]"]
    assert summary.files_written == 3  # [0:2] one pair, [1:4] two; [3:6] failed
    errors = {e.name: e.error for e in summary.failed}
    assert "frame 4 (" in errors["frames[3:6]"] and "f4.png" in errors["frames[3:6]"]
    assert "frames[1]" not in errors["frames[3:6]"]
    assert vd._frame_names("frames[2] and frames[0]", 10, None) == (
        "frame 12 and frame 10"
    )


def test_cli_many_file_refusals(tmp_path):
    """Options of single-file mode were ignored with status 0 (no --pfm or --flo
    written); an output folder holding the inputs skipped them as done outputs (or
    wrote the masks among them)."""
    _write_pngs(tmp_path / "in", [_picture(1), _picture(2)])
    frames = str(tmp_path / "in")
    out = str(tmp_path / "o")
    cases = [
        (["stereo", frames, frames, "--max-disparity", "4", "--pfm", "x.pfm"],
         "takes no --pfm"),
        (["stereo", frames, frames, "--max-disparity", "4", "--png16", "x.png",
          "--colormap"], "takes no --png16, --colormap"),
        (["flow", frames, "--flo", "x.flo"], "takes no --flo"),
        (["flow", frames, "--view", "color"], "takes no --view or --arrow-scale"),
    ]  # fmt: skip
    for argv, match in cases:
        with pytest.raises(SystemExit, match=match):
            _cli([*argv, "-o", out, "--workers", "1"])
    for argv in (["segment", frames], ["stereo", frames, frames, "--max-disparity",
                                       "4"], ["flow", frames]):  # fmt: skip
        with pytest.raises(SystemExit, match=r"-o .*in.* holds the input .*img0"):
            _cli([*argv, "-o", frames, "--workers", "1"])
    assert sorted(os.listdir(frames)) == ["img00.png", "img01.png"]
    assert not (tmp_path / "o").exists()


def test_cli_many_file_frames_one_by_one_and_failed_runs(tmp_path, capsys):
    """Frame files named one by one are one sequence (each was a sequence of one
    frame: "needs at least 2 frames"); a run whose every item fails leaves no empty
    output folder; .ppm frames are found in a folder."""
    import cv2

    from vision_cuts.datasets.synthetic import panning_clip

    clip, _ = panning_clip(_picture(3, 64, 96), 3, shape=(48, 64))
    names = []
    for k, f in enumerate(clip):
        names.append(str(tmp_path / f"f{k}.ppm"))
        cv2.imwrite(names[-1], f[..., ::-1])
    rc = _cli(["flow", *names, "-o", str(tmp_path / "flo"), "--workers", "1",
               "--backend", "cpu"])  # fmt: skip
    assert rc == 0
    assert sorted(os.listdir(tmp_path / "flo")) == ["frames_000000.flo",
                                                     "frames_000001.flo"]  # fmt: skip
    assert [p.name for p in vd._expand(tmp_path, "frames")] == ["f0.ppm", "f1.ppm",
                                                                 "f2.ppm"]  # fmt: skip
    capsys.readouterr()
    for k in range(2):  # pictures no reader can open: every item fails
        (tmp_path / f"bad{k}.png").write_bytes(b"not a picture")
    rc = _cli(["segment", str(tmp_path / "bad*.png"), "-o", str(tmp_path / "none"),
               "--workers", "1", "--backend", "cpu"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "0 written" in out
    # the folder is not claimed on the summary's line (it was, after the failures)
    assert "no output folder made" in out.splitlines()[0] and "outputs in" not in out
    assert not (tmp_path / "none").exists()
    # a bad option value fails every item too: it is refused before any worker
    with pytest.raises(SystemExit, match="error: --smoothness must be"):
        _cli(["segment", str(tmp_path / "f*.ppm"), "-o", str(tmp_path / "none"),
              "--workers", "1", "--backend", "cpu", "--smoothness", "-1"])  # fmt: skip
    assert not (tmp_path / "none").exists()


_BAD_VALUES = [
    (vd.segment_many, {"iterations": 0}, ValueError, "iterations must be"),
    (vd.segment_many, {"smoothness": -1.0}, ValueError, "smoothness must be"),
    (vd.segment_many, {"connectivity": 6}, ValueError, "connectivity"),
    (vd.segment_many, {"components": 0}, ValueError, "components must be"),
    (vd.segment_many, {"backend": "cuda"}, ValueError, "backend must be one of"),
    (vd.stereo_many, {"max_disparity": 0}, ValueError, "max_disparity must"),
    (vd.stereo_many, {"max_disparity": 2.0}, TypeError, "max_disparity must be an"),
    (vd.stereo_many, {"method": "sgm"}, ValueError, "method must be one of"),
    (vd.stereo_many, {"method": "ishikawa_pyramid", "label_step": 3}, ValueError,
     "label_step must be a power of two"),
    (vd.stereo_many, {"lam": -1.0}, ValueError, "lam"),
    (vd.stereo_many, {"census_radius": 0}, ValueError, "census_radius must be"),
    (vd.stereo_many, {"truncation": 0}, ValueError, "truncation must be"),
    (vd.stereo_many, {"max_cycles": 0}, ValueError, "max_cycles"),
    (vd.stereo_many, {"window": 0}, ValueError, "window"),
    (vd.flow_many, {"search_radius": -3.0}, ValueError, "search_radius"),
    (vd.flow_many, {"detector": "sift2"}, ValueError, "detector must be one of"),
    (vd.flow_many, {"warm_start": "yes"}, TypeError, "warm_start"),
    (vd.assignment_many, {"maximize": "yes"}, TypeError, "maximize"),
    (vd.assignment_many, {"backend": "tpu"}, ValueError, "backend must be one of"),
]  # fmt: skip


def _many_call(fn, tmp_path, kw):
    if fn is vd.segment_many:
        return lambda: fn([_picture(1)], tmp_path / "out", **kw)
    if fn is vd.stereo_many:
        kw = {"max_disparity": 4, **kw}
        return lambda: fn([(_picture(1), _picture(2))], tmp_path / "out", **kw)
    if fn is vd.flow_many:
        return lambda: fn([_picture(1), _picture(2)], tmp_path / "out", **kw)
    return lambda: fn(np.zeros((2, 3, 3)), tmp_path / "out", **kw)


def _single_call(fn, kw):
    """The front end itself on one item, with the same options."""
    from vision_cuts import grabcut, linear_sum_assignment_batched, stereo_disparity

    if fn is vd.segment_many:
        return lambda: grabcut(_picture(1), rect=(2, 2, 20, 20), **kw)
    if fn is vd.stereo_many:
        kw = {"max_disparity": 4, **kw}
        return lambda: stereo_disparity(_picture(1), _picture(2), **kw)
    if fn is vd.flow_many:
        return lambda: list(optical_flow_frames([_picture(1), _picture(2)], **kw))
    return lambda: linear_sum_assignment_batched(np.zeros((2, 3, 3)), **kw)


@pytest.mark.parametrize(("fn", "kw", "error", "match"), _BAD_VALUES)
def test_front_end_values_are_checked_before_any_worker(
    fn, kw, error, match, tmp_path, monkeypatch
):
    """A value the front end refuses (``iterations=0``, ...) started a cluster and
    failed every item in turn; it is the front end's own error at the call now, and
    no cluster starts, no folder is left."""

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(vd, "local_client", no_cluster)
    with pytest.raises(error, match=match) as many:
        _many_call(fn, tmp_path, kw)()
    assert not (tmp_path / "out").exists()
    with pytest.raises(error, match=match) as single:
        _single_call(fn, kw)()
    if fn is not vd.stereo_many or "max_disparity" not in kw:  # the width is known
        assert str(many.value) == str(single.value)  # there, not here


@pytest.mark.parametrize(
    "argv",
    [["segment", "{d}", "--iterations", "0"],
     ["stereo", "{d}", "{d}", "--max-disparity", "4", "--method", "ishikawa_pyramid",
      "--label-step", "3"],
     ["flow", "{d}", "--search-radius", "-1"]],
)  # fmt: skip
def test_cli_many_file_values_start_no_cluster(argv, tmp_path, monkeypatch):
    """``--workers N`` started its cluster before any option was checked."""
    import cv2

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(vd, "local_client", no_cluster)
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(2):
        cv2.imwrite(str(folder / f"f{k}.png"), _picture(k))
    args = [a.format(d=folder) for a in argv]
    with pytest.raises(SystemExit, match="error: .*must be"):
        _cli([*args, "-o", str(tmp_path / "out"), "--workers", "2"])
    assert not (tmp_path / "out").exists()


def test_a_rerun_with_every_output_there_starts_nothing(tmp_path, monkeypatch, capsys):
    """A rerun whose outputs all exist, without a client (or with --workers), failed
    with Dask's "No clients found"; it skips them all and starts no cluster."""
    import cv2

    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    for k in range(3):
        cv2.imwrite(str(folder / f"im{k}.png"), _picture(k))
        cv2.imwrite(str(out / f"im{k}.png"), np.zeros((4, 4), np.uint8))

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(vd, "local_client", no_cluster)
    summary = vd.segment_many(folder, out, progress=False, backend="cpu")
    assert sorted(summary.skipped) == ["im0", "im1", "im2"] and not summary.written
    rc = _cli(["segment", str(folder), "-o", str(out), "--workers", "2",
               "--backend", "cpu"])  # fmt: skip
    assert rc == 0 and "0 written, 3 skipped" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_parallel_numba_on_workers_with_a_cold_cache(tmp_path):
    """With numba's cache empty (a fresh install), every batch of assignment_many
    on two workers failed: "Cannot set NUMBA_NUM_THREADS to a different value once
    the threads have been launched". Run in a process of its own, whose numba cache
    is an empty folder."""
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np\n"
        "from vision_cuts.distributed import assignment_many\n"
        "if __name__ == '__main__':\n"
        "    costs = np.random.default_rng(0).random((600, 12, 12))\n"
        f"    s = assignment_many(costs, {str(tmp_path / 'out')!r}, workers=2,\n"
        "                        progress=False, batch=200)\n"
        "    print(repr(str(s)))\n"
        "    assert not s.failed and len(s.written) == 3, str(s)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_NUM_THREADS", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=280)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert len(list((tmp_path / "out").glob("*.npy"))) == 3


@pytest.mark.timeout(180)
def test_many_file_mode_is_quiet_without_verbose(tmp_path):
    """``--workers`` printed some 20-40 lines of Dask's INFO logging (scheduler
    address, worker plugins, ...) on stderr without ``-v``."""
    import subprocess
    import sys

    import cv2

    for k in range(2):
        cv2.imwrite(str(tmp_path / f"im{k}.png"), _picture(k))
    argv = [sys.executable, "-m", "vision_cuts.cli", "segment",
            str(tmp_path / "im*.png"), "-o", str(tmp_path / "out"), "--workers", "1",
            "--backend", "cpu"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr
    assert "2 written" in proc.stdout
    assert proc.stderr.strip() == "", proc.stderr
