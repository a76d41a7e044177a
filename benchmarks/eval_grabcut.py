"""GrabCut benchmark: vision_cuts.grabcut (CPU / GPU) against cv2.grabCut, same run.

Protocol (DESIGN.md, "Evaluation protocols"): the box from ``bb_GT``, 5 iterations;
error = % of the pixels inside the box, the unlabelled 128 band of ``boundary_GT``
excluded, whose label differs from the GT (``grabcut_error``); means over images.

Settings, each run by every method on every image:

  rect   the box only. OpenCV: ``cv2.grabCut(..., rect, 5, GC_INIT_WITH_RECT)``;
         ours: ``grabcut(image, rect=rect, iterations=5)``.
  set1 / set2   the box plus scribble set 1 / 2 as hard constraints (foreground
         seeds, background seeds). Ours: ``grabcut(image, rect=rect,
         foreground=fg, background=bg, iterations=5)``. OpenCV (default
         ``--scribble-protocol mask``): the mask that GC_INIT_WITH_RECT builds
         (GC_BGD outside the box, GC_PR_FGD inside), then the seeds written over it
         (GC_FGD for foreground seeds, GC_BGD for background seeds, also outside the
         box), then one ``cv2.grabCut(..., 5, GC_INIT_WITH_MASK)``. Both methods get
         the same information up front and 5 iterations. ``--scribble-protocol
         two-stage`` is the interactive variant instead: 1 iteration with the box,
         then the seeds written into the resulting mask, then 4 iterations with
         GC_INIT_WITH_MASK (the GMMs are re-fitted to the edited mask).

OpenCV is given BGR (the RGB image converted); a raw cv2 mask counts as foreground
where it is GC_FGD or GC_PR_FGD. cv2.grabCut seeds its k-means from cv::theRNG, so
the error depends on the RNG state: the script calls ``cv2.setRNGSeed(--seed)``
before every cv2 call, which makes each number independent of the order of the runs.

Timing: wall clock of the whole call, image in and mask out (the RGB->BGR conversion
and mask handling for OpenCV; ours returns a host mask, so a GPU run is synchronised).
Each method is warmed up once (JIT, kernel compilation) on the smallest selected
image, then each run is timed ``--repeat`` times (median). ``--size-test`` times one
image resized to 1920x1080 instead, median of ``--repeat`` runs (default 3) after a
warm-up at that size, and prints the cv2/ours time ratios.

All of ours goes through ``ours_grabcut`` below, the one place to adapt when the
``vision_cuts.grabcut`` API changes; without ``vision_cuts.grabcut`` the script runs
the OpenCV part and says so.

Usage::

    python benchmarks/eval_grabcut.py                          # all images, CPU
    python benchmarks/eval_grabcut.py --backend cpu gpu --json out.json
    python benchmarks/eval_grabcut.py --names banana1 teddy --data /path/to/datasets
    python benchmarks/eval_grabcut.py --size-test --backend cpu gpu
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
SETTINGS = ("rect", "set1", "set2")
SETTING_TITLES = {
    "rect": "box only",
    "set1": "box + scribble set 1 (hard constraints)",
    "set2": "box + scribble set 2 (hard constraints)",
}


# --------------------------------------------------------------------------- methods


def ours_available() -> bool:
    """True when ``vision_cuts.grabcut`` exists (it is being written)."""
    import vision_cuts

    return callable(getattr(vision_cuts, "grabcut", None))


def ours_grabcut(image, rect, fg=None, bg=None, *, iterations, backend, connectivity=4):
    """Run ``vision_cuts.grabcut``; return the foreground as a bool (M, N) array.

    The single adapter between this script and the library API.
    """
    import vision_cuts
    from vision_cuts._backend import to_numpy

    result = vision_cuts.grabcut(
        image,
        rect=rect,
        foreground=fg,
        background=bg,
        iterations=iterations,
        connectivity=connectivity,
        backend=backend,
    )
    mask = getattr(result, "mask", result)
    return to_numpy(mask) != 0


def cv2_grabcut(image, rect, fg=None, bg=None, *, iterations, protocol="mask", seed=0):
    """Run ``cv2.grabCut`` on an RGB image; return the foreground as bool (M, N).

    Without seeds: GC_INIT_WITH_RECT. With seeds, see the module docstring
    (``protocol`` "mask" or "two-stage").
    """
    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    mask = np.zeros(image.shape[:2], np.uint8)
    bgd = np.zeros((1, 65), np.float64)
    fgd = np.zeros((1, 65), np.float64)
    cv2.setRNGSeed(seed)
    if fg is None and bg is None:
        cv2.grabCut(bgr, mask, rect, bgd, fgd, iterations, cv2.GC_INIT_WITH_RECT)
    elif protocol == "mask":
        x, y, w, h = rect
        mask[y : y + h, x : x + w] = cv2.GC_PR_FGD
        mask[fg] = cv2.GC_FGD
        mask[bg] = cv2.GC_BGD
        cv2.grabCut(bgr, mask, None, bgd, fgd, iterations, cv2.GC_INIT_WITH_MASK)
    elif protocol == "two-stage":
        cv2.grabCut(bgr, mask, rect, bgd, fgd, 1, cv2.GC_INIT_WITH_RECT)
        mask[fg] = cv2.GC_FGD
        mask[bg] = cv2.GC_BGD
        if iterations > 1:
            cv2.grabCut(
                bgr, mask, None, bgd, fgd, iterations - 1, cv2.GC_INIT_WITH_MASK
            )
    else:
        raise ValueError(f"unknown scribble protocol {protocol!r}")
    return (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)


# --------------------------------------------------------------------------- helpers


def machine() -> str:
    from vision_cuts._backend import machine_description

    return machine_description()


def timed(fn, repeat: int):
    """Median wall time in ms over ``repeat`` calls, and the last result."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(times), out


