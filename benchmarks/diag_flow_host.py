"""Where the host's time goes in dense optical flow on the GPU, and whether two
processes on two GPUs slow each other down.

``--mode loop``: in this process, ``optical_flow_frames(dense=True)`` over a 640 x 480
clip (``panning_clip`` over the astronaut), for each OpenCV thread count in
``--cv-threads`` (0: OpenCV's default): pairs/s, the process's CPU seconds a pair
(every thread), and DIS (medium) alone on the same frames, wall and CPU a pair. Then
the device stages of the dense flow on one pair, each timed twice: the host's time to
issue the launches (no synchronisation) and the time until the device is done.

``--mode concurrent``: the loop of ``--mode loop`` (first thread count only) in one
process per visible GPU, first one at a time, then all together
(``CUDA_VISIBLE_DEVICES`` set for each): pairs/s alone and together, and their ratio.

    python benchmarks/diag_flow_host.py --mode loop --cv-threads 0 8 4
    python benchmarks/diag_flow_host.py --mode concurrent --gpus 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _clip(n: int) -> list:
    import skimage.data

    from vision_cuts.datasets.synthetic import panning_clip

    frames, _ = panning_clip(skimage.data.astronaut(), n)
    return list(frames)


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def loop(frames: list, cv_threads: int) -> dict:
    import cv2

    from vision_cuts.optical_flow import optical_flow_frames

    if cv_threads:
        cv2.setNumThreads(cv_threads)
    for _ in optical_flow_frames(frames[:4], backend="gpu", dense=True):
        pass  # warm-up
    _sync()
    t, c = time.perf_counter(), time.process_time()
    n = 0
    for _ in optical_flow_frames(frames, backend="gpu", dense=True):
        n += 1
    _sync()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    pair = {}
    from vision_cuts import optical_flow

    for dense in (False, True):  # single calls, as optical_flow(f0, f1) is used
        times = []
        for i in range(12):
            _sync()
            t = time.perf_counter()
            optical_flow(frames[i], frames[i + 1], backend="gpu", dense=dense)
            _sync()
            times.append(time.perf_counter() - t)
        times = times[2:]
        key = "dense" if dense else "sparse"
        pair[f"single_{key}_ms_median"] = 1e3 * float(np.median(times))
        pair[f"single_{key}_ms_worst"] = 1e3 * float(np.max(times))
    greys = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    dis.calc(greys[0], greys[1], None)
    t, c = time.perf_counter(), time.process_time()
    for a, b in zip(greys[:-1], greys[1:], strict=True):
        dis.calc(a, b, None)
    dwall, dcpu = time.perf_counter() - t, time.process_time() - c
    return {
        "cv_threads": cv_threads or cv2.getNumThreads(),
        "pairs": n,
        "pairs_per_s": n / wall,
        "ms_a_pair": 1e3 * wall / n,
        "cpu_ms_a_pair": 1e3 * cpu / n,
        "dis_ms_a_pair": 1e3 * dwall / n,
        "dis_cpu_ms_a_pair": 1e3 * dcpu / n,
        **pair,
    }


def device_stages(frames: list, repeat: int = 20) -> dict:
    """Host issue time and device-done time of the dense stages on one pair."""
    import importlib

    import cupy as cp
    import cv2

    from vision_cuts import _optical_flow_gpu as dev

    of = importlib.import_module("vision_cuts.optical_flow")

    img0, img1 = frames[10], frames[11]
    g0 = cv2.cvtColor(img0, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(img1, cv2.COLOR_RGB2GRAY)
    res = of.optical_flow(img0, img1, backend="gpu")
    init = of._interpolate(img0, res.points, res.vectors, gpu=True)
    pyramid = of._pyramid(g0, g1, 3)
    full = (cp.asarray(g0, dtype=cp.float32), cp.asarray(g1, dtype=cp.float32))
    colour = (cp.asarray(img0), cp.asarray(img1))
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    other = cp.asarray(dis.calc(g0, g1, None))
    ours = dev._pyramid_refine(pyramid, full, init)
    stages = {
        "interpolate": lambda: of._interpolate(img0, res.points, res.vectors, gpu=True),
        "pyramid_refine": lambda: dev._pyramid_refine(pyramid, full, init),
        "variational_full": lambda: dev.variational(*full, ours),
        "fuse": lambda: dev.fuse(*colour, [ours, other], of._FUSE_WINDOW),
        "dense_all": lambda: dev.dense(
            img0, img1, g0, g1, pyramid, init, cp.asnumpy(other), of._FUSE_WINDOW,
            colour,
        ),
    }  # fmt: skip
    out = {}
    for name, fn in stages.items():
        fn()
        _sync()
        issue, done = [], []
        for _ in range(repeat):
            _sync()
            t = time.perf_counter()
            fn()
            issue.append(time.perf_counter() - t)
            _sync()
            done.append(time.perf_counter() - t)
        out[name] = {
            "issue_ms": 1e3 * float(np.median(issue)),
            "done_ms": 1e3 * float(np.median(done)),
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["loop", "concurrent", "child"], default="loop")
    ap.add_argument("--frames", type=int, default=121)
    ap.add_argument("--cv-threads", type=int, nargs="+", default=[0])
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    result: dict = {"mode": args.mode}
    if args.mode in ("loop", "child"):
        frames = _clip(args.frames)
        if args.mode == "child":
            start = float(os.environ.get("VC_START_AT", "0"))
            while time.time() < start:
                time.sleep(0.001)
            print(json.dumps(loop(frames, args.cv_threads[0])), flush=True)
            return 0
        result["loops"] = [loop(frames, n) for n in args.cv_threads]
        result["device_stages"] = device_stages(frames)
    else:
        cmd = [sys.executable, "-P", __file__, "--mode", "child"]
        cmd += ["--frames", str(args.frames), "--cv-threads", str(args.cv_threads[0])]

        def run(gpus: list) -> list:
            # every child decodes its clip and compiles first; all start the timed
            # loop at one wall-clock instant (their warm-up is inside loop())
            start = time.time() + 15.0
            procs = [
                subprocess.Popen(
                    cmd,
                    env={
                        **os.environ,
                        "CUDA_VISIBLE_DEVICES": str(g),
                        "VC_START_AT": str(start),
                    },
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for g in gpus
            ]
            outs = [p.communicate()[0] for p in procs]
            return [json.loads(o.strip().splitlines()[-1]) for o in outs]

        alone = [run([g])[0] for g in range(args.gpus)]
        together = run(list(range(args.gpus)))
        result["alone"] = alone
        result["together"] = together
        total = sum(r["pairs_per_s"] for r in together)
        result["together_over_one_alone"] = total / alone[0]["pairs_per_s"]
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
