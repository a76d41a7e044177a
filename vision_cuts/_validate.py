"""Input checks shared by the public functions.

Every check names the parameter, the expected and the actual value. Shape and dtype
checks use host-side metadata only; checks that scan data return one bool to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import is_cupy_array

__all__ = [
    "INT32_MAX",
    "UNIT_SLACK",
    "as_capacity",
    "check_finite",
    "check_flag",
    "check_grid_shape",
    "check_int",
    "check_number",
    "check_scale",
    "exact_sum",
    "first_index",
    "given_kind",
    "nonfinite_at",
    "object_note",
    "regular_array",
    "unit_scale",
]

INT32_MAX = int(np.iinfo(np.int32).max)

#: how far above 1 a float picture on the [0, 1] scale may stray (the overshoot of a
#: resampling filter) and still be read on that scale; the image front ends share it
UNIT_SLACK = 0.5


def unit_scale(top: float) -> bool:
    """Whether a float picture whose largest value is ``top`` is on the [0, 1] scale
    (multiplied by 255) rather than in grey levels (0..255)."""
    return top <= 1.0 + UNIT_SLACK


def _xp(a: Any):
    if is_cupy_array(a):
        import cupy

        return cupy
    return np


def first_index(mask: Any) -> tuple:
    """C-order index of the first True element of ``mask`` (host tuple)."""
    xp = _xp(mask)
    flat = int(xp.argmax(mask.ravel()))
    return tuple(int(v) for v in np.unravel_index(flat, mask.shape))


def nonfinite_at(a: Any) -> tuple | None:
    """The C-order index of ``a``'s first NaN or infinity, or None (one reduction
    returned to the host when every value is finite)."""
    xp = _xp(a)
    if a.size == 0 or bool(xp.isfinite(a).all()):
        return None
    return first_index(~xp.isfinite(a))


def check_finite(a: Any, name: str) -> None:
    """A NaN or infinity in ``a`` is a ValueError naming ``name``, the value and its
    index."""
    bad = nonfinite_at(a)
    if bad is not None:
        raise ValueError(f"{name} must be finite, got {a[bad].item()!r} at index {bad}")


def check_scale(scale: Any) -> float | None:
    """``scale`` is None or a finite positive real number."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer,
                                                         np.floating)):
        raise TypeError(f"scale must be a positive number, got {type(scale).__name__}")
    try:
        value = float(scale)
    except OverflowError:  # a Python integer beyond float64
        value = float("inf")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    return value


def exact_sum(a: Any) -> int:
    """The sum of an int64 array (NumPy or CuPy) as a Python integer, exactly (int64's
    own sum wraps beyond 2**63): the upper and lower 32 bits of its values summed
    apart, in chunks of 2**30 values so that neither partial sum can wrap."""
    flat = a.ravel()
    total = 0
    step = 1 << 30
    for k in range(0, flat.size, step):
        part = flat[k : k + step]
        total += (int((part >> 32).sum()) << 32) + int((part & 0xFFFFFFFF).sum())
    return total


