"""Throughput of vision_cuts.distributed against the single-process loop, same run.

Workloads (inputs written as files first, outputs written as files by both):

* ``stereo``: ``--items`` rectified pairs cut from the shared Middlebury pairs (random
  crops of 256 x 320, the same crop of left and right; needs VISION_CUTS_DATA), max
  disparity 16, one PFM each;
* ``segment``: ``--items`` pictures cut from scikit-image's (random 300 x 400 crops),
  GrabCut with the central box, one PNG each;
* ``flow``: a ``--items``-frame 640 x 480 clip (``panning_clip`` over the astronaut),
  dense flow of every consecutive pair in chunks of 32 pairs, one ``.flo`` each.

For each ``--workers`` count a local cluster is started (``local_client``: CPU
processes sharing the cores, or one worker per GPU with ``--gpu``), warmed up with one
item per worker, then timed; the single-process loop runs after a warm-up of its own.
Every output of every run is counted and compared with the loop's (equal arrays), so no
item is lost or duplicated.

    python benchmarks/bench_distributed.py --kind stereo --items 200 --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


def _write_png(path: Path, rgb: np.ndarray) -> None:
    import cv2

    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))


def make_inputs(kind: str, n: int, root: Path, rng) -> tuple:
    """(collection for the *_many call, single-process function of one job)."""
    (root / "in").mkdir(parents=True)
    if kind == "stereo":
        from vision_cuts.datasets import middlebury as mb

        samples = [mb.load_stereo(name, None) for name in mb.stereo_names()]
        pairs = []
        for i in range(n):
            s = samples[i % len(samples)]
            h, w = s.left.shape[:2]
            y, x = rng.integers(0, h - 256 + 1), rng.integers(0, w - 320 + 1)
            for side, img in (("L", s.left), ("R", s.right)):
                _write_png(
                    root / "in" / f"{side}{i:04d}.png", img[y : y + 256, x : x + 320]
                )
            pairs.append((root / "in" / f"L{i:04d}.png", root / "in" / f"R{i:04d}.png"))
        return pairs, {"max_disparity": 16}
    if kind == "segment":
        import skimage.data

        bases = [
            skimage.data.astronaut(),
            skimage.data.coffee(),
            skimage.data.chelsea(),
        ]
        for i in range(n):
            b = bases[i % len(bases)]
            h, w = b.shape[:2]
            y, x = rng.integers(0, h - 300 + 1), rng.integers(0, w - 400 + 1)
            _write_png(root / "in" / f"img{i:04d}.png", b[y : y + 300, x : x + 400])
        return root / "in", {"iterations": 5}
    import skimage.data

    from vision_cuts.datasets.synthetic import panning_clip

    frames, _ = panning_clip(skimage.data.astronaut(), n)
    for i, f in enumerate(frames):
        _write_png(root / "in" / f"f{i:05d}.png", f)
    return {"clip": root / "in"}, {}


def warm(kind: str, items, params: dict, backend: str) -> None:
    """One job of the loop (the first pairs of a clip: 3 warm-started pairs), run where
    it is called: compiles what a job compiles, on the process's device."""
    from vision_cuts import distributed as vd

    if kind == "stereo":
        vd._stereo_one(items[0], backend=backend, **params)
    elif kind == "segment":
        vd._segment_one(
            (sorted(Path(items).iterdir())[0], None), backend=backend, **params
        )
    else:
        vd._flow_chunk(sorted(Path(items["clip"]).iterdir())[:4], backend=backend)


def single(kind: str, items, params: dict, out: Path, backend: str) -> float:
    """The plain loop over the same files; returns seconds (after a warm-up)."""
    from vision_cuts import distributed as vd

    out.mkdir(parents=True)
    if kind == "stereo":
        fn = lambda it: vd._stereo_one(it, backend=backend, **params)  # noqa: E731
        jobs = [(None, it, [out / f"{Path(it[0]).stem}.pfm"]) for it in items]
    elif kind == "segment":
        fn = lambda it: vd._segment_one(it, backend=backend, **params)  # noqa: E731
        jobs = [
            (None, (p, None), [out / f"{p.stem}.png"])
            for p in sorted(Path(items).iterdir())
        ]
    else:
        frames = sorted(Path(items["clip"]).iterdir())
        fn = lambda it: vd._flow_chunk(it, backend=backend)  # noqa: E731
        jobs = []
        for start, stop in vd._chunk_ranges(len(frames), 32):
            outs = [out / f"clip_{i:06d}.flo" for i in range(start, stop - 1)]
            jobs.append((None, frames[start:stop], outs))
    warm(kind, items, params, backend)
    t0 = time.perf_counter()
    for _, payload, outs in jobs:
        for path, arr in zip(outs, fn(payload), strict=True):
            vd._write(str(path), arr)
    return time.perf_counter() - t0


