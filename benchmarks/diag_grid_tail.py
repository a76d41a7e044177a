"""The distribution of GPU cut times over real energies, and what the slow ones do.

Runs GrabCut on the GPU over the shared pictures (box only, and the box with each
scribble set) and records every cut it makes: its time as GrabCut made it (warm
started from the previous cut's residual arcs), the same energy solved cold on the
GPU and on the CPU backend, and the GPU solver's work counters (sweeps, global
relabels, active nodes after each relabel). Cuts slower than ``--save-above`` times
the median are written to ``--out`` (``.npz``: source, sink, edges and the residual
arcs they were warm started from) so that they can be studied off the device.

    python benchmarks/diag_grid_tail.py --out /tmp/slow --settings rect set1 set2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--names", nargs="*", default=None)
    ap.add_argument("--settings", nargs="*", default=["rect"])
    ap.add_argument("--out", default=None, help="folder for the slow cuts' energies")
    ap.add_argument("--save-above", type=float, default=4.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import cupy

    from vision_cuts import grabcut, maxflow
    from vision_cuts.datasets import grabcut as gc
    from vision_cuts.grid import GridEnergy

    root = gc.data_root(args.data)
    names = args.names or gc.grabcut_names(root)
    cuts: list = []
    inner = maxflow._maxflow_warm  # what the GPU GrabCut calls

    def recorded(graph, residual):
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        cut, res = inner(graph, residual)
        cupy.cuda.Device().synchronize()
        ms = (time.perf_counter() - t) * 1e3
        keep = tuple(cupy.asarray(a).copy() for a in (graph.source, graph.sink))
        cuts.append(
            {
                "graph": (*keep, cupy.asarray(graph.edges).copy()),
                "residual": None if residual is None else residual.copy(),
                "ms": ms,
                "flow": int(cut.flow),
                "stats": {
                    k: cut.stats.get(k)
                    for k in ("sweeps", "global_relabels", "active", "warm_start")
                },
                "handover": cut.stats.get("handover") is not None,
            }
        )
        return cut, res

    maxflow._maxflow_warm = recorded
    samples = [gc.load_grabcut(n, root) for n in names]
    grabcut(samples[0].image, rect=samples[0].rect, backend="gpu")  # warm-up
    cuts.clear()
    rows = []
    for s in samples:
        for setting in args.settings:
            seeds = None if setting == "rect" else s.scribbles.get(setting)
            if setting != "rect" and seeds is None:
                continue
            start = len(cuts)
            fg, bg = (None, None) if seeds is None else seeds
            t = time.perf_counter()
            grabcut(s.image, rect=s.rect, foreground=fg, background=bg, backend="gpu")
            total = (time.perf_counter() - t) * 1e3
            for i, c in enumerate(cuts[start:]):
                src, snk, edg = c["graph"]
                energy = GridEnergy._trusted(src, snk, edg, 0)
                cold = []
                for _ in range(3):
                    cupy.cuda.Device().synchronize()
                    t = time.perf_counter()
                    cc = maxflow.maxflow_grid(energy, backend="gpu")
                    cupy.cuda.Device().synchronize()
                    cold.append((time.perf_counter() - t) * 1e3)
                host = GridEnergy._trusted(src.get(), snk.get(), edg.get(), 0)
                t = time.perf_counter()
                ref = maxflow.maxflow_grid(host, backend="cpu")
                cpu_ms = (time.perf_counter() - t) * 1e3
                assert ref.flow == cc.flow, (s.name, setting, i, ref.flow, cc.flow)
                row = {
                    "name": s.name,
                    "setting": setting,
                    "cut": i,
                    "shape": list(src.shape),
                    "grabcut_ms": total,
                    "warm_ms": c["ms"],
                    "cold_ms": statistics.median(cold),
                    "cold_worst_ms": max(cold),
                    "cpu_ms": cpu_ms,
                    "cold_sweeps": cc.stats["sweeps"],
                    "cold_relabels": cc.stats["global_relabels"],
                    "cold_active": cc.stats["active"],
                    "handover": c["handover"],
                    "cold_handover": cc.stats["handover"] is not None,
                    **c["stats"],
                }
                rows.append(row)
                c["row"] = row
                print(
                    f"{s.name:9s} {setting:4s} cut {i} {src.shape} warm {c['ms']:7.1f} "
                    f"(sw {row['sweeps']}, gr {row['global_relabels']}) cold "
                    f"{row['cold_ms']:7.1f} (sw {row['cold_sweeps']}, gr "
                    f"{row['cold_relabels']}) cpu {cpu_ms:7.1f} ms; active "
                    f"{row['active'][-6:]}",
                    flush=True,
                )
    print(
        "solves handed to the CPU solver: "
        f"{sum(r['handover'] for r in rows)} warm, "
        f"{sum(r['cold_handover'] for r in rows)} cold of {len(rows)} cuts"
    )
    for key in ("warm_ms", "cold_ms", "cpu_ms"):
        v = [r[key] for r in rows]
        print(
            f"{key}: {len(v)} cuts, median {statistics.median(v):.2f}, p90 "
            f"{np.percentile(v, 90):.2f}, worst {max(v):.2f} ms"
        )
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        med = statistics.median(r["warm_ms"] for r in rows)
        for c in cuts:
            r = c.get("row")
            if r is None or max(r["warm_ms"], r["cold_ms"]) < args.save_above * med:
                continue
            src, snk, edg = (a.get() for a in c["graph"])
            extra = {} if c["residual"] is None else {"residual": c["residual"].get()}
            np.savez_compressed(
                out / f"{r['name']}_{r['setting']}_{r['cut']}.npz",
                source=src,
                sink=snk,
                edges=edg,
                **extra,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
