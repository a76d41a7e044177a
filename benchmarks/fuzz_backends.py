#!/usr/bin/env python3
"""Differential fuzzing of vision_cuts: backend="gpu" against backend="cpu" and
independent oracles (PyMaxflow, SciPy, brute force, the tests' helpers).

Usage (from the repository root)::

    python3 benchmarks/fuzz_backends.py --minutes M --seed S --out DIR
    # replay one case:
    python3 benchmarks/fuzz_backends.py --family maxflow --case-seed N --out DIR
    # a subset of the families:
    python3 benchmarks/fuzz_backends.py --minutes M --families maxflow,assignment

Runs random cases for M minutes, split evenly across the families, and writes
DIR/fuzz.json (every failure, slow outlier and note with the family, case seed, sizes,
parameters and what differed; rewritten as the run goes, so a killed run keeps what it
found; DIR/current_case.json names the case in progress, so a hung solve can be
replayed) and prints a summary table per family (cases, failures, the time
distribution of the timed calls: GPU calls where a GPU is present, else the CPU calls).

Every case is reproducible from (family, case seed): its random generator is
``np.random.default_rng(case_seed)`` and nothing else. Without CuPy or a CUDA device
only the CPU-vs-oracle checks run (the script says so).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

# the tests' oracles (brute force, PyMaxflow builders, independent energies); the
# package itself is the installed one (no checkout folder ahead of it on the path)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import _helpers as H  # noqa: E402
import scipy.optimize  # noqa: E402
import scipy.sparse  # noqa: E402
import scipy.sparse.csgraph  # noqa: E402

import vision_cuts as vc  # noqa: E402
from vision_cuts.exceptions import BackendUnavailableError  # noqa: E402
from vision_cuts.segmentation import GrabCutResult  # noqa: E402
from vision_cuts.stereo import (  # noqa: E402
    solve_disparity,
    stereo_cost_volume,
    stereo_energy,
    stereo_weights,
)

try:
    import maxflow as pymaxflow  # PyMaxflow
except ImportError:  # pragma: no cover
    pymaxflow = None

SLOW_FACTOR = 20.0
SLOW_MIN_S = 0.050
SLOW_AFTER = 5
INT32_MAX = 2**31 - 1
WATCHDOG_S = 120.0

# --------------------------------------------------------------------------- GPU


def detect_gpu():
    """(cupy module or None, reason when None)."""
    try:
        import cupy as cp
    except Exception as exc:  # noqa: BLE001
        return None, f"CuPy not importable ({type(exc).__name__}: {exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return None, "CuPy is installed but no CUDA device"
        int(cp.arange(3).sum().item())
    except Exception as exc:  # noqa: BLE001
        return None, f"no usable CUDA device ({type(exc).__name__}: {exc})"
    if not vc.gpu_available():
        return None, "vision_cuts.gpu_available() is False"
    return cp, None


CP = None  # set in main()


def is_cp(a) -> bool:
    return CP is not None and isinstance(a, CP.ndarray)


def host(a):
    """A NumPy copy of a NumPy / CuPy array (or the value itself)."""
    if is_cp(a):
        return a.get()
    return np.asarray(a)


def dev(a):
    return CP.asarray(a)


def sync():
    if CP is not None:
        CP.cuda.Device().synchronize()


def jsonable(x):
    """Best-effort conversion of a description value to JSON."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        if x.size <= 64:
            return x.tolist()
        return f"ndarray{tuple(x.shape)} {x.dtype}"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


# --------------------------------------------------------------------------- cases


class CaseFailure(Exception):
    """Raised by Case.fail_now to stop a case after a failed check."""


class Case:
    """One random case: its description, failures, notes and call times."""

    def __init__(self, family: str, seed: int, gpu: bool):
        self.family = family
        self.seed = seed
        self.gpu = gpu
        self.rng = np.random.default_rng(seed)
        self.desc: dict = {}
        self.failures: list = []
        self.notes: list = []
        self.gpu_s = 0.0
        self.cpu_s = 0.0
        self.ngpu = 0
        self.ncpu = 0

    # timed calls ----------------------------------------------------------
    def on_gpu(self, fn, *args, **kw):
        sync()
        t = time.perf_counter()
        try:
            out = fn(*args, **kw)
            sync()
            return out
        finally:
            self.gpu_s += time.perf_counter() - t
            self.ngpu += 1

    def on_cpu(self, fn, *args, **kw):
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.cpu_s += time.perf_counter() - t
            self.ncpu += 1

    # checks -----------------------------------------------------------------
    def fail(self, what: str, **info):
        self.failures.append({"what": what, **jsonable(info)})

    def fail_now(self, what: str, **info):
        self.fail(what, **info)
        raise CaseFailure(what)

    def check(self, cond, what: str, **info) -> bool:
        if not bool(cond):
            self.fail(what, **info)
            return False
        return True

    def note(self, what: str, **info):
        self.notes.append({"what": what, **jsonable(info)})

    def xp_choice(self) -> bool:
        """True: CuPy inputs for the GPU call, False: NumPy (drawn from the case rng,
        so reproducible; only meaningful with a GPU)."""
        return bool(self.rng.random() < 0.5)


def outcome(fn, *args, **kw):
    """(result, None) or (None, exception)."""
    try:
        return fn(*args, **kw), None
    except BackendUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001
        return None, exc


def exc_text(exc) -> str:
    return f"{type(exc).__name__}: {exc}"[:600]


def outcomes_differ(err_c, err_g) -> bool:
    """Whether one backend's call failed and the other's did not, or both failed
    with exceptions of different types."""
    return (err_c is None) != (err_g is None) or (
        err_c is not None and type(err_c) is not type(err_g)
    )


def outcome_texts(err_c, err_g) -> dict:
    """The two calls' outcomes for a failure record (None: it returned)."""
    return {
        "cpu": None if err_c is None else exc_text(err_c),
        "gpu": None if err_g is None else exc_text(err_g),
    }


EXPECTED_ERRORS = (TypeError, ValueError)


def check_same_energy(c, e_dev, energy) -> None:
    """``grid_energy`` of CuPy inputs: CuPy arrays equal to those of the NumPy
    inputs' ``energy``, and the same constant."""
    for name in ("source", "sink", "edges"):
        a = getattr(e_dev, name)
        c.check(is_cp(a), f"grid_energy(CuPy).{name} is not CuPy")
        c.check(
            np.array_equal(host(a), getattr(energy, name)),
            f"grid_energy(CuPy).{name} != grid_energy(NumPy).{name}",
        )
    c.check(
        e_dev.constant == energy.constant,
        "grid_energy constant differs",
        gpu=e_dev.constant,
        cpu=energy.constant,
    )


# ====================================================================== family 1


def random_shape(rng, ndim, big2=300, big3=40):
    kind = rng.choice(["tiny", "thin", "medium", "large"], p=[0.25, 0.2, 0.4, 0.15])
    if ndim == 2:
        if kind == "tiny":
            return tuple(int(v) for v in rng.integers(1, 5, 2)), kind
        if kind == "thin":
            n = int(rng.integers(2, 700))
            return ((1, n) if rng.random() < 0.5 else (n, 1)), kind
        if kind == "medium":
            return tuple(int(v) for v in rng.integers(2, 90, 2)), kind
        return tuple(int(v) for v in rng.integers(100, big2 + 1, 2)), kind
    if kind == "tiny":
        return tuple(int(v) for v in rng.integers(1, 4, 3)), kind
    if kind == "thin":
        opts = [
            (2, 3, int(rng.integers(2, 501))),
            (1, 1, int(rng.integers(2, 300))),
            (int(rng.integers(2, 200)), 1, 2),
            (1, int(rng.integers(2, 100)), 3),
        ]
        return opts[int(rng.integers(len(opts)))], kind
    if kind == "medium":
        return tuple(int(v) for v in rng.integers(2, 20, 3)), kind
    return tuple(int(v) for v in rng.integers(20, big3 + 1, 3)), kind


def random_caps(rng, shape, mode):
    """Non-negative int64 capacities of ``shape`` in one of the capacity modes
    (each below 2**30, so that an arc pair always fits int32)."""
    if mode == "small":
        a = rng.integers(0, 11, shape)
    elif mode == "medium":
        a = rng.integers(0, 1001, shape)
    elif mode == "big":
        a = rng.integers(0, 2**20 + 1, shape)
    elif mode == "sparse":
        a = rng.integers(0, 200, shape) * (rng.random(shape) < 0.15)
    else:  # "huge": mostly small, a few up to 2**30 - 1
        a = rng.integers(0, 100, shape)
        few = rng.random(shape) < 0.01
        a = np.where(few, rng.integers(2**28, 2**30, shape), a)
    return a.astype(np.int64)


def pymaxflow_flow(source, sink, edges):
    """Max-flow value of PyMaxflow on the grid graph (Graph[int] where every sum fits
    int32, else Graph[float], exact for integers below 2**53), None if unusable."""
    if pymaxflow is None:
        return None
    total = int(
        np.asarray(source, np.int64).sum()
        + np.asarray(sink, np.int64).sum()
        + np.asarray(edges, np.int64).sum()
    )
    if total < 2**31 - 1:
        return H.pymaxflow_mincut(source, sink, edges)[0]
    if total >= 2**53:
        return None
    source = np.asarray(source, np.float64)
    g = pymaxflow.Graph[float]()
    ids = g.add_grid_nodes(source.shape)
    for k in range(np.asarray(edges).shape[0]):
        st = H._structure(H.direction_step(k, source.ndim))
        g.add_grid_edges(
            ids, weights=np.asarray(edges[k], np.float64), structure=st, symmetric=False
        )
    g.add_grid_tedges(ids, source, np.asarray(sink, np.float64))
    f = g.maxflow()
    return int(round(f))


