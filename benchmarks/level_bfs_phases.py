"""Where the level BFS's time goes, phase by phase (GPU; gbfs_level built with LV_PROF).

Solves segmentation energies of scikit-image pictures (CuPy arrays in) with the grid
solver compiled with ``LV_PROF=1``: thread 0 of every gbfs_level block then stamps each
phase (global timer and SM clock at its start, when its levels end, at its arrival at
the grid barrier and when it sees the barrier complete) and the levels it ran. For each
energy it prints the phases of the solve's relabels (the sum of their walls, and of
the levels of each phase's slowest block), the clock cycles a level of a busy block
takes, and the medians of the phase boundary: how far apart the blocks start a phase,
how long the last block to arrive took, the wait for the barrier and the way from it
to the next phase.

    python3 -P benchmarks/level_bfs_phases.py --cases astronaut:8:1414 coffee:8:1414 \\
        --levels 31 22 --json phases.json
"""

from __future__ import annotations

import argparse
import gc
import json

import numpy as np

_LP, _LB, _LP_PH = (
    32,
    160,
    64,
)  # launches, blocks and phases recorded (LV_PL, LV_PB, LV_PP)


def _view(module, name, dtype, shape):
    import cupy

    return cupy.ndarray(shape, dtype, memptr=module.get_global(name))


def modules_with(name: str) -> list:
    """The loaded CuPy modules that hold the device variable ``name`` (those built
    with the profiling define that declares it)."""
    import cupy

    found = []
    for obj in gc.get_objects():
        if isinstance(obj, cupy.RawModule):
            try:
                obj.get_global(name)
            except Exception:  # not built with that define
                continue
            found.append(obj)
    return found


def _prof_modules():
    return modules_with("lv_prof_launch")  # gbfs_level modules built with LV_PROF


def segmentation_arrays(name: str, side: int, conn: int) -> list:
    """The source, sink and arc arrays (CuPy, C-contiguous) of the segmentation energy
    of scikit-image's picture ``name`` resized to ``side`` x ``side``."""
    import cupy
    import cv2
    import skimage.data

    import vision_cuts as vc
    from vision_cuts.datasets.synthetic import segmentation_problem

    img = getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    img = cv2.resize(img, (side, side), interpolation=cv2.INTER_CUBIC)
    u, w = segmentation_problem(img, connectivity=conn)
    e = vc.grid_energy(cupy.asarray(u), weights=cupy.asarray(w), connectivity=conn)
    return [cupy.ascontiguousarray(a) for a in (e.source, e.sink, e.edges)]


