"""PFM and .flo reading and writing."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest

from vision_cuts.io import read_flo, read_pfm, write_flo, write_pfm


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


def _flo_bytes(width: int, height: int, values: int) -> bytes:
    """A .flo header for ``width x height`` followed by ``values`` float32 zeros."""
    return (
        struct.pack("<f", 202021.25)
        + struct.pack("<ii", width, height)
        + np.zeros(values, "<f4").tobytes()
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        # headers that claim far more than the file holds: no allocation, no overflow
        (_flo_bytes(2**31 - 1, 2**31 - 1, 2), "is truncated"),
        (_flo_bytes(2**20, 2**12, 2), "is truncated"),
        (_flo_bytes(5, 3, 30)[:-3], r"is truncated: .*expected 30 values .*found 117"),
        (_flo_bytes(5, 3, 30) + b"x" * 40, r"has bytes beyond its data: .*found 160"),
        (_flo_bytes(5, 3, 31), "has bytes beyond its data"),
    ],
)
def test_flo_size_must_match_the_header(tmp_path, data, words):
    path = tmp_path / "bad.flo"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=words) as info:
        read_flo(path)
    assert "bad.flo" in str(info.value)


def test_flo_exact_size_reads(tmp_path):
    path = tmp_path / "ok.flo"
    path.write_bytes(_flo_bytes(5, 3, 30))
    assert read_flo(path).shape == (3, 5, 2)
    path.write_bytes(_flo_bytes(0, 4, 0))
    assert read_flo(path).shape == (4, 0, 2)


def test_pfm_huge_header(tmp_path):
    path = tmp_path / "huge.pfm"
    path.write_bytes(b"Pf\n2147483647 2147483647\n-1.0\n" + b"\x00" * 8)
    with pytest.raises(ValueError, match="huge.pfm' is truncated"):
        read_pfm(path)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_write_flo_nan_is_unknown_for_every_float_dtype(tmp_path, dtype):
    flow = np.array([[[np.nan, 0.5], [1.5, -2.0]]], dtype)
    path = tmp_path / "n.flo"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_flo(path, flow)
    stored = np.fromfile(path, "<f4")[3:].reshape(1, 2, 2)
    np.testing.assert_array_equal(stored[0, 0], [1e10, 0.5])
    np.testing.assert_array_equal(stored[0, 1], [1.5, -2.0])
    back = read_flo(path, unknown_as_nan=True)
    assert np.isnan(back[0, 0]).all() and (back[0, 1] == [1.5, -2.0]).all()


def test_write_flo_refuses_masked_and_ragged(tmp_path):
    flow = np.ones((1, 2, 2), np.float32)
    masked = np.ma.masked_array(flow, mask=[[[True, True], [False, False]]])
    with pytest.raises(TypeError, match="flow must be a plain array, got a masked"):
        write_flo(tmp_path / "m.flo", masked)
    with pytest.raises(ValueError, match=r"flow must be a regular \(rectangular\)"):
        write_flo(tmp_path / "r.flo", [[[1.0, 0.0], [0.0]]])
    assert not (tmp_path / "m.flo").exists()


def test_pfm_and_flo_checks(tmp_path):
    with pytest.raises(TypeError, match="image must be a plain array"):
        write_pfm(tmp_path / "m.pfm", np.ma.masked_array(np.zeros((2, 2))))
    with pytest.raises(ValueError, match="image must be a regular"):
        write_pfm(tmp_path / "r.pfm", [[1.0, 2.0], [3.0]])
    for scale in (b"0", b"-0.0", b"nan"):
        path = tmp_path / "s.pfm"
        path.write_bytes(b"Pf\n1 1\n" + scale + b"\n" + np.float32(1).tobytes())
        with pytest.raises(ValueError, match=r"malformed PFM header \(scale"):
            read_pfm(path)
    write_flo(tmp_path / "f.flo", np.zeros((2, 2, 2), np.float32))
    for bad in ("no", 2, None):
        with pytest.raises(TypeError, match="unknown_as_nan must be True or False"):
            read_flo(tmp_path / "f.flo", unknown_as_nan=bad)


def test_read_pfm_of_a_file_without_line_ends(tmp_path):
    """A file that is no PFM may hold no line end: its first "line" is not read
    whole into memory and the error does not quote it."""
    path = tmp_path / "x.pfm"
    path.write_bytes(b"PF" + b"x" * 200_000)
    with pytest.raises(ValueError, match="not a PFM file") as info:
        read_pfm(path)
    assert len(str(info.value)) < 300
    path.write_bytes(b"Pf\n" + b"7" * 200_000)
    with pytest.raises(ValueError, match="header line longer than 4096") as info:
        read_pfm(path)
    assert len(str(info.value)) < 300
    path.write_bytes(b"Pf\r\n# a comment\r\n2 1\r\n-1.0\r\n" + b"\0" * 8)  # CRLF
    np.testing.assert_array_equal(read_pfm(path), np.zeros((1, 2), np.float32))


def test_read_flo_nan_component_is_unknown(tmp_path):
    """A pixel stored as (NaN, 1) is unknown as a whole with unknown_as_nan."""
    path = tmp_path / "f.flo"
    data = np.array([[[np.nan, 1.0], [2.0, 3.0]]], "<f4")
    path.write_bytes(struct.pack("<fii", 202021.25, 2, 1) + data.tobytes())
    got = read_flo(path, unknown_as_nan=True)
    assert np.isnan(got[0, 0]).all()
    np.testing.assert_array_equal(got[0, 1], [2.0, 3.0])


def test_visualise_arguments_beyond_float64_and_unsized_colours():
    from vision_cuts import draw_flow_arrows, flow_to_color

    img = np.zeros((5, 5), np.uint8)
    with pytest.raises(ValueError, match="max_magnitude must be a finite number"):
        flow_to_color(np.zeros((2, 2, 2)), max_magnitude=10**400)
    with pytest.raises(ValueError, match="scale must be a finite number"):
        draw_flow_arrows(img, [[1, 1]], [[1, 1]], scale=10**400)
    with pytest.raises(ValueError, match=r"color must have 3 values"):
        draw_flow_arrows(img, [[1, 1]], [[1, 1]], color=np.array(5))


def test_write_pfm_beyond_float32(tmp_path):
    path = tmp_path / "d.pfm"
    write_pfm(path, np.array([[1e300, -1e300, 2.0]]))  # no overflow warning (error)
    np.testing.assert_array_equal(read_pfm(path), [[np.inf, -np.inf, 2.0]])


def test_arrows_longer_than_the_unknown_threshold_keep_their_colour():
    from vision_cuts import draw_flow_arrows, flow_to_color

    frame = np.zeros((20, 30, 3), np.uint8)
    out = draw_flow_arrows(frame, [[5.0, 15.0]], [[2e9, 0.0]], color=None)
    drawn = out[out.any(-1)]
    assert len(drawn) > 0  # visible on a black frame
    want = flow_to_color(np.array([[[1.0, 0.0]]]))[0, 0]  # the +x direction: red
    np.testing.assert_array_equal(want, [255, 0, 0])
    assert (drawn[:, 1:] == 0).all() and drawn[:, 0].max() > 200  # red, blended
