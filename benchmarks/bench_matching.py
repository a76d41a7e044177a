"""Maximum bipartite matching benchmark: vision_cuts against SciPy, in the same run.

Graph families (``--families``), all CSR biadjacency matrices (rows = left side):

* ``random``: n rows and n columns, 5n uniformly random (row, column) pairs
  (duplicates merged: average degree just under 5); sizes from ``--sizes``.
* ``grid``: the 4-connected grid graph of a square ``side x side`` image with 10% of
  the pixels removed at random, split by the checkerboard colouring (black pixels are
  rows, white pixels columns; side = sqrt(2 n), so about n pixels on each side).
* ``ladder``: the layered worst case of SciPy's Hopcroft-Karp (see
  ``vision_cuts/_matching_cpu.py``): a chain that leaves one augmenting path of
  length 2 depth + 1 after the first phase, plus a ladder of ``depth`` levels of two
  vertices, each joined to both vertices of the next level, that SciPy's depth-first
  search walks 2**depth times; one copy of depth ``--ladder-depth``.
* ``ladders``: block-diagonal copies of a depth-16 ladder, about n rows in all
  (sizes from ``--ladders-sizes``).
* ``chain``: a single augmenting path of length 2 n + 1 left by the greedy start: the
  worst case of a level-synchronous GPU search (n levels of one vertex each).

For each graph: SciPy's ``maximum_bipartite_matching`` (what ``backend="cpu"``
replaces), ``vision_cuts.maximum_bipartite_matching`` on the CPU (numba Pothen-Fan)
and on the GPU (APFB; ``--gpu-algorithms apfb apsb`` to compare with APsB). GPU times
are given from a SciPy CSR matrix in host memory (upload and validation included,
result back on the host) and from a ``cupyx.scipy.sparse`` matrix already on the
device (result stays there). Every cardinality is checked against SciPy's (against
the known perfect matching for the ladder families and the chain, and against
SciPy's max-flow for grids above ``--scipy-grid-max``, where SciPy's matching can take
minutes: seed 0 at n = 10000 took 412 s on 2 cores); a mismatch or an invalid
matching aborts the run. Times are medians of ``--repeat`` runs after one warm-up
(numba compilation and kernel compilation excluded); a baseline run above 2 s runs
once.

Usage::

    python benchmarks/bench_matching.py                        # CPU, small sizes
    python benchmarks/bench_matching.py --backend cpu gpu --sizes 100000 1000000 \
        --json results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

from vision_cuts.datasets.synthetic import (
    chain_bipartite_graph,
    grid_bipartite_graph,
    ladder_bipartite_graph,
)

LADDER_BLOCK_DEPTH = 16


def machine() -> str:
    from vision_cuts._backend import machine_description

    return machine_description()


def gpu_name() -> str | None:
    from vision_cuts._backend import gpu_name as name

    return name()


# ------------------------------------------------------------------- generators


def random_graph(n: int, seed: int) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, 5 * n)
    cols = rng.integers(0, n, 5 * n)
    g = sp.coo_array((np.ones(5 * n, np.int8), (rows, cols)), shape=(n, n)).tocsr()
    g.sum_duplicates()
    return g


def grid_graph(n: int, seed: int) -> sp.csr_array:
    side = max(2, int(round((2 * n) ** 0.5)))
    return grid_bipartite_graph(side, np.random.default_rng(seed))


def ladders_graph(n: int) -> sp.csr_array:
    one = ladder_bipartite_graph(LADDER_BLOCK_DEPTH)
    copies = max(1, n // one.shape[0])
    return sp.block_diag([one] * copies, format="csr")


# ---------------------------------------------------------------------- timing


def median_time(fn, repeat: int, warmup: bool = True):
    if warmup:
        t0 = time.perf_counter()
        out = fn()
        first = time.perf_counter() - t0
        if first > 2.0:
            return first, out
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def check(graph: sp.csr_array, perm: np.ndarray, expect: int, who: str, name: str):
    """Abort unless ``perm`` (perm_type="row") is a matching of ``expect`` edges."""
    perm = np.asarray(perm)
    cols = np.flatnonzero(perm >= 0)
    rows = perm[cols].astype(np.int64)
    if cols.size != expect:
        sys.exit(f"{name}: {who} matched {cols.size} pairs, expected {expect}")
    if np.unique(rows).size != cols.size:
        sys.exit(f"{name}: {who} matched a row twice")
    coo = graph.tocoo()
    keys = coo.row.astype(np.int64) * graph.shape[1] + coo.col
    if not np.isin(rows * graph.shape[1] + cols, keys).all():
        sys.exit(f"{name}: {who} matched a pair that is not an edge")


def sync_gpu():
    import cupy

    cupy.cuda.Device().synchronize()


def maxflow_cardinality(graph: sp.csr_array) -> int:
    """Maximum matching size by SciPy's max-flow (source -> rows -> columns -> sink,
    unit capacities): the independent oracle where SciPy's matching is too slow."""
    from scipy.sparse.csgraph import maximum_flow

    n_r, n_c = graph.shape
    coo = graph.tocoo()
    s, t = n_r + n_c, n_r + n_c + 1
    tails = np.concatenate([np.full(n_r, s), coo.row, n_r + np.arange(n_c)])
    heads = np.concatenate([np.arange(n_r), n_r + coo.col, np.full(n_c, t)])
    net = sp.csr_array(
        (np.ones(tails.size, np.int32), (tails, heads)), shape=(t + 1, t + 1)
    )
    net.data[:] = 1  # duplicates were summed by the conversion
    return int(maximum_flow(net, s, t).flow_value)


