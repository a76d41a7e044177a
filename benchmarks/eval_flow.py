"""Middlebury flow: vision_cuts.optical_flow against OpenCV's PyrLK, Farneback and DIS.

Protocol (DESIGN.md, "Evaluation protocols: Flow"): average endpoint error (EPE) over
the pixels with known GT (|value| < 1e9 in the .flo file); for sparse output, EPE at
the matched points (rounded to the nearest pixel to read the GT; points on unknown GT
left out), reported with the number of points.

* Sparse: ``optical_flow(..., dense=False)`` against ``cv2.calcOpticalFlowPyrLK``
  (default parameters: 21 x 21 window, 3 pyramid levels, 30 iterations / eps 0.01) on
  grey frames, tracked from exactly our matched points; PyrLK's EPE is taken at all of
  them (the column ``lk ok`` counts those PyrLK itself flags as tracked).
* Dense: ``optical_flow(..., dense=True).dense`` against
  ``cv2.calcOpticalFlowFarneback`` (pyramid 0.5, 3 levels, window 15, 3 iterations,
  poly_n 5, poly_sigma 1.2) and ``cv2.DISOpticalFlow`` (medium preset), both on grey
  frames.

Times are medians of ``--repeat`` runs after one warm-up run, in the same process, with
the worst run beside them; every backend named runs in the same process.

Usage::

    python benchmarks/eval_flow.py [--data DIR] [--sequences Urban2 ...]
        [--detector orb] [--backend cpu gpu] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from vision_cuts import optical_flow
from vision_cuts._backend import machine_description, to_numpy
from vision_cuts.datasets import middlebury_flow as mf
from vision_cuts.optical_flow import DETECTORS


def _median_time(fn, repeat: int, worst: list | None = None):
    """(result, median time); the worst time is appended to ``worst`` if given."""
    out = fn()  # warm-up (and the result)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    if worst is not None:
        worst.append(max(times) if times else float("nan"))
    return out, float(np.median(times)) if times else float("nan")


def evaluate(name: str, args, backend: str) -> dict:
    import cv2

    sample = mf.load_flow(name, args.data)
    f0, f1, gt = sample
    g0 = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(f1, cv2.COLOR_RGB2GRAY)
    kw = {"backend": backend, "detector": args.detector}
    a0, a1 = f0, f1
    if backend == "gpu-cupy":  # CuPy frames in, CuPy results out
        import cupy

        a0, a1 = cupy.asarray(f0), cupy.asarray(f1)
        kw["backend"] = "gpu"

    def run(dense):
        res = optical_flow(a0, a1, dense=dense, **kw)
        return type(res)(*(None if v is None else to_numpy(v) for v in res))

    worst: list = []
    sparse, t_sparse = _median_time(lambda: run(False), args.repeat, worst)
    pts = np.ascontiguousarray(sparse.points.reshape(-1, 1, 2), dtype=np.float32)

    def pyrlk():
        if len(pts) == 0:
            return np.zeros((0, 1, 2), np.float32), np.zeros((0, 1), np.uint8)
        nxt, status, _ = cv2.calcOpticalFlowPyrLK(g0, g1, pts, None)
        return nxt, status

    (lk_next, lk_status), t_lk = _median_time(pyrlk, args.repeat)
    lk_vec = lk_next.reshape(-1, 2) - sparse.points
    epe_ours, n_ours = mf.sparse_epe(sparse.points, sparse.vectors, gt)
    epe_lk, n_lk = mf.sparse_epe(sparse.points, lk_vec, gt)

    res, t_dense = _median_time(lambda: run(True), args.repeat, worst)
    fb, t_fb = _median_time(
        lambda: cv2.calcOpticalFlowFarneback(g0, g1, None, 0.5, 3, 15, 3, 5, 1.2, 0),
        args.repeat,
    )
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    fd, t_dis = _median_time(lambda: dis.calc(g0, g1, None), args.repeat)
    # ablation: DIS plus one more full-size variational refinement (the last step of
    # our dense flow), so the fusion's own share shows
    vr = cv2.VariationalRefinement_create()
    vr.setFixedPointIterations(5)
    vr.setSorIterations(5)
    fd_vr = fd.copy()
    vr.calc(g0, g1, fd_vr)
    return {
        "sequence": name,
        "backend": backend,
        "time_sparse_worst_s": worst[0],
        "time_dense_worst_s": worst[1],
        "size": f"{f0.shape[1]}x{f0.shape[0]}",
        "points": n_ours,
        "points_lk": n_lk,
        "lk_status_ok": int(np.count_nonzero(lk_status)),
        "sparse_epe": epe_ours,
        "sparse_epe_pyrlk": epe_lk,
        "dense_epe": mf.dense_epe(res.dense, gt),
        "dense_epe_farneback": mf.dense_epe(fb, gt),
        "dense_epe_dis": mf.dense_epe(fd, gt),
        "dense_epe_dis_vr": mf.dense_epe(fd_vr, gt),
        "time_sparse_s": t_sparse,
        "time_pyrlk_s": t_lk,
        "time_dense_s": t_dense,
        "time_farneback_s": t_fb,
        "time_dis_s": t_dis,
    }


def main() -> None:
    import cv2

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="folder holding middlebury_flow/")
    ap.add_argument("--sequences", nargs="+", default=mf.flow_names())
    ap.add_argument("--detector", default="fast-brief", choices=DETECTORS)
    ap.add_argument(
        "--backend",
        nargs="+",
        default=["cpu"],
        choices=("auto", "cpu", "gpu", "gpu-cupy"),
        help="gpu-cupy: the GPU backend with CuPy frames in",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()

    machine = machine_description()
    print(
        f"machine: {machine}; OpenCV {cv2.__version__}, {cv2.getNumThreads()} threads"
    )
    print(f"optical_flow(detector={args.detector!r}, backends {args.backend})\n")
    rows = [evaluate(name, args, b) for b in args.backend for name in args.sequences]
    print(
        "| backend | sequence | points | sparse EPE | PyrLK EPE | ratio | dense EPE | "
        "Farneback EPE | ratio | DIS EPE | DIS+VR EPE | sparse ms (worst) | "
        "PyrLK ms | "
        "dense ms (worst) | Farneback ms | DIS ms |"
    )
    print("|---" * 16 + "|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['sequence']} | {r['points']} | "
            f"{r['sparse_epe']:.3f} | "
            f"{r['sparse_epe_pyrlk']:.3f} | "
            f"{r['sparse_epe_pyrlk'] / r['sparse_epe']:.2f}x | "
            f"{r['dense_epe']:.3f} | {r['dense_epe_farneback']:.3f} | "
            f"{r['dense_epe_farneback'] / r['dense_epe']:.2f}x | "
            f"{r['dense_epe_dis']:.3f} | {r['dense_epe_dis_vr']:.3f} | "
            f"{1e3 * r['time_sparse_s']:.0f} "
            f"({1e3 * r['time_sparse_worst_s']:.0f}) | "
            f"{1e3 * r['time_pyrlk_s']:.1f} | {1e3 * r['time_dense_s']:.0f} "
            f"({1e3 * r['time_dense_worst_s']:.0f}) | "
            f"{1e3 * r['time_farneback_s']:.0f} | {1e3 * r['time_dis_s']:.0f} |"
        )
    sparse_ok = all(
        r["sparse_epe"] < r["sparse_epe_pyrlk"] and r["points"] >= r["points_lk"]
        for r in rows
    )
    dense_ok = all(r["dense_epe"] < r["dense_epe_farneback"] for r in rows)
    dis_ok = all(r["dense_epe"] <= r["dense_epe_dis"] for r in rows)
    print(
        f"\nsparse EPE below PyrLK's on every sequence: {sparse_ok}; "
        f"dense EPE below Farneback's on every sequence: {dense_ok}; "
        f"dense EPE at most DIS's on every sequence: {dis_ok}"
    )
    if args.json:
        result = {
            "machine": machine,
            "opencv": cv2.__version__,
            "detector": args.detector,
            "backend": args.backend,
            "repeat": args.repeat,
            "rows": rows,
        }
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
