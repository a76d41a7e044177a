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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--labels", type=int, default=16)
    ap.add_argument("--weight", type=int, default=6)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    from maxflow import fastmin

    from vision_cuts import label_energy, minimize_labels
    from vision_cuts._backend import machine_description
    from vision_cuts.multilabel import pairwise_matrix

    print(f"machine: {machine_description()}")
    rows = []
    v = pairwise_matrix("potts", args.labels) * args.weight
    for side in args.sizes:
        u = problem(side, args.labels)
        start = np.argmin(u, axis=-1)
        for method, theirs_fn in (
            ("expansion", fastmin.aexpansion_grid),
            ("swap", fastmin.abswap_grid),
        ):
            t0 = time.perf_counter()
            theirs = theirs_fn(u.astype(np.float64), v.astype(np.float64),
                               max_cycles=5, labels=start.copy())  # fmt: skip
            t_theirs = time.perf_counter() - t0
            minimize_labels(u[:8, :8], v, method=method, backend="cpu")  # warm-up
            t0 = time.perf_counter()
            ours = minimize_labels(u, v, method=method, max_cycles=5, backend="cpu")
            t_ours = time.perf_counter() - t0
            row = {
                "size": f"{side}x{side}",
                "labels": args.labels,
                "method": method,
                "energy_ours": ours.energy,
                "energy_pymaxflow": label_energy(u, theirs, v),
                "s_ours": t_ours,
                "s_pymaxflow": t_theirs,
            }
            try:
                import gco
            except ImportError:
                gco = None
            if gco is not None:  # pyGCO (gco-wrapper): its own start, 5 cycles
                t0 = time.perf_counter()
                lab = gco.cut_grid_graph_simple(
                    u.astype(np.int32), v.astype(np.int32), n_iter=5, connect=4,
                    algorithm=method,
                )  # fmt: skip
                row["s_pygco"] = time.perf_counter() - t0
                row["energy_pygco"] = label_energy(u, lab.reshape(u.shape[:-1]), v)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| size | method | energy ours | PyMaxflow | pyGCO | ours s | PyMaxflow s |"
          " pyGCO s | x faster one |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        faster = min(r["s_pymaxflow"], r.get("s_pygco", nan))
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
