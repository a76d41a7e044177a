"""The slow calls of dense optical flow: many calls on the Middlebury pairs in turn,
each with its time, Python's garbage-collection pauses inside it and how long the
pipeline waited for DIS. Prints the distribution and the
slowest calls with their parts.

    python benchmarks/diag_flow_tail.py --backend gpu --calls 300 [--json out.json]

``--probe SECONDS``: afterwards, loops of other work for that long each, every
iteration timed, to tell a slow-down of the host from one of the pipeline: sparse
flow calls, DIS alone (OpenCV's threads), a host loop on one thread (NumPy), and a
device loop (a CuPy array op with a synchronisation). For each: the median, the
iterations over 1.5x the median and when they came (seconds from the loop's start).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import time

import numpy as np

from vision_cuts.datasets import middlebury_flow as mf


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--data", default=None)
    ap.add_argument("--probe", type=float, default=0.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    of = importlib.import_module("vision_cuts.optical_flow")
    pairs = [mf.load_flow(n, args.data)[:2] for n in mf.flow_names()]
    names = list(mf.flow_names())

    gc_pause = [0.0]
    gc_start = [0.0]
    gc_gens: list = []

    def on_gc(phase, info):
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            gc_pause[0] += time.perf_counter() - gc_start[0]
            gc_gens.append(info["generation"])

    dis_wait = [0.0]
    start_dis = of._start_dis

    class Timed:
        def __init__(self, fut):
            self.fut = fut

        def result(self):
            t = time.perf_counter()
            try:
                return self.fut.result()
            finally:
                dis_wait[0] += time.perf_counter() - t

    def timed_start(g0, g1):
        fut = start_dis(g0, g1)
        return None if fut is None else Timed(fut)

    of._start_dis = timed_start
    sync = lambda: None  # noqa: E731
    if args.backend == "gpu":
        import cupy

        sync = cupy.cuda.Device().synchronize
    for f0, f1 in pairs:  # warm-up
        of.optical_flow(f0, f1, backend=args.backend, dense=True)
    gc.callbacks.append(on_gc)
    rows = []
    for i in range(args.calls):
        f0, f1 = pairs[i % len(pairs)]
        gc_pause[0] = dis_wait[0] = 0.0
        gc_gens.clear()
        sync()
        t = time.perf_counter()
        of.optical_flow(f0, f1, backend=args.backend, dense=True)
        sync()
        rows.append({
            "call": i, "sequence": names[i % len(pairs)],
            "ms": 1e3 * (time.perf_counter() - t),
            "gc_ms": 1e3 * gc_pause[0], "gc_generations": list(gc_gens),
            "dis_wait_ms": 1e3 * dis_wait[0],
        })  # fmt: skip
    gc.callbacks.remove(on_gc)
    ms = np.array([r["ms"] for r in rows])
    summary = {
        "median": float(np.median(ms)),
        "p95": float(np.percentile(ms, 95)),
        "p99": float(np.percentile(ms, 99)),
        "worst": float(ms.max()),
    }
    print("dense calls, ms:", {k: round(v, 1) for k, v in summary.items()})
    for name in names:
        m = np.array([r["ms"] for r in rows if r["sequence"] == name])
        if not len(m):
            continue
        print(f"  {name:12s} median {np.median(m):6.1f}  worst {m.max():6.1f}")
    print("slowest calls:")
    for r in sorted(rows, key=lambda r: -r["ms"])[:8]:
        print(
            f"  call {r['call']:4d} {r['sequence']:12s} {r['ms']:7.1f} ms  gc "
            f"{r['gc_ms']:6.1f} ms {r['gc_generations']}  DIS wait "
            f"{r['dis_wait_ms']:6.1f} ms"
        )
    with_gc2 = [r["ms"] for r in rows if 2 in r["gc_generations"]]
    print(
        f"calls with a full collection: {len(with_gc2)}:", [round(x) for x in with_gc2]
    )
    probes = _probes(of, pairs, args.backend, args.probe, sync) if args.probe else {}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summary": summary, "rows": rows, "probes": probes}, fh)
    return 0


def _probes(of, pairs, backend, seconds, sync) -> dict:
    import cv2

    f0, f1 = pairs[0]
    g0 = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(f1, cv2.COLOR_RGB2GRAY)
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    big = np.random.default_rng(0).random(2_000_000)
    loops = {
        "sparse flow": lambda: of.optical_flow(f0, f1, backend=backend),
        "DIS alone": lambda: dis.calc(g0, g1, None),
        "host, one thread": lambda: [np.sort(big[:400_000]) for _ in range(3)],
    }
    if backend == "gpu":
        import cupy

        a = cupy.random.random(4_000_000)

        def device():
            for _ in range(200):
                a.sum()
            sync()

        loops["device, 200 launches"] = device
    out = {}
    for name, fn in loops.items():
        fn()
        times, at = [], []
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t))
            at.append(t - start)
        med = float(np.median(times))
        pairs_at = zip(at, times, strict=True)
        slow = [(round(a, 2), round(x, 1)) for a, x in pairs_at if x > 1.5 * med]
        out[name] = {"median_ms": med, "worst_ms": max(times), "n": len(times),
                     "slow": slow}  # fmt: skip
        print(
            f"probe {name}: {len(times)} runs, median {med:.2f} ms, worst "
            f"{max(times):.1f} ms, {len(slow)} over 1.5x the median at (s, ms): "
            f"{slow[:20]}"
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
