"""The ``vision-cuts`` command line."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import numpy as np

from .stereo import METHODS as STEREO_METHODS

SAMPLES = ("astronaut", "coffee", "chelsea", "rocket", "camera", "cat")

# Sub-commands that live in their own modules (``vision_cuts.<name>``); each module
# has ``add_parser(subparsers)``, which registers the command and sets ``func``.
_COMMAND_MODULES: tuple[str, ...] = ("cli_gui", "cli_maxflow", "cli_optical_flow")


def is_sample(spec: str, samples: tuple = SAMPLES) -> bool:
    """Whether ``spec`` names a built-in picture of ``samples``: ``sample:NAME``, or a
    bare NAME that is not an existing file (a file of that name is read as a file).
    A ``sample:`` name outside the default samples counts too, so that the reader
    can name it as unknown."""
    if spec.startswith("sample:"):
        return samples is SAMPLES or spec.split(":", 1)[1] in samples
    return spec in samples and not os.path.exists(spec)


def _load_image(spec: str) -> np.ndarray:
    """An image file, or a built-in scikit-image picture named ``sample:NAME`` (or
    ``NAME`` where no file has that name): RGB, (H, W, 3) uint8 either way."""
    if is_sample(spec):
        import skimage.data

        name = spec.split(":", 1)[-1]
        if name not in SAMPLES:
            raise SystemExit(f"error: unknown sample {name!r}; choose from {SAMPLES}")
        img = getattr(skimage.data, name)()
        # as an image file is read: three channels (camera is grey)
        return np.stack([img] * 3, axis=-1) if img.ndim == 2 else img[..., :3]
    import cv2

    # a floating-point picture (.pfm, .hdr, a float TIFF) keeps its values: read as
    # 8 bits it would be truncated (0.9 -> 0); the library takes floats in [0, 1]
    img = _imread(spec, cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH, "image")
    if img.dtype.kind == "f":
        return np.ascontiguousarray(img[..., ::-1], dtype=np.float32)
    if img.dtype != np.uint8:  # 16 bits and other integers: 8 bits, as OpenCV reads
        img = _imread(spec, cv2.IMREAD_COLOR, "image")  # them for a colour picture
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _on_255_scale(image: np.ndarray) -> np.ndarray:
    """``image`` for drawing on the 0..255 scale: a float picture on the [0, 1]
    scale (as the library reads float pictures: ``_validate.unit_scale``) times 255
    and rounded, in float32; any other picture as it is."""
    from ._validate import unit_scale

    if image.dtype.kind != "f" or not image.size:
        return image
    top = float(np.nanmax(image)) if not np.isnan(image).all() else 0.0
    if not unit_scale(top):
        return image
    return np.rint(image.astype(np.float32) * np.float32(255.0))


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence what OpenCV's codecs print on the process's stderr themselves
    (``libpng error: Read Error``, FFmpeg's log of a file it cannot open), which
    OpenCV's log level does not reach; the command reports the failure in one
    line."""
    import cv2

    with _QUIET_LOCK:  # (one thread at a time moves descriptor 2)
        with _quiet_fd2(cv2):
            yield


#: held while descriptor 2 points elsewhere
_QUIET_LOCK = threading.RLock()


@contextlib.contextmanager
def _quiet_fd2(cv2) -> Iterator[None]:
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    if sys.stderr is not None:
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # standard error is closed: nothing to silence
        saved = None
    try:
        if saved is not None:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
        yield
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        cv2.utils.logging.setLogLevel(level)


def _imread(path: str, flags: int, what: str) -> np.ndarray:
    """``cv2.imread(path, flags)``; ``SystemExit`` naming ``what`` and the reason
    (no such file, a directory, OpenCV's error, not a picture) otherwise."""
    import cv2

    if not os.path.isfile(path):  # (OpenCV would log a warning of its own first)
        why = "it is a directory" if os.path.isdir(path) else "no such file"
        raise SystemExit(f"error: cannot read {what} {path!r}: {why}")
    try:
        with quiet_stderr():  # (libpng prints "libpng error: ..." of a cut file)
            img = cv2.imread(path, flags)
    except cv2.error as exc:
        raise SystemExit(
            f"error: cannot read {what} {path!r}: {_cv2_reason(exc)}"
        ) from None
    if img is None:
        raise SystemExit(
            f"error: cannot read {what} {path!r}: not a picture OpenCV decodes"
        )
    return img


def _cv2_reason(exc: Exception) -> str:
    """The short text of a ``cv2.error`` (without OpenCV's file and line)."""
    return str(getattr(exc, "err", None) or exc).strip()


