"""Loader and error measure for the GrabCut segmentation benchmark.

Layout read (``<root>/grabcut``, see ``SOURCE.md`` in the data folder)::

    data_GT/<name>.{bmp,jpg,JPG}           input image, 24-bit RGB
    boundary_GT/<name>.bmp                 8-bit GT: 0 bg, 255 fg, 128 unlabelled band
    bb_GT/<name>.txt                       "x_min y_min x_max y_max", 1-based inclusive
    scribbles-set-{1,2}/<name>-anno.png    palette PNG: index 0 none, 1 fg, 2 bg seed

``root`` is the folder holding ``grabcut/`` (and ``middlebury_stereo/``, ...): the
``root`` argument, else the environment variable ``VISION_CUTS_DATA``. The GrabCut
folder itself, recognised by its ``bb_GT/`` and ``data_GT/`` subfolders, is accepted
too, whatever its name.

The evaluation protocol (DESIGN.md, "Evaluation protocols"): box from ``bb_GT``,
5 iterations, error = % of the pixels inside the box, the 128 band excluded, whose
label differs from the GT, averaged over the images (:func:`grabcut_error`).
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._common import base_folder

__all__ = [
    "SCRIBBLE_SETS",
    "UNKNOWN",
    "GrabCutSample",
    "data_root",
    "grabcut_error",
    "grabcut_names",
    "load_grabcut",
]

_SUBDIR = "grabcut"
_IMAGE_DIR = "data_GT"
_GT_DIR = "boundary_GT"
_BOX_DIR = "bb_GT"
_IMAGE_EXTS = (".bmp", ".jpg", ".jpeg", ".png")  # matched case-insensitively

#: Scribble set key -> folder. Set 1: the robot-user seeds of Gulshan et al. (2010);
#: set 2: denser seeds drawn by Andrade & Carrera (2015).
SCRIBBLE_SETS = {"set1": "scribbles-set-1", "set2": "scribbles-set-2"}

#: GT label of the unlabelled band along the object boundary (128 in the files).
UNKNOWN = 255

# First 12 hex digits of each file's SHA-256, from SOURCE.md (development split).
# Files not listed here (for instance the Berkeley images of a full copy) are read
# without a check.
_REGISTRY = {
    "bb_GT/banana1.txt": "db5b04d59938",
    "bb_GT/banana2.txt": "3fe76ed95cf4",
    "bb_GT/book.txt": "38266855eae0",
    "bb_GT/bool.txt": "3396a6bc0b39",
    "bb_GT/ceramic.txt": "b2a25f178fba",
    "bb_GT/cross.txt": "b2dfe12511aa",
    "bb_GT/elefant.txt": "d422defeae11",
    "bb_GT/flower.txt": "26bd7ecabd26",
    "bb_GT/grave.txt": "549fd74bf2b2",
    "bb_GT/llama.txt": "9f72a7b05943",
    "bb_GT/music.txt": "d040516393bd",
    "bb_GT/person1.txt": "cd2141d03484",
    "bb_GT/person3.txt": "f64444fa64d6",
    "bb_GT/person4.txt": "6bcc1ff329b7",
    "bb_GT/person6.txt": "450a0464a601",
    "bb_GT/person7.txt": "6c7633d6d28f",
    "bb_GT/scissors.txt": "a38ca01f6b0f",
    "bb_GT/sheep.txt": "5521b2bb9b5e",
    "bb_GT/stone2.txt": "9a387f2aca2e",
    "bb_GT/teddy.txt": "5e83fb733ea6",
    "boundary_GT/banana1.bmp": "ca026894d191",
    "boundary_GT/banana2.bmp": "c3da05befd43",
    "boundary_GT/book.bmp": "b5f17b79f48d",
    "boundary_GT/bool.bmp": "df8f2b69a7a4",
    "boundary_GT/ceramic.bmp": "74233d18a915",
    "boundary_GT/cross.bmp": "de15ef5e1fa7",
    "boundary_GT/elefant.bmp": "7c1f6b8c4c3a",
    "boundary_GT/flower.bmp": "1047d7f1d13f",
    "boundary_GT/grave.bmp": "857b6107ef62",
    "boundary_GT/llama.bmp": "1ffaa0b8eebe",
    "boundary_GT/music.bmp": "ef3cd910bf46",
    "boundary_GT/person1.bmp": "7683fe036ea9",
    "boundary_GT/person3.bmp": "b3c6431099b4",
    "boundary_GT/person4.bmp": "752bc9258b9d",
    "boundary_GT/person6.bmp": "f8260801a5e1",
    "boundary_GT/person7.bmp": "1b0b7514175a",
    "boundary_GT/scissors.bmp": "aa59850ee868",
    "boundary_GT/sheep.bmp": "9dd900c8c994",
    "boundary_GT/stone2.bmp": "c4868716de0e",
    "boundary_GT/teddy.bmp": "cc34b150e644",
    "data_GT/banana1.bmp": "7dae20dbc545",
    "data_GT/banana2.bmp": "87a2b65c8ec5",
    "data_GT/book.bmp": "073749a3b6ae",
    "data_GT/bool.jpg": "32634d98f98b",
    "data_GT/ceramic.bmp": "cbc974c702c1",
    "data_GT/cross.jpg": "5af8740df001",
    "data_GT/elefant.bmp": "79174f80861e",
    "data_GT/flower.jpg": "899cd09571c3",
    "data_GT/grave.jpg": "5bb926394030",
    "data_GT/llama.bmp": "773bd67ec7c7",
    "data_GT/music.JPG": "6f0f0ec5e7bb",
    "data_GT/person1.jpg": "6a1f0689309d",
    "data_GT/person3.jpg": "648103658192",
    "data_GT/person4.jpg": "749c14292ac6",
    "data_GT/person6.jpg": "8e03df3bca31",
    "data_GT/person7.jpg": "25afc8788fea",
    "data_GT/scissors.JPG": "40297756fc5e",
    "data_GT/sheep.jpg": "b98427278e6b",
    "data_GT/stone2.JPG": "9aeb23a60649",
    "data_GT/teddy.jpg": "79e32836fe1e",
    "scribbles-set-1/banana1-anno.png": "09166592ade7",
    "scribbles-set-1/banana2-anno.png": "1d487b14327b",
    "scribbles-set-1/book-anno.png": "3839c2814549",
    "scribbles-set-1/bool-anno.png": "f4d514393994",
    "scribbles-set-1/ceramic-anno.png": "d62dd91113b5",
    "scribbles-set-1/cross-anno.png": "bbeaf87cbf0e",
    "scribbles-set-1/elefant-anno.png": "10c01078fb0f",
    "scribbles-set-1/flower-anno.png": "d1b176084c01",
    "scribbles-set-1/grave-anno.png": "bf64215067e8",
    "scribbles-set-1/llama-anno.png": "95d781e0fe8c",
    "scribbles-set-1/music-anno.png": "37e4fc90fbd5",
    "scribbles-set-1/person1-anno.png": "935cdce2912e",
    "scribbles-set-1/person3-anno.png": "676c97d390d8",
    "scribbles-set-1/person4-anno.png": "7094a03ec256",
    "scribbles-set-1/person6-anno.png": "0e747645e4c8",
    "scribbles-set-1/person7-anno.png": "89b6c2fa9e13",
    "scribbles-set-1/scissors-anno.png": "72ccd2ebc9a8",
    "scribbles-set-1/sheep-anno.png": "319c99047527",
    "scribbles-set-1/stone2-anno.png": "a8ecd68ada5b",
    "scribbles-set-1/teddy-anno.png": "6e30f8a20db8",
    "scribbles-set-2/banana1-anno.png": "9844683a46d3",
    "scribbles-set-2/banana2-anno.png": "fc3233d49f7e",
    "scribbles-set-2/book-anno.png": "7d956176242c",
    "scribbles-set-2/bool-anno.png": "19f42ef62618",
    "scribbles-set-2/ceramic-anno.png": "22c7e68c0a6d",
    "scribbles-set-2/cross-anno.png": "d8fa49444662",
    "scribbles-set-2/elefant-anno.png": "d02b5e266124",
    "scribbles-set-2/flower-anno.png": "7cfbebfadd21",
    "scribbles-set-2/grave-anno.png": "6077451f699f",
    "scribbles-set-2/llama-anno.png": "56d9033851da",
    "scribbles-set-2/music-anno.png": "dabf17d0a668",
    "scribbles-set-2/person1-anno.png": "a64d16e9eb55",
    "scribbles-set-2/person3-anno.png": "ec331c0b09ef",
    "scribbles-set-2/person4-anno.png": "64befff4055e",
    "scribbles-set-2/person6-anno.png": "338201c062e0",
    "scribbles-set-2/person7-anno.png": "3d29accedb47",
    "scribbles-set-2/scissors-anno.png": "421ef8e68af0",
    "scribbles-set-2/sheep-anno.png": "5e1b7d697249",
    "scribbles-set-2/stone2-anno.png": "655e3c344097",
    "scribbles-set-2/teddy-anno.png": "f73a76251962",
}


class GrabCutSample(NamedTuple):
    """One GrabCut benchmark image with its ground truth, box and scribbles.

    Attributes
    ----------
    name : str
        Image name (file stem), e.g. ``"banana1"``.
    image : ndarray of uint8, shape (M, N, 3)
        The input image, RGB.
    gt : ndarray of uint8, shape (M, N)
        Ground truth: 0 background, 1 foreground, 255 (:data:`UNKNOWN`) the
        unlabelled band along the object boundary (128 in ``boundary_GT``), which
        scoring ignores.
    rect : tuple of int
        The box ``(x, y, w, h)``, 0-based, ``x`` the column and ``y`` the row of
        its top-left pixel: columns ``x .. x + w - 1`` and rows ``y .. y + h - 1``
        (the ``rect`` of ``cv2.grabCut``).
    scribbles : dict of str to tuple of ndarray
        ``{"set1": (fg, bg), "set2": (fg, bg)}``: boolean ``(M, N)`` seed masks,
        foreground and background (disjoint). Sets whose file is absent are left
        out.
    """

    name: str
    image: np.ndarray
    gt: np.ndarray
    rect: tuple[int, int, int, int]
    scribbles: dict[str, tuple[np.ndarray, np.ndarray]]


def _grabcut_dir(path: str | os.PathLike | None) -> Path:
    """The GrabCut folder: ``path`` itself when it is one, else ``path/grabcut``."""
    root, origin = base_folder(path, _SUBDIR)
    if (root / _BOX_DIR).is_dir() and (root / _IMAGE_DIR).is_dir():
        return root  # given the GrabCut folder itself, whatever its name
    if not (root / _SUBDIR).is_dir():
        raise FileNotFoundError(
            f"data folder {root} has no {_SUBDIR}/ subfolder ({origin}); expected "
            f"{root / _SUBDIR}/{{{_IMAGE_DIR},{_GT_DIR},{_BOX_DIR}}}"
        )
    return root / _SUBDIR


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The benchmark data folder, the one holding ``grabcut/`` (or a GrabCut folder).

    Parameters
    ----------
    path : str or path-like, optional
        The data folder. Default: the environment variable ``VISION_CUTS_DATA``.
        The GrabCut folder itself (a folder with ``bb_GT/`` and ``data_GT/``) is
        accepted too, whatever its name.

    Returns
    -------
    root : Path
        The folder to pass as ``root`` to :func:`grabcut_names` and
        :func:`load_grabcut`: the folder holding ``grabcut/``, or the GrabCut
        folder itself when ``path`` is one that is not named ``grabcut`` (a copy
        under another name, or ``"."`` from inside it).

    Raises
    ------
    FileNotFoundError
        If neither ``path`` nor ``VISION_CUTS_DATA`` is given, or the folder does
        not exist, or it is neither a GrabCut folder nor holds a ``grabcut/``
        subfolder.
    """
    d = _grabcut_dir(path)
    if d.name == _SUBDIR:
        return d.parent  # holds the grabcut folder under its own name
    return d