def run_graph(name, graph, expect, args, rows, run_scipy=True):
    from scipy.sparse.csgraph import maximum_bipartite_matching as scipy_mbm

    from vision_cuts import maximum_bipartite_matching as vc_mbm

    row = {
        "family": name.split()[0],
        "graph": name,
        "shape": list(graph.shape),
        "nnz": int(graph.nnz),
    }
    if run_scipy and row["family"] in args.scipy_families:
        t, out = median_time(lambda: scipy_mbm(graph, perm_type="row"), args.repeat)
        card = int((out >= 0).sum())
        if expect is not None and card != expect:
            sys.exit(f"{name}: SciPy matched {card}, expected {expect}")
        expect = card
        row["scipy_s"] = t
    if expect is None:
        expect = maxflow_cardinality(graph)
        row["oracle"] = "scipy maximum_flow"
    row["cardinality"] = expect
    if "cpu" in args.backend:
        t, out = median_time(lambda: vc_mbm(graph, "row", backend="cpu"), args.repeat)
        check(graph, out, expect, "cpu", name)
        row["cpu_s"] = t
    if "gpu" in args.backend:
        import cupyx.scipy.sparse as csp

        from vision_cuts import _matching_gpu

        dev = csp.csr_matrix(sp.csr_matrix(graph, dtype=np.float32))
        for alg in args.gpu_algorithms:
            key = "gpu" if alg == "apfb" else f"gpu_{alg}"

            def host_call(alg=alg):
                return _call_gpu(graph, alg)

            def dev_call(alg=alg):
                out = _call_gpu(dev, alg)
                sync_gpu()
                return out

            t, out = median_time(host_call, args.repeat)
            check(graph, out, expect, key, name)
            row[f"{key}_s"] = t
            t, out = median_time(dev_call, args.repeat)
            check(graph, out.get(), expect, key + " (device input)", name)
            row[f"{key}_device_s"] = t
        del _matching_gpu
    for key in [k for k in row if k.endswith("_s") and k != "scipy_s"]:
        if "scipy_s" in row:
            row[key.replace("_s", "_vs_scipy")] = row["scipy_s"] / row[key]
    rows.append(row)
    print(format_row(row), flush=True)