#: a --rect value with a negative first number (``-5,-5,50,50``), which argparse
#: would take for an option
_NEGATIVE_RECT = re.compile(r"-\d+(\s*,\s*[-+]?\d+){3}")


def _join_negative_rect(argv: list[str]) -> list[str]:
    """``argv`` with ``--rect -5,-5,50,50`` given as ``--rect=-5,-5,50,50`` (argparse
    reads a value that starts with ``-`` and is no plain number as an option: "expected
    one argument"). Nothing after ``--`` changes."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            out += argv[i:]
            break
        if (argv[i] == "--rect" and i + 1 < len(argv)
                and _NEGATIVE_RECT.fullmatch(argv[i + 1])):  # fmt: skip
            out.append(f"--rect={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


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


#: an overlay's dimmed background: 0.3 v in float32, truncated, for each uint8 value v
_DIM = (np.arange(256, dtype=np.float32) * np.float32(0.3)).astype(np.uint8)


def _dimmed(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The overlay's base: RGB uint8, the object as it is and the background at 0.3
    of its value (float32, clipped to [0, 255] and truncated); a float picture on
    the [0, 1] scale is put on the 0..255 scale first."""
    import cv2

    img = _on_255_scale(image)
    img = img if img.ndim == 3 else np.stack([img] * 3, axis=-1)
    img = img[..., :3]
    m = np.ascontiguousarray(mask, dtype=bool)  # no copy of a boolean mask
    if img.dtype == np.uint8 and img.shape[-1] == 3:
        # the float formula below by a table, and the object copied back by OpenCV:
        # the same values in a tenth of the time on large pictures
        img = np.ascontiguousarray(img)
        return cv2.copyTo(img, m.view(np.uint8), cv2.LUT(img, _DIM))
    f = img.astype(np.float32)
    out = f * 0.3
    out[m] = f[m]
    return np.clip(out, 0, 255).astype(np.uint8)


def overlay(
    image: np.ndarray, mask: np.ndarray, rect=None, fg=None, bg=None
) -> np.ndarray:
    """RGB picture: background dimmed, object contour, box and scribbles drawn."""
    import cv2

    m = np.ascontiguousarray(mask, dtype=bool)  # once, for the base and the contour
    out = _dimmed(image, m)
    contours, _ = cv2.findContours(
        m.view(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE
    )
    cv2.drawContours(out, contours, -1, (255, 230, 0), 2)
    if rect is not None:  # the box's part inside the picture (as grabcut clips it)
        x, y, w, h = (int(v) for v in rect)
        rows, cols = out.shape[:2]
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + w, cols) - 1, min(y + h, rows) - 1
        if x0 <= x1 and y0 <= y1:
            cv2.rectangle(out, (x0, y0), (x1, y1), (255, 60, 60), 2)
    if fg is not None:
        out[fg] = (40, 220, 40)
    if bg is not None:
        out[bg] = (60, 120, 255)
    return out


#: extensions whose OpenCV writers keep 16-bit integers (``stereo --png16``)
_EXT_16BIT = (".png", ".tif", ".tiff", ".pgm", ".pnm")
#: formats of one grey channel (OpenCV's writers refuse a colour picture there)
_EXT_GREY = (".pgm", ".pbm")
#: formats whose OpenCV writers change pixel values (a mask would not read back)
_EXT_LOSSY = (".jpg", ".jpeg", ".jpe", ".jp2", ".avif", ".gif")
#: formats of floating-point pixels (OpenCV scales an 8-bit picture into them)
_EXT_FLOAT = (".hdr", ".pic", ".pfm", ".exr")
#: formats OpenCV writes in colour only: a grey picture goes in as three equal
#: channels (a grey Sun raster is written all black, a grey GIF not at all)
_EXT_COLOUR_ONLY = (".ppm", ".ras", ".sr", ".gif")


#: the longest file name (bytes) of the common file systems
_NAME_MAX = 255


#: the library parameters that command-line options set, by the option's name
_OPTIONS = {
    name: "--" + name.replace("_", "-")
    for name in (
        "iterations smoothness connectivity max_disparity label_step method "
        "max_features search_radius detector backend"
    ).split()
}


def cli_error(exc: Exception) -> SystemExit:
    """``error: ...`` for a library error about an argument the command line passed
    on: a message that starts with the parameter's name names the option instead
    (``iterations must be ...`` -> ``--iterations must be ...``)."""
    text = str(exc)
    first = text.split(" ", 1)[0]
    if first in _OPTIONS:
        text = _OPTIONS[first] + text[len(first) :]
    return SystemExit(f"error: {text}")


def _cannot_write(path: str, option: str, reason: str) -> SystemExit:
    return SystemExit(f"error: cannot write {path!r} ({option}): {reason}")


