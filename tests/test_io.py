"""PFM reading and writing."""

from __future__ import annotations

import numpy as np
import pytest

from vision_cuts.io import read_pfm, write_pfm


@pytest.mark.parametrize("shape", [(5, 7), (4, 3, 3), (1, 1)])
def test_pfm_round_trip(tmp_path, rng, shape):
    img = rng.normal(size=shape).astype(np.float32)
    img.flat[0] = np.nan
    path = tmp_path / "x.pfm"
    write_pfm(path, img)
    back = read_pfm(path)
    assert back.shape == shape and back.dtype == np.float32
    np.testing.assert_array_equal(back, img)  # NaN == NaN here, top row first


def test_pfm_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="image must be"):
        write_pfm(tmp_path / "a.pfm", np.zeros((2, 2, 2)))
    with pytest.raises(TypeError, match="numeric"):
        write_pfm(tmp_path / "a.pfm", np.array([["a"]]))
    bad = tmp_path / "b.pfm"
    bad.write_bytes(b"P6\n1 1\n255\n\x00\x00\x00")
    with pytest.raises(ValueError, match="not a PFM file"):
        read_pfm(bad)
    short = tmp_path / "c.pfm"
    short.write_bytes(b"Pf\n4 4\n-1.0\n\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="expected 16 values"):
        read_pfm(short)
