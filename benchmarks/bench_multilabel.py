"""minimize_labels against PyMaxflow's fastmin and pyGCO (expansion and swap), same run.

Problem: Potts denoising of a grey picture quantised to ``--labels`` levels (scikit-
image's camera, resized to each ``--sizes`` side): unary ``|level - noisy pixel|``
(integers), Potts weight ``--weight``, 4-connected. Both start from the cheapest unary
label and run at most 5 cycles; the energies are ours (``label_energy``) for both.

    python benchmarks/bench_multilabel.py [--sizes 256 512] [--labels 16]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def problem(side: int, nlabels: int, seed: int = 0) -> np.ndarray:
    import cv2
    import skimage.data

    img = cv2.resize(skimage.data.camera(), (side, side)).astype(np.float64)
    noisy = img + np.random.default_rng(seed).normal(0, 25, img.shape)
    levels = np.linspace(0, 255, nlabels)
    return np.rint(np.abs(noisy[..., None] - levels) / 4).astype(np.int64)


def stereo_problem(nlabels: int) -> tuple:
    """A stereo cost volume of scikit-image's Middlebury motorcycle pair (500 x 741,
    disparities 0-62 in its ground truth): disparities 0 .. nlabels - 1 at full size
    when ``nlabels`` > 32, else the pair halved; unary = the sum over a 3 x 3 window
    of min(|left(x) - right(x - d)|, 20) on grey levels (right pixels left of the
    picture count as the truncation), integers; returns (unary, scale)."""
    import cv2
    import skimage.data

    left, right, _ = skimage.data.stereo_motorcycle()
    scale = 1 if nlabels > 32 else 2
    g = [
        cv2.cvtColor(im, cv2.COLOR_RGB2GRAY).astype(np.int32)[::scale, ::scale]
        for im in (left, right)
    ]
    h, w = g[0].shape
    cost = np.full((h, w, nlabels), 20, dtype=np.int32)
    for d in range(nlabels):
        if d < w:
            cost[:, d:, d] = np.minimum(np.abs(g[0][:, d:] - g[1][:, : w - d]), 20)
    box = np.stack(
        [cv2.boxFilter(cost[..., d].astype(np.float32), -1, (3, 3), normalize=False)
         for d in range(nlabels)], axis=-1,
    )  # fmt: skip
    return np.rint(box).astype(np.int64), scale


def volume_problem(side: int, nlabels: int, seed: int = 0) -> np.ndarray:
    """A ``side``^3 volume of ``nlabels`` levels: a smooth random field (Gaussian
    blobs) quantised to the levels, Gaussian noise (sigma 1.5 levels); unary = 4 x
    |level - noisy value| in level units, integers."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    field = ndimage.gaussian_filter(rng.normal(size=(side,) * 3), side / 10)
    field = (field - field.min()) / (np.ptp(field) + 1e-12) * (nlabels - 1)
    noisy = np.round(field) + rng.normal(0, 1.5, field.shape)
    levels = np.arange(nlabels)
    return np.rint(4 * np.abs(noisy[..., None] - levels)).astype(np.int64)