def check_int(value: Any, name: str, low: int | None = None,
              high: int | None = None) -> int:
    """``value`` as a Python int: an integer (Python or NumPy, not a bool, not a
    float) within ``[low, high]`` where those are given."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        want = (f"in [{low}, {high}]" if low is not None and high is not None
                else f">= {low}" if low is not None else f"<= {high}")
        raise ValueError(f"{name} must be an integer {want}, got {v}")
    return v


def check_number(value: Any, name: str, low: float | None = None,
                 high: float | None = None, *, above: bool = False) -> float:
    """``value`` as a finite Python float: a real number (Python or NumPy, not a
    bool, not a string) within ``[low, high]``, or ``(low, high]`` with ``above``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"{name} must be a number, got {value!r} "
                        f"({type(value).__name__})")
    try:
        v = float(value)
    except OverflowError:  # a Python int beyond float64
        v = float("inf") if value > 0 else float("-inf")
    bad = not np.isfinite(v)
    if low is not None:
        bad = bad or (v <= low if above else v < low)
    if high is not None:
        bad = bad or v > high
    if bad:
        lo = "" if low is None else (f" > {low}" if above else f" >= {low}")
        hi = "" if high is None else f" <= {high}"
        join = " and" if lo and hi else ""
        raise ValueError(f"{name} must be a finite number{lo}{join}{hi}, got {value!r}")
    return v


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a bool: True, False, a NumPy bool (a 0-d bool array too), or the
    integers 0 and 1 (not a string, not None)."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == bool:
        value = value.item()  # a 0-d bool array, as NumPy reductions give
    if not isinstance(value, (bool, np.bool_)) and not (
        isinstance(value, (int, np.integer)) and value in (0, 1)
    ):
        raise TypeError(f"{name} must be True or False, got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def _scaled(a: Any, scale: float, name: str, xp) -> Any:
    """``round(a * scale)`` in float64; a product beyond float64 (infinite) is a
    ValueError naming ``name`` and the value before scaling."""
    with np.errstate(over="ignore"):
        out = xp.rint(a.astype(np.float64) * float(scale))
    bad = nonfinite_at(out)
    if bad is not None:
        raise ValueError(
            f"{name} times scale ({scale!r}) must be a finite number, got "
            f"{a[bad].item()!r} at index {bad}: reduce the costs or the scale"
        )
    return out


def object_note(a: Any, given: str) -> str:
    """For a dtype error: why NumPy made an object array of what was ``given`` (the
    type's name), or "" for other dtypes."""
    if getattr(getattr(a, "dtype", None), "kind", "") != "O":
        return ""
    return (
        f" (the {given} given holds Python objects: integers beyond int64 or values "
        "that are not numbers)"
    )


def given_kind(value: Any, arr: Any) -> str:
    """What a caller passed, for a dtype error: ``None`` or the type's name where
    NumPy made an object scalar of it, else the array's dtype (and why it holds
    objects, where it does)."""
    if getattr(arr, "ndim", None) == 0 and getattr(arr.dtype, "kind", "") == "O":
        return "None" if value is None else type(value).__name__
    return f"dtype {arr.dtype}{object_note(arr, type(value).__name__)}"


def regular_array(a: Any, name: str) -> Any:
    """Lists and tuples as a NumPy array; a ragged nesting is a ValueError naming
    ``name`` (NumPy's own message names no parameter), a masked array a TypeError
    (its mask would be dropped). Anything else as it is."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must be a plain array, got a masked array: fill the masked "
            "entries with the values they stand for first (a.filled(value))"
        )
    if isinstance(a, (list, tuple)):
        try:
            return np.asarray(a)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{name} must be a regular (rectangular) array of numbers: {exc}"
            ) from None
    return a


def check_grid_shape(shape: tuple, name: str) -> None:
    """A grid is 2-D (rows, columns) or 3-D (slices, rows, columns)."""
    if len(shape) not in (2, 3):
        raise ValueError(
            f"{name} must be a 2-D (M, N) or 3-D (P, M, N) grid, got shape {shape}"
        )


def as_capacity(a: Any, name: str, *, scale: float | None = None) -> Any:
    """Validate one capacity array and return it as int32 of the same array kind.

    Integer dtypes are accepted when every value lies in ``[0, 2**31 - 1]``; floating
    dtypes only with an explicit ``scale`` (values are multiplied by it and rounded to
    the nearest integer; integers are too, where a scale is given). The sign is
    checked before rounding. Anything else is a TypeError; negative, NaN, infinite or
    too large values are a ValueError naming the first offender.
    """
    given = type(a).__name__
    a = regular_array(a, name)
    if not (is_cupy_array(a) or isinstance(a, np.ndarray)):
        if isinstance(a, (int, float)):
            a = np.asarray(a)
        else:
            raise TypeError(
                f"{name} must be a NumPy or CuPy array, got {type(a).__name__}"
            )
    scale = check_scale(scale)
    xp = _xp(a)
    kind = a.dtype.kind
    if kind == "f":
        if scale is None:
            raise TypeError(
                f"{name} has floating dtype {a.dtype}; capacities are integers. Pass "
                "scale=<factor> to quantise floats (round(value * scale)), or convert "
                "to an integer dtype"
            )
        check_finite(a, name)
        if a.size and bool((a < 0).any()):  # before rounding: -0.4 is not 0
            bad = first_index(a < 0)
            raise ValueError(
                f"{name} must be non-negative, got {a[bad].item()!r} at index {bad}"
            )
        a = _scaled(a, scale, name, xp)
    elif kind in "iu":
        if scale is not None and scale != 1:
            if a.size and a.dtype.kind == "i" and bool((a < 0).any()):
                bad = first_index(a < 0)
                raise ValueError(
                    f"{name} must be non-negative, got {a[bad]} at index {bad}"
                )
            # in float64: exact wherever the result can fit int32 (the check below),
            # and no int64 product to wrap
            a = _scaled(a, scale, name, xp)
    elif kind == "b":
        raise TypeError(
            f"{name} must have an integer dtype (int32 preferred), got bool"
        )
    else:
        raise TypeError(
            f"{name} must have an integer dtype (int32 preferred), got {a.dtype}"
            f"{object_note(a, given)}"
        )
    if a.size:
        if a.dtype.kind != "u" and bool((a < 0).any()):
            bad = first_index(a < 0)
            raise ValueError(
                f"{name} must be non-negative, got {a[bad]} at index {bad}"
            )
        if a.dtype.itemsize > 4 or a.dtype.kind in "uf":
            if bool((a > INT32_MAX).any()):
                bad = first_index(a > INT32_MAX)
                value = a[bad]
                if a.dtype.kind == "f":
                    value = int(value)  # (scaled: a whole number in float64)
                raise ValueError(
                    f"{name} must fit in int32 (<= {INT32_MAX}), got {value} at index "
                    f"{bad}; rescale the capacities"
                )
    if a.ndim == 0:  # (ascontiguousarray would make it 1-D: keep the shape for the
        return a.astype(np.int32)  # caller's shape check)
    return xp.ascontiguousarray(a, dtype=np.int32)
