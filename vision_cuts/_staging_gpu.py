"""Pinned staging of host arrays for the GPU solvers' uploads.

A pageable ``cupy.asarray`` is staged by the driver on one thread (about 10 GB/s on
the H200 host); :func:`upload_host` and :class:`Staging` copy host arrays through pinned
buffers kept by each thread across calls, by several worker threads whose uploads
overlap their next copies (about 27 GB/s there).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["Staging", "staging", "upload_host"]

# host arrays go up through pinned staging buffers of this many bytes (two, reused
# across calls), copied into them by up to _COPY_THREADS threads: each chunk's upload
# overlaps the copy of the next (a pageable copy is staged by the driver on one thread)
# (H200 host, 16 cores, 8 MP of int32 capacities, 192 MB: 27 GB/s with 8 workers and
# 4 MB chunks, 23-29 GB/s with 4-12 workers and 2-8 MB, the driver's pageable copy
# 10 GB/s; at 0.3 MP, 7 MB, the pageable copy is faster: arrays below a chunk take it)
_STAGE_CHUNK = 4 << 20
_COPY_THREADS = max(1, min(8, (os.cpu_count() or 1) // 2))
_local = threading.local()  # this thread's Staging


class Staging:
    """Pinned host memory for uploads, kept by a thread across calls.

    A host array is split into up to ``_COPY_THREADS`` contiguous parts (one for
    every 4 MB), each streamed by its own worker through its own two pinned chunks of
    ``_STAGE_CHUNK`` bytes: the worker copies a chunk in and queues its upload, then
    fills its other chunk while that upload runs. The workers never wait for each
    other, only for their own chunks' earlier uploads.
    """

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        lanes = _COPY_THREADS
        self.mem = cupy.cuda.alloc_pinned_memory(2 * lanes * _STAGE_CHUNK)
        self.buf = np.frombuffer(
            self.mem, dtype=np.uint8, count=2 * lanes * _STAGE_CHUNK
        )
        self.events: list = [None] * (2 * lanes)
        self.pool = (
            ThreadPoolExecutor(lanes, thread_name_prefix="vision_cuts-stage")
            if lanes > 1
            else None
        )

    def _lane(self, lane: int, pieces: list, stream: Any, device: int) -> None:
        """Upload ``pieces`` (device address, host bytes) in turn through chunks
        ``2 lane`` and ``2 lane + 1``."""
        cp = self.cp
        j = 0
        with cp.cuda.Device(device):
            for dst, part in pieces:
                for off in range(0, part.nbytes, _STAGE_CHUNK):
                    slot = 2 * lane + (j & 1)
                    j += 1
                    if self.events[slot] is not None:
                        self.events[slot].synchronize()  # its last upload has left
                    count = min(_STAGE_CHUNK, part.nbytes - off)
                    base = slot * _STAGE_CHUNK
                    np.copyto(self.buf[base : base + count], part[off : off + count])
                    cp.cuda.runtime.memcpyAsync(
                        dst + off,
                        self.mem.ptr + base,
                        count,
                        cp.cuda.runtime.memcpyHostToDevice,
                        stream.ptr,
                    )
                    ev = cp.cuda.Event(block=False, disable_timing=True)
                    ev.record(stream)
                    self.events[slot] = ev

    def upload(self, pairs: list, stream: Any) -> None:
        """Copy each host array of ``pairs`` ``(device array, host array)`` into its
        device array (same bytes) on ``stream``; returns once every chunk is queued
        (the host arrays may then change). The arrays' bytes are cut into one part a
        worker, parts that may span arrays."""
        cp = self.cp
        flats = [
            (dst.data.ptr, np.ascontiguousarray(h).reshape(-1).view(np.uint8))
            for dst, h in pairs
        ]
        total = sum(f.nbytes for _, f in flats)
        if total < _STAGE_CHUNK:  # the driver's own staging: no workers
            for dst, flat in flats:
                cp.cuda.runtime.memcpyAsync(
                    dst,
                    flat.ctypes.data,
                    flat.nbytes,
                    cp.cuda.runtime.memcpyHostToDevice,
                    stream.ptr,
                )  # (returns once the pageable source has been read)
            return
        device = cp.cuda.Device().id
        lanes = min(_COPY_THREADS, max(1, total >> 22)) if self.pool else 1
        cuts = [(total * i // lanes) & ~4095 for i in range(lanes)] + [total]
        work: list = [[] for _ in range(lanes)]
        start = 0
        for dst, flat in flats:  # each array's share of every lane's byte range
            end = start + flat.nbytes
            for i in range(lanes):
                lo, hi = max(cuts[i], start), min(cuts[i + 1], end)
                if hi > lo:
                    work[i].append((dst + lo - start, flat[lo - start : hi - start]))
            start = end
        if lanes == 1:
            self._lane(0, work[0], stream, device)
            return
        jobs = [
            self.pool.submit(self._lane, i, work[i], stream, device)
            for i in range(lanes)
        ]
        for job in jobs:
            job.result()


def staging() -> Staging:
    """This thread's staging buffers."""
    stage = getattr(_local, "staging", None)
    if stage is None:
        stage = _local.staging = Staging()
    return stage


def upload_host(*arrays: Any) -> list:
    """Device copies of host arrays (None stays None), through this thread's pinned
    staging buffers on the current stream: about 27 GB/s on the H200 host against the
    driver's 10 for a pageable ``cupy.asarray`` (192 MB of 8 MP costs: 7 against 36
    ms). The kernels queued after it on the stream see the data."""
    import cupy

    out = [
        None if a is None else cupy.empty(np.shape(a), dtype=np.asarray(a).dtype)
        for a in arrays
    ]
    pairs = [
        (d, np.asarray(a))
        for d, a in zip(out, arrays, strict=True)
        if a is not None and d.size
    ]
    if pairs:
        staging().upload(pairs, cupy.cuda.get_current_stream())
    return out
