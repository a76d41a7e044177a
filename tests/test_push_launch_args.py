"""The grid solver's push launches pass their arguments in the order of the kernels'
parameters (host side: stand-in kernels and a stand-in CuPy record the calls; no GPU,
so CI checks the launches that only the device runs)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from vision_cuts import _maxflow_gpu as mg
from vision_cuts._kernels import kernel_source


def _params(kernel: str) -> list:
    """The parameter names of ``kernel`` in grid_push_relabel.cu."""
    m = re.search(rf"\b{kernel}\(([^)]*)\)\s*{{", kernel_source("grid_push_relabel.cu"))
    assert m, kernel
    return [re.findall(r"(\w+)\s*$", p.strip())[0] for p in m.group(1).split(",")]


class _Buffer(str):
    """A device buffer stand-in: its name, a pointer and a size."""

    data = SimpleNamespace(ptr=0)
    nbytes = 4


def _solver(claim: bool, calls: list):
    """A solver of a 3 x 3 tile grid whose arrays are their kernel parameter names."""
    s = object.__new__(mg._Solver)
    for k in ("rc", "ex", "h", "tcap", "touched", "pstats", "mask", "narrow", "nwm"):
        setattr(s, k, k)
    s.pflags = "flags"
    s.tdone, s.cdone, s.ticket = (_Buffer(k) for k in ("tdone", "cdone", "ticket"))
    s.dims, s.tdims = ("nx", "ny", "nz"), ("ntx", "nty", "ntz")
    s.n, s.idx = 123, lambda v: ("n", v)
    s.slots = s.persist_blocks = s.claim_blocks = s.nt = 4
    s.colours, s.corners, s.claim = (0, 1), False, claim
    s.ntx = s.nty = 3
    for attr, name in (
        ("k_push", "gpr_push_tile"),
        ("k_push_persist", "gpr_push_persist"),
        ("k_push_claim", "gpr_push_claim"),
    ):
        setattr(
            s, attr, lambda grid, block, args, name=name: calls.append((name, args))
        )
    memsets: list = []
    runtime = SimpleNamespace(memsetAsync=lambda *a: memsets.append(a))
    stream = SimpleNamespace(ptr=0)
    s.cp = SimpleNamespace(
        cuda=SimpleNamespace(runtime=runtime, get_current_stream=lambda: stream)
    )
    return s, memsets


@pytest.mark.parametrize("claim", [False, True])
def test_push_launches_follow_the_kernel_parameters(claim):
    calls: list = []
    s, memsets = _solver(claim, calls)
    s.sweeps(2, 16)  # colour launches, or one claim launch
    s.sweeps(1, 8, persist=True)  # the persistent grid either way
    kernels = [name for name, _ in calls]
    if claim:
        assert kernels == ["gpr_push_claim", "gpr_push_persist", "gpr_push_persist"]
        assert len(memsets) == 3  # tdone, cdone and the ticket, before the launch
    else:
        assert kernels == ["gpr_push_tile"] * 4 + ["gpr_push_persist"] * 2
    values = {"hmax": np.int32(123), "n": ("n", 123)}
    colours = [0, 0, 1] if claim else [0, 1, 0, 1, 0, 1]
    for (name, args), colour in zip(calls, colours, strict=True):
        names = _params(name)
        assert len(args) == len(names), (name, names, args)
        for pname, value in zip(names, args, strict=True):
            if pname in ("colour", "iters", "sweeps"):
                assert isinstance(value, np.int32), (name, pname, value)
            else:
                assert value == values.get(pname, pname), (name, pname, value)
        if "colour" in names:
            assert int(args[names.index("colour")]) == colour
        iters = int(args[names.index("iters")])
        assert iters == (8 if name == "gpr_push_persist" else 16)
        if name == "gpr_push_claim":
            assert int(args[names.index("sweeps")]) == 2
