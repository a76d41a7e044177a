"""The ``vision-cuts`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np

SAMPLES = ("astronaut", "coffee", "chelsea", "rocket", "camera", "cat")


def _load_image(spec: str) -> np.ndarray:
    """An image file, or a built-in scikit-image picture named ``sample:NAME``."""
    if spec.startswith("sample:") or spec in SAMPLES:
        import skimage.data

        name = spec.split(":", 1)[-1]
        if name not in SAMPLES:
            raise SystemExit(f"error: unknown sample {name!r}; choose from {SAMPLES}")
        img = getattr(skimage.data, name)()
        return img
    import cv2

    img = cv2.imread(spec, cv2.IMREAD_COLOR)
    if img is None:
        raise SystemExit(f"error: cannot read image {spec!r}")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _parse_rect(text: str) -> tuple[int, int, int, int]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        vals = ()
    if len(vals) != 4:
        raise argparse.ArgumentTypeError(
            f"--rect must be x,y,w,h integers, got {text!r}"
        )
    return vals  # type: ignore[return-value]


def overlay(
    image: np.ndarray, mask: np.ndarray, rect=None, fg=None, bg=None
) -> np.ndarray:
    """RGB picture: background dimmed, object contour, box and scribbles drawn."""
    import cv2

    img = image if image.ndim == 3 else np.stack([image] * 3, axis=-1)
    img = img[..., :3].astype(np.float32)
    m = mask.astype(bool)
    out = img * 0.3
    out[m] = img[m]
    out = np.clip(out, 0, 255).astype(np.uint8)
    contours, _ = cv2.findContours(
        m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE
    )
    cv2.drawContours(out, contours, -1, (255, 230, 0), 2)
    if rect is not None:
        x, y, w, h = rect
        cv2.rectangle(out, (x, y), (x + w - 1, y + h - 1), (255, 60, 60), 2)
    if fg is not None:
        out[fg] = (40, 220, 40)
    if bg is not None:
        out[bg] = (60, 120, 255)
    return out


def _write_rgb(path: str, rgb: np.ndarray) -> None:
    import cv2

    img = rgb if rgb.ndim == 2 else cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    if not cv2.imwrite(path, img):
        raise SystemExit(f"error: cannot write {path!r}")


def _load_mask(path: str | None, shape: tuple, what: str):
    if path is None:
        return None
    import cv2

    m = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if m is None:
        raise SystemExit(f"error: cannot read {what} mask {path!r}")
    if m.shape != shape:
        raise SystemExit(
            f"error: the {what} mask {path!r} is {m.shape[1]}x{m.shape[0]}, the image "
            f"{shape[1]}x{shape[0]}"
        )
    return m > 0


class _Progress:
    """A one-line progress bar on stderr (only when it is a terminal, or verbose)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 24
        fill = int(width * done / max(total, 1))
        end = "\n" if done >= total else ""
        sys.stderr.write(
            f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}{end}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _cmd_segment(args: argparse.Namespace) -> int:
    from .segmentation import grabcut

    image = _load_image(args.image)
    h, w = image.shape[:2]
    fg = _load_mask(args.fg, (h, w), "foreground")
    bg = _load_mask(args.bg, (h, w), "background")
    rect = args.rect
    if rect is None and fg is None and bg is None:
        rect = (w // 8, h // 16, w * 3 // 4, h * 7 // 8)
    progress = _Progress("grabcut", sys.stderr.isatty() or args.verbose)
    t0 = time.perf_counter()
    try:
        res = grabcut(
            image,
            rect=rect,
            foreground=fg,
            background=bg,
            iterations=args.iterations,
            smoothness=args.smoothness,
            callback=progress,
            backend=args.backend,
        )
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"error: {exc}") from None
    if res.iterations < args.iterations:
        progress.close()
    dt = time.perf_counter() - t0
    mask = res.mask
    if args.output:
        _write_rgb(args.output, mask * 255)
    if args.overlay:
        _write_rgb(args.overlay, overlay(image, mask, rect, fg, bg))
    print(
        f"segmented {w}x{h} image in {dt * 1e3:.0f} ms ({res.iterations} cuts): "
        f"{int(mask.sum())} object pixels ({100.0 * mask.mean():.1f}%)"
        + (f"; mask -> {args.output}" if args.output else "")
        + (f"; overlay -> {args.overlay}" if args.overlay else "")
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``vision-cuts``."""
    p = argparse.ArgumentParser(
        prog="vision-cuts", description="Exact graph cuts for computer vision."
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "segment", help="GrabCut: segment the object in a rectangle and/or scribbles"
    )
    s.add_argument(
        "image", help=f"image file, or a built-in picture: {', '.join(SAMPLES)}"
    )
    s.add_argument(
        "--rect",
        type=_parse_rect,
        default=None,
        help="x,y,w,h box around the object (default: central box)",
    )
    s.add_argument("-o", "--output", help="write the mask (PNG, 255 = object)")
    s.add_argument("--overlay", help="write an overlay picture (PNG)")
    s.add_argument("--fg", help="foreground scribbles: mask image, nonzero = object")
    s.add_argument(
        "--bg", help="background scribbles: mask image, nonzero = background"
    )
    s.add_argument("--iterations", type=int, default=5)
    s.add_argument("--smoothness", type=float, default=120.0)
    s.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto")
    s.set_defaults(func=_cmd_segment)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vision-cuts`` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