def scale_rect(rect, src_shape, dst_shape):
    """Map a 0-based (x, y, w, h) box from one image size to another."""
    sy = dst_shape[0] / src_shape[0]
    sx = dst_shape[1] / src_shape[1]
    x, y, w, h = rect
    x0, y0 = round(x * sx), round(y * sy)
    x1 = min(dst_shape[1], round((x + w) * sx))
    y1 = min(dst_shape[0], round((y + h) * sy))
    return (x0, y0, x1 - x0, y1 - y0)


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def resolve_backends(requested, notes):
    """The backends of ours that can run here; unusable ones are noted and dropped."""
    if not ours_available():
        notes.append(
            "vision_cuts.grabcut does not exist yet: only cv2.grabCut was run "
            "(the ours columns are n/a)"
        )
        return []
    from vision_cuts import gpu_available

    out = []
    for b in requested:
        if b == "gpu" and not gpu_available():
            notes.append("backend gpu skipped: no CuPy or no CUDA device here")
            continue
        out.append(b)
    return out


# --------------------------------------------------------------------------- runs


def method_fns(backends, args):
    """Method name -> fn(image, rect, fg, bg) -> bool mask."""
    fns = {
        "cv2": lambda im, r, f, b: cv2_grabcut(
            im,
            r,
            f,
            b,
            iterations=args.iterations,
            protocol=args.scribble_protocol,
            seed=args.seed,
        )
    }
    for conn in args.connectivity:
        for be in backends:
            name = be if conn == 4 else f"{be}-{conn}conn"
            fns[name] = lambda im, r, f, b, be=be, conn=conn: ours_grabcut(
                im, r, f, b, iterations=args.iterations, backend=be, connectivity=conn
            )
    return fns


def run_method(name, fn, image, rect, seeds, repeat, notes):
    """(ms, mask) of one timed run; (None, None) and a note when it raises."""
    fg, bg = seeds if seeds is not None else (None, None)
    try:
        return timed(lambda: fn(image, rect, fg, bg), repeat)
    except Exception as exc:  # a failing method must not hide the others' numbers
        notes.append(f"{name}: {type(exc).__name__}: {exc}")
        return None, None


def evaluate(args, gc, backends, notes):
    root = gc.data_root(args.data)
    names = args.names or gc.grabcut_names(root)
    samples = [gc.load_grabcut(n, root, verify=not args.no_verify) for n in names]
    fns = method_fns(backends, args)
    methods = list(fns)

    # warm-up: every method, every code path, on the smallest image; not recorded
    small = min(samples, key=lambda s: s.gt.size)
    for m, fn in fns.items():
        for setting in SETTINGS:
            seeds = small.scribbles.get(setting) if setting != "rect" else None
            if setting != "rect" and seeds is None:
                continue
            run_method(
                f"warm-up {m}/{setting}", fn, small.image, small.rect, seeds, 1, notes
            )

    records = []
    for s in samples:
        rec = {
            "name": s.name,
            "shape": list(s.gt.shape),
            "rect": list(s.rect),
            "results": {},
        }
        for setting in SETTINGS:
            if setting == "rect":
                seeds = None
            elif setting in s.scribbles:
                seeds = s.scribbles[setting]
            else:
                continue
            row = {}
            for m, fn in fns.items():
                ms, mask = run_method(
                    f"{s.name} {m}/{setting}",
                    fn,
                    s.image,
                    s.rect,
                    seeds,
                    args.repeat,
                    notes,
                )
                err = None if mask is None else gc.grabcut_error(mask, s.gt, s.rect)
                row[m] = {"error": err, "ms": ms}
            rec["results"][setting] = row
        records.append(rec)
        short = "  ".join(
            f"{st}:" + ",".join(f"{m}={fmt(r['error'], '.2f')}%" for m, r in rw.items())
            for st, rw in rec["results"].items()
        )
        print(f"  {s.name}: {short}", file=sys.stderr, flush=True)
    return methods, records


