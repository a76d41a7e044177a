"""Shared fixtures and collection rules of the vision_cuts test suite.

* ``rng``: a seeded ``np.random.default_rng`` per test.
* ``backend``: every test taking it runs once on ``"cpu"`` and once on ``"gpu"``; the
  GPU run carries the ``gpu`` marker.
* ``gpu`` items are skipped, with the reason, where CuPy or a CUDA device is missing;
  with ``VISION_CUTS_REQUIRE_GPU=1`` (or ``true``, ``yes``, ``on``) they fail instead,
  so GPU CI cannot pass by skipping. Any other value than those and ``0``, ``false``,
  ``no``, ``off`` or empty stops the session with a usage error: a misspelt request
  must not turn into skips.
* ``data_dir``: the benchmark data directory (``VISION_CUTS_DATA``, else
  ``../shared/datasets`` next to the repository); ``data`` items skip without it. A
  ``VISION_CUTS_DATA`` that names no directory stops the session with a usage error
  (it was meant to run the data tests).
* ``gui`` items skip without a Qt binding. pytest-qt (the ``test`` extra) aborts the
  whole session when no binding is installed (PyQt5 is in the ``apps`` extra), so
  without one the plugin is blocked here and only the GUI tests are lost.

CuPy is never imported here: ``vision_cuts._backend.gpu_available`` probes it lazily.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from vision_cuts import _backend

REPO = Path(__file__).resolve().parents[1]
_REQUIRE_GPU = "VISION_CUTS_REQUIRE_GPU"
_DATA_ENV = "VISION_CUTS_DATA"
_MISSING_GPU = pytest.StashKey[str]()

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


def require_gpu() -> bool:
    """True when ``VISION_CUTS_REQUIRE_GPU`` asks GPU tests to fail rather than skip.

    Raises pytest.UsageError for a value that is neither yes nor no."""
    raw = os.environ.get(_REQUIRE_GPU, "")
    value = raw.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise pytest.UsageError(
        f"{_REQUIRE_GPU} must be one of {', '.join(_YES)} (GPU tests fail without a "
        f"device) or {', '.join(v for v in _NO if v)} or empty (they skip), got {raw!r}"
    )


def gpu_missing_reason() -> str | None:
    """Why GPU tests cannot run here, or None when CuPy and a device are usable."""
    if _backend.gpu_available():
        return None
    if not _backend.has_cupy():
        return "CuPy is not installed (install the 'gpu' extra)"
    return "CuPy is installed but no CUDA device is usable"


def qt_binding() -> bool:
    """True when a Qt binding that pytest-qt supports can be imported."""
    return any(
        importlib.util.find_spec(m) is not None for m in ("PyQt5", "PyQt6", "PySide6")
    )


def pytest_addoption(parser, pluginmanager):
    # runs for this initial conftest before any pytest_configure: the last moment to
    # keep pytest-qt from failing the session on a machine without PyQt5
    if not qt_binding() and pluginmanager.has_plugin("pytest-qt"):
        pluginmanager.set_blocked("pytest-qt")


def find_data_dir() -> Path | None:
    """The benchmark data directory, or None when it is absent.

    Raises pytest.UsageError when ``VISION_CUTS_DATA`` is set and names no directory."""
    env = os.environ.get(_DATA_ENV, "").strip()
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise pytest.UsageError(
                f"{_DATA_ENV}={env!r} is not a directory: set it to the folder that "
                "holds the benchmark data sets (grabcut/, middlebury_stereo/, ...), or "
                "unset it to skip the data tests"
            )
        return path
    path = REPO.parent / "shared" / "datasets"
    return path if path.is_dir() else None


def pytest_configure(config):
    # the environment's requests checked once, before collection: a bad value stops
    # the session with its usage error instead of changing what runs
    require_gpu()
    find_data_dir()


def pytest_collection_modifyitems(config, items):
    reason = gpu_missing_reason()
    data = find_data_dir()
    qt = qt_binding()
    for item in items:
        if reason is not None and item.get_closest_marker("gpu") is not None:
            if require_gpu():
                # fail in the call phase (see pytest_runtest_call), never skip
                item.stash[_MISSING_GPU] = reason
            else:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))
        if data is None and item.get_closest_marker("data") is not None:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"data test: no data directory (set {_DATA_ENV})"
                )
            )
        if not qt and item.get_closest_marker("gui") is not None:
            item.add_marker(pytest.mark.skip(reason="gui test: PyQt5 is not installed"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    reason = item.stash.get(_MISSING_GPU, None)
    if reason is not None:
        pytest.fail(
            f"{_REQUIRE_GPU}=1 but this gpu test cannot run: {reason}", pytrace=False
        )


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded generator: every test sees the same random stream on every run."""
    return np.random.default_rng(20240611)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request) -> str:
    """The backend name a test runs on ("cpu" always, "gpu" where a device exists)."""
    return request.param


@pytest.fixture
def data_dir() -> Path:
    """The benchmark data directory; skips the test when it is absent."""
    path = find_data_dir()
    if path is None:
        pytest.skip(f"no data directory (set {_DATA_ENV})")
    return path


@pytest.fixture
def dimacs(tmp_path):
    """A two-node DIMACS max-flow file (one arc of capacity 3)."""
    path = tmp_path / "f.max"
    path.write_text("p max 2 1\nn 1 s\nn 2 t\na 1 2 3\n")
    return path