def _grid_edges(shape: tuple) -> np.ndarray:
    """The 4- / 6-connected neighbour pairs of a C-order grid, (E, 2) int32, the
    smaller index first (pyGCO's general-graph form)."""
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    pairs = []
    for axis in range(len(shape)):
        a = np.take(idx, np.arange(shape[axis] - 1), axis=axis).ravel()
        b = np.take(idx, np.arange(1, shape[axis]), axis=axis).ravel()
        pairs.append(np.stack([a, b], axis=1))
    return np.concatenate(pairs).astype(np.int32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--labels", type=int, default=16)
    ap.add_argument("--weight", type=int, default=6)
    ap.add_argument(
        "--problem",
        choices=["potts", "stereo", "volume"],
        default="potts",
        help="potts: the denoising problem above; stereo: truncated linear "
        "(min(|a - b|, --cap) x --weight) on the motorcycle pair's cost volume with "
        "--labels disparities (--sizes ignored); volume: the same model on "
        "--sizes^3 volumes (6-connected; pyGCO through its general-graph call)",
    )
    ap.add_argument("--cap", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["expansion", "swap"])
    ap.add_argument(
        "--baselines",
        nargs="*",
        default=["pymaxflow", "pygco"],
        choices=["pymaxflow", "pygco"],
        help="baselines to run (both by default; leave the slower one out on "
        "problems where it takes minutes)",
    )
    ap.add_argument(
        "--backend",
        nargs="+",
        default=["cpu"],
        choices=["cpu", "gpu"],
        help="backends of minimize_labels to run (the first one's columns are "
        "'ours'; each also gets s_<backend> and energy_<backend>)",
    )
    ap.add_argument(
        "--gpu-moves-per-cut",
        type=int,
        nargs="+",
        default=[1],
        help="moves_per_cut of the GPU runs (each B > 1 adds the columns "
        "s_gpu<B> and energy_gpu<B>)",
    )
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    runs = [
        (be if b == 1 else f"{be}{b}", be, b)
        for be in args.backend
        for b in (args.gpu_moves_per_cut if be == "gpu" else [1])
    ]

    from maxflow import fastmin

    from vision_cuts import label_energy, minimize_labels
    from vision_cuts._backend import machine_description
    from vision_cuts.multilabel import pairwise_matrix

    print(f"machine: {machine_description()}")
    rows = []
    if args.problem == "potts":
        v = pairwise_matrix("potts", args.labels) * args.weight
        cases = [(f"{side}x{side}", problem(side, args.labels)) for side in args.sizes]
    elif args.problem == "stereo":
        v = pairwise_matrix(("truncated_linear", args.cap), args.labels) * args.weight
        u, scale = stereo_problem(args.labels)
        cases = [(f"motorcycle {u.shape[1]}x{u.shape[0]}", u)]
    else:
        v = pairwise_matrix(("truncated_linear", args.cap), args.labels) * args.weight
        cases = [(f"{n}^3", volume_problem(n, args.labels)) for n in args.sizes]
    for name, u in cases:
        start = np.argmin(u, axis=-1)
        for method, theirs_fn in (
            ("expansion", fastmin.aexpansion_grid),
            ("swap", fastmin.abswap_grid),
        ):
            if method not in args.methods:
                continue
            theirs, t_theirs = None, float("nan")
            if "pymaxflow" in args.baselines:
                t0 = time.perf_counter()
                theirs = theirs_fn(u.astype(np.float64), v.astype(np.float64),
                                   max_cycles=5, labels=start.copy())  # fmt: skip
                t_theirs = time.perf_counter() - t0
            row = {"size": name, "labels": args.labels, "method": method}
            for i, (key, be, per_cut) in enumerate(runs):
                # warm-up (compilation, kernels) on a small piece of the same problem;
                # on the GPU one cycle of the whole problem (the solver's kernels and
                # buffers depend on the grid's size, stacked moves included)
                kw = {"method": method, "backend": be, "moves_per_cut": per_cut}
                minimize_labels(u[:8, :8], v, **kw)
                if be == "gpu":
                    minimize_labels(u, v, max_cycles=1, **kw)
                t0 = time.perf_counter()
                ours = minimize_labels(u, v, max_cycles=5, **kw)
                t_ours = time.perf_counter() - t0
                row[f"s_{key}"], row[f"energy_{key}"] = t_ours, ours.energy
                if i == 0:
                    row["s_ours"], row["energy_ours"] = t_ours, ours.energy
            row["energy_pymaxflow"] = (
                None if theirs is None else label_energy(u, theirs, v)
            )
            row["s_pymaxflow"] = t_theirs
            try:
                import gco
            except ImportError:
                gco = None
            if "pygco" not in args.baselines:
                gco = None
            if gco is not None and u.ndim == 3:  # pyGCO: its own start, 5 cycles
                t0 = time.perf_counter()
                lab = gco.cut_grid_graph_simple(
                    u.astype(np.int32), v.astype(np.int32), n_iter=5, connect=4,
                    algorithm=method,
                )  # fmt: skip
            elif gco is not None:  # 3-D: the general-graph call, unit edge weights
                # (float64: with int32 arrays gco-wrapper 3.0.9's general-graph call
                # returns labellings worse than the unary argmin; its float path
                # quantises the costs itself)
                edges = _grid_edges(u.shape[:-1])
                t0 = time.perf_counter()
                flat = u.reshape(-1, u.shape[-1]).astype(float)
                lab = gco.cut_general_graph(
                    edges, np.ones(len(edges)), flat, v.astype(float), n_iter=5,
                    algorithm=method,
                )  # fmt: skip
            if gco is not None:
                row["s_pygco"] = time.perf_counter() - t0
                row["energy_pygco"] = label_energy(u, lab.reshape(u.shape[:-1]), v)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| size | method | energy ours | PyMaxflow | pyGCO | ours s | PyMaxflow s |"
          " pyGCO s | x faster one |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        faster = min(
            (t for t in (r["s_pymaxflow"], r.get("s_pygco", nan)) if t == t),
            default=nan,
        )
        for be, _, _ in runs[1:]:
            print(
                f"  {r['size']} {r['method']} {be}: {r[f's_{be}']:.3f} s, energy "
                f"{r[f'energy_{be}']}, {faster / r[f's_{be}']:.1f}x the faster baseline"
            )
        print(
            f"| {r['size']} | {r['method']} | {r['energy_ours']} | "
            f"{r['energy_pymaxflow']} | {r.get('energy_pygco', '-')} | "
            f"{r['s_ours']:.2f} | {r['s_pymaxflow']:.2f} | "
            f"{r.get('s_pygco', nan):.2f} | {faster / r['s_ours']:.2f}x |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_description(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