#: dense flow on the GPU is not bitwise repeatable: two runs of the same chunk in one
#: process differ on a few pairs by up to about 0.03 px (H200); .flo files are compared
#: to this tolerance, every other output exactly
FLO_TOLERANCE = 0.05


def compare(a: Path, b: Path) -> int:
    """Number of outputs; raises if the folders differ in names or contents (flow
    fields: by more than ``FLO_TOLERANCE`` pixels anywhere)."""
    from vision_cuts.io import read_flo, read_pfm

    names_a = sorted(p.name for p in a.iterdir())
    names_b = sorted(p.name for p in b.iterdir())
    if names_a != names_b:
        raise SystemExit(f"outputs differ: {len(names_a)} against {len(names_b)} files")
    for name in names_a:
        if name.endswith(".pfm"):
            x, y = read_pfm(a / name), read_pfm(b / name)
        elif name.endswith(".flo"):
            x, y = read_flo(a / name), read_flo(b / name)
        else:
            import cv2

            x, y = cv2.imread(str(a / name)), cv2.imread(str(b / name))
        if name.endswith(".flo"):
            gap = float(np.nanmax(np.abs(x - y))) if x.shape == y.shape else np.inf
            if not gap <= FLO_TOLERANCE:
                raise SystemExit(f"{name} differs by {gap} px between {a} and {b}")
            continue
        if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            raise SystemExit(f"{name} differs between {a} and {b}")
    return len(names_a)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=["stereo", "segment", "flow"], default="stereo")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--workers", type=int, nargs="+", default=[2])
    ap.add_argument("--gpu", action="store_true", help="one worker per GPU (dask-cuda)")
    ap.add_argument(
        "--variants", nargs="+", default=["default"],
        choices=["default", "single-items", "loop-in-worker", "profiler-off", "thread"],
        help="with one worker also: one item a task, the plain loop run inside the "
        "worker, Dask's profiler off; the plain loop in a thread of this process",
    )  # fmt: skip
    ap.add_argument(
        "--opencv-threads", type=int, nargs="*", default=[],
        help="also clusters (every --workers count) whose workers run OpenCV on this "
        "many threads (OPENCV_FOR_THREADS_NUM; 0: OpenCV's default)",
    )  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every method")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    import dask
    import distributed  # noqa: F401  (its configuration before dask.config.set)

    from vision_cuts import distributed as vd
    from vision_cuts._backend import machine_description

    backend = "gpu" if args.gpu else "cpu"
    root = Path(tempfile.mkdtemp(prefix="vc-bench-distributed-"))
    try:
        items, params = make_inputs(
            args.kind, args.items, root, np.random.default_rng(args.seed)
        )
        print(
            f"machine: {machine_description()}; {args.kind}, {args.items} items, "
            f"backend {backend}"
        )
        run = {
            "stereo": vd.stereo_many,
            "segment": vd.segment_many,
            "flow": vd.flow_many,
        }[args.kind]
        clusters = [(w, "default") for w in args.workers]
        clusters += [(1, v) for v in args.variants if v not in ("default", "thread")]
        clusters += [
            (w, f"opencv-{k}") for k in args.opencv_threads for w in args.workers
        ]
        thread_env = vd._thread_env
        times: dict = {}  # method -> [seconds of each round]
        info: dict = {}  # method -> (variant, workers)
        with contextlib.ExitStack() as stack:
            clients = []
            for w, variant in clusters:
                off = {"distributed.worker.profile.enabled": variant != "profiler-off"}
                if variant.startswith("opencv-"):
                    k = variant.split("-")[1]

                    def env(n, gpu=False, k=k):
                        e = {**thread_env(n, gpu), "OPENCV_FOR_THREADS_NUM": k}
                        if k == "0":  # OpenCV's default
                            del e["OPENCV_FOR_THREADS_NUM"]
                        return e

                    vd._thread_env = env
                try:
                    with dask.config.set(off):
                        client = stack.enter_context(vd.local_client(w, gpu=args.gpu))
                finally:
                    vd._thread_env = thread_env
                addrs = list(client.scheduler_info()["workers"])
                kind = type(client.cluster).__name__
                print(f"{variant}: {kind}, {len(addrs)} worker(s)")
                # warm-up: one job on every worker, in the thread that runs its tasks
                # (compiled kernels and solvers, and the thread's own: its OpenMP
                # team, CuPy's handles), as the single process's
                client.gather([
                    client.submit(warm, args.kind, items, params, backend, pure=False,
                                  workers=[a], allow_other_workers=False)
                    for a in addrs
                ])  # fmt: skip
                label = "" if variant == "default" else f", {variant}"
                clients.append(
                    (f"dask, {len(addrs)} worker(s){label}", variant, client)
                )
                info[clients[-1][0]] = (variant, len(addrs))
            info["single process"] = ("single", 1)
            if "thread" in args.variants:
                info["single process, in a thread"] = ("thread", 1)
            # rounds: every method once a round, in turn (drifts of the host's speed
            # fall on all of them alike)
            for r in range(args.repeat):
                out = root / f"single{r}"
                times.setdefault("single process", []).append(
                    single(args.kind, items, params, out, backend)
                )
                # the plain loop in a thread of this process
                if "thread" in args.variants:
                    with ThreadPoolExecutor(1) as pool:
                        dt = pool.submit(
                            single,
                            args.kind,
                            items,
                            params,
                            root / f"thread{r}",
                            backend,
                        ).result()
                    times.setdefault("single process, in a thread", []).append(dt)
                for method, variant, client in clients:
                    out = root / f"{method}-{r}".replace(" ", "_").replace(",", "")
                    kw = {"client": client, "progress": False, "backend": backend}
                    if variant == "loop-in-worker":  # the plain loop, inside the worker
                        fut = client.submit(
                            single, args.kind, items, params, out, backend
                        )
                        dt = fut.result()
                    else:
                        if variant == "single-items":
                            kw["items_per_task"] = 1
                        t0 = time.perf_counter()
                        summary = run(items, out, **kw, **params)
                        dt = time.perf_counter() - t0
                        if summary.failed:
                            raise SystemExit(str(summary))
                    times.setdefault(method, []).append(dt)
        # every output of every round, counted and compared with the first single run
        n_single = len(list((root / "single0").iterdir()))
        outs = sorted(p for p in root.iterdir() if p.is_dir() and p.name != "in")
        counts = {p.name: compare(root / "single0", p) for p in outs}
        rows = []
        t_single = float(np.median(times["single process"]))
        print(f"\n{args.repeat} round(s); items/s of the median and the slowest round")
        print("| method | outputs a round | median s | items/s | slowest items/s | "
              "x single |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for method, secs in times.items():
            med, worst = float(np.median(secs)), max(secs)
            variant, workers = info[method]
            row = {"method": method, "variant": variant, "workers": workers,
                   "seconds": med, "seconds_all": secs, "outputs": n_single,
                   "items_per_s": n_single / med,
                   "items_per_s_slowest": n_single / worst,
                   "speedup": t_single / med}  # fmt: skip
            rows.append(row)
            print(
                f"| {method} | {n_single} | {med:.2f} | {row['items_per_s']:.2f} | "
                f"{row['items_per_s_slowest']:.2f} | {row['speedup']:.2f}x |"
            )
        print(f"outputs checked: {len(counts)} folders, {sum(counts.values())} files")
        print(
            "(every output equal to the single process's"
            + (f"; flow fields to {FLO_TOLERANCE} px)" if args.kind == "flow" else ")")
        )
        if args.json:
            meta = {"machine": machine_description(), "kind": args.kind}
            meta.update(
                items=args.items, backend=backend, repeat=args.repeat, rows=rows
            )
            with open(args.json, "w") as f:
                json.dump(meta, f, indent=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