def summarise(methods, records):
    summary = {}
    for setting in SETTINGS:
        for m in methods:
            errs = [
                r["results"][setting][m]["error"]
                for r in records
                if setting in r["results"]
            ]
            mss = [
                r["results"][setting][m]["ms"]
                for r in records
                if setting in r["results"]
            ]
            ok = [(e, t) for e, t in zip(errs, mss, strict=True) if e is not None]
            if not ok:
                continue
            summary.setdefault(setting, {})[m] = {
                "images": len(ok),
                "mean_error": statistics.fmean(e for e, _ in ok),
                "mean_ms": statistics.fmean(t for _, t in ok),
                "median_ms": statistics.median(t for _, t in ok),
                "total_ms": sum(t for _, t in ok),
            }
    per_method = {}
    for m in methods:
        mss = [
            r["results"][st][m]["ms"]
            for r in records
            for st in r["results"]
            if r["results"][st][m]["ms"] is not None
        ]
        if mss:
            per_method[m] = {"runs": len(mss), "mean_ms": statistics.fmean(mss)}
    return summary, per_method


def print_tables(methods, records, summary, per_method, args):
    label = {m: ("cv2" if m == "cv2" else f"ours-{m}") for m in methods}
    for setting in SETTINGS:
        rows = [r for r in records if setting in r["results"]]
        if not rows:
            continue
        print(
            f"\n== {setting}: {SETTING_TITLES[setting]}, {args.iterations} iterations"
        )
        head = f"{'image':<10} {'size':>8}" + "".join(
            f" {label[m] + ' err%':>13} {label[m] + ' ms':>12}" for m in methods
        )
        print(head)
        print("-" * len(head))
        for r in rows:
            h, w = r["shape"]
            line = f"{r['name']:<10} {f'{w}x{h}':>8}"
            for m in methods:
                res = r["results"][setting][m]
                line += f" {fmt(res['error'], '.2f'):>13} {fmt(res['ms'], '.1f'):>12}"
            print(line)
        line = f"{'mean':<10} {'':>8}"
        for m in methods:
            sm = summary.get(setting, {}).get(m)
            line += (
                f" {fmt(sm and sm['mean_error'], '.2f'):>13}"
                f" {fmt(sm and sm['mean_ms'], '.1f'):>12}"
            )
        print(line)

    print("\n== summary (mean over images; ratio = cv2 total time / method total time)")
    print(
        f"{'setting':<8} {'method':<10} {'images':>6} {'mean err%':>10} "
        f"{'mean ms':>10} {'median ms':>10} {'cv2/this':>9}"
    )
    for setting, by_m in summary.items():
        cv = by_m.get("cv2")
        for m, sm in by_m.items():
            ratio = cv["total_ms"] / sm["total_ms"] if cv and m != "cv2" else None
            print(
                f"{setting:<8} {label[m]:<10} {sm['images']:>6} "
                f"{sm['mean_error']:>10.2f} {sm['mean_ms']:>10.1f} "
                f"{sm['median_ms']:>10.1f} {fmt(ratio, '.2f'):>9}"
            )
    print("\n== mean time per run, all settings")
    for m, pm in per_method.items():
        print(f"{label[m]:<10} {pm['mean_ms']:>10.1f} ms  ({pm['runs']} runs)")