def _extension(path: str) -> str:
    name = os.path.basename(path)
    return name[name.rfind(".") :] if "." in name else ""


def _check_output(path: str | None, option: str, kind: str = "file") -> None:
    """Fail before the long work on an output path that cannot be written.

    ``kind`` is ``"file"`` (any file), ``"image"`` (a grey 8-bit picture
    ``cv2.imwrite`` can write), ``"mask"`` (a grey 8-bit picture that must read
    back exactly: no lossy format), ``"colour"`` (a colour one), ``"image16"`` (a
    grey 16-bit one), ``"video"``, ``"pfm"`` or ``"flo"`` (files of that extension).
    An empty name, a directory, a missing or read-only parent directory, a read-only
    file and an extension OpenCV has no writer for (or none for this kind of
    picture) are errors that name the option.
    """
    if path is None:
        return
    if not path.strip():
        raise SystemExit(f"error: {option} needs a file name, got {path!r}")
    reason = output_problem(path, kind)
    if reason is not None:
        raise _cannot_write(path, option, reason)


def output_problem(path: str, kind: str = "file") -> str | None:
    """Why ``path`` cannot be written as ``kind`` (see :func:`_check_output`), or
    None. The GUI's pictures are checked with it too."""
    if os.path.isdir(path) or path.endswith(("/", os.sep)):
        return "it is a directory; give a file name"
    fd = open_descriptor(path)
    if fd is not None:
        problem = _descriptor_problem(fd)
        if problem is not None:
            return problem
    stream = is_stream(path)
    if not stream:
        name_bytes = len(os.fsencode(os.path.basename(path)))
        if name_bytes > _NAME_MAX:  # checked before the work: no output replaced
            return (
                f"the file name is {name_bytes} bytes long; file systems take at "
                f"most {_NAME_MAX}"
            )
        parent = os.path.dirname(path) or "."
        if not os.path.isdir(parent):
            why = (
                "does not exist" if not os.path.exists(parent) else "is not a directory"
            )
            return f"the directory {parent!r} {why}"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"the directory {parent!r} is not writable"
    if fd is None and os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is read-only"
    ext = _extension(path)
    if stream and not ext:
        return None  # written in its kind's default format (see replacing)
    if kind == "video":
        return _video_extension_problem(path)
    if kind in ("pfm", "flo"):  # a format of its own: an image name would mislead
        if stream:
            return None
        if ext.lower() != f".{kind}":
            return f"this output is a .{kind} file; name it with the .{kind} extension"
        return None
    if kind not in ("image", "mask", "colour", "image16"):
        return None
    import cv2

    if not ext:
        return "no file extension to choose the image format; add .png"
    if kind == "mask" and ext.lower() in _EXT_FLOAT:
        return (
            f"a {ext!r} image stores floating-point values and a mask is 8-bit "
            "(255 = object); use .png, .tif, .bmp or .pgm"
        )
    if ext.lower() in _EXT_FLOAT:  # (whether this OpenCV has a writer or not)
        # OpenCV would store the integer values as they are (255.0 for white),
        # where readers of these formats take 1.0 for white
        bits = "16-bit" if kind == "image16" else "8-bit"
        return (
            f"a {ext!r} image stores floating-point values and this picture is "
            f"{bits}; use .png, .tif" + (" or .jpg" if bits == "8-bit" else "")
        )
    if not cv2.haveImageWriter(path):
        return (
            f"unknown image format: OpenCV has no writer for the extension {ext!r}; "
            "use .png, .jpg, .tif or .bmp"
        )
    if kind == "colour" and ext.lower() in _EXT_GREY:
        return (
            f"a {ext!r} image holds one grey channel and this is a colour picture; "
            "use .png, .jpg, .ppm or .tif"
        )
    if kind == "image" and ext.lower() == ".pbm":
        return (
            "a '.pbm' image holds one bit a pixel and this picture has 256 grey "
            "levels; use .png, .pgm or .tif"
        )
    if kind == "mask" and ext.lower() in _EXT_LOSSY:
        return (
            f"a {ext!r} image is stored lossily and a mask must read back exactly; "
            "use .png, .tif, .bmp or .pgm"
        )
    if kind == "image16" and ext.lower() not in _EXT_16BIT:
        kinds = ", ".join(_EXT_16BIT)
        return f"a {ext!r} image cannot hold 16 bits; use one of {kinds}"
    return None


def _video_extension_problem(path: str) -> str | None:
    """A video needs a container extension (.mp4, .avi, ...): none, or one of an
    image format, is an error. (FFmpeg would write the encoded stream under an image
    name, a file nothing can open.) Whether OpenCV can write the container with the
    chosen codec is only known when the writer opens."""
    import cv2

    ext = _extension(path)
    if not ext:
        return "no file extension to choose the video format; add .mp4"
    if cv2.haveImageWriter(path):
        return (
            f"{ext!r} is an image format, and a video is written here; use a video "
            "extension such as .mp4 or .avi"
        )
    return None


