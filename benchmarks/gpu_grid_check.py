"""GPU grid max-flow: randomized differential test against the CPU solver, and timings.

Part 1 (``--diff N``): N random 2-D and 3-D grids (1 x 1 up to ~300 x 300 and 40^3; zero
capacities, directed arcs, capacities near int32 max with arc-pair sums <= 2**31 - 1,
small tiles that put most arcs on a tile border, random solver settings), each solved
once on the CPU (``vision_cuts._maxflow_cpu.maxflow_grid_cpu``) and ``--repeats`` times
on the GPU (``--jobs N``: their kernels compiled first in N processes). A
case passes when every GPU flow equals the CPU flow and the capacity of every GPU cut
(``grid_graph(...).energy(labels)``) equals the flow. Races would show up as GPU answers
that vary between repeats.

``--diag N`` does the same for N grids with diagonal arcs (8-connected 2-D, 18- and
26-connected 3-D) and the settings those take (``random_diag_case``).

Part 2 (``--bench``): solve time of segmentation energies (scikit-image's astronaut
resized to ``--sizes`` megapixels, ``datasets.synthetic.segmentation_problem``) and
noisy volumes (``volume_problem(n)`` for ``--volumes``), device arrays in, after one
warm-up, median of ``--runs`` runs (the solver synchronises before it returns). Flows
are checked against the CPU solver (``--cpu-max`` nodes at most) and every cut against
its flow. ``--configs`` times other solver settings (see ``parse_configs``);
``--profile`` adds one solve per setting with CUDA-event phase times.

Usage (vision_cuts installed, or importable with its ``kernels`` package; in a plain
source tree ``vision_cuts.kernels`` does not exist, see benchmarks/NOTES_gpu_grid.md)::

    python -P benchmarks/gpu_grid_check.py --diff 300 --repeats 3 --seed 6 7 --jobs 16
    python -P benchmarks/gpu_grid_check.py --bench --profile --sizes 0.3 2 4 8 \
        --volumes 128 256 --runs 7 --configs "def;def,tail2;def,scan1"
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

# an installed vision_cuts (with vision_cuts.kernels) wins over the source tree
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    from vision_cuts.datasets import synthetic
except ImportError:  # source tree: datasets/ is a top-level folder
    from datasets import synthetic

INT32_MAX = 2**31 - 1


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------- problems
def _pair_slices(nd, d):
    ax = nd - 1 - d
    tail = [slice(None)] * nd
    head = [slice(None)] * nd
    tail[ax] = slice(None, -1)
    head[ax] = slice(1, None)
    return tuple(tail), tuple(head)


def big_graph(shape, rng):
    """Capacities near int32 max; forward + backward of every arc pair <= 2**31 - 1."""
    nd = len(shape)
    top = INT32_MAX
    s = rng.integers(top // 2, top, size=shape, endpoint=True)
    t = rng.integers(top // 2, top, size=shape, endpoint=True)
    s[rng.random(shape) < 0.3] = 0
    t[rng.random(shape) < 0.3] = 0
    e = np.zeros((2 * nd, *shape), dtype=np.int64)
    for d in range(nd):
        tail, head = _pair_slices(nd, d)
        f = rng.integers(0, top, size=e[2 * d][tail].shape, endpoint=True)
        share = rng.random(f.shape)
        fwd = (f * share).astype(np.int64)
        bwd = f - fwd
        fwd[rng.random(f.shape) < 0.2] = 0
        e[2 * d][tail] = fwd
        e[2 * d + 1][head] = bwd
    return s.astype(np.int32), t.astype(np.int32), e.astype(np.int32)


def _random_paces(kw, rng):
    """Random local rounds and sweeps of a differential case (each knob at 30 %)."""
    for name, values in (
        ("local_iters", [1, 2, 5, 100]),
        ("sweeps_per_relabel", [1, 2, 16]),
        ("tail_sweeps", [1, 3, 8]),
        ("tail_iters", [1, 4, 64]),
    ):
        if rng.random() < 0.3:
            kw[name] = int(rng.choice(values))


def random_case(i, rng):
    """(kind, shape, source, sink, edges, solver kwargs) of differential case i."""
    random_grid_graph = synthetic.random_grid_graph
    nd = 3 if i % 4 == 3 else 2
    r = rng.random()
    if nd == 2:
        if r < 0.1:
            shape = (1, 1)
        elif r < 0.6:
            shape = tuple(int(v) for v in rng.integers(1, 40, size=2))
        elif r < 0.9:
            shape = tuple(int(v) for v in rng.integers(30, 160, size=2))
        else:
            shape = tuple(int(v) for v in rng.integers(200, 301, size=2))
    else:
        if r < 0.6:
            shape = tuple(int(v) for v in rng.integers(1, 12, size=3))
        elif r < 0.9:
            shape = tuple(int(v) for v in rng.integers(8, 25, size=3))
        else:
            shape = tuple(int(v) for v in rng.integers(30, 41, size=3))
    kind = ["random", "random", "random", "big", "zeros", "sparse"][i % 6]
    if kind == "big":
        s, t, e = big_graph(shape, rng)
    elif kind == "zeros":
        s, t, e = random_grid_graph(shape, rng, high=50, density=0.5)
        which = rng.integers(0, 4)
        if which == 0:
            s[:] = 0
        elif which == 1:
            t[:] = 0
        elif which == 2:
            e[:] = 0
        else:
            s[:] = 0
            t[:] = 0
    elif kind == "sparse":
        s, t, e = random_grid_graph(
            shape,
            rng,
            high=int(rng.choice([2, 3, 5])),
            density=float(rng.uniform(0.2, 0.6)),
        )
    else:
        s, t, e = random_grid_graph(
            shape,
            rng,
            high=int(rng.choice([2, 10, 100, 10**5])),
            density=float(rng.uniform(0.3, 1.0)),
            directed=bool(rng.random() < 0.7),
        )
    kw = {}
    q = rng.random()
    if q < 0.35:  # small tiles: most arcs cross a tile border
        kw["tile"] = (4, 4, 1) if nd == 2 else (4, 2, 2)
    elif q < 0.5:
        kw["tile"] = (8, 2, 1) if nd == 2 else (8, 4, 4)
    if rng.random() < 0.4:  # tiles of the global relabel of their own
        choices = (
            [(4, 4, 1), (8, 2, 1), (2, 1, 1), (32, 8, 1), (16, 16, 1)]
            if nd == 2
            else [(4, 2, 2), (8, 4, 4), (2, 1, 1), (16, 8, 4), (32, 4, 2)]
        )
        kw["bfs_tile"] = choices[int(rng.integers(len(choices)))]
    _random_paces(kw, rng)
    q = rng.random()
    if q < 0.2:  # the other BFS relaxation, either push register budget
        kw["defines"] = {"BFS_SCAN": 1}
    elif q < 0.4:  # 2-D grids this small default to 1
        kw["defines"] = {"PR_MIN_BLOCKS": int(rng.choice([1, 2]))}
    if rng.random() < 0.3:  # a local relabel of each tile at local round 1, 2 or 6
        lr_at = int(rng.choice([1, 2, 6]))
        kw["defines"] = {**kw.get("defines", {}), "PR_LR_AT": lr_at}
    q = rng.random()
    if q < 0.2:  # host loop: read the active count after every round, or 3 ahead
        kw["_pipeline"] = 1
    elif q < 0.4:
        kw["_pipeline"] = 3
    if rng.random() < 0.1:
        kw["_reuse"] = False
    q = rng.random()  # path walks: never, in the tail (default), in every round
    if q < 0.2:
        kw["_walk"] = 0.0
    elif q < 0.6:
        kw["_walk"] = 2.0
    if rng.random() < 0.7:  # BFS launch: 0 gbfs_persistent, else gbfs_fused bits
        kw["bfs_mode"] = int(rng.integers(0, 64))
    q = rng.random()  # persistent push launches: never, in the tail, every round
    if q < 0.3:
        kw["_persist"] = 0.0
    elif q < 0.5:
        kw["_persist"] = 1 / 1024
    elif q < 0.8:
        kw["_persist"] = 2.0
    if rng.random() < 0.3:  # the level BFS's masks and count at every relabel
        kw["_track"] = False
    if nd == 2 and rng.random() < 0.4:  # the bit-parallel BFS (its own BFS tiles)
        kw["_bfs_warp"] = True
        kw.pop("bfs_tile", None)
    q = rng.random()  # 2-D: the level-synchronous BFS (default), off, L levels a phase
    if nd == 2 and q < 0.25:
        kw["_bfs_level"] = 0
    elif nd == 2 and q < 0.6:
        kw["_bfs_level"] = int(rng.choice([1, 2, 7, 16, 30, 31]))
        if rng.random() < 0.7:
            kw["bfs_mode"] = 0  # (other modes run gbfs_fused)
    if rng.random() < 0.5:  # incremental global relabels (need bfs_mode 0, no walks)
        kw["incremental_below"] = float(rng.choice([2.0, 1 / 1024, 0.05]))
        kw["bfs_mode"] = 0
        kw["_walk"] = 0.0
    return kind, shape, s, t, e, kw


def random_diag_case(i, rng):
    """(kind, shape, source, sink, edges, solver kwargs) of diagonal differential case
    i (``--diag``): 8-connected 2-D and 18- / 26-connected 3-D grids (small ones, up to
    ~200 x 200 and 25^3; zero capacities, capacities near int32 max with arc-pair sums
    <= 2**31 - 1, small tiles that put most arcs on a tile edge or corner) and the
    solver settings those grids take (the level BFS or the tile BFS, two colours with
    the corner pushes or four, corners of idle tiles skipped or not, ...)."""
    nd = 3 if i % 3 == 2 else 2
    k = 8 if nd == 2 else int(rng.choice([18, 26]))
    r = rng.random()
    if nd == 2:
        hi = 40 if r < 0.55 else 200
        shape = (1, 1) if r < 0.05 else tuple(int(v) for v in rng.integers(1, hi, 2))
    else:
        shape = tuple(int(v) for v in rng.integers(1, 12 if r < 0.6 else 26, size=3))
    kind = ["random", "random", "big", "zeros", "sparse"][i % 5]
    eshape = (k, *shape)
    if kind == "big":  # each entry <= (2**31 - 1) // 2: an arc pair's sum fits
        s = rng.integers(INT32_MAX // 2, INT32_MAX, shape, endpoint=True)
        t = rng.integers(INT32_MAX // 2, INT32_MAX, shape, endpoint=True)
        s = s * (rng.random(shape) < 0.7)
        t = t * (rng.random(shape) < 0.7)
        e = rng.integers(0, INT32_MAX // 2, eshape, endpoint=True)
        e = e * (rng.random(eshape) < 0.8)
    else:
        high = int(rng.choice([2, 3, 10, 100, 10**5]))
        low = 0.1 if kind == "sparse" else 0.5
        s = rng.integers(0, high, shape) * (rng.random(shape) < 0.5)
        t = rng.integers(0, high, shape) * (rng.random(shape) < 0.5)
        e = rng.integers(0, high, eshape) * (rng.random(eshape) < rng.uniform(low, 1))
        if kind == "zeros":
            [s, t, e][int(rng.integers(0, 3))][...] = 0
    s, t, e = (a.astype(np.int32) for a in (s, t, e))
    kw = {}
    q = rng.random()
    if q < 0.35:  # small tiles: most arcs cross a tile edge or corner
        kw["tile"] = (4, 4, 1) if nd == 2 else (4, 2, 2)
    elif q < 0.5:
        kw["tile"] = (8, 2, 1) if nd == 2 else (8, 4, 4)
    elif q < 0.6 and nd == 2:
        kw["tile"] = (32, 32, 1)
    if rng.random() < 0.3:
        choices = (
            [(4, 4, 1), (8, 2, 1), (2, 1, 1), (16, 16, 1)]
            if nd == 2
            else [(4, 2, 2), (8, 4, 4), (2, 1, 1), (16, 4, 4)]
        )
        kw["bfs_tile"] = choices[int(rng.integers(len(choices)))]
    _random_paces(kw, rng)
    if rng.random() < 0.3:  # the push kernel's register budget
        kw["defines"] = {"PR_MIN_BLOCKS": int(rng.choice([1, 2, 4]))}
    if nd == 2 and rng.random() < 0.2:  # the corner pushes of every corner
        kw["defines"] = {**kw.get("defines", {}), "PR_CORNER_FLAGS": 0}
    if nd == 2 and rng.random() < 0.2:  # four colours, no corner pushes
        kw["_corners"] = False
    q = rng.random()
    if q < 0.2:
        kw["_pipeline"] = 1
    elif q < 0.4:
        kw["_pipeline"] = 3
    if rng.random() < 0.1:
        kw["_reuse"] = False
    q = rng.random()  # persistent push launches: never, in the tail (default), always
    if q < 0.3:
        kw["_persist"] = 0.0
    elif q < 0.6:
        kw["persist_below"] = 10**9
    if rng.random() < 0.3:  # the level BFS's masks and count at every relabel
        kw["_track"] = False
    q = rng.random()  # 2-D: the level BFS (default), the tile BFS, L levels a phase
    if nd == 2 and q < 0.25:
        kw["_bfs_level"] = 0
    elif nd == 2 and q < 0.6:
        kw["_bfs_level"] = int(rng.choice([1, 2, 7, 16, 30, 31]))
    return kind, shape, s, t, e, kw


def _solver_with_knobs():
    """maxflow_grid_gpu taking ``defines`` (compile-time constants), ``_pipeline`` and
    ``_reuse`` (module settings of vision_cuts._maxflow_gpu) as extra keywords."""
    from vision_cuts import _maxflow_gpu

    def solve(
        *args,
        defines=None,
        _pipeline=None,
        _reuse=None,
        _walk=None,
        _persist=None,
        _bfs_warp=None,
        _bfs_level=None,
        _track=None,
        _corners=None,
        **kw,
    ):
        settings = {
            "_DIAG_CORNERS": _corners,
            "_PIPELINE": _pipeline,
            "_REUSE": _reuse,
            "_WALK_BELOW": _walk,
            "_PERSIST_BELOW": _persist,
            "_BFS_WARP": _bfs_warp,
            "_TRACK_MASKS": _track,
        }
        if _bfs_level is not None:  # 0: off, L: on, L levels a phase
            settings["_BFS_LEVEL"] = bool(_bfs_level)
            if _bfs_level:
                settings["_BFS_LEVEL_L"] = int(_bfs_level)
        settings = {k: v for k, v in settings.items() if v is not None}
        saved = {k: getattr(_maxflow_gpu, k) for k in settings}
        for k, v in settings.items():
            setattr(_maxflow_gpu, k, v)
        _maxflow_gpu._EXTRA_DEFINES.clear()
        _maxflow_gpu._EXTRA_DEFINES.update(defines or {})
        if isinstance(kw.get("incremental_below"), float):  # a fraction of the nodes
            kw["incremental_below"] = int(kw["incremental_below"] * args[0].size)
        try:
            return _maxflow_gpu.maxflow_grid_gpu(*args, **kw)
        finally:
            _maxflow_gpu._EXTRA_DEFINES.clear()
            for k, v in saved.items():
                setattr(_maxflow_gpu, k, v)

    return solve


def _compile_job(job):
    """Compile the kernel modules one solver setting needs (in a worker process)."""
    ndim, tile, bfs_tile, defines = job
    from vision_cuts import _maxflow_gpu

    _maxflow_gpu._EXTRA_DEFINES.clear()
    _maxflow_gpu._EXTRA_DEFINES.update(dict(defines))
    small = _maxflow_gpu._SMALL_2D_SCHEDULE["tile"]
    if tile is None:  # (the compile shape below is small)
        tile = small if ndim == 2 else _maxflow_gpu._TILES[ndim]
    if bfs_tile is None:
        default = tuple(tile) in (_maxflow_gpu._TILES[ndim], small)
        bfs_tile = _maxflow_gpu._BFS_TILES[ndim] if default else tile
    _maxflow_gpu._Solver((8,) * ndim, tuple(tile), tuple(bfs_tile))
    return job


def precompile(jobs, workers):
    """Fill CuPy's kernel cache for the given (ndim, tile, bfs_tile, defines items)
    settings in ``workers`` processes (the solves then load the compiled modules)."""
    import concurrent.futures
    import multiprocessing

    jobs = sorted(set(jobs), key=repr)
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        list(pool.map(_compile_job, jobs))
    log(f"precompiled {len(jobs)} settings in {time.perf_counter() - t0:.1f} s")


def case_jobs(count, seeds):
    """The compile settings of the differential cases of ``seeds``."""
    jobs = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for i in range(count):
            kind, shape, s, t, e, kw = random_case(i, rng)
            defines = tuple(sorted((kw.get("defines") or {}).items()))
            jobs.append((len(shape), kw.get("tile"), kw.get("bfs_tile"), defines))
    return jobs


def diff_test(count, repeats, seed, out, diag=False):
    import cupy

    from vision_cuts import grid_graph
    from vision_cuts._maxflow_cpu import maxflow_grid_cpu

    maxflow_grid_gpu = _solver_with_knobs()

    rng = np.random.default_rng(seed)
    fails = []
    n2 = n3 = 0
    t0 = time.perf_counter()
    for i in range(count):
        kind, shape, s, t, e, kw = (random_diag_case if diag else random_case)(i, rng)
        g = grid_graph(s, t, e)
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        flows, cuts = [], []
        for r in range(repeats):
            if r % 2:  # CuPy in
                args = (
                    cupy.asarray(g.source),
                    cupy.asarray(g.sink),
                    cupy.asarray(g.edges),
                )
            else:
                args = (g.source, g.sink, g.edges)
            f, lab, st = maxflow_grid_gpu(*args, max_rounds=5000, **kw)
            assert lab.shape == shape and lab.dtype == np.uint8
            flows.append(int(f))
            cuts.append(g.energy(lab.get()))
        ok = all(f == f_cpu for f in flows) and all(c == f_cpu for c in cuts)
        if len(shape) == 2:
            n2 += 1
        else:
            n3 += 1
        if (i + 1) % 25 == 0:
            dt = time.perf_counter() - t0
            log(f"  {i + 1} cases, {len(fails)} failed, {dt:.0f} s")
        if not ok:
            fails.append(
                {
                    "case": i,
                    "kind": kind,
                    "shape": shape,
                    "kw": kw,
                    "cpu": f_cpu,
                    "gpu": flows,
                    "cut": cuts,
                }
            )
            log(
                f"FAIL case {i} {kind} {shape} {kw}: cpu {f_cpu} gpu {flows} cut {cuts}"
            )
    dt = time.perf_counter() - t0
    log(
        f"diff: {count} cases ({n2} 2-D, {n3} 3-D) x {repeats} GPU repeats, "
        f"{len(fails)} failed, {dt:.1f} s"
    )
    if out:
        name = f"diff_diag_seed{seed}.json" if diag else f"diff_seed{seed}.json"
        with open(os.path.join(out, name), "w") as fh:
            json.dump(
                {"count": count, "repeats": repeats, "fails": fails}, fh, indent=1
            )
    return len(fails)


# ---------------------------------------------------------------------------- timing
def seg_energy(mp, image="astronaut"):
    import cv2
    import skimage.data

    from vision_cuts import grid_energy

    img = getattr(skimage.data, image)()[..., :3]
    f = math.sqrt(mp * 1e6 / (img.shape[0] * img.shape[1]))
    h, w = round(img.shape[0] * f), round(img.shape[1] * f)
    img = cv2.resize(
        img, (w, h), interpolation=cv2.INTER_LINEAR if f > 1 else cv2.INTER_AREA
    )
    u, wts = synthetic.segmentation_problem(img)
    name = f"seg {mp:g} MP {h}x{w}" if image == "astronaut" else f"{image} {mp:g} MP"
    return name, grid_energy(u, weights=wts)


def vol_energy(n):
    from vision_cuts import grid_energy

    u, wts = synthetic.volume_problem(n)
    return f"vol {n}^3", grid_energy(u, weights=wts)


def parse_configs(text):
    """``"tok,tok;tok;..."`` -> solver keyword dicts (empty text: the defaults).

    Tokens: ``itN`` local_iters, ``RN`` sweeps_per_relabel, ``tailN`` tail_sweeps,
    ``titN`` tail_iters, ``tXxYxZ`` tile, ``btXxYxZ`` bfs_tile, ``g0`` no CUDA graph,
    ``def`` nothing (the defaults), ``bw1`` the bit-parallel BFS of 2-D grids
    (``_maxflow_gpu._BFS_WARP``), ``lvL`` the level-synchronous BFS of 2-D grids
    with L levels a phase (``_maxflow_gpu._BFS_LEVEL``; ``lv0`` off; ``lvtN`` and
    ``lvpN`` its threads a block and words a thread, LV_NT and LV_NPER), ``wbF`` path
    walks in the rounds that start with fewer than F * n active nodes
    (``_maxflow_gpu._WALK_BELOW``; 0 = none, 2 = every round), ``ppF`` persistent
    push launches in the rounds that start with fewer than F * n active nodes
    (``_maxflow_gpu._PERSIST_BELOW``), ``tm0`` the level BFS's masks and count at
    every relabel, not kept by the push kernel (``_maxflow_gpu._TRACK_MASKS``),
    ``bmN`` the mode bits of the
    global relabel launch (``bfs_mode``), ``pipeN`` rounds in flight
    (``_maxflow_gpu._PIPELINE``), ``reuse0`` a new solver every call, ``incF``
    incremental global relabels after the rounds that start with fewer than F * n
    active nodes (``incremental_below``; needs ``bm0``), and
    compile-time constants through ``_maxflow_gpu._EXTRA_DEFINES``: ``mbN``
    (PR_MIN_BLOCKS), ``scanN`` (BFS_SCAN), ``sleepN`` (BFS_SLEEP), ``lrN`` (PR_LR_AT:
    a local relabel of each push tile at local round N), ``stats1`` (PR_STATS: push and
    BFS tiles and rounds per round, in the profile).
    """
    if not text:
        return [{}]
    out = []
    for c in text.split(";"):
        kw, defines = {}, {}
        for tok in c.split(","):
            if tok == "def":
                continue
            if tok == "g0":
                kw["graph"] = False
            elif tok in ("scan0", "scan1"):
                defines["BFS_SCAN"] = int(tok[4:])
            elif tok.startswith("mb"):
                defines["PR_MIN_BLOCKS"] = int(tok[2:])
            elif tok == "stats1":
                defines["PR_STATS"] = 1
            elif tok.startswith("sleep"):
                defines["BFS_SLEEP"] = int(tok[5:])
            elif tok.startswith("pipe"):
                kw["_pipeline"] = int(tok[4:])
            elif tok == "reuse0":
                kw["_reuse"] = False
            elif tok == "bw1":
                kw["_bfs_warp"] = True
            elif tok.startswith("lvt"):
                defines["LV_NT"] = int(tok[3:])
            elif tok.startswith("lvp"):
                defines["LV_NPER"] = int(tok[3:])
            elif tok.startswith("lv"):
                kw["_bfs_level"] = int(tok[2:])
            elif tok.startswith("wb"):
                kw["_walk"] = float(tok[2:])
            elif tok.startswith("pp"):
                kw["_persist"] = float(tok[2:])
            elif tok in ("tm0", "tm1"):
                kw["_track"] = tok == "tm1"
            elif tok.startswith("inc"):
                kw["incremental_below"] = float(tok[3:])  # fraction of n
            elif tok.startswith("lr"):
                defines["PR_LR_AT"] = int(tok[2:])
            elif tok.startswith("bm"):
                kw["bfs_mode"] = int(tok[2:])
            elif tok.startswith("tit"):
                kw["tail_iters"] = int(tok[3:])
            elif tok.startswith("bt"):
                kw["bfs_tile"] = tuple(int(v) for v in tok[2:].split("x"))
            elif tok.startswith("it"):
                kw["local_iters"] = int(tok[2:])
            elif tok.startswith("tail"):
                kw["tail_sweeps"] = int(tok[4:])
            elif tok.startswith("R"):
                kw["sweeps_per_relabel"] = int(tok[1:])
            elif tok.startswith("t"):
                kw["tile"] = tuple(int(v) for v in tok[1:].split("x"))
            else:
                raise ValueError(f"unknown config token {tok!r}")
        if defines:
            kw["defines"] = defines
        out.append(kw)
    return out


def bench(sizes, volumes, runs, cpu_max, configs, profile, out, images=("astronaut",)):
    import cupy

    from vision_cuts import grid_graph
    from vision_cuts._maxflow_cpu import maxflow_grid_cpu

    maxflow_grid_gpu = _solver_with_knobs()

    rows = []
    problems = [lambda m=m, i=i: seg_energy(m, i) for i in images for m in sizes] + [
        lambda v=v: vol_energy(v) for v in volumes
    ]
    for make in problems:
        name, en = make()
        n = en.source.size
        g = grid_graph(en.source, en.sink, en.edges)
        f_cpu, cpu_s = None, None
        if n <= cpu_max:
            f_cpu, _, st = maxflow_grid_cpu(g.source, g.sink, g.edges)
            cpu_s = st.get("solve_s", st["time_s"])
        dsrc, dsnk, dedg = (cupy.asarray(a) for a in (g.source, g.sink, g.edges))
        gd = grid_graph(dsrc, dsnk, dedg)
        for kw in configs:
            if any(
                key in kw and (kw[key][2] != 1) != (len(g.shape) == 3)
                for key in ("tile", "bfs_tile")
            ):
                continue
            f, lab, st = maxflow_grid_gpu(dsrc, dsnk, dedg, **kw)  # warm-up
            cut = gd.energy(lab)
            times = []
            for _ in range(runs):
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                f2, lab2, st2 = maxflow_grid_gpu(dsrc, dsnk, dedg, **kw)
                times.append(time.perf_counter() - t0)
                if f2 != f:
                    log(f"  VARYING FLOW {name}: {f} vs {f2}")
            prof = {}
            if profile:
                _, _, sp = maxflow_grid_gpu(dsrc, dsnk, dedg, profile=True, **kw)
                prof = {
                    k: round(v, 3)
                    for k, v in sp.items()
                    if k.endswith("_ms") and isinstance(v, float)
                }
                prof["push_ms_rounds"] = sp["push_ms_rounds"]
                prof["relabel_ms_rounds"] = sp["relabel_ms_rounds"]
                prof["bfs_ms_rounds"] = sp["bfs_ms_rounds"]
                if "push_tiles_rounds" in sp:
                    prof["push_tiles_rounds"] = sp["push_tiles_rounds"]
                prof["wall_ms"] = round(sp["time_s"] * 1e3, 3)
            ms = statistics.median(times) * 1e3
            ok = (cut == f) and (f_cpu is None or f_cpu == f)
            cfg = (
                ",".join(f"{k}={v}" for k, v in kw.items())
                .replace("local_iters", "it")
                .replace("sweeps_per_relabel", "R")
                .replace("tail_iters", "tit")
                .replace("tail_sweeps", "tail")
                or "defaults"
            )
            row = {
                "problem": name,
                "nodes": n,
                "config": cfg,
                "ms": round(ms, 3),
                "min_ms": round(min(times) * 1e3, 3),
                "sweeps": st["sweeps"],
                "global_relabels": st["global_relabels"],
                "graph": st.get("graph"),
                "flow": f,
                "cpu_flow": f_cpu,
                "cut_ok": cut == f,
                "ok": ok,
                "cpu_ms": None if cpu_s is None else round(cpu_s * 1e3, 1),
                "active": st["active"][:16],
                "round_ms": st2.get("round_ms"),
                **prof,
            }
            rows.append(row)
            log(
                f"{name:20s} {cfg:44s} {ms:8.2f} ms sweeps {st['sweeps']:4d} "
                f"GR {st['global_relabels']:3d} ok={ok} {prof} active {st['active']}"
            )
        del dsrc, dsnk, dedg, gd
        cupy.get_default_memory_pool().free_all_blocks()
    if out:
        with open(os.path.join(out, "bench.json"), "w") as fh:
            json.dump(rows, fh, indent=1)
    log(
        "\nproblem              config                                       "
        "      ms sweeps  GR ok    cpu_ms  first/push/relabel/result ms"
    )
    for r in rows:
        ph = "/".join(
            str(r.get(k, ""))
            for k in ("first_relabel_ms", "push_ms", "relabel_ms", "result_ms")
        )
        log(
            f"{r['problem']:20s} {r['config']:44s} {r['ms']:8.2f} {r['sweeps']:6d}"
            f" {r['global_relabels']:3d} {str(r['ok']):5s} {r['cpu_ms']} {ph}"
        )
    return sum(not r["ok"] for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--diff", type=int, default=0)
    ap.add_argument(
        "--diag",
        type=int,
        default=0,
        help="this many differential cases of 8-, 18- and 26-connected grids",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, nargs="+", default=[0])
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--sizes", type=float, nargs="*", default=[0.3, 2, 4, 8])
    ap.add_argument(
        "--images",
        nargs="+",
        default=["astronaut"],
        help="scikit-image pictures of the segmentation energies",
    )
    ap.add_argument("--volumes", type=int, nargs="*", default=[128, 256])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu-max", type=int, default=9_000_000)
    ap.add_argument(
        "--configs",
        default="",
        help='"it32,R4,tail8,t32x32x1,g0,mb2,scan0;def;..." (see parse_configs)',
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="one more solve per config with CUDA-event phase times",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="compile the kernels of the differential cases in this many processes "
        "first",
    )
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    a = ap.parse_args()
    configs = parse_configs(a.configs)
    bad = 0
    if a.diff and a.jobs > 1:
        precompile(case_jobs(a.diff, a.seed), a.jobs)
    if a.diff:
        for seed in a.seed:
            bad += diff_test(a.diff, a.repeats, seed, a.out)
    if a.diag:
        for seed in a.seed:
            bad += diff_test(a.diag, a.repeats, seed, a.out, diag=True)
    if a.bench:
        bad += bench(
            a.sizes, a.volumes, a.runs, a.cpu_max, configs, a.profile, a.out, a.images
        )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