def profile(name: str, conn: int, side: int, levels: int, ghz: float) -> dict:
    import cupy

    import vision_cuts as vc
    import vision_cuts._maxflow_gpu as mg

    mg._BFS_LEVEL_L = levels
    arrays = segmentation_arrays(name, side, conn)
    for _ in range(3):
        vc.maxflow_grid(*arrays, backend="gpu")
    cupy.cuda.runtime.deviceSynchronize()
    mods = _prof_modules()
    for m in mods:  # (stamps of an earlier energy's deeper relabels must not remain)
        _view(m, "lv_prof_launch", cupy.int32, (1,))[0] = 0
        _view(m, "lv_prof", cupy.uint64, (_LP * _LB * _LP_PH * 8,)).fill(0)
        _view(m, "lv_profk", cupy.uint64, (_LP * _LB * 4,)).fill(0)
    cupy.cuda.runtime.deviceSynchronize()
    cut = vc.maxflow_grid(*arrays, backend="gpu")
    cupy.cuda.runtime.deviceSynchronize()
    mod, launches = None, 0
    for m in mods:
        launches = int(_view(m, "lv_prof_launch", cupy.int32, (1,))[0].get())
        if launches:
            mod = m
            break
    if mod is None:
        raise SystemExit("no gbfs_level launch was recorded (is the level BFS used?)")
    ph = (
        _view(mod, "lv_prof", cupy.uint64, (_LP, _LB, _LP_PH, 8)).get().astype(np.int64)
    )
    kl = _view(mod, "lv_profk", cupy.uint64, (_LP, _LB, 4)).get().astype(np.int64)
    blocks = int((kl[0, :, 0] > 0).sum())
    walls_ns = levels_ns = 0.0
    phases = level_count = 0
    cycles = []
    bound = []
    for launch in range(min(launches, _LP)):
        p = ph[launch, :blocks]
        n = int((p[0, :, 0] > 0).sum())
        phases += n
        for q in range(n):
            lv = p[:, q, 2] - p[:, q, 1]
            b = int(np.argmax(lv))
            levels_ns += lv[b] / ghz
            ran = int(p[b, q, 5]) - 1
            level_count += ran
            if ran == levels:
                cycles.append(lv[b] / ran)
            if q + 1 < n:
                start, arrive, seen = p[:, q, 0], p[:, q, 6], p[:, q, 7]
                nxt = p[:, q + 1, 0]
                last = int(np.argmax(arrive))
                walls_ns += nxt.min() - start.min()
                bound.append(
                    (
                        start.max() - start.min(),
                        arrive.max() - start[last],
                        np.median(seen) - arrive.max(),
                        np.median(nxt - seen),
                        nxt.min() - start.min(),
                    )
                )
    bound = np.array(bound, dtype=float).reshape(-1, 5)  # (no boundary: no rows)
    names = (
        "start skew",
        "last arrival's phase",
        "barrier seen",
        "to next phase",
        "wall",
    )
    st = cut.stats
    return {
        "energy": f"{name} {side}x{side} {conn}-connected, L = {levels}",
        "solve_ms": st["time_s"] * 1e3,
        "global_relabels": st["global_relabels"],
        "bfs_level_defer": st.get("bfs_level_defer"),
        "phase_walls_us": walls_ns / 1e3,  # every phase but each launch's last
        "levels_us": levels_ns / 1e3,
        "phases": phases,
        "levels": level_count,
        "cycles_a_level": float(np.median(cycles)) if cycles else None,
        "boundary_median_ns": {
            nm: float(np.median(bound[:, i])) if len(bound) else None
            for i, nm in enumerate(names)
        },
        "boundary_p90_ns": {
            nm: float(np.percentile(bound[:, i], 90)) if len(bound) else None
            for i, nm in enumerate(names)
        },
    }


def _ns(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases",
        nargs="+",
        default=["astronaut:8:1414"],
        help="picture:connectivity:side",
    )
    ap.add_argument("--levels", type=int, nargs="+", default=[31])
    ap.add_argument(
        "--ghz", type=float, default=1.98, help="SM clock, to turn cycles into time"
    )
    ap.add_argument(
        "--defer",
        type=int,
        choices=(0, 1),
        default=None,
        help="force LV_DEFER (default: the solver's choice)",
    )
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import vision_cuts._maxflow_gpu as mg

    mg._EXTRA_DEFINES["LV_PROF"] = 1
    if args.defer is not None:
        mg._LV_DEFER = bool(args.defer)
    out = []
    for case in args.cases:
        name, conn, side = case.split(":")
        for lv in args.levels:
            r = profile(name, int(conn), int(side), lv, args.ghz)
            out.append(r)
            b = r["boundary_median_ns"]
            head = f"{r['energy']}: solve {r['solve_ms']:.2f} ms, "
            head += f"{r['phases']} phases, walls {r['phase_walls_us']:.0f} us "
            head += "(each launch's last left out), "
            head += f"levels of the slowest block {r['levels_us']:.0f} us; "
            cyc = r["cycles_a_level"]  # (None where no phase ran all its levels)
            head += "n/a" if cyc is None else f"{cyc:.0f}"
            head += " cycles a level; boundary (median ns): "
            print(head + ", ".join(f"{k} {_ns(v)}" for k, v in b.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
