"""General-graph max-flow benchmark: SciPy Dinic and our CPU and GPU backends, same run.

Instances (``--instances``, generated with seed 1, see vision_cuts.graph):

* ``rlgRxC``       Washington random level graph, R rows x C levels
* ``genrmfAxB``    genrmf / RMFGEN, B frames of A x A (c1 = 1, c2 = 100)
* ``adgN``         acyclic dense graph on N nodes
* ``akK``          Cherkassky and Goldberg's AK(K) network (push-relabel's hard case)

Columns: SciPy ``maximum_flow(method="dinic")`` (skipped above ``--scipy-max-nodes``),
``maximum_flow(backend="cpu")`` (highest-label push-relabel), and with ``--backend gpu``
the GPU backend in its forms (``--variants``: thread = a thread per node, warp = a warp
per node, ballot = a warp per node that tests 32 nodes at once; each run to the end,
without the time budget), and ``gpu call``: ``maximum_flow(backend="gpu")`` as a
user calls it, whose solve stops past its time budget and is finished on the CPU
(``handed over`` then; ``--variants`` may be empty). Every value is checked
against the others; a mismatch is printed and makes the exit status 1. Times are the
solve alone (graph generation and CSR construction excluded), the median of ``--repeat``
runs after a warm-up on a small graph (numba and kernel compilation excluded); instances
above ``--once-above`` nodes run once, SciPy ``--scipy-repeat`` times (default once).
``ref hi_pr`` is the single-core hi_pr time quoted for the instance in the literature
(RLG 512 x 512: 0.33 s, genrmf 128 x 128: 22 s), for orientation only: it was measured
on another machine.

Usage::

    python benchmarks/bench_graph.py                       # CPU, small default set
    python benchmarks/bench_graph.py --backend cpu gpu --instances rlg512x512 \
        rlg1024x1024 genrmf64x64 genrmf128x16 genrmf128x128 adg2000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time

import numpy as np

HI_PR = {"rlg512x512": 0.33, "genrmf128x128": 22.0}


def machine() -> str:
    from vision_cuts._backend import gpu_name, machine_description

    gpu = gpu_name()
    return machine_description() + (f"; GPU: {gpu}" if gpu else "")


def make(name: str):
    from vision_cuts import (
        acyclic_dense_graph,
        ak_graph,
        genrmf_graph,
        washington_rlg_graph,
    )

    if m := re.fullmatch(r"rlg(\d+)x(\d+)", name):
        return washington_rlg_graph(int(m[1]), int(m[2]), seed=1)
    if m := re.fullmatch(r"genrmf(\d+)x(\d+)", name):
        return genrmf_graph(int(m[1]), int(m[2]), seed=1)
    if m := re.fullmatch(r"adg(\d+)", name):
        return acyclic_dense_graph(int(m[1]), seed=1)
    if m := re.fullmatch(r"ak(\d+)", name):
        return ak_graph(int(m[1]))
    raise SystemExit(f"error: unknown instance {name!r} (rlgRxC, genrmfAxB, adgN, akK)")


def scipy_solver(g, s, t):
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow

    if g.capacity.max(initial=0) >= 2**31:
        return None
    mat = sp.csr_matrix(
        (g.capacity.astype(np.int32), g.heads, g.indptr),
        shape=(g.num_nodes, g.num_nodes),
    )
    return lambda: int(maximum_flow(mat, s, t, method="dinic").flow_value)


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_instance(name, args, gpu):
    """Solve one instance with every solver; returns the result row."""
    import functools

    from vision_cuts import maximum_flow

    t0 = time.perf_counter()
    g, s, t = make(name)
    gen_s = time.perf_counter() - t0
    rep = 1 if g.num_nodes > args.once_above else args.repeat
    row = {
        "instance": name,
        "nodes": g.num_nodes,
        "arcs": int((g.capacity > 0).sum()),
        "generate_s": gen_s,
        "repeat": rep,
    }
    values = {}
    if g.num_nodes <= args.scipy_max_nodes and (fn := scipy_solver(g, s, t)):
        row["scipy_s"], values["scipy"] = timed(fn, min(rep, args.scipy_repeat))
    if "cpu" in args.backend and g.num_nodes <= args.cpu_max_nodes:
        row["cpu_s"], res = timed(lambda: maximum_flow(g, s, t, backend="cpu"), rep)
        values["cpu"] = res.value
        row["cpu_stats"] = {
            k: v for k, v in res.stats.items() if k not in ("backend", "method")
        }
    if gpu:
        from vision_cuts._flow_graph_gpu import maximum_flow_gpu

        for label in ("gpu_thread", "gpu_warp", "gpu_ballot"):
            if label[4:] not in args.variants:
                continue
            for cycles in args.cycles:
                run = functools.partial(
                    maximum_flow_gpu,
                    g.indptr,
                    g.heads,
                    g.reverse,
                    g.capacity,
                    s,
                    t,
                    kernel=label[4:],
                    cycles=cycles,
                    budget_s=math.inf,
                )
                sec, out = timed(run, rep)
                values[f"{label}_c{cycles}"] = out[0]
                row.setdefault("gpu_sweep", []).append(
                    {"variant": label, "cycles": cycles, "time_s": sec, "stats": out[3]}
                )
                if f"{label}_s" not in row or sec < row[f"{label}_s"]:
                    row[f"{label}_s"] = sec
                    row[f"{label}_stats"] = out[3]
    if gpu:
        row["gpu_call_s"], res = timed(
            lambda: maximum_flow(g, s, t, backend="gpu"), rep
        )
        values["gpu_call"] = res.value
        row["gpu_call_handover"] = res.stats.get("handover")
    row["values"] = values
    if len(set(values.values())) > 1:
        print(f"VALUE MISMATCH on {name}: {values}", flush=True)
    row["mismatch"] = len(set(values.values())) > 1
    row["value"] = next(iter(values.values()), None)
    gbest = min(
        (
            row[k]
            for k in ("gpu_thread_s", "gpu_warp_s", "gpu_ballot_s", "gpu_call_s")
            if k in row
        ),
        default=None,
    )
    row["gpu_s"] = gbest

    def fmt(x, w, p=3):
        return f"{x:>{w}.{p}f}" if x is not None else f"{'-':>{w}}"

    def ratio(a, b):
        return row[a] / b if row.get(a) and b else None

    print(
        f"{name:<15}{g.num_nodes:>9}{row['arcs']:>10}"
        f"{fmt(row.get('scipy_s'), 10)}{fmt(row.get('cpu_s'), 9)}"
        f"{fmt(row.get('gpu_thread_s'), 10)}{fmt(row.get('gpu_warp_s'), 11)}"
        f"{fmt(row.get('gpu_ballot_s'), 11)}{fmt(row.get('gpu_call_s'), 10)}"
        f"{fmt(ratio('scipy_s', row.get('cpu_s')), 10, 1)}"
        f"{fmt(ratio('scipy_s', gbest), 10, 1)}"
        f"{fmt(ratio('cpu_s', gbest), 9, 1)}{fmt(HI_PR.get(name), 10, 2)}",
        flush=True,
    )
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=("cpu", "gpu"))
    ap.add_argument(
        "--instances",
        nargs="+",
        default=["rlg256x256", "rlg512x512", "genrmf32x32", "adg1000"],
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--once-above",
        type=int,
        default=1_500_000,
        help="instances with more nodes run once",
    )
    ap.add_argument("--scipy-max-nodes", type=int, default=1_100_000)
    ap.add_argument(
        "--scipy-repeat",
        type=int,
        default=1,
        help="SciPy runs per instance (the slowest column)",
    )
    ap.add_argument("--cpu-max-nodes", type=int, default=10**9)
    ap.add_argument(
        "--cycles",
        type=int,
        nargs="+",
        default=[None],
        help="GPU push / relabel rounds per launch (several: a sweep; the "
        "table shows the fastest)",
    )
    ap.add_argument(
        "--variants",
        nargs="*",
        default=["thread", "warp"],
        choices=("thread", "warp", "ballot"),
        help="GPU forms to run",
    )
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)

    from vision_cuts import maximum_flow, washington_rlg_graph

    bad = False
    print(f"machine: {machine()}", flush=True)
    gpu = "gpu" in args.backend
    if gpu:
        from vision_cuts._flow_graph_gpu import maximum_flow_gpu
    warm = washington_rlg_graph(8, 8, seed=0)
    maximum_flow(*warm, backend="cpu")
    if gpu:
        for v in args.variants:
            maximum_flow_gpu(
                warm.graph.indptr,
                warm.graph.heads,
                warm.graph.reverse,
                warm.graph.capacity,
                warm.source,
                warm.sink,
                kernel=v,
            )
    rows = []
    hdr = (
        f"{'instance':<15}{'nodes':>9}{'arcs':>10}{'scipy s':>10}{'cpu s':>9}"
        f"{'gpu thr s':>10}{'gpu warp s':>11}{'gpu ballot':>11}{'gpu call':>10}"
        f"{'cpu/scipy':>10}{'gpu/scipy':>10}"
        f"{'gpu/cpu':>9}{'ref hi_pr':>10}"
    )
    print(hdr, flush=True)
    for name in args.instances:
        row = run_instance(name, args, gpu)
        bad = bad or row["mismatch"]
        rows.append(row)
        if args.json:  # rewritten after every instance: partial results survive
            with open(args.json, "w") as f:
                json.dump(
                    {"machine": machine(), "rows": rows}, f, indent=1, default=float
                )
    print(
        "ratios: baseline time / our time (> 1: ours faster); gpu = the faster GPU "
        "variant; value = the max-flow value, equal across all columns"
    )
    for row in rows:
        extra = []
        for k in ("gpu_thread_stats", "gpu_warp_stats", "gpu_ballot_stats"):
            if k in row:
                st = row[k]
                extra.append(
                    f"{k[4:-6]} (cycles {st['cycles']}): rounds "
                    f"{st['rounds']}+{st['phase2_rounds']}, "
                    f"phase1 {st['phase1_s']:.3f} s, phase2 "
                    f"{st['phase2_s']:.3f} s"
                )
        for sw in row.get("gpu_sweep", []) if len(args.cycles) > 1 else []:
            st = sw["stats"]
            extra.append(
                f"{sw['variant'][4:]} cycles {st['cycles']}: "
                f"{sw['time_s']:.3f} s ({st['rounds']} rounds)"
            )
        if "cpu_stats" in row:
            st = row["cpu_stats"]
            extra.append(
                f"cpu: phase2 {st['phase2_s']:.3f} s, "
                f"{st['global_relabels']} global relabels"
            )
        if row.get("gpu_call_handover"):
            ho = row["gpu_call_handover"]
            extra.append(
                f"gpu call handed over after {ho['gpu_s']:.3f} s ({ho['rounds']} "
                f"rounds, phase {ho['phase']})"
            )
        print(f"  {row['instance']}: value {row['value']}; " + "; ".join(extra))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
