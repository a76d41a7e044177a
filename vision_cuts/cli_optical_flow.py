"""``vision-cuts flow``: optical flow of an image pair or of every frame of a video.

Video mode streams: frames are read one at a time with ``cv2.VideoCapture``, only the
previous frame is kept, and every output frame is written as soon as it is drawn, so
a video of any length runs in constant memory.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from .cli import (
    _check_distinct,
    _check_output,
    _cv2_reason,
    _load_image,
    _Progress,
    _write_rgb,
    _writing,
    add_backend_option,
    cli_error,
    quiet_stderr,
)
from .optical_flow import DETECTORS

_VIEWS = ("arrows", "color", "both")
_MAX_FEATURES = 2**31 - 1  # optical_flow's bound on max_features


#: the default codec of a flow video
_FOURCC = "mp4v"


def add_parser(subparsers) -> None:
    """Register the ``flow`` sub-command."""
    f = subparsers.add_parser(
        "flow",
        help="optical flow by feature assignment: an image pair or a video",
        description=(
            "Optical flow by assignment between the features of consecutive frames. "
            "With one INPUT (a video) every pair of consecutive frames is solved and "
            "drawn into the output video; with two (FRAME0 FRAME1) one pair."
        ),
    )
    f.add_argument("inputs", nargs="+", metavar="INPUT", help="VIDEO, or FRAME0 FRAME1")
    f.add_argument(
        "-o",
        "--output",
        help="output picture (pair mode, PNG) or video (video mode, e.g. out.mp4)",
    )
    f.add_argument(
        "--view",
        choices=_VIEWS,
        default=None,
        help="what -o shows: sparse arrows on the frame (the default), the Middlebury "
        "colour coding of the dense flow, or both side by side (color and both "
        "compute dense flow)",
    )
    f.add_argument(
        "--color", help="pair mode: write the dense flow colour coding (PNG)"
    )
    f.add_argument("--flo", help="pair mode: write the dense flow as a .flo file")
    f.add_argument(
        "--arrow-scale",
        type=float,
        default=None,
        help="length factor of the arrows of -o (default 1)",
    )
    f.add_argument(
        "--max-magnitude",
        type=float,
        default=None,
        help="flow magnitude of full colour saturation in the colour coding (-o with "
        "--view color or both, --color; default: per frame maximum)",
    )
    f.add_argument(
        "--detector", choices=DETECTORS, default="fast-brief",
        help="default fast-brief",
    )  # fmt: skip
    f.add_argument(
        "--max-features", type=int, default=3000,
        help="features a frame at most (default 3000)",
    )  # fmt: skip
    f.add_argument(
        "--search-radius",
        type=float,
        default=40.0,
        help="largest displacement (px) of the first, global matching; the local pass "
        "after it may follow the local motion up to 6 px further",
    )
    f.add_argument(
        "--max-frames",
        type=int,
        default=None,
        help="video mode: stop after this many frame pairs",
    )
    f.add_argument(
        "--fourcc", default=_FOURCC, help="video mode: output codec (default mp4v)"
    )
    f.add_argument(
        "--no-warm-start",
        action="store_true",
        help="video mode: solve every pair from scratch (default: start each pair "
        "from the previous pair's motion)",
    )
    add_backend_option(f)
    from . import cli_many

    cli_many.add_options(f, videos=True)
    f.set_defaults(func=_cmd_flow)


def _solve(args, frame0, frame1, dense: bool):
    from .optical_flow import optical_flow

    try:
        return optical_flow(
            frame0,
            frame1,
            backend=args.backend,
            dense=dense,
            detector=args.detector,
            max_features=args.max_features,
            search_radius=args.search_radius,
        )
    except (ValueError, TypeError) as exc:
        raise cli_error(exc) from None


def _picture(args, frame, res) -> np.ndarray:
    from .visualize import draw_flow_arrows, flow_to_color

    arrows = None
    if args.view in ("arrows", "both"):
        arrows = draw_flow_arrows(
            frame, res.points, res.vectors, scale=args.arrow_scale
        )
    if args.view == "arrows":
        return arrows
    color = flow_to_color(res.dense, args.max_magnitude)
    if args.view == "color":
        return color
    return np.concatenate([arrows, color], axis=1)


def _summary(res, dt: float) -> str:
    n = len(res.points)
    if n == 0:
        return f"0 matches, {dt * 1e3:.0f} ms"
    mag = np.hypot(res.vectors[:, 0], res.vectors[:, 1])
    return (
        f"{n} matches, median |v| {float(np.median(mag)):.2f} px, "
        f"max {float(mag.max()):.2f} px, mean cost {float(res.costs.mean()):.3f}, "
        f"{dt * 1e3:.0f} ms"
    )


def _check_args(args) -> None:
    """The options' values, checked before any file is read or written."""
    if not 0 < args.max_features <= _MAX_FEATURES:
        raise SystemExit(
            f"error: --max-features must be positive and at most {_MAX_FEATURES}, "
            f"got {args.max_features}"
        )
    for option, value in (
        ("--search-radius", args.search_radius),
        ("--arrow-scale", args.arrow_scale),
        ("--max-magnitude", args.max_magnitude),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise SystemExit(
                f"error: {option} must be positive and finite, got {value}"
            )
    if args.max_frames is not None and args.max_frames <= 0:
        raise SystemExit(f"error: --max-frames must be positive, got {args.max_frames}")


def _check_drawing(args) -> None:
    """The drawing options only with an output that they change (they were ignored,
    and ``--view color`` without ``-o`` computed dense flow for nothing); then the
    defaults of those not given."""
    view = args.view or "arrows"
    arrows = args.output and view in ("arrows", "both")
    colour = (args.output and view in ("color", "both")) or args.color
    if args.view is not None and not args.output:
        raise SystemExit(
            f"error: --view chooses what the -o picture or video shows; give -o FILE "
            f"(--view {args.view})"
        )
    if args.arrow_scale is not None and not arrows:
        raise SystemExit(
            "error: --arrow-scale sizes the arrows of -o (--view arrows or both), and "
            "no output here shows arrows"
        )
    if args.max_magnitude is not None and not colour:
        raise SystemExit(
            "error: --max-magnitude sets the colour coding's saturation (-o with "
            "--view color or both, or --color), and no output here shows it"
        )
    args.view = view
    if args.arrow_scale is None:
        args.arrow_scale = 1.0


def _cmd_flow(args: argparse.Namespace) -> int:
    from . import cli_many

    if cli_many.wanted(args):
        return cli_many.flow(args)
    _check_args(args)
    if len(args.inputs) not in (1, 2):
        raise SystemExit(
            f"error: give one video or two frames, got {len(args.inputs)} inputs"
        )
    pair = len(args.inputs) == 2
    if not pair and (args.color is not None or args.flo is not None):
        raise SystemExit("error: --color and --flo are for an image pair")
    video_only = [o for o, given in (
        ("--max-frames", args.max_frames is not None),
        ("--fourcc", args.fourcc != _FOURCC),
        ("--no-warm-start", args.no_warm_start),
    ) if given]  # fmt: skip
    if pair and video_only:
        raise SystemExit(f"error: {', '.join(video_only)}: for a video, not a pair")
    _check_drawing(args)
    if len(args.fourcc) != 4:
        raise SystemExit(
            f"error: --fourcc is a four-character codec code, got {args.fourcc!r}"
        )
    _check_output(args.output, "-o/--output", "colour" if pair else "video")
    _check_output(args.color, "--color", "colour")
    _check_output(args.flo, "--flo", "flo")
    _check_distinct(
        [(args.output, "-o/--output"), (args.color, "--color"), (args.flo, "--flo")],
        list(args.inputs),
    )
    return _pair(args) if pair else _video(args)


def _pair(args: argparse.Namespace) -> int:
    from .io import write_flo
    from .visualize import flow_to_color

    frame0, frame1 = _load_image(args.inputs[0]), _load_image(args.inputs[1])
    if frame0.shape != frame1.shape:
        raise SystemExit(
            f"error: the frames differ in size: {args.inputs[0]!r} is "
            f"{frame0.shape[1]}x{frame0.shape[0]}, {args.inputs[1]!r} is "
            f"{frame1.shape[1]}x{frame1.shape[0]}"
        )
    dense = bool(args.color or args.flo or args.view != "arrows")
    t0 = time.perf_counter()
    res = _solve(args, frame0, frame1, dense)
    dt = time.perf_counter() - t0
    outputs = []
    if args.output:
        _write_rgb(args.output, _picture(args, frame0, res), "-o/--output")
        outputs.append(f"{args.view} -> {args.output}")
    if args.color:
        _write_rgb(args.color, flow_to_color(res.dense, args.max_magnitude), "--color")
        outputs.append(f"colour coding -> {args.color}")
    if args.flo:
        with _writing(args.flo, "--flo") as part:
            write_flo(part, res.dense)
        outputs.append(f"dense flow -> {args.flo}")
    h, w = frame0.shape[:2]
    print(
        f"flow of a {w}x{h} pair: {_summary(res, dt)}"
        + ("; " + "; ".join(outputs) if outputs else "")
    )
    return 0


def _open_writer(args: argparse.Namespace, fps: float, size: tuple, path: str):
    """The video writer of ``-o`` for frames of ``size`` (width, height), writing
    ``path`` (the file beside ``-o`` that replaces it at the end), or ``error:
    cannot write ...`` naming ``-o``'s file and the codec."""
    import cv2

    fourcc = args.fourcc
    try:
        with quiet_stderr():
            writer = cv2.VideoWriter(
                path, cv2.VideoWriter_fourcc(*fourcc), float(fps), size
            )
    except cv2.error as exc:
        raise SystemExit(
            f"error: cannot write video {args.output!r} (-o/--output) with codec "
            f"{args.fourcc!r}: OpenCV: {_cv2_reason(exc)}"
        ) from None
    if not writer.isOpened():
        raise SystemExit(
            f"error: cannot write video {args.output!r} (-o/--output) with codec "
            f"{args.fourcc!r}: OpenCV has no writer for this container and codec; "
            "try .mp4 or .avi with --fourcc mp4v or MJPG"
        )
    return writer


def _check_written(path: str, frames: int, shown: str | None = None) -> None:
    """The video written to ``path`` (for ``-o`` ``shown``) reads back to its last
    frame: OpenCV's writer reports no failure of its own (on a full disk it leaves
    a file that nothing can play, and the command would end as if it had written
    it)."""
    import cv2

    with quiet_stderr():
        cap = cv2.VideoCapture(path)
        try:
            ok = cap.isOpened()
            count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) if ok else 0
            if ok and frames > 1:
                cap.set(cv2.CAP_PROP_POS_FRAMES, frames - 1)
            ok = ok and cap.read()[0]
        finally:
            cap.release()
    if not ok or 0 < count < frames:
        with contextlib.suppress(OSError):  # nothing can play it
            os.remove(path)
        if 0 < count < frames:
            why = f"it holds {count} of the {frames} frames written"
        elif count:
            why = f"its last frame ({frames}) does not read back"
        else:
            why = "it does not read back"
        raise SystemExit(
            f"error: cannot write video {shown or path!r} (-o/--output): {why} (is "
            "the disk full?); removed it"
        )