def _call_gpu(graph, algorithm):
    from vision_cuts import _matching_gpu, maximum_bipartite_matching

    if algorithm == "apfb":
        return maximum_bipartite_matching(graph, "row", backend="gpu")
    saved = _matching_gpu.DEFAULT_ALGORITHM
    _matching_gpu.DEFAULT_ALGORITHM = algorithm
    try:
        return maximum_bipartite_matching(graph, "row", backend="gpu")
    finally:
        _matching_gpu.DEFAULT_ALGORITHM = saved


def fmt_t(t):
    if t is None:
        return "-"
    return f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.2f} s"


def format_row(row):
    parts = [
        f"{row['graph']:<22} {row['shape'][0]:>8}x{row['shape'][1]:<8} "
        f"nnz {row['nnz']:>8}  card {row['cardinality']:>8}"
    ]
    parts.append(f"scipy {fmt_t(row.get('scipy_s'))}")
    for key in ("cpu", "gpu", "gpu_apsb"):
        if f"{key}_s" in row:
            s = f"{key} {fmt_t(row[f'{key}_s'])}"
            if f"{key}_vs_scipy" in row:
                s += f" ({row[f'{key}_vs_scipy']:.1f}x)"
            if f"{key}_device_s" in row:
                s += f" / on device {fmt_t(row[f'{key}_device_s'])}"
            parts.append(s)
    return "  ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument(
        "--families",
        nargs="+",
        default=["random", "grid", "ladder", "ladders", "chain"],
    )
    ap.add_argument("--sizes", nargs="+", type=int, default=[10000, 100000])
    ap.add_argument("--ladder-depth", type=int, default=24)
    ap.add_argument("--ladders-sizes", nargs="+", type=int, default=[100000])
    ap.add_argument("--chain-size", type=int, default=100000)
    ap.add_argument(
        "--gpu-algorithms", nargs="+", default=["apfb"], choices=["apfb", "apsb"]
    )
    ap.add_argument(
        "--scipy-families",
        nargs="+",
        default=["random", "grid", "ladder", "ladders", "chain"],
        help="families with a known answer on which SciPy still runs",
    )
    ap.add_argument(
        "--scipy-grid-max",
        type=int,
        default=4000,
        help="largest grid n on which SciPy runs (seed 0, n = 10000 took "
        "412 s on 2 cores); larger grids are checked by max-flow",
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    if "gpu" in args.backend:
        from vision_cuts._backend import gpu_available

        if not gpu_available():
            print("gpu: skipped, no usable CUDA device")
            args.backend = [b for b in args.backend if b != "gpu"]
        else:
            print(f"gpu: {gpu_name()}")
    rows: list = []
    for fam in args.families:
        if fam == "random":
            for n in args.sizes:
                run_graph(f"random n={n}", random_graph(n, args.seed), None, args, rows)
        elif fam == "grid":
            for n in args.sizes:
                run_graph(
                    f"grid n={n}",
                    grid_graph(n, args.seed),
                    None,
                    args,
                    rows,
                    run_scipy=n <= args.scipy_grid_max,
                )
        elif fam == "ladder":
            g = ladder_bipartite_graph(args.ladder_depth)
            run_graph(f"ladder depth={args.ladder_depth}", g, g.shape[0], args, rows)
        elif fam == "ladders":
            for n in args.ladders_sizes:
                g = ladders_graph(n)
                run_graph(f"ladders n={n}", g, g.shape[0], args, rows)
        elif fam == "chain":
            g = chain_bipartite_graph(args.chain_size)
            run_graph(f"chain n={args.chain_size}", g, g.shape[0], args, rows)
        else:
            sys.exit(f"unknown family {fam!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": machine(),
                    "gpu": gpu_name() if "gpu" in args.backend else None,
                    "repeat": args.repeat,
                    "rows": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