def _check_distinct(outputs: list, inputs: list) -> None:
    """Each output ``(path, option)`` its own file, and none of them an input file
    (which writing would destroy before, or instead of, the result)."""
    seen: dict[str, str] = {}
    for path, option in outputs:
        if not path:
            continue
        fd = open_descriptor(path)
        key = f"/dev/fd/{fd}" if fd is not None else os.path.realpath(path)
        if key in seen:
            raise SystemExit(
                f"error: {seen[key]} and {option} name the same file {path!r}; give "
                "each output a file of its own"
            )
        seen[key] = option
        for src in inputs:
            if not src or not os.path.isfile(src):
                continue
            same = os.path.realpath(src) == key
            if not same and os.path.exists(path):
                same = os.path.samefile(src, path)
            if same:
                raise SystemExit(
                    f"error: {option} {path!r} is the input file {src!r}; writing "
                    "it would overwrite the input"
                )


#: the standard streams' names under /dev, by descriptor
_STD_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def open_descriptor(path: str) -> int | None:
    """The file descriptor that ``path`` names, where it names one the process holds:
    ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N`` (or this
    process's ``/proc/PID/fd/N``), as given or through symbolic links; else None.

    Such a name is not resolved further: the descriptor's file is written through
    the descriptor (a pipe's ``pipe:[N]`` is no path; a file redirected with ``>>``
    is appended to only through the descriptor the shell opened)."""
    dirs = ("/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/",
            f"/proc/{os.getpid()}/fd/")  # fmt: skip
    p = os.path.abspath(path)
    for _ in range(40):  # a loop of links ends here too
        if p in _STD_NAMES:
            return _STD_NAMES[p]
        for d in dirs:
            if p.startswith(d) and p[len(d) :].isdigit():
                return int(p[len(d) :])
        try:
            link = os.readlink(p)
        except OSError:  # not a link (or nothing there)
            return None
        p = os.path.normpath(os.path.join(os.path.dirname(p), link))
    return None


def _descriptor_name(fd: int) -> str:
    names = {0: "standard input", 1: "standard output", 2: "standard error"}
    return names.get(fd, f"file descriptor {fd}")


def _std_stream(fd: int):
    """Python's stream of standard output (1) or error (2); None when closed (or
    for another descriptor)."""
    return {1: sys.stdout, 2: sys.stderr}.get(fd)


def _descriptor_problem(fd: int) -> str | None:
    """Why descriptor ``fd`` cannot be written (closed, open for reading only), or
    None."""
    name = _descriptor_name(fd)
    if fd in (1, 2) and _std_stream(fd) is None:  # closed when the command started
        return f"{name} is closed"
    try:
        os.fstat(fd)
    except OSError:
        return f"{name} is closed"
    try:
        import fcntl
    except ImportError:  # (not POSIX: the write tells)
        return None
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
        return f"{name} is open for reading only"
    return None


def check_stdout(option: str) -> None:
    """``error: ...`` for ``option`` given as ``-`` (standard output) where standard
    output is closed (before the work)."""
    if sys.stdout is None:
        raise SystemExit(
            f"error: cannot write to standard output ({option} -): standard output "
            "is closed"
        )


def is_stream(path: str) -> bool:
    """Whether ``path`` is written in place, never replaced: an open descriptor's
    name (see :func:`open_descriptor`), or an existing file that is not a regular
    file (a named pipe, a device such as ``/dev/null``)."""
    if open_descriptor(path) is not None:
        return True
    return os.path.exists(path) and not os.path.isfile(path)