def _video(args: argparse.Namespace) -> int:
    """Video mode; ``-o`` is written beside its file and moved over it once read
    back (a run that fails leaves what was there)."""
    if not args.output:
        return _video_to(args, None)
    with _writing(args.output, "-o/--output", ".mp4") as part:
        return _video_to(args, part)


def _video_to(args: argparse.Namespace, part: str | None) -> int:
    import cv2

    path = args.inputs[0]
    if not Path(path).is_file():
        if Path(path).is_dir():
            raise SystemExit(f"error: cannot read video {path!r}: it is a directory")
        raise SystemExit(f"error: no such video file {path!r}")
    with quiet_stderr():  # (FFmpeg logs a file it cannot open, twice)
        cap = cv2.VideoCapture(path)
        ok, first = cap.read() if cap.isOpened() else (False, None)
    if not ok or first is None:
        cap.release()
        raise SystemExit(f"error: cannot read video {path!r} (no decodable frame)")
    fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
    pairs = count - 1 if count > 1 else 0
    if args.max_frames is not None:
        pairs = min(pairs, args.max_frames) if pairs else args.max_frames
    progress = _Progress("flow", sys.stderr.isatty() or args.verbose)
    dense = args.view != "arrows"
    writer = None
    if args.output:
        # opened before any pair is solved: a container or codec OpenCV cannot
        # write fails now, not after the first solve
        h, w = first.shape[:2]
        try:
            size = (2 * w if args.view == "both" else w, h)
            writer = _open_writer(args, fps, size, part)
        except SystemExit:
            cap.release()
            raise
    from .optical_flow import optical_flow_frames

    def decoded():
        """RGB frames as they are decoded (on the pipeline's reader thread)."""
        yield cv2.cvtColor(first, cv2.COLOR_BGR2RGB)
        for _ in range(pairs if args.max_frames is not None else 2**62):
            ok, frame = cap.read()
            if not ok or frame is None:
                return
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)

    kept: dict = {}  # frames by index, until their pair is drawn (at most 3: the
    # reader runs a frame ahead of the solve)

    def remember(frames):
        for i, f in enumerate(frames):
            kept[i] = f
            yield f

    results = optical_flow_frames(
        remember(decoded()),
        backend=args.backend,
        dense=dense,
        detector=args.detector,
        max_features=args.max_features,
        search_radius=args.search_radius,
        warm_start=not args.no_warm_start,
    )
    done = 0
    matches = 0
    prev = None
    t_start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        while True:
            try:
                res = next(results)
            except StopIteration:
                break
            except (ValueError, TypeError) as exc:
                raise cli_error(exc) from None
            dt = time.perf_counter() - t0
            prev = kept.pop(done)
            if writer is not None:
                pic = _picture(args, prev, res)
                writer.write(cv2.cvtColor(pic, cv2.COLOR_RGB2BGR))
            done += 1
            matches += len(res.points)
            progress.clear()  # the summary line replaces the bar
            print(f"frame {done - 1}->{done}: {_summary(res, dt)}", flush=True)
            if pairs:
                progress(min(done, pairs), pairs)
            t0 = time.perf_counter()
    finally:
        results.close()
        cap.release()
        if writer is not None:
            writer.release()
    if pairs and done < pairs:
        progress.close()
    if done == 0 or prev is None:
        raise SystemExit(f"error: video {path!r} has fewer than two frames")
    if writer is not None:
        _check_written(part, done, args.output)
    total = time.perf_counter() - t_start
    h, w = prev.shape[:2]
    print(
        f"flow of {done} frame pairs ({w}x{h}) in {total:.1f} s "
        f"({done / max(total, 1e-9):.1f} pairs/s), {matches / done:.0f} matches per "
        "pair" + (f"; {args.view} video -> {args.output}" if args.output else "")
    )
    return 0