def size_test(args, gc, backends, notes):
    root = gc.data_root(args.data)
    name = args.size_image
    s = gc.load_grabcut(name, root, verify=not args.no_verify)
    w, h = args.size
    image = cv2.resize(s.image, (w, h), interpolation=cv2.INTER_LINEAR)
    gt = cv2.resize(s.gt, (w, h), interpolation=cv2.INTER_NEAREST)
    rect = scale_rect(s.rect, s.gt.shape, (h, w))
    fns = method_fns(backends, args)
    repeat = args.repeat if args.repeat_given else 3
    print(
        f"\n== size test: {name} resized {s.gt.shape[1]}x{s.gt.shape[0]} -> {w}x{h}"
        f" ({w * h / 1e6:.2f} MP), box {rect}, {args.iterations} iterations, "
        f"median of {repeat} after 1 warm-up"
    )
    rows = {}
    for m, fn in fns.items():
        run_method(f"size warm-up {m}", fn, image, rect, None, 1, notes)
        ms, mask = run_method(f"size {m}", fn, image, rect, None, repeat, notes)
        err = None if mask is None else gc.grabcut_error(mask, gt, rect)
        rows[m] = {"ms": ms, "error": err}
    base = rows["cv2"]["ms"]
    print(f"{'method':<10} {'ms':>10} {'err%':>7} {'cv2/this':>9}")
    for m, r in rows.items():
        ratio = base / r["ms"] if base and r["ms"] and m != "cv2" else None
        r["cv2_over_this"] = ratio
        print(
            f"{('cv2' if m == 'cv2' else 'ours-' + m):<10} {fmt(r['ms'], '.1f'):>10}"
            f" {fmt(r['error'], '.2f'):>7} {fmt(ratio, '.2f'):>9}"
        )
    return {
        "image": name,
        "size": [w, h],
        "rect": list(rect),
        "repeat": repeat,
        "results": rows,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        help="folder holding grabcut/ (default VISION_CUTS_DATA,"
        " else ../shared/datasets next to the repository)",
    )
    ap.add_argument("--names", nargs="+", help="images to run (default: all)")
    ap.add_argument(
        "--backend",
        nargs="+",
        default=["cpu"],
        choices=["cpu", "gpu"],
        help="backends of vision_cuts.grabcut to run (default cpu)",
    )
    ap.add_argument(
        "--iterations", type=int, default=5, help="GrabCut iterations (protocol: 5)"
    )
    ap.add_argument(
        "--connectivity",
        type=int,
        nargs="+",
        default=[4],
        choices=[4, 8],
        help="neighbourhoods of ours to run (8: methods named <backend>-8conn)",
    )
    ap.add_argument(
        "--scribble-protocol",
        choices=["mask", "two-stage"],
        default="mask",
        help="how cv2 gets the scribbles (see above)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="cv2.setRNGSeed before every cv2 call (default 0)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="timed runs per measurement, median (default 1; 3 for --size-test)",
    )
    ap.add_argument(
        "--size-test",
        action="store_true",
        help="time one image resized to --size instead of the benchmark",
    )
    ap.add_argument(
        "--size-image",
        default="person1",
        help="image of the size test (default person1)",
    )
    ap.add_argument(
        "--size",
        nargs=2,
        type=int,
        default=[1920, 1080],
        metavar=("W", "H"),
        help="size of the size test (1920 1080)",
    )
    ap.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the SHA-256 check of the data files",
    )
    ap.add_argument("--json", help="write all numbers to this file")
    args = ap.parse_args(argv)
    args.repeat_given = args.repeat is not None
    if args.repeat is None:
        args.repeat = 1
    if args.data is None and not os.environ.get("VISION_CUTS_DATA", "").strip():
        default = REPO.parent / "shared" / "datasets"
        if default.is_dir():
            args.data = str(default)

    from vision_cuts.datasets import grabcut as gc

    notes = []
    backends = resolve_backends(args.backend, notes)
    info = {
        "machine": machine(),
        "opencv": cv2.__version__,
        "opencv_threads": cv2.getNumThreads(),
        "backends": backends,
        "iterations": args.iterations,
        "scribble_protocol": args.scribble_protocol,
        "cv2_seed": args.seed,
        "repeat": args.repeat,
    }
    print(f"machine: {info['machine']}")
    print(
        f"opencv {cv2.__version__} ({cv2.getNumThreads()} threads); ours: "
        + (", ".join(backends) if backends else "not run")
    )
    if "gpu" in backends:
        from vision_cuts._backend import gpu_name

        info["gpu"] = gpu_name()
        print(f"gpu: {info['gpu']}")
    for n in notes:
        print(f"note: {n}")
    notes_before = len(notes)

    out = {"info": info}
    if args.size_test:
        out["size_test"] = size_test(args, gc, backends, notes)
    else:
        methods, records = evaluate(args, gc, backends, notes)
        summary, per_method = summarise(methods, records)
        print_tables(methods, records, summary, per_method, args)
        out.update(images=records, summary=summary, per_method=per_method)
    for n in notes[notes_before:]:
        print(f"note: {n}")
    out["notes"] = notes
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