def _image_files(folder: Path) -> dict[str, Path]:
    """Name -> image file in ``data_GT`` (extensions matched case-insensitively)."""
    if not folder.is_dir():
        return {}
    out = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in _IMAGE_EXTS:
            out.setdefault(p.stem, p)
    return out


def grabcut_names(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the images that have an input image, a GT mask and a box.

    Parameters
    ----------
    root : str or path-like, optional
        The data folder holding ``grabcut/``, or the GrabCut folder itself (see
        :func:`data_root`); default ``VISION_CUTS_DATA``.

    Returns
    -------
    names : list of str
        Sorted image names, e.g. ``["banana1", "banana2", ...]``.

    Raises
    ------
    FileNotFoundError
        If the data folder is not found (see :func:`data_root`).
    """
    return _names(_grabcut_dir(root))


def _names(d: Path) -> list[str]:
    """Names of the images of the GrabCut folder ``d`` with a GT mask and a box."""
    images = _image_files(d / _IMAGE_DIR)
    return sorted(
        n
        for n in images
        if (d / _GT_DIR / f"{n}.bmp").is_file()
        and (d / _BOX_DIR / f"{n}.txt").is_file()
    )


def _verify(path: Path, base: Path) -> None:
    rel = path.relative_to(base).as_posix()
    want = _REGISTRY.get(rel)
    if want is None:
        return
    got = hashlib.sha256(path.read_bytes()).hexdigest()[: len(want)]
    if got != want:
        raise ValueError(
            f"{path}: SHA-256 starts {got}, the registry (SOURCE.md) says {want}; "
            "the file is corrupt or not the published one (verify=False skips this)"
        )


def _read_box(path: Path, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """``bb_GT`` text (1-based inclusive x0 y0 x1 y1) -> 0-based ``(x, y, w, h)``."""
    raw = path.read_bytes()
    try:
        tokens = raw.decode("ascii").split()
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}: expected ASCII text with four integers 'x_min y_min x_max "
            f"y_max', got bytes {raw[:40]!r}"
        ) from None
    try:
        vals = [float(t) for t in tokens]  # plain integers or MATLAB %e notation
    except ValueError:
        vals = []
    if len(vals) != 4 or not all(math.isfinite(v) and v == round(v) for v in vals):
        raise ValueError(
            f"{path}: expected four integers 'x_min y_min x_max y_max', got {tokens!r}"
        )
    x0, y0, x1, y1 = (int(round(v)) for v in vals)
    rect = (x0 - 1, y0 - 1, x1 - x0 + 1, y1 - y0 + 1)
    h, w = shape
    if not (1 <= x0 <= x1 <= w and 1 <= y0 <= y1 <= h):
        raise ValueError(
            f"{path}: box x {x0}..{x1}, y {y0}..{y1} (1-based) is not inside the "
            f"{w}x{h} image"
        )
    return rect


def _read_gt(path: Path) -> np.ndarray:
    import cv2

    raw = cv2.imread(os.fspath(path), cv2.IMREAD_GRAYSCALE)
    if raw is None:
        raise ValueError(f"{path}: cannot be read as an image")
    bad = ~np.isin(raw, (0, 128, 255))
    if bad.any():
        raise ValueError(
            f"{path}: GT values must be 0, 128 or 255; found "
            f"{np.unique(raw[bad])[:5].tolist()}"
        )
    gt = np.zeros(raw.shape, dtype=np.uint8)
    gt[raw == 255] = 1
    gt[raw == 128] = UNKNOWN
    return gt


def _read_image(path: Path) -> np.ndarray:
    import cv2

    bgr = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{path}: cannot be read as an image")
    return np.ascontiguousarray(bgr[..., ::-1])


def _read_scribbles(
    path: Path, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    # Palette indices are needed, not colours: OpenCV always expands a palette PNG
    # to BGR, Pillow (a dependency of scikit-image) keeps the indices.
    from PIL import Image

    try:
        with Image.open(path) as im:
            mode = im.mode
            if mode in ("P", "L"):
                idx = np.asarray(im)
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError) as e:  # unknown, truncated or corrupt
        raise ValueError(
            f"{path}: expected a palette PNG with index 0 none, 1 foreground, "
            f"2 background; it cannot be read as an image ({e})"
        ) from e
    if mode not in ("P", "L"):
        raise ValueError(
            f"{path}: expected a palette (or 8-bit gray) PNG with index 0 none, "
            f"1 foreground, 2 background; got mode {mode!r}"
        )
    if idx.shape != shape:
        raise ValueError(f"{path}: shape {idx.shape} differs from the image's {shape}")
    return idx == 1, idx == 2


def load_grabcut(
    name: str, root: str | os.PathLike | None = None, *, verify: bool = True
) -> GrabCutSample:
    """Load one GrabCut image with its ground truth, box and scribbles.

    Parameters
    ----------
    name : str
        Image name, one of :func:`grabcut_names`.
    root : str or path-like, optional
        The data folder holding ``grabcut/``, or the GrabCut folder itself (see
        :func:`data_root`); default ``VISION_CUTS_DATA``.
    verify : bool, optional
        Check each file against the SHA-256 registry of ``SOURCE.md`` (files not in
        the registry are not checked). Default True.

    Returns
    -------
    sample : GrabCutSample
        ``(name, image, gt, rect, scribbles)``; see :class:`GrabCutSample`.

    Raises
    ------
    FileNotFoundError
        If the data folder is not found (see :func:`data_root`).
    ValueError
        If ``name`` is not a known image (the message lists the known ones), a file
        fails the SHA-256 check, or a file's content is malformed (GT values
        outside {0, 128, 255}, a box file that is not four finite integers in
        ASCII, box outside the image, an unreadable scribble PNG, sizes that
        disagree).

    Notes
    -----
    ``bb_GT`` holds ``x_min y_min x_max y_max``, 1-based and inclusive (plain
    integers in some files, MATLAB ``%e`` notation in others); ``rect`` is
    ``(x_min - 1, y_min - 1, x_max - x_min + 1, y_max - y_min + 1)``. Boxes that
    reach the image border end exactly at the last column or row (for instance
    ``cross``: ``1 5 450 600`` in a 450 x 600 image), which fixes the 1-based
    reading. The scribble PNGs are palette images: index 1 is a foreground seed,
    2 a background seed, 0 no seed.

    Examples
    --------
    >>> from vision_cuts.datasets import grabcut
    >>> s = grabcut.load_grabcut("banana1")  # doctest: +SKIP
    >>> s.image.shape, s.rect  # doctest: +SKIP
    ((480, 640, 3), (15, 19, 605, 417))
    """
    d = _grabcut_dir(root)
    names = _names(d)
    if name not in names:
        raise ValueError(
            f"unknown GrabCut image {name!r}; the {len(names)} available in {d} are: "
            + (", ".join(names) if names else "(none)")
        )
    paths = {
        "image": _image_files(d / _IMAGE_DIR)[name],
        "gt": d / _GT_DIR / f"{name}.bmp",
        "box": d / _BOX_DIR / f"{name}.txt",
    }
    for key, folder in SCRIBBLE_SETS.items():
        p = d / folder / f"{name}-anno.png"
        if p.is_file():
            paths[key] = p
    if verify:
        for p in paths.values():
            _verify(p, d)
    image = _read_image(paths["image"])
    gt = _read_gt(paths["gt"])
    if gt.shape != image.shape[:2]:
        raise ValueError(
            f"{paths['gt']}: GT shape {gt.shape} differs from the image's "
            f"{image.shape[:2]}"
        )
    rect = _read_box(paths["box"], gt.shape)
    scribbles = {
        key: _read_scribbles(paths[key], gt.shape)
        for key in SCRIBBLE_SETS
        if key in paths
    }
    return GrabCutSample(name, image, gt, rect, scribbles)


def grabcut_error(mask, gt, rect) -> float:
    """GrabCut benchmark error: % of the scored pixels in the box labelled wrongly.

    The scored pixels are those inside ``rect`` whose ``gt`` is not :data:`UNKNOWN`
    (the unlabelled boundary band); pixels outside the box never count.

    Parameters
    ----------
    mask : array_like, shape (M, N)
        Predicted segmentation: nonzero (or True) is foreground. For a raw
        ``cv2.grabCut`` mask, pass ``(m == cv2.GC_FGD) | (m == cv2.GC_PR_FGD)``.
    gt : array_like of uint8, shape (M, N)
        Ground truth as :func:`load_grabcut` returns it: 0 background,
        1 foreground, 255 unknown (not the 0/128/255 of the files).
    rect : tuple of int
        The box ``(x, y, w, h)``, 0-based, inside the image.

    Returns
    -------
    error : float
        The error in percent, in [0, 100].

    Raises
    ------
    ValueError
        If the shapes differ, ``gt`` has values other than 0, 1 and 255 (a raw
        0/128/255 file mask is caught by its 128), the box is empty or leaves the
        image, or no pixel in the box is scored.

    Examples
    --------
    >>> import numpy as np
    >>> gt = np.array([[0, 1], [1, 255]], dtype=np.uint8)
    >>> mask = np.array([[1, 1], [0, 0]], dtype=np.uint8)
    >>> grabcut_error(mask, gt, (0, 0, 2, 2))  # 2 of the 3 scored pixels wrong
    66.66666666666667
    """
    mask = np.asarray(mask)
    gt = np.asarray(gt)
    if mask.ndim != 2 or mask.shape != gt.shape:
        raise ValueError(
            f"mask and gt must be 2-D arrays of one shape; got mask {mask.shape}, "
            f"gt {gt.shape}"
        )
    bad = ~np.isin(gt, (0, 1, UNKNOWN))
    if bad.any():
        raise ValueError(
            "gt must hold 0 (background), 1 (foreground) and 255 (unknown) as "
            f"load_grabcut returns it; found {np.unique(gt[bad])[:5].tolist()}"
            + (
                " (a raw boundary_GT mask? map 255->1, 128->255)"
                if np.any(gt == 128)
                else ""
            )
        )
    try:
        x, y, w, h = (int(v) for v in rect)
    except (TypeError, ValueError):
        raise ValueError(
            f"rect must be four integers (x, y, w, h); got {rect!r}"
        ) from None
    rows, cols = gt.shape
    if w <= 0 or h <= 0 or x < 0 or y < 0 or x + w > cols or y + h > rows:
        raise ValueError(
            f"rect (x, y, w, h) = {(x, y, w, h)} must be non-empty and inside the "
            f"{cols}x{rows} (width x height) image"
        )
    g = gt[y : y + h, x : x + w]
    m = mask[y : y + h, x : x + w] != 0
    scored = g != UNKNOWN
    n = int(np.count_nonzero(scored))
    if n == 0:
        raise ValueError(f"no scored pixel in rect {(x, y, w, h)}: all are unknown")
    wrong = int(np.count_nonzero(m[scored] != (g[scored] == 1)))
    return 100.0 * wrong / n