def fam_maxflow(c: Case):
    rng = c.rng
    ndim = int(rng.choice([2, 3], p=[0.6, 0.4]))
    K = int(rng.choice([4, 8])) if ndim == 2 else int(rng.choice([6, 18, 26]))
    shape, skind = random_shape(rng, ndim)
    if K == 26 and skind == "large":
        shape = tuple(min(s, 32) for s in shape)
    mode = str(rng.choice(["small", "medium", "big", "sparse", "huge"]))
    form = str(rng.choice(["energy", "graph"]))
    c.desc.update(ndim=ndim, K=K, shape=shape, shape_kind=skind, caps=mode, form=form)
    D = K // 2
    if form == "energy":
        cap = {"small": 10, "medium": 1000, "big": 2**20, "sparse": 200, "huge": 2**20}[
            mode
        ]
        unary = rng.integers(-cap, cap + 1, (*shape, 2))
        w = random_caps(rng, (D, *shape), mode)
        if mode == "huge":
            w = np.minimum(w, 2**29)
        energy = vc.grid_energy(unary, weights=w, connectivity=K)
        build = ("grid_energy", unary, w)
    else:
        src = random_caps(rng, shape, mode).astype(np.int32)
        snk = random_caps(rng, shape, mode).astype(np.int32)
        edg = random_caps(rng, (K, *shape), mode).astype(np.int32)
        energy = vc.grid_graph(src, snk, edg)
        build = ("grid_graph", src, snk, edg)
    n = int(np.prod(shape))
    s, t, e = energy.source, energy.sink, energy.edges
    # CPU
    cut_c = c.on_cpu(vc.maxflow_grid, energy, backend="cpu")
    c.check(
        isinstance(cut_c.labels, np.ndarray)
        and cut_c.labels.dtype == np.uint8
        and cut_c.labels.shape == shape,
        "cpu labels kind/dtype/shape",
        got=f"{type(cut_c.labels).__name__} {cut_c.labels.dtype} {cut_c.labels.shape}",
    )
    e_c = energy.energy(cut_c.labels)
    c.check(
        e_c == energy.constant + cut_c.flow,
        "cpu: E(labels) != constant + flow",
        energy=e_c,
        constant=energy.constant,
        flow=cut_c.flow,
    )
    # oracles
    oracle = None
    if n <= H.MAX_BRUTE_NODES:
        oracle = H.brute_force_mincut(s, t, e)[0]
        c.desc["oracle"] = "brute_force"
    elif n <= 130_000:
        oracle = pymaxflow_flow(s, t, e)
        c.desc["oracle"] = "pymaxflow" if oracle is not None else None
    if oracle is not None:
        c.check(
            cut_c.flow == oracle,
            "cpu flow != oracle flow",
            cpu=cut_c.flow,
            oracle=oracle,
        )
    if n <= 4000:
        cc = H.cut_capacity(s, t, e, cut_c.labels)
        c.check(
            cc == cut_c.flow,
            "cpu: oracle cut capacity of labels != flow",
            cut=cc,
            flow=cut_c.flow,
        )
    if not c.gpu:
        return
    # GPU: a GridEnergy (NumPy or CuPy) or the raw arrays (checked on the device)
    path = str(rng.choice(["energy_np", "energy_cp", "arrays_np", "arrays_cp"]))
    c.desc["gpu_path"] = path
    if path == "energy_np":
        cut_g = c.on_gpu(vc.maxflow_grid, energy, backend="gpu")
    elif path == "energy_cp":
        if build[0] == "grid_energy":
            e_dev = vc.grid_energy(dev(build[1]), weights=dev(build[2]), connectivity=K)
            check_same_energy(c, e_dev, energy)
        else:
            e_dev = vc.grid_graph(dev(build[1]), dev(build[2]), dev(build[3]))
        cut_g = c.on_gpu(vc.maxflow_grid, e_dev, backend="gpu")
    elif path == "arrays_np":
        cut_g = c.on_gpu(vc.maxflow_grid, s, t, e, backend="gpu")
    else:
        cut_g = c.on_gpu(vc.maxflow_grid, dev(s), dev(t), dev(e), backend="gpu")
    want_cp = path.endswith("_cp")
    c.check(
        is_cp(cut_g.labels) == want_cp,
        "gpu labels array kind",
        got=type(cut_g.labels).__name__,
        want="cupy" if want_cp else "numpy",
    )
    lab = host(cut_g.labels)
    c.check(
        lab.dtype == np.uint8 and lab.shape == shape,
        "gpu labels dtype/shape",
        got=f"{lab.dtype} {lab.shape}",
    )
    c.check(
        cut_g.flow == cut_c.flow,
        "gpu flow != cpu flow",
        gpu=cut_g.flow,
        cpu=cut_c.flow,
        oracle=oracle,
        handover=cut_g.stats.get("handover"),
    )
    if lab.shape == shape and set(np.unique(lab).tolist()) <= {0, 1}:
        e_g = energy.energy(lab)
        c.check(
            e_g == energy.constant + cut_g.flow,
            "gpu: E(labels) != constant + flow",
            energy=e_g,
            constant=energy.constant,
            flow=cut_g.flow,
        )
    else:
        c.fail("gpu labels not 0/1", values=np.unique(lab)[:10])


# ====================================================================== family 2


def oracle_energy(unary, x, pairwise, weights, D=None):
    """E(x) by the tests' helpers (vectorised for the weight form). ``D``: the
    directions, for a single (2, 2) table without weights (the helper would take
    only the face directions there)."""
    if pairwise is None:
        return H.potts_energy(unary, weights, x)
    if weights is None and np.asarray(pairwise).ndim == 2 and D is not None:
        weights = np.ones((D, *np.asarray(unary).shape[:-1]), np.int64)
    return H.direct_energy(unary, x, pairwise, weights)


def pymaxflow_potts(unary, weights):
    """min of ``sum unary[p, x_p] + sum w [x_p != x_q]`` by PyMaxflow, any
    neighbourhood (H.pymaxflow_potts_energy assumes the face directions only),
    built from the energy terms with H's independent plane table."""
    unary = np.asarray(unary, np.int64)
    weights = np.asarray(weights, np.int64)
    ndim = unary.ndim - 1
    g = pymaxflow.Graph[int]()
    ids = g.add_grid_nodes(unary.shape[:-1])
    for d in range(weights.shape[0]):
        st = H._structure(H.direction_step(2 * d, ndim))
        g.add_grid_edges(ids, weights=weights[d], structure=st, symmetric=True)
    g.add_grid_tedges(ids, unary[..., 1], unary[..., 0])
    return int(g.maxflow())


def fam_energy(c: Case):
    rng = c.rng
    ndim = int(rng.choice([2, 3], p=[0.65, 0.35]))
    K = int(rng.choice([4, 8])) if ndim == 2 else int(rng.choice([6, 18, 26]))
    D = K // 2
    form = str(
        rng.choice(
            [
                "weights_int",
                "table",
                "table_weights",
                "per_edge",
                "float_weights",
                "float_table",
            ]
        )
    )
    small = form in ("table", "table_weights", "per_edge", "float_table")
    if ndim == 2:
        hi = 16 if small else 64
        shape = tuple(int(v) for v in rng.integers(1, hi, 2))
    else:
        hi = 7 if small else 14
        shape = tuple(int(v) for v in rng.integers(1, hi, 3))
    n = int(np.prod(shape))
    udt = str(rng.choice(["int64", "int32", "int16", "uint8"]))
    c.desc.update(ndim=ndim, K=K, shape=shape, form=form, unary_dtype=udt)
    kw: dict = {"connectivity": K}
    scale = None
    if form.startswith("float"):
        scale = float(rng.choice([1.0, 10.0, 64.0, 1000.0]))
        unary = rng.normal(0, 5, (*shape, 2))
        weights = rng.random((D, *shape)) * 4
        kw["scale"] = scale
        if form == "float_weights":
            pairwise = None
            uq = np.rint(unary * scale).astype(np.int64)
            o_pair, o_w = None, np.rint(weights * scale).astype(np.int64)
        else:
            lam = rng.integers(0, 4)
            pairwise = np.array([[0, 2 + lam], [2, 0]], np.int64)
            uq = np.rint(unary * scale).astype(np.int64)
            o_pair = np.rint(weights[..., None, None] * pairwise * scale).astype(
                np.int64
            )
            o_w = None
        c.desc["scale"] = scale
    else:
        lo = 0 if udt == "uint8" else -50
        unary = rng.integers(lo, 60, (*shape, 2)).astype(udt)
        uq = unary.astype(np.int64)
        if form == "weights_int":
            weights = rng.integers(0, 30, (D, *shape)).astype(
                str(rng.choice(["int64", "int32", "uint8"]))
            )
            pairwise = None
            o_pair, o_w = None, weights
        elif form == "table":
            weights = None
            a, d = rng.integers(-5, 6, 2)
            b = rng.integers(-5, 6)
            cc = int(rng.integers(0, 8)) + a + d - b  # B + C - A - D >= 0
            pairwise = np.array([[a, b], [cc, d]], np.int64)
            o_pair, o_w = pairwise, None
        elif form == "table_weights":
            weights = rng.integers(0, 6, (D, *shape))
            pairwise = np.array([[0, 3], [2, 1]], np.int64)
            o_pair, o_w = pairwise, weights
        else:
            weights = None
            pairwise = H.random_submodular_pairwise(rng, shape, directions=D)
            o_pair, o_w = pairwise, None
    c.desc["pairwise"] = (
        None
        if pairwise is None
        else (pairwise.tolist() if pairwise.ndim == 2 else f"per-edge {pairwise.shape}")
    )
    energy = c.on_cpu(vc.grid_energy, unary, pairwise, weights=weights, **kw)
    # E(x) at random labellings against the oracle
    slow_ok = pairwise is None or n <= 600
    if slow_ok:
        for trial in range(3):
            x = (rng.random(shape) < [0.0, 1.0, 0.5][trial]).astype(np.uint8)
            got = energy.energy(x)
            want = oracle_energy(uq, x, o_pair, o_w, D)
            if not c.check(
                got == want,
                "grid_energy: energy(x) != oracle E(x)",
                got=got,
                want=want,
                trial=trial,
            ):
                break
    # the minimum from segment
    lab_c = c.on_cpu(vc.segment, unary, weights, pairwise=pairwise, backend="cpu", **kw)
    c.check(
        isinstance(lab_c, np.ndarray) and lab_c.shape == shape,
        "segment cpu output",
        got=f"{type(lab_c).__name__}",
    )
    e_min_c = energy.energy(lab_c)
    if slow_ok:
        c.check(
            e_min_c == oracle_energy(uq, lab_c, o_pair, o_w, D),
            "segment cpu: oracle E(labels) differs from GridEnergy.energy",
        )
    ref = None
    if n <= 10:
        bw = o_w
        if o_pair is not None and o_w is None and np.asarray(o_pair).ndim == 2:
            bw = np.ones((D, *shape), np.int64)
        ref = H.brute_force_energy_min(uq, o_pair, bw)
        c.desc["oracle"] = "brute_force"
    elif pairwise is None and pymaxflow is not None:
        ref = pymaxflow_potts(uq, o_w)
        c.desc["oracle"] = "pymaxflow_potts"
    elif pymaxflow is not None:
        ref = (
            energy.constant
            + H.pymaxflow_mincut(energy.source, energy.sink, energy.edges)[0]
        )
        c.desc["oracle"] = "pymaxflow_on_capacities"
    if ref is not None:
        c.check(
            e_min_c == ref, "segment cpu: min E != oracle min", cpu=e_min_c, oracle=ref
        )
    if not c.gpu:
        return
    # GPU: grid_energy on CuPy arrays gives NumPy's arrays
    d_args = [
        dev(unary),
        None if pairwise is None else dev(pairwise),
        None if weights is None else dev(weights),
    ]
    e_dev = c.on_gpu(vc.grid_energy, d_args[0], d_args[1], weights=d_args[2], **kw)
    check_same_energy(c, e_dev, energy)
    use_cp = c.xp_choice()
    c.desc["segment_gpu_input"] = "cupy" if use_cp else "numpy"
    if use_cp:
        lab_g = c.on_gpu(
            vc.segment, d_args[0], d_args[2], pairwise=d_args[1], backend="gpu", **kw
        )
        c.check(is_cp(lab_g), "segment(CuPy) did not return CuPy")
    else:
        lab_g = c.on_gpu(
            vc.segment, unary, weights, pairwise=pairwise, backend="gpu", **kw
        )
        c.check(isinstance(lab_g, np.ndarray), "segment(NumPy, gpu) not NumPy")
    e_min_g = energy.energy(host(lab_g))
    c.check(
        e_min_g == e_min_c,
        "segment: gpu min E != cpu min E",
        gpu=e_min_g,
        cpu=e_min_c,
        oracle=ref,
    )


