"""The test suite's own environment variables (``tests/conftest.py``): a value that
means neither yes nor no, or a data folder that does not exist, stops the session with
a usage error instead of silently turning the GPU or data tests into skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_require_gpu_yes(monkeypatch, value):
    monkeypatch.setenv("VISION_CUTS_REQUIRE_GPU", value)
    assert conftest.require_gpu() is True


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_require_gpu_no(monkeypatch, value):
    monkeypatch.setenv("VISION_CUTS_REQUIRE_GPU", value)
    assert conftest.require_gpu() is False


@pytest.mark.parametrize("value", ["2", "maybe", "gpu"])
def test_require_gpu_other_values_are_usage_errors(monkeypatch, value):
    monkeypatch.setenv("VISION_CUTS_REQUIRE_GPU", value)
    with pytest.raises(pytest.UsageError, match=rf"VISION_CUTS_REQUIRE_GPU.*{value!r}"):
        conftest.require_gpu()


def test_data_dir_that_does_not_exist_is_a_usage_error(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-folder"
    monkeypatch.setenv("VISION_CUTS_DATA", str(missing))
    with pytest.raises(pytest.UsageError, match="no-such-folder.*not a directory"):
        conftest.find_data_dir()
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("VISION_CUTS_DATA", str(tmp_path / "file"))
    with pytest.raises(pytest.UsageError, match="not a directory"):
        conftest.find_data_dir()
    monkeypatch.setenv("VISION_CUTS_DATA", str(tmp_path))
    assert conftest.find_data_dir() == tmp_path


@pytest.mark.parametrize(
    "env",
    [{"VISION_CUTS_REQUIRE_GPU": "sure"}, {"VISION_CUTS_DATA": "/no/such/data/folder"}],
)
def test_session_stops_on_a_bad_setting(env):
    """The whole session ends with pytest's usage-error status and the message."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
         "no:cacheprovider", str(Path(__file__))],
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    name = next(iter(env))
    assert name in proc.stderr
