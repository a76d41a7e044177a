"""Middlebury stereo: vision_cuts (expansion, Ishikawa, Ishikawa pyramid) against
cv2.StereoSGBM.

Protocol (DESIGN.md, "Evaluation protocols: Stereo"): left view as reference, bad-t =
% of the pixels with known GT whose error exceeds t px, invalid output counted as bad.
SGBM: mode HH, blockSize 5, P1 = 8*3*25, P2 = 32*3*25, numDisparities = max_disp
rounded up to a multiple of 16, minDisparity 0; its fixed-point output is divided by
16 and its negative (invalid) values count as bad.

Times are end to end (images in, disparity out, as NumPy arrays; on the GPU also with
CuPy arrays in and out). Each of our (method, backend) runs once untimed first (kernel
compilation, numba), then ``--repeat`` times (median and worst; default 5 on the GPU, 1
on the CPU); SGBM: median of 5.
With the GPU among the backends, a breakdown on tsukuba follows: device milliseconds
of the cost volume, the quantised costs and weights, the solve (moves, cuts, cycles,
per cut), for several ``moves_per_cut`` and ``tol`` settings.

Usage::

    python benchmarks/eval_stereo.py [--data DIR] [--sets tsukuba venus ...]
        [--methods expansion ishikawa ishikawa_pyramid sgbm] [--backend cpu gpu]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time

import numpy as np

from vision_cuts import stereo_disparity
from vision_cuts._backend import gpu_name, machine_description
from vision_cuts.datasets import middlebury as mb
from vision_cuts.stereo import GPU_MOVES_PER_CUT
from vision_cuts.stereo import METHODS as STEREO_METHODS

METHODS = (*STEREO_METHODS, "sgbm")
# pairs that ship with scikit-image (no download, no VISION_CUTS_DATA)
BUILT_IN = ("motorcycle",)


def load_sample(name: str, data: str | None) -> mb.StereoSample:
    """A shared Middlebury set, or ``motorcycle``: scikit-image's Middlebury 2014
    motorcycle pair (741 x 500, GT in px, infinite where unknown; searched up to its
    largest GT disparity rounded up, 60)."""
    if name != "motorcycle":
        return mb.load_stereo(name, data)
    import skimage.data

    left, right, gt = skimage.data.stereo_motorcycle()
    gt = np.where(np.isfinite(gt), gt, np.nan).astype(np.float32)
    return mb.StereoSample(left, right, gt, 1, int(np.ceil(np.nanmax(gt))))


def sgbm_disparity(left: np.ndarray, right: np.ndarray, max_disp: int) -> np.ndarray:
    """cv2.StereoSGBM with the protocol's parameters; invalid output is -1."""
    import cv2

    num = int(np.ceil((max_disp + 1) / 16.0)) * 16
    matcher = cv2.StereoSGBM_create(
        minDisparity=0,
        numDisparities=num,
        blockSize=5,
        P1=8 * 3 * 25,
        P2=32 * 3 * 25,
        mode=cv2.STEREO_SGBM_MODE_HH,
    )
    raw = matcher.compute(
        np.ascontiguousarray(left[..., ::-1]), np.ascontiguousarray(right[..., ::-1])
    )
    d = raw.astype(np.float32) / 16.0
    d[raw < 0] = -1.0
    return d


def run_once(sample: mb.StereoSample, method: str, backend: str, **kw) -> np.ndarray:
    if method == "sgbm":
        return sgbm_disparity(sample.left, sample.right, sample.max_disp)
    return stereo_disparity(
        sample.left,
        sample.right,
        max_disparity=sample.max_disp,
        method=method,
        backend=backend,
        **kw,
    )


def cupy_in_times(
    sample: mb.StereoSample, method: str, repeat: int, **kw
) -> tuple[float, float]:
    """Median and worst seconds of ``stereo_disparity`` with the pair as CuPy arrays
    (uploaded once before; the disparity stays on the device, synchronised)."""
    import cupy

    left, right = cupy.asarray(sample.left), cupy.asarray(sample.right)
    call = lambda: stereo_disparity(  # noqa: E731
        left, right, max_disparity=sample.max_disp, method=method, **kw
    )
    call()
    times = []
    for _ in range(max(1, repeat)):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        call()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times)