# ====================================================================== family 3


def synthetic_picture(rng, h, w, kind):
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w
    ry, rx = rng.uniform(0.15, 0.35) * h + 1, rng.uniform(0.15, 0.35) * w + 1
    obj = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
    fg_col, bg_col = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    img = np.where(obj[..., None], fg_col, bg_col)
    if kind == "two_tone":
        img = img + rng.normal(0, 6, img.shape)
    else:  # textured: a second colour mixed in per class, and noise
        alt_f, alt_b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        mix = rng.random((h, w)) < 0.3
        img = np.where((obj & mix)[..., None], alt_f, img)
        img = np.where((~obj & mix)[..., None], alt_b, img)
        img = img + rng.normal(0, 15, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), obj


def random_blobs(rng, shape, count, where=None):
    h, w = shape
    m = np.zeros(shape, bool)
    for _ in range(count):
        if where is not None and where.any():
            ys, xs = np.nonzero(where)
            i = int(rng.integers(len(ys)))
            y, x = int(ys[i]), int(xs[i])
        else:
            y, x = int(rng.integers(h)), int(rng.integers(w))
        r = int(rng.integers(0, 3))
        m[max(0, y - r) : y + r + 1, max(0, x - r) : x + r + 1] = True
    return m


def check_grabcut(c: Case, tag, res, shape, rect, fg, bg, k):
    mask = host(res.mask)
    ok = c.check(
        mask.shape == shape and mask.dtype == np.uint8,
        f"{tag}: mask shape/dtype",
        got=f"{mask.shape} {mask.dtype}",
    )
    if not ok:
        return mask
    if fg is not None:
        c.check(
            (mask[fg] == 1).all(),
            f"{tag}: a foreground scribble is not 1",
            count=int((mask[fg] != 1).sum()),
        )
    if bg is not None:
        c.check(
            (mask[bg] == 0).all(),
            f"{tag}: a background scribble is not 0",
            count=int((mask[bg] != 0).sum()),
        )
    if rect is not None:
        x, y, w, h = rect
        inside = np.zeros(shape, bool)
        inside[max(y, 0) : y + h, max(x, 0) : x + w] = True
        outside = ~inside
        if fg is not None:
            outside &= ~fg
        c.check(
            (mask[outside] == 0).all(),
            f"{tag}: a pixel outside rect is not 0",
            count=int((mask[outside] != 0).sum()),
        )
    for name in ("foreground_model", "background_model"):
        wts, mu, cov = (host(a) for a in getattr(res, name))
        c.check(
            wts.shape == (k,) and mu.shape == (k, 3) and cov.shape == (k, 3, 3),
            f"{tag}: {name} shapes",
            got=[wts.shape, mu.shape, cov.shape],
            K=k,
        )
    return mask