@contextlib.contextmanager
def replacing(path: str, default_ext: str = "") -> Iterator[str]:
    """A file name beside ``path`` (same extension) to write ``path``'s new content
    to: moved over ``path`` when the block ends, removed when it raises. A write
    that fails (a full disk) leaves what was at ``path`` as it was, and nothing
    half-written; an existing file keeps its permissions. A symbolic link is
    followed (the file it names gets the content; the link stays), a read-only
    file is a PermissionError, as for a direct write.

    What is not a regular file is written in place, never replaced: the name of a
    descriptor the process holds (``/dev/stdout``, ``/dev/fd/3``: through that
    descriptor, where earlier output on it and a ``>>`` redirection's appending
    are kept), a named pipe or a device (opened as named). The block then writes a
    temporary file (the extension of ``path``, or ``default_ext`` where it has
    none: the format of a picture or video), copied there when it ends, after
    what the command printed on the same stream before."""
    if is_stream(path):
        with tempfile.TemporaryDirectory(prefix="vision-cuts-") as tmp:
            part = os.path.join(tmp, "output" + (_extension(path) or default_ext))
            yield part
            _copy_in_place(part, path)
        return
    target = os.path.realpath(path)  # a link keeps pointing at the file it names
    if os.path.exists(target) and not os.access(target, os.W_OK):
        # a rename needs only the folder's permission: refuse as a write would
        raise PermissionError(errno.EACCES, "the file is read-only", path)
    folder, base = os.path.split(target)
    name = f".{base}.{os.getpid()}.part{_extension(path)}"
    if len(os.fsencode(name)) > _NAME_MAX:  # a long name leaves no room for more
        name = f".vision-cuts.{os.getpid()}.part{_extension(path)}"
    part = os.path.join(folder, name)
    try:
        yield part
        if os.path.exists(target):
            shutil.copymode(target, part)
        os.replace(part, target)
    finally:
        with contextlib.suppress(OSError):
            os.remove(part)


def _copy_in_place(part: str, path: str) -> None:
    """The bytes of file ``part`` written to ``path``, a stream (see
    :func:`is_stream`): through the descriptor it names (standard output and
    error through Python's streams, flushed first, so that what was printed comes
    first), else through ``path`` opened as named."""
    fd = open_descriptor(path)
    with open(part, "rb") as src:
        if fd is None:
            with open(path, "wb") as dst:  # (no truncation of a pipe or a device)
                shutil.copyfileobj(src, dst)
            return
        problem = _descriptor_problem(fd)
        if problem is not None:
            raise OSError(errno.EBADF, problem, path)
        stream = _std_stream(fd)
        if stream is not None:
            stream.flush()
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                shutil.copyfileobj(src, buffer)
                buffer.flush()
                return
        while chunk := src.read(1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]


@contextlib.contextmanager
def _writing(path: str, option: str, default_ext: str = "") -> Iterator[str]:
    """Write ``path`` through :func:`replacing` (the block writes the name it is
    given); an ``OSError`` is ``error: cannot write ...``. A reader of standard
    output that left (``| head``) ends the command quietly (see :func:`main`)."""
    try:
        with replacing(path, default_ext) as part:
            yield part
    except BrokenPipeError:
        if open_descriptor(path) != 1:
            raise _cannot_write(path, option, "the reader of the pipe left") from None
        raise
    except OSError as exc:
        raise _cannot_write(path, option, exc.strerror or str(exc)) from None


class _NotWritten(Exception):
    """``cv2.imwrite`` returned False."""


def imwrite_replacing(path: str, img: np.ndarray) -> bool:
    """``cv2.imwrite(path, img)`` (BGR or grey) through :func:`replacing`. A grey
    picture goes into a colour-only format (``.ppm``, ``.ras``, ``.sr``, ``.gif``) as
    three equal channels; a stream without an extension (``/dev/stdout``) gets a
    PNG. False where the writer failed (``path`` then as it was); ``cv2.error`` and
    ``OSError`` pass through."""
    import cv2

    if img.ndim == 2 and _extension(path).lower() in _EXT_COLOUR_ONLY:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    try:
        with replacing(path, ".png") as part:
            if not cv2.imwrite(part, img):
                raise _NotWritten
    except _NotWritten:
        return False
    return True


def _write_image(path: str, img: np.ndarray, option: str) -> None:
    """``cv2.imwrite`` that ends in ``error: cannot write ...`` when it fails."""
    import cv2

    try:
        ok = imwrite_replacing(path, img)
    except cv2.error as exc:  # e.g. no writer for the extension
        raise _cannot_write(path, option, f"OpenCV: {_cv2_reason(exc)}") from None
    except BrokenPipeError:
        if open_descriptor(path) == 1:  # the reader of standard output left
            raise
        raise _cannot_write(path, option, "the reader of the pipe left") from None
    except OSError as exc:
        raise _cannot_write(path, option, exc.strerror or str(exc)) from None
    if not ok:
        reason = "OpenCV's image writer failed"
        parent = os.path.dirname(path) or "."
        if not os.path.isdir(parent):
            reason = f"the directory {parent!r} does not exist"
        elif not os.access(parent, os.W_OK):
            reason = f"permission denied in {parent!r}"
        raise _cannot_write(path, option, reason)


def _write_rgb(path: str, rgb: np.ndarray, option: str = "-o/--output") -> None:
    import cv2

    img = rgb if rgb.ndim == 2 else cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    _write_image(path, img, option)


