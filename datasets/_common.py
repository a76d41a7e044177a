"""What every benchmark-data loader shares: finding the data folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "base_folder", "data_parent"]

ENV = "VISION_CUTS_DATA"


def base_folder(path: str | os.PathLike | None, subdir: str) -> tuple[Path, str]:
    """The data folder from ``path`` or ``VISION_CUTS_DATA``, and where it came from.

    Raises FileNotFoundError, naming ``VISION_CUTS_DATA`` and ``subdir``, when neither
    is given or the folder does not exist. The caller checks its own subfolder.
    """
    if path is None:
        env = os.environ.get(ENV, "").strip()
        if not env:
            raise FileNotFoundError(
                f"no data folder: pass root= or set the environment variable {ENV} "
                f"to the folder holding {subdir}/ (and the other data sets)"
            )
        path, origin = env, f"{ENV}={env!r}"
    else:
        origin = f"root={os.fspath(path)!r}"
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {root} does not exist ({origin})")
    return root, origin


def data_parent(path: str | os.PathLike | None, subdir: str) -> Path:
    """The data folder holding ``subdir/``, from ``path`` or ``VISION_CUTS_DATA``.

    ``subdir`` itself is accepted too (its parent is returned). Raises
    FileNotFoundError when neither is given or a folder is missing.
    """
    root, origin = base_folder(path, subdir)
    if root.name == subdir:
        return root.parent
    if not (root / subdir).is_dir():
        raise FileNotFoundError(
            f"data folder {root} has no {subdir}/ subfolder ({origin})"
        )
    return root