def run(
    sample: mb.StereoSample, method: str, backend: str, repeat: int, warm: set, **kw
) -> tuple[np.ndarray, float, float]:
    """Disparity, median and worst seconds of ``repeat`` runs (one untimed run first
    per (method, backend))."""
    if (method, backend) not in warm:
        run_once(sample, method, backend, **kw)
        warm.add((method, backend))
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        d = run_once(sample, method, backend, **kw)
        times.append(time.perf_counter() - t0)
    return d, statistics.median(times), max(times)


def gpu_breakdown(name: str, sample: mb.StereoSample, repeat: int = 5) -> list[dict]:
    """Device times of the GPU expansion's phases on one set, for several settings."""
    import cupy as cp

    from vision_cuts import stereo as st

    def sync() -> None:
        cp.cuda.get_current_stream().synchronize()

    out = []
    variants = [(1, 0.0), (1, 1e-3), (2, 0.0), (4, 0.0), (4, 1e-3), (8, 0.0)]
    for per_cut, tol in variants:
        runs = []
        for i in range(repeat + 1):  # the first run is a warm-up
            stats: dict = {}
            sync()
            t0 = time.perf_counter()
            lp, rp = st._check_pair(
                cp.asarray(sample.left), cp.asarray(sample.right), cp
            )
            cost = st.stereo_cost_volume(lp, rp, sample.max_disp, backend="gpu")
            sync()
            t1 = time.perf_counter()
            c = cp.rint(cost * 100.0).astype(cp.int32)
            w = cp.rint(st.stereo_weights(lp, smoothness=0.2) * 100.0).astype(cp.int32)
            sync()
            t2 = time.perf_counter()
            d = st.solve_disparity(
                c, w, backend="gpu", moves_per_cut=per_cut, tol=tol, stats=stats
            )
            sync()
            t3 = time.perf_counter()
            disp = d.astype(cp.float32).get()
            t4 = time.perf_counter()
            if i:
                runs.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, stats, disp))
        med = {
            k: statistics.median(r[j] for r in runs) * 1e3
            for j, k in enumerate(
                ("cost_ms", "weights_ms", "solve_ms", "download_ms", "total_ms")
            )
        }
        stats = runs[-1][5]
        row = {
            "set": name,
            "moves_per_cut": per_cut,
            "tol": tol,
            **{k: round(v, 3) for k, v in med.items()},
            "cycles": stats["cycles"],
            "cuts": stats["cuts"],
            "moves": stats["moves"],
            "ms_per_cut": round(med["solve_ms"] / max(1, stats["cuts"]), 3),
            "ms_per_move": round(med["solve_ms"] / max(1, stats["moves"]), 3),
            "energy": stats["energies"][-1],
            "bad1": mb.bad_pixel_rate(runs[-1][6], sample.gt_disparity, 1.0),
            "bad2": mb.bad_pixel_rate(runs[-1][6], sample.gt_disparity, 2.0),
        }
        out.append(row)
        print(
            f"{name} B={per_cut} tol={tol:g}: total {row['total_ms']:.1f} ms "
            f"(cost {row['cost_ms']:.2f}, weights {row['weights_ms']:.2f}, solve "
            f"{row['solve_ms']:.1f} = {row['cuts']} cuts x {row['ms_per_cut']:.2f} ms, "
            f"{row['moves']} moves, {row['cycles']} cycles, download "
            f"{row['download_ms']:.2f})  energy {row['energy']}  bad-1.0 "
            f"{row['bad1']:.2f}%  bad-2.0 {row['bad2']:.2f}%",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="folder holding middlebury_stereo/")
    ap.add_argument(
        "--sets",
        nargs="+",
        default=[*mb.stereo_names(), *BUILT_IN],
        help="shared Middlebury sets and motorcycle (scikit-image's; no download)",
    )
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument(
        "--backend", nargs="+", default=["cpu"], choices=("auto", "cpu", "gpu")
    )
    ap.add_argument("--repeat", type=int, default=None, help="timed runs (median)")
    ap.add_argument(
        "--moves-per-cut",
        type=int,
        default=None,
        help="expansion moves cut together (default: ours, 1 on the CPU, 4 on the GPU)",
    )
    ap.add_argument(
        "--tol", type=float, default=None, help="expansion stopping tol (default: ours)"
    )
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    ours = [m for m in args.methods if m != "sgbm"]
    columns = [(m, b) for m in ours for b in args.backend]
    if "sgbm" in args.methods:
        columns.append(("sgbm", "cpu"))
    kw = {}
    if args.moves_per_cut is not None:
        kw["moves_per_cut"] = args.moves_per_cut
    if args.tol is not None:
        kw["tol"] = args.tol
    gpu = gpu_name() if "gpu" in args.backend else None
    print(f"machine: {machine_description()}" + (f"; GPU: {gpu}" if gpu else ""))
    print(f"options: {kw or 'defaults'}", flush=True)
    rows = []
    warm: set = set()
    for name in args.sets:
        sample = load_sample(name, args.data)
        for method, backend in columns:
            if method == "sgbm":
                repeat = args.repeat or 5
            else:
                repeat = args.repeat or (5 if backend == "gpu" else 1)
            extra = {} if method == "sgbm" else kw
            d, secs, worst = run(sample, method, backend, repeat, warm, **extra)
            row = {
                "set": name,
                "method": method,
                "backend": backend,
                "bad1": mb.bad_pixel_rate(d, sample.gt_disparity, 1.0),
                "bad2": mb.bad_pixel_rate(d, sample.gt_disparity, 2.0),
                "time_s": secs,
                "worst_s": worst,
                "max_disp": sample.max_disp,
                "shape": list(sample.left.shape[:2]),
            }
            cupy_in = ""
            if backend == "gpu":  # the same call with CuPy arrays in (and out)
                med_c, worst_c = cupy_in_times(sample, method, repeat, **extra)
                row["time_cupy_s"], row["worst_cupy_s"] = med_c, worst_c
                cupy_in = f"; CuPy in {med_c * 1e3:.1f} (worst {worst_c * 1e3:.1f})"
            rows.append(row)
            print(
                f"{name:8s} {method:16s} {backend:4s} bad-1.0 {row['bad1']:6.2f}%  "
                f"bad-2.0 {row['bad2']:6.2f}%  {secs * 1e3:9.1f} ms (worst "
                f"{worst * 1e3:.1f}){cupy_in}",
                flush=True,
            )
    labels = [f"{m}/{b}" if m != "sgbm" else m for m, b in columns]
    means = {}
    for (method, backend), label in zip(columns, labels, strict=True):
        sel = [r for r in rows if r["method"] == method and r["backend"] == backend]
        means[label] = {
            k: float(np.mean([r[k] for r in sel])) for k in ("bad1", "bad2", "time_s")
        }
    print("\nbad-1.0 / bad-2.0 % and ms; x = time / SGBM time")
    print("set       " + "".join(f"{lab:>32s}" for lab in labels))
    for name in args.sets:
        cells = []
        sg = next((r for r in rows if r["set"] == name and r["method"] == "sgbm"), None)
        for method, backend in columns:
            r = next(
                r
                for r in rows
                if r["set"] == name
                and r["method"] == method
                and r["backend"] == backend
            )
            ratio = f"{r['time_s'] / sg['time_s']:6.0f}x" if sg else ""
            cells.append(
                f"{r['bad1']:7.2f}{r['bad2']:7.2f}{r['time_s'] * 1e3:10.1f}{ratio:>8s}"
            )
        print(f"{name:10s}" + "".join(cells))
    print(
        f"{'mean':10s}"
        + "".join(
            f"{m['bad1']:7.2f}{m['bad2']:7.2f}{m['time_s'] * 1e3:10.1f}{'':8s}"
            for m in means.values()
        )
    )
    breakdown = []
    if "gpu" in args.backend and not args.no_breakdown and "tsukuba" in args.sets:
        print("\nGPU expansion on tsukuba, device time by phase (median):")
        breakdown = gpu_breakdown("tsukuba", mb.load_stereo("tsukuba", args.data))
    result = {
        "machine": machine_description(),
        "gpu": gpu,
        "backends": args.backend,
        "options": {
            "tol": inspect.signature(stereo_disparity).parameters["tol"].default,
            "moves_per_cut": f"1 on the CPU, {GPU_MOVES_PER_CUT} on the GPU",
            **kw,
        },
        "rows": rows,
        "means": means,
        "gpu_breakdown": breakdown,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main()