def _load_mask(path: str | None, shape: tuple, what: str):
    if path is None:
        return None
    import cv2

    # unchanged: a grey conversion would scale 16 bits to 8 (1 -> 0) and drop alpha
    m = _imread(path, cv2.IMREAD_UNCHANGED, f"{what} mask")
    if m.shape[:2] != shape:
        raise SystemExit(
            f"error: the {what} mask {path!r} is {m.shape[1]}x{m.shape[0]}, the image "
            f"{shape[1]}x{shape[0]}"
        )
    if m.ndim == 2:  # nonzero: negative values of a signed or float mask too
        return m != 0
    painted = (m[..., :3] != 0).any(axis=-1)
    if m.shape[2] == 4:  # transparent pixels are not painted
        painted &= m[..., 3] > 0
    return painted


class _Progress:
    """Progress on stderr where ``enabled``: a one-line bar on a terminal, else (a
    verbose run into a file or pipe) a plain line a step."""

    #: a bar stands unfinished on the terminal's current line (shared by all bars,
    #: so that a log record or a bar's ``clear`` starts a line of its own)
    line_open = False

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.last: tuple[int, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or (done, total) == self.last:
            return  # (a long step reports the same progress again while it runs)
        self.last = (done, total)
        if not self.tty:
            sys.stderr.write(f"{self.label} {done}/{total}\n")
            sys.stderr.flush()
            return
        width = 24
        fill = int(width * done / max(total, 1))
        end = "\n" if done >= total else ""
        sys.stderr.write(
            f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}{end}"
        )
        sys.stderr.flush()
        _Progress.line_open = done < total

    def clear(self) -> None:
        """Erase an unfinished bar, so that the next line takes its place."""
        self.last = None  # the next call draws the bar again
        if self.tty and _Progress.line_open:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            _Progress.line_open = False

    def close(self) -> None:
        """End an unfinished bar's line (the work stopped before its total)."""
        if self.tty and _Progress.line_open:
            sys.stderr.write("\n")
            sys.stderr.flush()
            _Progress.line_open = False


class _LogHandler(logging.StreamHandler):
    """Log records on stderr, each on a line of its own after an unfinished bar."""

    def emit(self, record: logging.LogRecord) -> None:
        if _Progress.line_open:
            self.stream.write("\n")
            _Progress.line_open = False
        super().emit(record)


def _cmd_segment(args: argparse.Namespace) -> int:
    from . import cli_many
    from .segmentation import grabcut

    if cli_many.wanted(args):
        return cli_many.segment(args)

    _check_output(args.output, "-o/--output", "mask")
    _check_output(args.overlay, "--overlay", "colour")
    _check_distinct(
        [(args.output, "-o/--output"), (args.overlay, "--overlay")],
        [args.image, args.fg, args.bg],
    )
    image = _load_image(args.image)
    h, w = image.shape[:2]
    fg = _load_mask(args.fg, (h, w), "foreground")
    bg = _load_mask(args.bg, (h, w), "background")
    rect = args.rect
    if rect is None and fg is not None and bg is not None:  # scribbles, no box
        for path, marks, option in ((args.fg, fg, "--fg"), (args.bg, bg, "--bg")):
            if not marks.any():
                what = "foreground" if option == "--fg" else "background"
                raise SystemExit(
                    f"error: the {what} mask {path!r} ({option}) marks no pixels "
                    "(every pixel is 0 or transparent); without --rect both masks "
                    "must mark some"
                )
    if rect is None and (fg is None or bg is None):  # the two scribbles need none
        from .segmentation import default_box

        rect = default_box(w, h)
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
            connectivity=args.connectivity,
            callback=progress,
            backend=args.backend,
        )
    except (ValueError, TypeError) as exc:
        raise cli_error(exc) from None
    if res.iterations < args.iterations:
        progress.close()
    dt = time.perf_counter() - t0
    mask = res.mask
    if args.output:
        _write_rgb(args.output, mask.astype(np.uint8) * 255, "-o/--output")
    if args.overlay:
        _write_rgb(args.overlay, overlay(image, mask, rect, fg, bg), "--overlay")
    cuts = f"{res.iterations} cut" + ("s" if res.iterations != 1 else "")
    print(
        f"segmented {w}x{h} image in {dt * 1e3:.0f} ms ({cuts}): "
        f"{int(mask.sum())} object pixels ({100.0 * mask.mean():.1f}%)"
        + (f"; mask -> {args.output}" if args.output else "")
        + (f"; overlay -> {args.overlay}" if args.overlay else "")
    )
    return 0