def fam_grabcut(c: Case):
    rng = c.rng
    h, w = int(rng.integers(20, 201)), int(rng.integers(20, 301))
    kind = str(rng.choice(["two_tone", "textured"]))
    img, obj = synthetic_picture(rng, h, w, kind)
    as_float = bool(rng.random() < 0.2)
    if as_float:
        img = img.astype(np.float64) / 255.0
    shape = (h, w)
    use_rect = bool(rng.random() < 0.8)
    rect = None
    if use_rect:
        x0, y0 = int(rng.integers(0, w // 3 + 1)), int(rng.integers(0, h // 3 + 1))
        rw = int(rng.integers(max(2, w // 3), w - x0 + 1))
        rh = int(rng.integers(max(2, h // 3), h - y0 + 1))
        rect = (x0, y0, rw, rh)
    fg = (
        random_blobs(rng, shape, int(rng.integers(0, 4)), obj)
        if (rng.random() < 0.5 or not use_rect)
        else None
    )
    bg = (
        random_blobs(rng, shape, int(rng.integers(0, 4)), ~obj)
        if (rng.random() < 0.5 or not use_rect)
        else None
    )
    if fg is not None and bg is not None:
        bg &= ~fg
    if not use_rect:  # both scribbles needed, non-empty
        fg[obj.nonzero()[0][0], obj.nonzero()[1][0]] = True
        bgi = np.argwhere(~obj)
        bg[tuple(bgi[len(bgi) // 2])] = True
        bg &= ~fg
    k = int(rng.integers(1, 9))
    iters = int(rng.integers(1, 6))
    conn = int(rng.choice([4, 8]))
    c.desc.update(
        shape=shape,
        picture=kind,
        float_image=as_float,
        rect=rect,
        fg_pixels=None if fg is None else int(fg.sum()),
        bg_pixels=None if bg is None else int(bg.sum()),
        components=k,
        iterations=iters,
        connectivity=conn,
    )
    kw = dict(
        rect=rect,
        foreground=fg,
        background=bg,
        iterations=iters,
        components=k,
        connectivity=conn,
    )
    r_c, err_c = outcome(c.on_cpu, vc.grabcut, img, backend="cpu", **kw)
    if err_c is not None and not isinstance(err_c, EXPECTED_ERRORS):
        c.fail_now(
            "cpu grabcut raised unexpectedly",
            error=exc_text(err_c),
            traceback="".join(traceback.format_exception(err_c))[-3000:],
        )
    m_c = None
    if err_c is None:
        m_c = check_grabcut(c, "cpu", r_c, shape, rect, fg, bg, k)
    else:
        c.note("cpu refused the input", error=exc_text(err_c))
    m_g, r_g = None, None
    if c.gpu:
        use_cp = c.xp_choice()
        c.desc["gpu_input"] = "cupy" if use_cp else "numpy"
        gimg = dev(img) if use_cp else img
        r_g, err_g = outcome(c.on_gpu, vc.grabcut, gimg, backend="gpu", **kw)
        if outcomes_differ(err_c, err_g):
            c.fail_now("gpu and cpu outcomes differ", **outcome_texts(err_c, err_g))
        if err_g is None:
            c.check(is_cp(r_g.mask) == use_cp, "gpu mask array kind")
            m_g = check_grabcut(c, "gpu", r_g, shape, rect, fg, bg, k)
            agree = float((m_g == m_c).mean())
            c.desc["agreement"] = agree
            c.check(
                agree >= 0.99,
                "gpu/cpu masks agree on < 99% of pixels",
                agreement=agree,
                cpu_energy=r_c.energy,
                gpu_energy=r_g.energy,
            )
    if err_c is not None:
        return
    # refinement: more scribbles, init = the previous result (K kept)
    fg2 = random_blobs(rng, shape, int(rng.integers(1, 4)), obj)
    bg2 = random_blobs(rng, shape, int(rng.integers(0, 3)), ~obj)
    bg2 &= ~fg2
    if fg is not None:
        fg2 |= fg
        bg2 &= ~fg
    empty_init = bool(rng.random() < 0.25)
    kw2 = dict(
        rect=rect,
        foreground=fg2,
        background=bg2,
        iterations=int(rng.integers(1, 4)),
        connectivity=conn,
    )
    c.desc.update(
        refine_fg=int(fg2.sum()),
        refine_bg=int(bg2.sum()),
        refine_iterations=kw2["iterations"],
        empty_init=empty_init,
    )

    def with_empty(r):
        if not empty_init:
            return r
        z = np.zeros(shape, np.uint8)
        return GrabCutResult(
            dev(z) if is_cp(r.mask) else z,
            r.foreground_model,
            r.background_model,
            r.iterations,
            r.energy,
        )

    q_c, qerr_c = outcome(
        c.on_cpu, vc.grabcut, img, init=with_empty(r_c), backend="cpu", **kw2
    )
    if qerr_c is not None and not isinstance(qerr_c, EXPECTED_ERRORS):
        c.fail_now(
            "cpu refinement raised unexpectedly",
            error=exc_text(qerr_c),
            traceback="".join(traceback.format_exception(qerr_c))[-3000:],
        )
    if qerr_c is None:
        qm_c = check_grabcut(c, "cpu refine", q_c, shape, rect, fg2, bg2, k)
    else:
        c.note("cpu refused the refinement", error=exc_text(qerr_c))
    if c.gpu and r_g is not None:
        gimg = dev(img) if is_cp(r_g.mask) else img
        q_g, qerr_g = outcome(
            c.on_gpu, vc.grabcut, gimg, init=with_empty(r_g), backend="gpu", **kw2
        )
        if outcomes_differ(qerr_c, qerr_g):
            c.fail_now(
                "refinement: gpu and cpu outcomes differ",
                **outcome_texts(qerr_c, qerr_g),
            )
        if qerr_g is None:
            qm_g = check_grabcut(c, "gpu refine", q_g, shape, rect, fg2, bg2, k)
            agree = float((qm_g == qm_c).mean())
            c.desc["refine_agreement"] = agree
            c.check(
                agree >= 0.99,
                "refinement: gpu/cpu masks agree on < 99%",
                agreement=agree,
            )
        # the GPU refining the CPU's result (host models into the device loop)
        q_x, qerr_x = outcome(
            c.on_gpu, vc.grabcut, img, init=with_empty(r_c), backend="gpu", **kw2
        )
        if (qerr_c is None) != (qerr_x is None):
            c.fail(
                "refinement of the CPU result on the GPU: outcome differs",
                **outcome_texts(qerr_c, qerr_x),
            )
        elif qerr_x is None:
            qm_x = check_grabcut(
                c, "gpu refine of cpu init", q_x, shape, rect, fg2, bg2, k
            )
            agree = float((qm_x == qm_c).mean())
            c.desc["cross_refine_agreement"] = agree
            c.check(
                agree >= 0.99,
                "gpu refining the cpu result: < 99% agreement",
                agreement=agree,
            )


# ====================================================================== family 4


def random_metric(rng, L):
    """A random (L, L) integer metric: shortest paths of random positive weights."""
    m = rng.integers(1, 12, (L, L))
    m = np.minimum(m, m.T)
    np.fill_diagonal(m, 0)
    for k in range(L):
        m = np.minimum(m, m[:, k : k + 1] + m[k : k + 1, :])
    return m.astype(np.int64)


def oracle_label_energy(u, lab, V, w):
    grid = lab.shape
    x = lab.reshape(-1)
    total = int(u.reshape(-1, u.shape[-1])[np.arange(x.size), x].sum())
    for d in range(w.shape[0]):
        p, q = H.neighbour_pairs(grid, d)
        total += int((w[d].reshape(-1)[p] * V[x[p], x[q]]).sum())
    return total


def fam_multilabel(c: Case):
    rng = c.rng
    geo = str(rng.choice(["2d4", "2d8", "3d6"], p=[0.45, 0.25, 0.3]))
    if geo == "3d6":
        shape = tuple(int(v) for v in rng.integers(1, 11, 3))
        conn = 6
    else:
        shape = tuple(int(v) for v in rng.integers(1, 40, 2))
        conn = 4 if geo == "2d4" else 8
    D = {4: 2, 8: 4, 6: 3}[conn]
    L = int(rng.integers(2, 9))
    method = str(rng.choice(["expansion", "swap"]))
    model_kind = str(rng.choice(["potts", "truncated_linear", "matrix"]))
    if model_kind == "potts":
        model = "potts"
    elif model_kind == "truncated_linear":
        model = ("truncated_linear", int(rng.integers(1, 5)))
    else:
        model = random_metric(rng, L)
    V = vc.multilabel.pairwise_matrix(model, L)
    unary = rng.integers(0, 50, (*shape, L))
    weights = rng.integers(0, 9, (D, *shape))
    max_cycles = int(rng.integers(1, 12))
    c.desc.update(
        shape=shape,
        connectivity=conn,
        labels=L,
        method=method,
        model=model_kind,
        V=V,
        max_cycles=max_cycles,
    )
    kw = dict(weights=weights, method=method, connectivity=conn, max_cycles=max_cycles)
    res_c = c.on_cpu(vc.minimize_labels, unary, model, backend="cpu", **kw)
    lab_c = np.asarray(res_c.labels)
    c.check(lab_c.dtype == np.int32 and lab_c.shape == shape, "cpu labels dtype/shape")
    le = vc.label_energy(unary, lab_c, model, weights=weights, connectivity=conn)
    oe = oracle_label_energy(unary, lab_c, V, weights)
    c.check(
        res_c.energy == le == oe,
        "cpu: LabelResult.energy != label_energy/oracle",
        result=res_c.energy,
        label_energy=le,
        oracle=oe,
    )
    c.check(
        res_c.energy <= res_c.stats["initial_energy"],
        "cpu energy rose",
        initial=res_c.stats["initial_energy"],
        final=res_c.energy,
    )
    converged = (
        res_c.stats["cycles"] and res_c.stats["cycles"][-1]["improving_moves"] == 0
    )
    if converged:  # a local minimum of its moves: one more CPU cycle finds nothing
        again = vc.minimize_labels(
            unary, model, backend="cpu", init=lab_c, **{**kw, "max_cycles": 1}
        )
        c.check(
            again.energy == res_c.energy,
            "cpu: converged run is not a local minimum (one more cycle lowered it)",
            before=res_c.energy,
            after=again.energy,
        )
        if method == "swap" and L == 2:  # one swap move is the whole binary problem
            u2 = unary.astype(np.int64)
            w2 = weights.astype(np.int64) * int(V[0, 1])
            n = int(np.prod(shape))
            if n <= 10:
                ref = H.brute_force_energy_min(u2, None, w2)
            elif pymaxflow is not None:
                ref = pymaxflow_potts(u2, w2)
            else:
                ref = None
            if ref is not None and V[0, 1] == V[1, 0]:
                c.check(
                    res_c.energy == ref,
                    "cpu swap with 2 labels != global min",
                    cpu=res_c.energy,
                    oracle=ref,
                )
    if not c.gpu:
        return
    use_cp = c.xp_choice()
    c.desc["gpu_input"] = "cupy" if use_cp else "numpy"
    u_in, w_in = (dev(unary), dev(weights)) if use_cp else (unary, weights)
    res_g = c.on_gpu(
        vc.minimize_labels,
        u_in,
        model,
        backend="gpu",
        moves_per_cut=1,
        **{**kw, "weights": w_in},
    )
    lab_g = host(res_g.labels)
    le_g = vc.label_energy(unary, lab_g, model, weights=weights, connectivity=conn)
    c.check(
        res_g.energy == le_g,
        "gpu: LabelResult.energy != label_energy",
        result=res_g.energy,
        label_energy=le_g,
    )
    device = bool(res_g.stats.get("device_moves"))
    c.desc["device_moves"] = device
    same = np.array_equal(lab_g, lab_c) and res_g.energy == res_c.energy
    if same:
        return
    if method == "swap" and not device:
        # documented (tests/test_multilabel_gpu.py): host-built swap moves may break
        # ties differently; still a local minimum no higher than the start
        again = vc.minimize_labels(
            unary, model, backend="cpu", init=lab_g, **{**kw, "max_cycles": 1}
        )
        c.note(
            "swap with host-built moves: gpu labels differ from cpu (ties)",
            gpu=res_g.energy,
            cpu=res_c.energy,
            local_min=again.energy == res_g.energy,
        )
        if (
            converged
            and res_g.stats["cycles"]
            and res_g.stats["cycles"][-1]["improving_moves"] == 0
        ):
            c.check(
                again.energy == res_g.energy,
                "gpu swap result is no local minimum",
                gpu=res_g.energy,
                after_cpu_cycle=again.energy,
            )
        return
    c.fail(
        "gpu labels/energy != cpu (moves_per_cut=1)",
        gpu_energy=res_g.energy,
        cpu_energy=res_c.energy,
        differing=int((lab_g != lab_c).sum()),
    )


# ====================================================================== family 5


def smooth_noise(rng, h, w, cells):
    coarse = rng.random((cells + 1, cells + 1))
    ys, xs = np.linspace(0, cells, h), np.linspace(0, cells, w)
    y0, x0 = (
        np.floor(ys).astype(int).clip(0, cells - 1),
        np.floor(xs).astype(int).clip(0, cells - 1),
    )
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a = coarse[y0][:, x0]
    b = coarse[y0][:, x0 + 1]
    cc = coarse[y0 + 1][:, x0]
    d = coarse[y0 + 1][:, x0 + 1]
    return (
        a * (1 - fy) * (1 - fx) + b * (1 - fy) * fx + cc * fy * (1 - fx) + d * fy * fx
    )


def stereo_pair(rng, h, w, maxd):
    """(left, right, true disparity) from a random textured picture."""
    right = 0.6 * smooth_noise(rng, h, w, int(rng.integers(3, 12)))
    right += 0.4 * rng.random((h, w))
    disp = np.full((h, w), int(rng.integers(0, maxd + 1)))
    for _ in range(int(rng.integers(0, 4))):  # a few rectangles at other depths
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        disp[
            y0 : y0 + int(rng.integers(3, h // 2 + 4)),
            x0 : x0 + int(rng.integers(3, w // 2 + 4)),
        ] = int(rng.integers(0, maxd + 1))
    cols = np.arange(w)[None, :] - disp
    left = np.take_along_axis(right, np.clip(cols, 0, w - 1), axis=1)
    return left, right, disp


def fam_stereo(c: Case):
    rng = c.rng
    h, w = int(rng.integers(20, 121)), int(rng.integers(30, 161))
    maxd = int(rng.integers(2, min(24, w - 1) + 1))
    method = str(rng.choice(["expansion", "ishikawa", "ishikawa_pyramid"]))
    dtype = str(rng.choice(["uint8", "float", "uint16"]))
    left, right, truth = stereo_pair(rng, h, w, maxd)
    if dtype == "uint8":
        lf, rf = (np.rint(a * 255).astype(np.uint8) for a in (left, right))
    elif dtype == "uint16":
        lf, rf = (np.rint(a * 65535).astype(np.uint16) for a in (left, right))
    else:
        lf, rf = left.astype(np.float64), right.astype(np.float64)
    c.desc.update(shape=(h, w), max_disparity=maxd, method=method, dtype=dtype)
    d_c = c.on_cpu(
        vc.stereo_disparity, lf, rf, max_disparity=maxd, method=method, backend="cpu"
    )
    c.check(
        isinstance(d_c, np.ndarray) and d_c.dtype == np.float32 and d_c.shape == (h, w),
        "cpu disparity kind/dtype/shape",
    )
    c.check(
        np.all((d_c >= 0) & (d_c <= maxd) & (d_c == np.rint(d_c))),
        "cpu disparity outside [0, max_disparity] or not integral",
        lo=float(d_c.min()),
        hi=float(d_c.max()),
    )
    # the CPU's integer energy (stereo_disparity's quantisation, cost_scale 100)
    lam = 0.2 if method == "expansion" else 0.05
    cost = stereo_cost_volume(lf, rf, maxd, backend="cpu")
    cq = np.rint(cost * 100).astype(np.int32)
    wq = np.rint(stereo_weights(lf, smoothness=lam) * 100).astype(np.int32)
    kind = "truncated_linear" if method == "expansion" else "linear"

    def E(d, k=kind):
        return stereo_energy(
            cq, wq, np.asarray(d).astype(np.int64), smoothness=k, truncation=2
        )

    e_c = E(d_c)
    e_init = E(np.argmin(cq, axis=0))
    c.check(
        e_c <= e_init,
        "cpu energy above the cheapest-label start",
        energy=e_c,
        start=e_init,
    )
    if method == "ishikawa":  # exact: no other labelling lower
        pyr = solve_disparity(cq, wq, method="ishikawa_pyramid", backend="cpu")
        c.check(
            e_c <= E(pyr),
            "cpu ishikawa above the pyramid's energy",
            exact=e_c,
            pyramid=E(pyr),
        )
        again = solve_disparity(cq, wq, method="ishikawa", backend="cpu")
        c.check(
            E(again) == e_c,
            "solve_disparity(ishikawa) != stereo_disparity's energy",
            solve=E(again),
            front=e_c,
        )
    c.desc["cpu_energy"] = e_c
    if not c.gpu:
        return
    use_cp = c.xp_choice()
    c.desc["gpu_input"] = "cupy" if use_cp else "numpy"
    args = (dev(lf), dev(rf)) if use_cp else (lf, rf)
    d_g = c.on_gpu(
        vc.stereo_disparity, *args, max_disparity=maxd, method=method, backend="gpu"
    )
    c.check(is_cp(d_g) == use_cp, "gpu disparity array kind")
    d_gh = host(d_g)
    c.check(d_gh.dtype == np.float32 and d_gh.shape == (h, w), "gpu dtype/shape")
    c.check(
        np.all((d_gh >= 0) & (d_gh <= maxd) & (d_gh == np.rint(d_gh))),
        "gpu disparity outside [0, max_disparity] or not integral",
        lo=float(d_gh.min()),
        hi=float(d_gh.max()),
    )
    c.desc["mean_abs_diff"] = float(np.abs(d_gh - d_c).mean())
    c.desc["equal_share"] = float((d_gh == d_c).mean())
    e_g = E(d_gh)
    c.desc["gpu_energy_on_cpu_costs"] = e_g
    if method != "ishikawa":
        return
    # the exact cut on one integer volume: equal energies, strictly
    cin = (dev(cq), dev(wq)) if use_cp else (cq, wq)
    s_g = host(c.on_gpu(solve_disparity, *cin, method="ishikawa", backend="gpu"))
    c.check(
        E(s_g) == e_c,
        "solve_disparity ishikawa: gpu energy != cpu optimum",
        gpu=E(s_g),
        cpu=e_c,
    )
    if e_g != e_c:  # end to end: only where the device volume quantises the same
        cost_g = host(stereo_cost_volume(lf, rf, maxd, backend="gpu"))
        cq_g = np.rint(cost_g * 100).astype(np.int32)
        diff = int((cq_g != cq).sum())
        if diff == 0:
            c.fail(
                "stereo_disparity ishikawa: gpu energy != cpu energy on identical "
                "quantised costs",
                gpu=e_g,
                cpu=e_c,
            )
        else:
            c.note(
                "ishikawa end to end: energies differ where the device cost volume "
                "rounds differently",
                gpu=e_g,
                cpu=e_c,
                differing_costs=diff,
            )


# ====================================================================== family 6


def lsa_total(cost, r, cidx):
    vals = cost[r, cidx]
    if cost.dtype.kind in "iub":
        return int(np.asarray(vals, np.int64).sum())
    return math.fsum(float(v) for v in vals)


def random_costs(rng, shape, kind, maximize):
    if kind == "int_small":  # many ties
        a = rng.integers(0, 4, shape)
    elif kind == "int":
        a = rng.integers(-1000, 1000, shape)
    elif kind == "int_wide":
        a = rng.integers(-(2**30), 2**30, shape, dtype=np.int64)
    elif kind == "int32":
        a = rng.integers(0, 10**6, shape).astype(np.int32)
    elif kind == "float":
        a = rng.random(shape) * 100
    elif kind == "float_wide":
        a = rng.normal(0, 1, shape) * 10.0 ** rng.integers(-3, 7)
    elif kind == "float_ties":
        a = np.rint(rng.random(shape) * 8) / 2
    else:  # "float_intvalued"
        a = rng.integers(-500, 500, shape).astype(np.float64)
    return a


def scipy_lsa(cost, maximize):
    try:
        r, cidx = scipy.optimize.linear_sum_assignment(cost, maximize=maximize)
        return lsa_total(cost, r, cidx), None
    except ValueError as exc:
        return None, exc


def check_assignment(c: Case, tag, cost, r, cidx, maximize):
    """Form checks of one problem's result; returns its total or None."""
    n, m = cost.shape
    k = min(n, m)
    r, cidx = host(r), host(cidx)
    ok = c.check(
        r.shape == (k,) and cidx.shape == (k,),
        f"{tag}: result shapes",
        got=[r.shape, cidx.shape],
        k=k,
    )
    ok = ok and c.check(
        np.all(np.diff(r) > 0) if k > 1 else True,
        f"{tag}: row_ind not strictly increasing",
    )
    ok = ok and c.check(
        len(np.unique(cidx)) == k
        and (cidx >= 0).all()
        and (cidx < m).all()
        and (r >= 0).all()
        and (r < n).all(),
        f"{tag}: indices out of range or repeated",
    )
    if not ok:
        return None
    vals = cost[r, cidx]
    if cost.dtype.kind == "f":
        c.check(np.isfinite(vals).all(), f"{tag}: a forbidden pair was chosen")
    return lsa_total(cost, r, cidx)


def totals_agree(got, want, cost, tol_abs=0.0):
    if cost.dtype.kind in "iub" or (isinstance(got, int) and isinstance(want, int)):
        return got == want
    return abs(got - want) <= tol_abs + 1e-9 * max(1.0, abs(want))


def gpu_float_tolerance(costs):
    """The documented bound on (GPU total - optimum) for float costs: ``min(n, m) *
    (hi - lo) / Q``, with ``lo``, ``hi`` the finite range of the whole stack (the
    GPU quantises a stack on one scale) and ``Q`` the levels its plan takes
    (``_assignment_gpu.make_plan``; 2**16, the fewest, if that cannot be read).
    0 where the costs are integers (solved exactly)."""
    a = np.asarray(costs, dtype=np.float64)
    n, m = sorted(a.shape[-2:])
    fin = np.isfinite(a)
    if a.size == 0 or not fin.any():
        return 0.0
    vals = a[fin]
    lo, hi = float(vals.min()), float(vals.max())
    if hi == lo or (np.all(vals == np.rint(vals)) and max(abs(lo), abs(hi)) <= 2**53):
        return 0.0
    try:
        from vision_cuts._assignment_gpu import make_plan

        levels = make_plan(n, m, lo, hi, not bool(fin.all()), False).levels or 2**16
    except Exception:  # noqa: BLE001
        levels = 2**16
    return n * (hi - lo) / levels


def fam_assignment(c: Case):
    rng = c.rng
    batched = bool(rng.random() < 0.4)
    kind = str(
        rng.choice(
            [
                "int_small",
                "int",
                "int_wide",
                "int32",
                "float",
                "float_wide",
                "float_ties",
                "float_intvalued",
            ]
        )
    )
    maximize = bool(rng.random() < 0.3)
    forbid = float(rng.choice([0.0, 0.0, 0.1, 0.4, 0.8]))
    if batched:
        B = int(rng.integers(1, 201))
        cap = max(1, int(np.sqrt(400_000 / B)))
        n = int(rng.integers(1, min(64, cap) + 1))
        m = int(rng.integers(1, min(64, cap) + 1)) if rng.random() < 0.6 else n
        shape = (B, n, m)
    else:
        n = int(rng.integers(1, 401))
        m = n if rng.random() < 0.4 else int(rng.integers(1, 401))
        shape = (n, m)
    cost = random_costs(rng, shape, kind, maximize)
    if forbid and cost.dtype.kind == "f" or (forbid and kind in ("int", "int_small")):
        cost = cost.astype(np.float64)
        mask = rng.random(shape) < forbid
        cost[mask] = -np.inf if maximize else np.inf
        if rng.random() < 0.15:  # a whole row (column) forbidden: infeasible
            bad = -np.inf if maximize else np.inf
            view = cost if not batched else cost[int(rng.integers(shape[0]))]
            if view.shape[0] <= view.shape[1]:
                view[int(rng.integers(view.shape[0])), :] = bad
            else:
                view[:, int(rng.integers(view.shape[1]))] = bad
    c.desc.update(
        batched=batched,
        shape=shape,
        kind=kind,
        dtype=str(cost.dtype),
        maximize=maximize,
        forbidden_share=forbid,
    )
    probs = [cost] if not batched else list(cost)
    want = [scipy_lsa(p, maximize) for p in probs]
    infeasible = [i for i, (_, e) in enumerate(want) if e is not None]
    c.desc["infeasible_problems"] = len(infeasible)
    fn = vc.linear_sum_assignment_batched if batched else vc.linear_sum_assignment
    got_c, err_c = outcome(c.on_cpu, fn, cost, maximize, backend="cpu")

    def compare(tag, got, err, gpu):
        if infeasible:
            if err is None:
                c.fail(
                    f"{tag}: solved an infeasible stack",
                    scipy=exc_text(want[infeasible[0]][1]),
                    first=infeasible[0],
                )
            elif not isinstance(err, ValueError):
                c.fail(
                    f"{tag}: infeasible stack raised {type(err).__name__}, "
                    "not ValueError",
                    error=exc_text(err),
                )
            return
        if err is not None:
            if gpu and isinstance(err, ValueError) and "backend='cpu'" in str(err):
                c.note(f"{tag}: documented GPU limit", error=exc_text(err))
                return
            c.fail(
                f"{tag}: raised on a feasible problem",
                error=exc_text(err),
                traceback="".join(traceback.format_exception(err))[-3000:],
            )
            return
        rows, cols = got[0], got[1]
        stack_tol = gpu_float_tolerance(cost) if gpu and cost.dtype.kind == "f" else 0
        if batched:
            rows, cols = host(rows), host(cols)
        for i, p in enumerate(probs):
            ri, ci = (rows[i], cols[i]) if batched else (rows, cols)
            tot = check_assignment(c, f"{tag}[{i}]", p, ri, ci, maximize)
            if tot is None:
                return
            tol = 0.0
            if gpu and p.dtype.kind == "f":
                tol = stack_tol
            if tol:  # GPU, non-integer floats: quantised, within the bound
                worse = (tot - want[i][0]) * (-1 if maximize else 1)
                slack = 1e-9 * max(1.0, abs(want[i][0]))
                ok = -slack <= worse <= tol * (1 + 1e-9) + slack
            else:
                ok = totals_agree(tot, want[i][0], p)
            if not ok:
                c.fail(
                    f"{tag}: total != scipy's",
                    problem=i,
                    got=tot,
                    scipy=want[i][0],
                    tolerance=tol,
                )
                return

    compare("cpu", got_c, err_c, False)
    if not c.gpu:
        return
    use_cp = c.xp_choice()
    c.desc["gpu_input"] = "cupy" if use_cp else "numpy"
    got_g, err_g = outcome(
        c.on_gpu, fn, dev(cost) if use_cp else cost, maximize, backend="gpu"
    )
    if err_g is None:
        c.check(is_cp(got_g[0]) == use_cp, "gpu result array kind")
    compare("gpu", got_g, err_g, True)


# ====================================================================== family 7


def scipy_graph(graph):
    """The FlowGraph as SciPy's int32 CSR capacity matrix (arcs summed)."""
    tails = np.asarray(graph.tails, np.int64)
    heads = np.asarray(graph.heads, np.int64)
    cap = np.asarray(graph.capacity, np.int64)
    keep = cap > 0
    n = graph.num_nodes
    mat = scipy.sparse.csr_matrix((cap[keep], (tails[keep], heads[keep])), shape=(n, n))
    mat.sum_duplicates()
    return mat


def cut_of(graph, labels):
    tails = np.asarray(graph.tails, np.int64)
    heads = np.asarray(graph.heads, np.int64)
    cap = np.asarray(graph.capacity, np.int64)
    lab = np.asarray(labels)
    cross = (lab[tails] == 0) & (lab[heads] == 1)
    return int(cap[cross].sum())


def random_flow_problem(rng):
    kind = str(rng.choice(["random", "ak", "genrmf", "washington", "acyclic_dense"]))
    params: dict = {"generator": kind}
    if kind == "random":
        n = int(rng.integers(2, 2001))
        E = int(rng.integers(1, min(20 * n, 40000) + 1))
        tails = rng.integers(0, n, E)
        heads = rng.integers(0, n, E)
        hi = int(rng.choice([10, 1000, 2**20]))
        caps = rng.integers(0, hi + 1, E)
        s, t = (int(v) for v in rng.choice(n, 2, replace=False))
        params.update(n=n, edges=E, cap_hi=hi)
        graph = vc.flow_graph(tails, heads, caps, num_nodes=n)
        return graph, s, t, params
    if kind == "ak":
        k = int(rng.integers(1, 200))
        params["k"] = k
        g, s, t = vc.ak_graph(k)
    elif kind == "genrmf":
        a, b = int(rng.integers(2, 9)), int(rng.integers(2, 11))
        sd = int(rng.integers(2**31))
        params.update(a=a, b=b, seed=sd)
        g, s, t = vc.genrmf_graph(a, b, seed=sd)
    elif kind == "washington":
        r, cc = int(rng.integers(3, 65)), int(rng.integers(2, 65))
        sd = int(rng.integers(2**31))
        params.update(rows=r, cols=cc, seed=sd)
        g, s, t = vc.washington_rlg_graph(r, cc, seed=sd)
    else:
        n = int(rng.integers(2, 151))
        sd = int(rng.integers(2**31))
        params.update(n=n, seed=sd)
        g, s, t = vc.acyclic_dense_graph(n, seed=sd)
    return g, int(s), int(t), params


def fam_graphflow(c: Case):
    rng = c.rng
    if rng.random() < 0.3:
        return matching_case(c)
    graph, s, t, params = random_flow_problem(rng)
    method = str(rng.choice(["highest", "fifo"]))
    c.desc.update(
        problem="maximum_flow",
        source=s,
        sink=t,
        method=method,
        arcs=graph.num_arcs,
        **params,
    )
    mat = scipy_graph(graph)
    want = int(scipy.sparse.csgraph.maximum_flow(mat.astype(np.int32), s, t).flow_value)
    res_c = c.on_cpu(vc.maximum_flow, graph, s, t, method=method, backend="cpu")
    c.check(
        res_c.value == want,
        "cpu max-flow value != scipy's",
        cpu=res_c.value,
        scipy=want,
    )
    lab = np.asarray(res_c.labels)
    c.check(lab[s] == 0 and lab[t] == 1, "cpu cut does not separate s and t")
    c.check(
        cut_of(graph, lab) == res_c.value,
        "cpu cut capacity != value",
        cut=cut_of(graph, lab),
        value=res_c.value,
    )
    if not c.gpu:
        return
    res_g = c.on_gpu(vc.maximum_flow, graph, s, t, backend="gpu")
    c.check(
        res_g.value == want,
        "gpu max-flow value != scipy's",
        gpu=res_g.value,
        scipy=want,
        handover=res_g.stats.get("handover") is not None,
    )
    lab_g = host(res_g.labels)
    c.check(lab_g[s] == 0 and lab_g[t] == 1, "gpu cut does not separate s and t")
    c.check(
        cut_of(graph, lab_g) == res_g.value,
        "gpu cut capacity != value",
        cut=cut_of(graph, lab_g),
        value=res_g.value,
    )


def matching_case(c: Case):
    rng = c.rng
    nr, nc = int(rng.integers(1, 2001)), int(rng.integers(1, 2001))
    density = float(rng.choice([0.0005, 0.002, 0.01, 0.05]))
    perm_type = str(rng.choice(["row", "column"]))
    fmt = str(rng.choice(["csr", "csc", "coo"]))
    c.desc.update(
        problem="maximum_bipartite_matching",
        rows=nr,
        cols=nc,
        density=density,
        perm_type=perm_type,
        format=fmt,
    )
    g = scipy.sparse.random(
        nr,
        nc,
        density=density,
        format=fmt,
        random_state=np.random.RandomState(int(rng.integers(2**31))),
    )
    want = int(
        (
            scipy.sparse.csgraph.maximum_bipartite_matching(
                g.tocsr(), perm_type=perm_type
            )
            >= 0
        ).sum()
    )

    def valid(tag, perm):
        perm = host(perm)
        size = int((perm >= 0).sum())
        expect_len = nc if perm_type == "row" else nr
        if not c.check(
            perm.shape == (expect_len,),
            f"{tag}: perm shape",
            got=perm.shape,
            want=expect_len,
        ):
            return size
        idx = np.nonzero(perm >= 0)[0]
        other = perm[idx]
        c.check(len(np.unique(other)) == len(other), f"{tag}: a vertex matched twice")
        csr = g.tocsr()
        rows, cols = (other, idx) if perm_type == "row" else (idx, other)
        if len(rows):
            present = np.zeros(len(rows), bool)
            for j, (a, b) in enumerate(zip(rows, cols, strict=True)):
                lo, hi = csr.indptr[a], csr.indptr[a + 1]
                present[j] = b in csr.indices[lo:hi]
            c.check(
                present.all(),
                f"{tag}: matched pair is not an edge",
                missing=int((~present).sum()),
            )
        return size

    perm_c = c.on_cpu(vc.maximum_bipartite_matching, g, perm_type, backend="cpu")
    size_c = valid("cpu", perm_c)
    c.check(size_c == want, "cpu matching size != scipy's", cpu=size_c, scipy=want)
    if not c.gpu:
        return
    use_cp = c.xp_choice() and fmt in ("csr", "csc")
    c.desc["gpu_input"] = "cupyx" if use_cp else "scipy"
    gin = g
    if use_cp:
        import cupyx.scipy.sparse as cps

        gin = cps.csr_matrix(g.tocsr()) if fmt == "csr" else cps.csc_matrix(g.tocsc())
    perm_g = c.on_gpu(vc.maximum_bipartite_matching, gin, perm_type, backend="gpu")
    c.check(is_cp(perm_g) == use_cp, "gpu perm array kind")
    size_g = valid("gpu", perm_g)
    c.check(size_g == want, "gpu matching size != scipy's", gpu=size_g, scipy=want)


# ====================================================================== family 8

_PICTURES: dict = {}


def picture(name):
    if name not in _PICTURES:
        import skimage.data

        _PICTURES[name] = getattr(skimage.data, name)()
    return _PICTURES[name]


def fam_optical_flow(c: Case):
    rng = c.rng
    name = str(rng.choice(["astronaut", "camera", "coffee", "chelsea"]))
    img = picture(name)
    H_, W_ = img.shape[:2]
    dx, dy = (int(v) for v in rng.integers(-30, 31, 2))
    h = int(rng.integers(120, min(260, H_ - 62) + 1))
    w = int(rng.integers(160, min(360, W_ - 62) + 1))
    y0 = int(rng.integers(31, H_ - h - 31 + 1))
    x0 = int(rng.integers(31, W_ - w - 31 + 1))
    f0 = img[y0 : y0 + h, x0 : x0 + w]
    f1 = img[y0 - dy : y0 - dy + h, x0 - dx : x0 - dx + w]  # f1(p + d) = f0(p)
    f0, f1 = np.ascontiguousarray(f0), np.ascontiguousarray(f1)
    c.desc.update(picture=name, crop=(y0, x0, h, w), shift=(dx, dy))
    kw = {"search_radius": 50.0}
    res_c = c.on_cpu(vc.optical_flow, f0, f1, backend="cpu", **kw)
    _check_median_shift(c, "cpu", np.asarray(res_c.vectors), (dx, dy))
    if not c.gpu:
        return
    use_cp = c.xp_choice()
    c.desc["gpu_input"] = "cupy" if use_cp else "numpy"
    args = (dev(f0), dev(f1)) if use_cp else (f0, f1)
    res_g = c.on_gpu(vc.optical_flow, *args, backend="gpu", **kw)
    c.check(is_cp(res_g.vectors) == use_cp, "gpu vectors array kind")
    _check_median_shift(c, "gpu", host(res_g.vectors), (dx, dy))


def _check_median_shift(c, who: str, vec: np.ndarray, shift: tuple) -> None:
    """Matches found, and their median vector within 0.5 px of the true shift."""
    c.desc[f"{who}_matches"] = int(len(vec))
    if c.check(len(vec) > 0, f"{who}: no matches"):
        med = np.median(vec, axis=0)
        c.desc[f"{who}_median"] = med.tolist()
        c.check(
            np.abs(med - list(shift)).max() <= 0.5,
            f"{who} median vector != shift",
            median=med.tolist(),
            shift=list(shift),
        )


# ====================================================================== family 9


def _bad_grid(rng, what):
    shape = tuple(int(v) for v in rng.integers(2, 9, 2))
    s = rng.integers(0, 20, shape).astype(np.int32)
    t = rng.integers(0, 20, shape).astype(np.int32)
    e = rng.integers(0, 20, (4, *shape)).astype(np.int32)
    if what == "nan":
        s = s.astype(np.float64)
        s[0, 0] = np.nan
        return (s, t.astype(np.float64), e.astype(np.float64)), {"scale": 1.0}
    if what == "negative":
        e[1, 1, 1] = -3
    elif what == "bool":
        s, t, e = s > 5, t > 5, e > 5
    elif what == "complex":
        s = s.astype(np.complex128)
    elif what == "float_no_scale":
        e = e.astype(np.float32)
    elif what == "shape_edges":
        e = e[:3]
    elif what == "shape_sink":
        t = t[:, :-1]
    elif what == "pair_overflow":
        e[0, 0, 0] = 2**30 + 5
        e[1, 0, 1] = 2**30 + 5
    elif what == "mixed_dtype":
        t = t.astype(np.int64)
    return (s, t, e), {}


def bad_inputs(rng):
    """A list of (name, builder(xp) -> (fn, args, kwargs), must_raise)."""
    cases = []

    def to(xp, a):
        return xp.asarray(a) if isinstance(a, np.ndarray) else a

    def add(name, fn, args, kw, must, *, move=True):
        """A case calling ``fn(*args, **kw)``, its NumPy arrays on ``xp`` (``move``
        False: the inputs as given, on either backend)."""

        def build(xp):
            if not move:
                return fn, args, kw
            return (
                fn,
                tuple(to(xp, a) for a in args),
                {k: to(xp, v) for k, v in kw.items()},
            )

        cases.append((name, build, must))

    for what in (
        "nan",
        "negative",
        "bool",
        "complex",
        "float_no_scale",
        "shape_edges",
        "shape_sink",
        "pair_overflow",
        "mixed_dtype",
    ):
        arrays, kw = _bad_grid(rng, what)
        must = what not in ("bool", "mixed_dtype")
        for fn in (vc.maxflow_grid, vc.grid_graph):
            add(f"{fn.__name__}/{what}", fn, arrays, kw, must)
    shape = tuple(int(v) for v in rng.integers(2, 8, 2))
    u = rng.integers(-10, 10, (*shape, 2))
    w = rng.integers(0, 5, (2, *shape))
    uf = u.astype(np.float64)
    un = uf.copy()
    un[0, 0, 0] = np.nan
    variants = {
        "nan_unary": ((un, None), {"weights": w, "scale": 2.0}, True),
        "complex_unary": ((u.astype(np.complex128), None), {"weights": w}, True),
        "bool_unary": ((u > 0, None), {"weights": w}, False),
        "float_no_scale": ((uf, None), {"weights": w}, True),
        "negative_weights": ((u, None), {"weights": -w - 1}, True),
        "weights_shape": ((u, None), {"weights": w[:1]}, True),
        "unary_shape": ((u[..., :1], None), {"weights": w}, True),
        "nonsubmodular": ((u, np.array([[0, -2], [-1, 0]])), {}, True),
        "inf_weights": (
            (uf, None),
            {"weights": np.where(w > 2, np.inf, w * 1.0), "scale": 1.0},
            True,
        ),
    }
    for what, (args, kw, must) in variants.items():
        add(f"grid_energy/{what}", vc.grid_energy, args, kw, must)
        seg_args = (args[0], kw.get("weights"))
        seg_kw = {k: v for k, v in kw.items() if k != "weights"}
        if args[1] is not None:
            seg_kw["pairwise"] = args[1]
        add(f"segment/{what}", vc.segment, seg_args, seg_kw, must)
    img = rng.integers(0, 255, (24, 30, 3)).astype(np.uint8)
    imgf = img / 255.0
    imgn = imgf.copy()
    imgn[3, 4, 1] = np.nan
    rect = (3, 3, 20, 15)
    g_variants = {
        "nan_image": (imgn, {"rect": rect}, True),
        "complex_image": (img.astype(np.complex64), {"rect": rect}, True),
        "shape_2ch": (img[..., :2], {"rect": rect}, True),
        "int64_image": (img.astype(np.int64), {"rect": rect}, True),
        "float_255": (img.astype(np.float64), {"rect": rect}, True),
        "rect_outside": (img, {"rect": (100, 100, 5, 5)}, True),
        "no_rect_no_scribbles": (img, {}, True),
        "components_0": (img, {"rect": rect, "components": 0}, True),
        "bool_image": (img > 128, {"rect": rect}, False),
    }
    for what, (im, kw, must) in g_variants.items():
        add(f"grabcut/{what}", vc.grabcut, (im,), kw, must)
    ul = rng.integers(0, 30, (6, 7, 3))
    wl = rng.integers(0, 5, (2, 6, 7))
    m_variants = {
        "float_unary": (ul.astype(np.float64), {"weights": wl}, True),
        "complex_unary": (ul.astype(np.complex128), {"weights": wl}, True),
        "bool_unary": (ul > 10, {"weights": wl}, False),
        "negative_weights": (ul, {"weights": -wl - 1}, True),
        "weights_shape": (ul, {"weights": wl[:, :3]}, True),
        "one_label": (ul[..., :1], {"weights": wl}, True),
        "bad_init": (ul, {"weights": wl, "init": np.full((6, 7), 5)}, True),
        "not_metric": (
            ul,
            {"weights": wl, "pairwise": np.array([[0, 1, 9], [1, 0, 1], [9, 1, 0]])},
            True,
        ),
    }
    for what, (uu, kw, must) in m_variants.items():
        add(f"minimize_labels/{what}", vc.minimize_labels, (uu,), kw, must)
    left = rng.random((16, 24))
    s_variants = {
        "nan_left": (np.where(np.arange(24) == 3, np.nan, left), left, 4, True),
        "complex": (left.astype(np.complex128), left, 4, True),
        "shape_mismatch": (left, left[:, :-1], 4, True),
        "max_disparity_too_big": (left, left, 24, True),
        "max_disparity_0": (left, left, 0, True),
        "one_column": (left[:, :1], left[:, :1], 1, True),
        "bool_pair": (left > 0.5, left > 0.4, 3, False),
    }
    for what, (a, b, md, must) in s_variants.items():
        add(f"stereo_disparity/{what}", vc.stereo_disparity, (a, b),
            {"max_disparity": md}, must)  # fmt: skip
    cst = rng.random((5, 6))
    cn = cst.copy()
    cn[1, 2] = np.nan
    cm = cst.copy()
    cm[0, 0] = -np.inf
    a_variants = {
        "nan": (vc.linear_sum_assignment, cn, True),
        "complex": (vc.linear_sum_assignment, cst.astype(np.complex128), True),
        "3d_single": (vc.linear_sum_assignment, cst[None], True),
        "minus_inf": (vc.linear_sum_assignment, cm, True),
        "bool": (vc.linear_sum_assignment, cst > 0.5, False),
        "infeasible": (
            vc.linear_sum_assignment,
            np.where(np.arange(6) < 5, np.inf, 1.0) * np.ones((5, 6)),
            True,
        ),
        "batched_2d": (vc.linear_sum_assignment_batched, cst, True),
        "batched_nan": (vc.linear_sum_assignment_batched, cn[None], True),
    }
    for what, (fn, cc, must) in a_variants.items():
        add(f"{fn.__name__}/{what}", fn, (cc,), {}, must)
    # maximum_flow: the graph lives on the host (both backends take the same input)
    neg = scipy.sparse.csr_matrix(np.array([[0, 3, -1], [0, 0, 2], [0, 0, 0]]))
    fl = scipy.sparse.csr_matrix(np.array([[0, 1.5, 0], [0, 0, 2.0], [0, 0, 0]]))
    ok3 = scipy.sparse.csr_matrix(np.array([[0, 3, 1], [0, 0, 2], [0, 0, 0]]))
    f_variants = {
        "negative": ((neg, 0, 2), True),
        "float": ((fl, 0, 2), True),
        "source_is_sink": ((ok3, 1, 1), True),
        "sink_out_of_range": ((ok3, 0, 7), True),
        "dense": ((ok3.toarray(), 0, 2), True),
    }
    for what, (args, must) in f_variants.items():
        add(f"maximum_flow/{what}", vc.maximum_flow, args, {}, must, move=False)

    g = scipy.sparse.random(6, 5, density=0.4, format="csr", random_state=1)
    add("maximum_bipartite_matching/dense", vc.maximum_bipartite_matching,
        (g.toarray(),), {}, True)  # fmt: skip
    add("maximum_bipartite_matching/perm_type", vc.maximum_bipartite_matching,
        (g, "diagonal"), {}, True)  # fmt: skip
    fr = rng.integers(0, 255, (40, 50)).astype(np.uint8)
    frn = fr / 255.0
    frn[2, 3] = np.nan
    o_variants = {
        "nan_frame": (frn, fr / 255.0, True),
        "complex": (fr.astype(np.complex64), fr, True),
        "shape_mismatch": (fr, fr[:, :-1], True),
        "scales_mismatch": (fr / 255.0, fr.astype(np.float64), True),
    }
    for what, (a, b, must) in o_variants.items():
        add(f"optical_flow/{what}", vc.optical_flow, (a, b), {}, must)
    return cases


def fam_bad_inputs(c: Case):
    rng = c.rng
    cases = bad_inputs(rng)
    name, build, must = cases[int(rng.integers(len(cases)))]
    c.desc.update(input=name, must_raise=must)
    fn, args, kw = build(np)
    no_backend = fn in (vc.grid_graph, vc.grid_energy)  # the array kind decides
    res_c, err_c = outcome(
        c.on_cpu, fn, *args, **kw, **({} if no_backend else {"backend": "cpu"})
    )
    c.desc["cpu"] = "ok" if err_c is None else exc_text(err_c)
    if err_c is not None and not isinstance(err_c, EXPECTED_ERRORS):
        c.fail(
            "cpu raised an unexpected exception type",
            error=exc_text(err_c),
            traceback="".join(traceback.format_exception(err_c))[-3000:],
        )
    if must and err_c is None:
        c.fail("cpu accepted an invalid input")
    if not c.gpu:
        return
    fn, args, kw = build(CP)
    res_g, err_g = outcome(
        c.on_gpu, fn, *args, **kw, **({} if no_backend else {"backend": "gpu"})
    )
    c.desc["gpu"] = "ok" if err_g is None else exc_text(err_g)
    if (err_c is None) != (err_g is None):
        c.fail(
            "gpu and cpu outcomes differ",
            cpu=c.desc["cpu"],
            gpu=c.desc["gpu"],
            traceback=None
            if err_g is None
            else "".join(traceback.format_exception(err_g))[-3000:],
        )
    elif err_c is not None:
        if type(err_c) is not type(err_g):
            c.fail(
                "gpu raised another exception type than cpu",
                cpu=exc_text(err_c),
                gpu=exc_text(err_g),
            )
        elif str(err_c) != str(err_g):
            c.note(
                "same type, different message", cpu=exc_text(err_c), gpu=exc_text(err_g)
            )
            print(
                f"  [bad_inputs/{name}] message differs:\n    cpu: {exc_text(err_c)}"
                f"\n    gpu: {exc_text(err_g)}",
                flush=True,
            )


# ====================================================================== driver

FAMILIES = {
    "maxflow": fam_maxflow,
    "grid_energy": fam_energy,
    "grabcut": fam_grabcut,
    "minimize_labels": fam_multilabel,
    "stereo": fam_stereo,
    "assignment": fam_assignment,
    "graph_flow": fam_graphflow,
    "optical_flow": fam_optical_flow,
    "bad_inputs": fam_bad_inputs,
}


def case_seed(seed: int, family_index: int, i: int) -> int:
    return int(
        np.random.SeedSequence([seed, family_index, i]).generate_state(1, np.uint32)[0]
    )


def run_case(family: str, seed: int, gpu: bool) -> Case:
    c = Case(family, seed, gpu)
    try:
        FAMILIES[family](c)
    except CaseFailure:
        pass
    except Exception as exc:  # noqa: BLE001
        c.fail(
            "unexpected exception",
            error=exc_text(exc),
            traceback="".join(traceback.format_exception(exc))[-4000:],
        )
    return c


class Report:
    def __init__(self, out: Path, args, gpu_reason):
        self.out = out
        self.meta = {
            "argv": sys.argv,
            "seed": args.seed,
            "minutes": args.minutes,
            "gpu": CP is not None,
            "gpu_note": gpu_reason,
            "device": vc.describe_backend("gpu" if CP is not None else "cpu"),
            "replay": "python3 benchmarks/fuzz_backends.py --family FAMILY "
            "--case-seed SEED --out DIR",
        }
        self.failures: list = []
        self.slow: list = []
        self.notes: list = []
        self.times: dict = {f: [] for f in FAMILIES}
        self.counts: dict = {f: [0, 0, 0] for f in FAMILIES}  # cases, failed, notes
        self.last_write = 0.0

    def add(self, c: Case, timed: float):
        fam = c.family
        times = self.times[fam]
        self.counts[fam][0] += 1
        entry = {"family": fam, "case_seed": c.seed, "description": jsonable(c.desc)}
        if c.failures:
            self.counts[fam][1] += 1
            self.failures.append(
                {**entry, "failures": c.failures, "gpu_s": c.gpu_s, "cpu_s": c.cpu_s}
            )
        if c.notes:
            self.counts[fam][2] += 1
            self.notes.append({**entry, "notes": c.notes})
        if len(times) >= SLOW_AFTER:
            med = float(np.median(times))
            if timed > SLOW_FACTOR * med and timed > SLOW_MIN_S:
                self.slow.append({**entry, "seconds": timed, "running_median": med})
        times.append(timed)

    def write(self, force=False):
        if not force and time.time() - self.last_write < 5:
            return
        self.last_write = time.time()
        data = {
            "meta": self.meta,
            "summary": self.summary_rows(),
            "failures": self.failures,
            "slow_outliers": self.slow,
            "notes": self.notes,
        }
        tmp = self.out / "fuzz.json.tmp"
        tmp.write_text(json.dumps(data, indent=1, default=str))
        os.replace(tmp, self.out / "fuzz.json")

    def summary_rows(self):
        rows = []
        for fam in FAMILIES:
            t = self.times[fam]
            n, f, nn = self.counts[fam]
            if t:
                med = float(np.median(t))
                p90 = float(np.percentile(t, 90))
                worst = float(max(t))
                ratio = worst / med if med > 0 else float("inf")
            else:
                med = p90 = worst = ratio = None
            rows.append(
                {
                    "family": fam,
                    "cases": n,
                    "failures": f,
                    "with_notes": nn,
                    "slow_outliers": sum(1 for s in self.slow if s["family"] == fam),
                    "median_s": med,
                    "p90_s": p90,
                    "worst_s": worst,
                    "worst_over_median": ratio,
                }
            )
        return rows

    def print_summary(self):
        what = "GPU" if CP is not None else "CPU (no GPU: CPU-vs-oracle only)"
        print(f"\ntime columns: {what} time per case (s)")
        hdr = (
            f"{'family':16s} {'cases':>6s} {'fail':>5s} {'notes':>5s} {'slow':>5s} "
            f"{'median':>9s} {'p90':>9s} {'worst':>9s} {'worst/med':>9s}"
        )
        print(hdr)
        print("-" * len(hdr))

        def f(v):
            return "-" if v is None else f"{v:9.4f}"

        for r in self.summary_rows():
            ratio = r["worst_over_median"]
            print(
                f"{r['family']:16s} {r['cases']:6d} {r['failures']:5d} "
                f"{r['with_notes']:5d} {r['slow_outliers']:5d} {f(r['median_s'])} "
                f"{f(r['p90_s'])} {f(r['worst_s'])} "
                f"{'-' if ratio is None else f'{ratio:9.1f}'}"
            )
        print(
            f"\nfailures: {len(self.failures)} cases, slow outliers: "
            f"{len(self.slow)}, cases with notes: {len(self.notes)}"
        )
        for fl in self.failures[:30]:
            first = fl["failures"][0]
            print(
                f"  FAIL {fl['family']} seed={fl['case_seed']}: {first['what']}"
                + (f" ({first.get('error')})" if first.get("error") else "")
            )
        print(f"report: {self.out / 'fuzz.json'}")


def watchdog(state: dict, stop: threading.Event):
    """Print the case in progress when it has run for WATCHDOG_S (a stalled solve
    cannot be interrupted in-process; its description is also in current_case.json)."""
    warned = None
    while not stop.wait(5.0):
        cur = state.get("case")
        if cur is None:
            continue
        age = time.time() - cur[2]
        if age > WATCHDOG_S and warned != cur:
            warned = cur
            print(
                f"\n!! case {cur[0]} seed={cur[1]} has run {age:.0f} s (stalled?); "
                "replay with --family/--case-seed",
                file=sys.stderr,
                flush=True,
            )


def main(argv=None):
    global CP
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("fuzz_out"))
    p.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help="comma-separated subset of: " + ", ".join(FAMILIES),
    )
    p.add_argument("--family", help="replay one case of this family (with --case-seed)")
    p.add_argument("--case-seed", type=int)
    p.add_argument("--no-gpu", action="store_true", help="CPU-vs-oracle checks only")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    reason = "disabled by --no-gpu"
    if not args.no_gpu:
        CP, reason = detect_gpu()
    gpu = CP is not None
    if gpu:
        print(f"GPU: {vc.describe_backend('gpu')}", flush=True)
    else:
        print(f"NO GPU ({reason}): running only the CPU-vs-oracle checks", flush=True)
    if pymaxflow is None:
        print("PyMaxflow missing: grid oracles limited to brute force", flush=True)

    if args.family:
        if args.family not in FAMILIES or args.case_seed is None:
            p.error("--family needs one of the families and --case-seed")
        c = run_case(args.family, args.case_seed, gpu)
        print(
            json.dumps(
                {
                    "family": c.family,
                    "case_seed": c.seed,
                    "description": jsonable(c.desc),
                    "failures": c.failures,
                    "notes": c.notes,
                    "gpu_s": c.gpu_s,
                    "cpu_s": c.cpu_s,
                },
                indent=1,
                default=str,
            )
        )
        return 1 if c.failures else 0

    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in fams:
        if f not in FAMILIES:
            p.error(f"unknown family {f!r}")
    report = Report(args.out, args, reason)
    per_family = args.minutes * 60.0 / len(fams)
    state: dict = {}
    stop = threading.Event()
    threading.Thread(target=watchdog, args=(state, stop), daemon=True).start()
    current = args.out / "current_case.json"
    try:
        for fam in fams:
            fi = list(FAMILIES).index(fam)
            t_end = time.time() + per_family
            i = 0
            print(f"[{fam}] {per_family:.0f} s", flush=True)
            while time.time() < t_end:
                seed = case_seed(args.seed, fi, i)
                i += 1
                state["case"] = (fam, seed, time.time())
                current.write_text(
                    json.dumps(
                        {"family": fam, "case_seed": seed, "started": time.time()}
                    )
                )
                c = run_case(fam, seed, gpu)
                state["case"] = None
                timed = c.gpu_s if gpu else c.cpu_s
                report.add(c, timed)
                if c.failures:
                    print(
                        f"  FAIL {fam} seed={seed}: {c.failures[0]['what']}", flush=True
                    )
                report.write()
    finally:
        stop.set()
        report.write(force=True)
        try:
            current.unlink()
        except OSError:
            pass
    report.print_summary()
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