def colorize_disparity(disp: np.ndarray, max_disparity: float) -> np.ndarray:
    """RGB picture of a disparity map (turbo colour map, near = warm) with a colour bar.

    Invalid (NaN or negative) pixels are black.
    """
    import cv2

    d = np.asarray(disp, dtype=np.float32)
    bad = ~np.isfinite(d) | (d < 0)
    scaled = np.clip(np.nan_to_num(d, nan=0.0) / max(float(max_disparity), 1e-6), 0, 1)
    rgb = cv2.applyColorMap((scaled * 255).astype(np.uint8), cv2.COLORMAP_TURBO)[
        ..., ::-1
    ]
    rgb = rgb.copy()
    rgb[bad] = 0
    h = rgb.shape[0]
    bar_w = max(12, rgb.shape[1] // 40)
    ramp = np.linspace(255, 0, h).astype(np.uint8)[:, None].repeat(bar_w, axis=1)
    bar = cv2.applyColorMap(ramp, cv2.COLORMAP_TURBO)[..., ::-1]
    gap = np.full((h, 4, 3), 255, np.uint8)
    out = np.concatenate([rgb, gap, bar], axis=1).copy()
    for frac, label in ((0.0, f"{max_disparity:g}"), (1.0, "0")):
        y = int(np.clip(frac * (h - 1), 12, h - 4))
        cv2.putText(
            out,
            label,
            (rgb.shape[1] + 6, y),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.35,
            (255, 255, 255),
            1,
            cv2.LINE_AA,
        )
    return out


def _cmd_stereo(args: argparse.Namespace) -> int:
    from . import cli_many
    from .io import write_pfm
    from .stereo import stereo_disparity

    if cli_many.wanted(args):
        return cli_many.stereo(args)

    if args.colormap and not args.output:
        raise SystemExit("error: --colormap colours the -o picture; give -o FILE")
    ext = _extension(args.output or "")
    if ext.lower() in _EXT_FLOAT:
        raise _cannot_write(
            args.output,
            "-o/--output",
            f"a {ext!r} image stores floating-point values and -o writes an 8-bit "
            "picture (disparity x 255 / --max-disparity); use --pfm FILE for the "
            "disparity as floats, or .png for the picture",
        )
    _check_output(args.output, "-o/--output", "colour" if args.colormap else "image")
    _check_output(args.png16, "--png16", "image16")
    if args.png16 and args.max_disparity * 256 > 65535:
        raise SystemExit(
            f"error: --png16 holds disparity x 256 in 16 bits, so disparities below "
            f"256; --max-disparity is {args.max_disparity}: use --pfm for the full "
            "range"
        )
    _check_output(args.pfm, "--pfm", "pfm")
    _check_distinct(
        [(args.output, "-o/--output"), (args.png16, "--png16"), (args.pfm, "--pfm")],
        [args.left, args.right],
    )
    if is_sample(args.left, ("motorcycle",)):
        if args.right is not None:
            raise SystemExit(
                "error: the built-in pair 'motorcycle' takes no RIGHT image"
            )
        import skimage.data

        left, right, _ = skimage.data.stereo_motorcycle()
    else:
        if args.right is None:
            raise SystemExit(
                "error: give LEFT and RIGHT images (or the pair 'motorcycle')"
            )
        left, right = _load_image(args.left), _load_image(args.right)
    progress = _Progress(f"stereo ({args.method})", sys.stderr.isatty() or args.verbose)
    t0 = time.perf_counter()
    try:
        disp = stereo_disparity(
            left,
            right,
            max_disparity=args.max_disparity,
            method=args.method,
            backend=args.backend,
            callback=progress,
            label_step=args.label_step,
        )
    except (ValueError, TypeError) as exc:
        raise cli_error(exc) from None
    dt = time.perf_counter() - t0
    outputs = []
    if args.output:
        if args.colormap:
            _write_rgb(args.output, colorize_disparity(disp, args.max_disparity))
        else:
            grey = np.clip(disp * (255.0 / args.max_disparity), 0, 255).astype(np.uint8)
            _write_rgb(args.output, grey)
        outputs.append(f"picture -> {args.output}")
    if args.png16:
        disp16 = np.clip(np.nan_to_num(disp * 256.0), 0, 65535).astype(np.uint16)
        _write_image(args.png16, disp16, "--png16")
        outputs.append(f"16-bit (disparity x 256) -> {args.png16}")
    if args.pfm:
        with _writing(args.pfm, "--pfm") as part:
            write_pfm(part, disp)
        outputs.append(f"PFM -> {args.pfm}")
    h, w = disp.shape
    print(
        f"disparity of a {w}x{h} pair in {dt:.1f} s ({args.method}, range "
        f"{float(np.nanmin(disp)):g}..{float(np.nanmax(disp)):g})"
        + ("; " + "; ".join(outputs) if outputs else "")
    )
    return 0


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """The ``--backend`` option every command shares."""
    parser.add_argument(
        "--backend",
        choices=("auto", "cpu", "gpu"),
        default="auto",
        help="where to run (default auto: the GPU where one is usable, else the CPU; "
        "VISION_CUTS_BACKEND overrides it)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``vision-cuts``."""
    from . import cli_many

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
        metavar="X,Y,W,H",
        help="box around the object: left, top, width, height in pixels (default: a "
        "central box, unless both --fg and --bg are given: then no box); a box that "
        "starts left of or above the picture may be given as --rect=-5,-5,50,50",
    )
    s.add_argument("-o", "--output", help="write the mask (PNG, 255 = object)")
    s.add_argument("--overlay", help="write an overlay picture (PNG)")
    s.add_argument(
        "--fg",
        help="foreground scribbles: mask image (any depth), nonzero = object; "
        "transparent pixels of an RGBA mask are not scribbled",
    )
    s.add_argument(
        "--bg", help="background scribbles: mask image as --fg, nonzero = background"
    )
    s.add_argument(
        "--iterations", type=int, default=5, help="graph cuts at most (default 5)"
    )
    s.add_argument(
        "--smoothness",
        type=float,
        default=None,
        help="gamma of the contrast term (default 120 with 4 neighbours, 50 with 8)",
    )
    s.add_argument(
        "--connectivity",
        type=int,
        choices=(4, 8),
        default=8,
        help="neighbourhood of the smoothness term (default 8, GrabCut's; 4: faster)",
    )
    add_backend_option(s)
    cli_many.add_options(s)
    s.set_defaults(func=_cmd_segment)

    st = sub.add_parser(
        "stereo", help="dense disparity of a rectified pair by graph cuts"
    )
    st.add_argument("left", help="left image, or the built-in pair 'motorcycle'")
    st.add_argument("right", nargs="?", help="right image")
    st.add_argument(
        "--max-disparity",
        type=int,
        required=True,
        help="largest disparity searched (pixels)",
    )
    st.add_argument(
        "--method", choices=STEREO_METHODS, default="expansion",
        help="default expansion",
    )  # fmt: skip
    st.add_argument(
        "--label-step",
        type=int,
        default=None,
        help="ishikawa_pyramid: the first level's step, a power of two (default: the "
        "largest that leaves at least 16 labels)",
    )
    st.add_argument("-o", "--output", help="write the disparity picture (PNG)")
    st.add_argument(
        "--colormap",
        action="store_true",
        help="colour-code the picture (turbo) with a colour bar",
    )
    st.add_argument("--png16", help="write disparity x 256 as a 16-bit PNG")
    st.add_argument("--pfm", help="write the float disparity as PFM")
    add_backend_option(st)
    cli_many.add_options(st)
    st.set_defaults(func=_cmd_stereo)

    for name in _COMMAND_MODULES:
        importlib.import_module(f"vision_cuts.{name}").add_parser(sub)
    return p


def _quiet_opencv() -> None:
    """Keep OpenCV's and FFmpeg's own log lines (``[ WARN:0@...] imwrite_(...)``
    with a temporary file's name, ``[png @ 0x...] Invalid PNG signature``) off
    stderr: each failure they log is an ``error:`` line of the command's own.
    Environment variables the user set win; ``-v`` keeps the logs. What a codec
    library prints itself (libpng) is silenced where it is called
    (:func:`quiet_stderr`)."""
    os.environ.setdefault("OPENCV_LOG_LEVEL", "SILENT")  # read when cv2 first logs
    # read when OpenCV first opens a video through FFmpeg; -8 is AV_LOG_QUIET
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    cv2 = sys.modules.get("cv2")
    if cv2 is not None and os.environ["OPENCV_LOG_LEVEL"] == "SILENT":
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vision-cuts`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(_join_negative_rect(argv))
    if not args.verbose:
        _quiet_opencv()
    level = logging.INFO if args.verbose else logging.WARNING
    handler = _LogHandler()
    # on the handler too: libraries that set their loggers' own levels (Dask's
    # scheduler and nannies log at INFO) pass records up past the root's level
    handler.setLevel(level)
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler])
    from .exceptions import VisionCutsError

    try:
        return args.func(args)
    except (ValueError, TypeError, VisionCutsError) as exc:
        # bad input the commands did not catch themselves, a backend that cannot
        # run (``--backend gpu`` without a GPU), a problem too large for the GPU
        raise cli_error(exc) from None
    except KeyboardInterrupt:  # Ctrl-C: a line, not a traceback; the shell's status
        if _Progress.line_open:
            sys.stderr.write("\n")
            _Progress.line_open = False
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:  # the reader of standard output left (``| head``): end
        # quietly, as other tools do, and keep the interpreter's last flush quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as exc:  # a file or a connection the command needed
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    sys.exit(main())
