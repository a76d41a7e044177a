"""Many images, stereo pairs and video frames across processes, GPUs and machines, on
Dask.

Each ``*_many`` function maps one front end over a collection on a
``distributed.Client`` (the caller's, or a local cluster started for the call and
closed after it) and streams every result to a file in ``out_dir``, so a long run keeps
no result in memory:

* :func:`segment_many`: ``grabcut`` over images (a mask PNG each, 255 = object);
* :func:`stereo_many`: ``stereo_disparity`` over rectified pairs (a PFM each);
* :func:`flow_many`: ``optical_flow_frames`` over the consecutive frames of sequences,
  in chunks that overlap by one frame (a ``.flo`` per frame pair, numbered in frame
  order; a chunk starts cold, as the first pair of a sequence does);
* :func:`assignment_many`: ``linear_sum_assignment_batched`` over a stack of problems
  too large for one device (or one machine's memory: a ``.npy`` file each worker maps),
  in batches (an ``.npy`` of row and column indices each).

Behaviour shared by all of them:

* an output that exists already is not computed again (``overwrite=False``): a rerun
  finishes an interrupted one; every file is written in ``out_dir/.vision_cuts-partial``
  and renamed into place, so an interrupted write never leaves a partial output behind
  (that folder is emptied and removed at the end of the run: do not point two runs at
  one ``out_dir`` at the same time);
* an item that raises is retried once (``retries``), then reported with its input's
  name and the error, and the rest of the run goes on; a worker that dies has its tasks
  rescheduled by Dask;
* a task holds ``items_per_task`` items; by default one until the first few tasks
  have finished, then as many as take about a quarter of a second (at most 16): a
  task costs its worker a few milliseconds of scheduling, which small items on a GPU
  feel (1-GPU stereo of 256 x 320 pairs, 28 ms an item: 0.90x the plain loop in tasks
  of one item, 0.95x batched), and long items stay one a task so that the workers
  share them evenly; towards the end of the run these tasks shrink (at most half of
  the items left a worker), so that the workers finish together;
* at most ``max_in_flight`` tasks are submitted at a time;
* a one-line progress bar on stderr (``progress``), and a :class:`RunSummary` back.

Workers keep their compiled kernels and solvers between tasks (they are cached per
process). With GPUs, :func:`local_client` starts one worker per GPU with ``dask-cuda``
(each pinned to its device); without, worker processes on the CPU that share the cores.
Its workers run without the ``MALLOC_TRIM_THRESHOLD_`` that Dask's nannies set by
default: that setting turns off glibc's adaptive mmap threshold, and the front ends'
large temporary arrays were then mapped and faulted in afresh every time (a
Middlebury-size stereo pair: 2.7 s instead of 1.1 s). Workers of your own cluster
should be started without it too (``distributed.nanny.pre-spawn-environ``). Dask is an
optional dependency (``pip install "vision-cuts[distributed]"``); ``import
vision_cuts`` never imports it.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ItemError",
    "RunSummary",
    "assignment_many",
    "flow_many",
    "local_client",
    "segment_many",
    "stereo_many",
]


def _distributed():
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "vision_cuts.distributed needs Dask's distributed scheduler: "
            'pip install "vision-cuts[distributed]"'
        ) from exc
    return distributed


@dataclass(frozen=True)
class ItemError:
    """An input that failed (after its retries): its name and the error."""

    name: str
    error: str


@dataclass
class RunSummary:
    """What a ``*_many`` call did: outputs written, outputs found already there
    (skipped), inputs that failed, and the wall time."""

    written: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    seconds: float = 0.0
    #: what an item is (``flow_many``: a chunk of frame pairs, several files)
    unit: str = "items"
    #: output files of the written items
    files_written: int = 0

    @property
    def items_per_s(self) -> float:
        return len(self.written) / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        done = f"{len(self.written)} written"
        if self.unit != "items":  # items of several files: say what was counted
            done = (
                f"{len(self.written)} {self.unit} written ({self.files_written} files)"
            )
        text = (
            f"{done}, {len(self.skipped)} skipped (existing), "
            f"{len(self.failed)} failed in {self.seconds:.1f} s "
            f"({self.items_per_s:.2f} {self.unit}/s)"
        )
        for e in self.failed:
            text += f"\n  {e.name}: {e.error}"
        return text


def _gpu_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy or no device
        return 0


def local_client(workers: int | None = None, *, gpu: bool | None = None) -> Any:
    """A ``distributed.Client`` of a cluster on this machine.

    ``gpu=None`` (default): one worker per GPU where GPUs exist (``dask-cuda``'s
    ``LocalCUDACluster``, or without it one worker process a GPU, each seeing its
    own), else CPU worker processes. ``workers``: the number of workers
    (GPU: at most the GPUs; CPU: default one a core, one task at a time each). The
    workers share this process's threads: ``VISION_CUTS_THREADS`` where it is set,
    else the cores its CPU affinity allows; each worker's solvers, numba and OpenMP get
    an equal part. Closing the client
    closes its cluster: ``with local_client() as client: ...``.
    """
    dist = _distributed()
    import dask

    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    gpus = _gpu_count()
    if gpu is None:
        gpu = gpus > 0
    # Dask's nannies set MALLOC_TRIM_THRESHOLD_ in their workers by default, which
    # turns off glibc's adaptive mmap threshold: every large temporary array is then
    # mapped afresh and faulted in page by page (a Middlebury-size stereo pair took
    # 2.7 s instead of 1.1 s in such a process). These workers keep glibc's default.
    # The workers' thread counts (_thread_env) go through the nannies' environment
    # settings as well as the clusters' ``env``: dask-cuda's LocalCUDACluster replaces
    # a worker's ``env`` with its CUDA_VISIBLE_DEVICES, and the workers then ran with
    # the nannies' OMP_NUM_THREADS=1.
    n_env = _gpu_workers(workers, gpus) if gpu else (workers or _cores())
    with dask.config.set(
        {
            "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
            "distributed.nanny.environ": _thread_env(max(1, n_env), gpu),
        }
    ):
        cluster = _cluster(dist, workers, gpu, gpus)

    class _OwningClient(dist.Client):
        """A client that closes its cluster with it."""

        def close(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().close(*args, **kwargs)
            finally:
                cluster.close()

    return _OwningClient(cluster)


def _gpu_workers(workers: int | None, gpus: int) -> int:
    return gpus if workers is None else min(workers, gpus)


#: OpenCV's threads in a GPU worker (at most; fewer where the cores shared among the
#: workers are fewer). There OpenCV runs beside the device work, not as the work: DIS,
#: the dense flow's second proposal, runs on the host while the device solves the pair
#: before (``optical_flow_frames`` starts it one pair ahead). With OpenCV's default of
#: a thread a core, DIS on a 640 x 480 pair took 10 ms but 220 ms of CPU time (its
#: threads wait actively between its many short parallel steps); on 4 threads, 13-15
#: ms and 50-60 ms. Two GPU workers on a 32-core host (2x H100) then gave 1.88x one
#: worker's dense flow throughput, against 1.63x with OpenCV's default.
_GPU_WORKER_OPENCV_THREADS = 4


def _cores() -> int:
    """The threads the workers of a local cluster share: ``VISION_CUTS_THREADS`` where
    it is set, else the cores this process may run on (its CPU affinity, not the
    machine's count: a container or ``taskset`` may give it fewer)."""
    from ._maxflow_cpu import default_threads

    return default_threads()


def _thread_env(n: int, gpu: bool = False) -> dict:
    """The environment of n worker processes that share this process's cores
    (:func:`_cores`): the CPU solvers' and OpenMP's threads (Dask's nannies set
    OMP_NUM_THREADS=1 by default, which makes every OpenMP-threaded step of a worker
    single-threaded); ``gpu``: also OpenCV's (``_GPU_WORKER_OPENCV_THREADS``)."""
    share = max(1, _cores() // n)
    threads = str(share)
    env = {  # numba's parallel loops: from VISION_CUTS_THREADS, in _task
        "VISION_CUTS_THREADS": threads,
        "OMP_NUM_THREADS": threads,
    }
    if gpu:
        env["OPENCV_FOR_THREADS_NUM"] = str(min(share, _GPU_WORKER_OPENCV_THREADS))
    return env


def _cluster(dist: Any, workers: int | None, gpu: bool, gpus: int) -> Any:
    if gpu:
        if gpus == 0:
            raise ValueError("gpu=True, but no CUDA device is visible")
        n = _gpu_workers(workers, gpus)
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:  # missing, or not matching this distributed
            return _gpu_spec_cluster(dist, n)
        devices = ",".join(str(i) for i in range(n))
        return LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=devices,
            n_workers=n,
            dashboard_address=":0",
            env=_thread_env(n, gpu=True),
        )
    n = workers or _cores()
    return dist.LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        env=_thread_env(n),
    )


def _gpu_spec_cluster(dist: Any, n: int) -> Any:
    """One worker process a GPU without dask-cuda: worker i sees GPU i alone
    (``CUDA_VISIBLE_DEVICES``), one task at a time, as ``LocalCUDACluster`` does."""
    workers = {
        f"gpu-{i}": {
            "cls": dist.Nanny,
            "options": {
                "nthreads": 1,
                "env": {"CUDA_VISIBLE_DEVICES": str(i), **_thread_env(n, gpu=True)},
            },
        }
        for i in range(n)
    }
    scheduler = {"cls": dist.Scheduler, "options": {"dashboard_address": ":0"}}
    return dist.SpecCluster(workers=workers, scheduler=scheduler)


# ------------------------------------------------------------------ the run loop
def _task(fn: Callable, batch: list, params: dict, retries: int) -> tuple[list, float]:
    """On a worker: the items of one task in turn. Each item is computed (tried
    ``1 + retries`` times), then every output is written under a temporary name and
    renamed (``fn`` returns one array per output path). Returns ``([(name, error or
    None), ...], seconds a computed item took on average)``: an item that fails does
    not stop the others."""
    _numba_threads()
    report = []
    t0 = time.perf_counter()
    for name, payload, outs in batch:
        for _ in range(1 + retries):
            try:
                arrays = fn(payload, **params)
                for path, array in zip(outs, arrays, strict=True):
                    p = Path(path)
                    tmp = p.parent / _PARTIAL / f"{p.stem}-{uuid.uuid4().hex}{p.suffix}"
                    tmp.parent.mkdir(exist_ok=True)
                    _write(str(tmp), array)
                    os.replace(tmp, p)
            except Exception as exc:  # reported with the item's name
                error = f"{type(exc).__name__}: {exc}"
            else:
                error = None
                break
        report.append((name, error))
    return report, (time.perf_counter() - t0) / max(1, len(batch))


def _numba_threads() -> None:
    """On a worker: numba's parallel loops (the batched assignment, the multi-label
    moves) on the worker's share of the cores (``VISION_CUTS_THREADS``, which its
    environment sets), through ``numba.set_num_threads``. (numba fixes its thread
    count when it is imported, which in a worker may come before the environment is
    applied; a ``NUMBA_NUM_THREADS`` set later disagreed with the threads launched,
    and the first compile on a worker failed.)"""
    share = os.environ.get("VISION_CUTS_THREADS")
    if not share:
        return
    import numba

    numba.set_num_threads(max(1, min(int(share), numba.config.NUMBA_NUM_THREADS)))


#: the folder of out_dir where the outputs are written before they are renamed; what a
#: killed worker leaves there is removed at the end of the run
_PARTIAL = ".vision_cuts-partial"


def _write(path: str, array: Any) -> None:
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        import cv2

        if not cv2.imwrite(path, np.asarray(array)):
            raise OSError(f"cannot write {path}")
    elif suffix == ".pfm":
        from .io import write_pfm

        write_pfm(path, array)
    elif suffix == ".flo":
        from .io import write_flo

        write_flo(path, array)
    elif suffix == ".npy":
        np.save(path, np.asarray(array))
    else:  # pragma: no cover - the callers choose the suffixes
        raise ValueError(f"no writer for {suffix!r}")


#: with ``items_per_task=None``, tasks of one item until a few have finished, then
#: tasks of as many items as take about this long (at most _MAX_ITEMS_PER_TASK): a
#: task costs the worker a few milliseconds of scheduling beside the launch-bound
#: device work of a small item (1-GPU stereo of 256 x 320 pairs on an H200, 28 ms an
#: item: 0.90-0.91x the single-process loop in single-item tasks, 0.93-0.95x batched,
#: 0.97-0.98x for the same loop run inside the worker)
_TASK_SECONDS = 0.25
_MAX_ITEMS_PER_TASK = 16


def _check_count(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")


def _run(
    label: str,
    jobs: list[tuple[str, Any, list[Path]]],
    fn: Callable,
    params: dict,
    client: Any,
    workers: int | None,
    *,
    retries: int,
    overwrite: bool,
    progress: bool,
    max_in_flight: int | None,
    items_per_task: int | None = None,
    unit: str = "items",
) -> RunSummary:
    """Compute ``fn(payload, **params)`` for every job ``(name, payload, outputs)``
    whose outputs are not all there, in tasks of ``items_per_task`` jobs (None: chosen
    from the first tasks' times), at most ``max_in_flight`` tasks at a time. ``unit``
    names a job in the summary."""
    dist = _distributed()
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    _check_count("max_in_flight", max_in_flight)
    _check_count("items_per_task", items_per_task)
    t0 = time.perf_counter()
    summary = RunSummary(unit=unit)
    todo = []
    for name, payload, outs in jobs:
        if not overwrite and outs and all(p.exists() for p in outs):
            summary.skipped.append(name)
        else:
            todo.append((name, payload, outs))
    folders = sorted({p.parent for _, _, outs in todo for p in outs})
    made = [f for f in folders if not f.exists()]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    own = client is None
    try:
        if own and todo:
            client = local_client(workers)
    except BaseException:
        _remove_empty(made)
        raise
    try:
        nworkers = len(client.scheduler_info().get("workers", {})) if todo else 1
        limit = max_in_flight or 4 * max(1, nworkers)
        from .cli import _Progress  # the CLI's one-line bar on stderr

        bar = _Progress(label, progress)
        finished = 0
        pending: dict = {}
        queue = iter(todo)
        # (nothing to do: no cluster was started, and as_completed() would look for
        # a default client)
        done = dist.as_completed() if todo else []
        probe = 4 * max(1, nworkers)  # single-item tasks timed before batching
        item_seconds: list = []
        size = items_per_task or 1  # items a task
        left = len(todo)  # items not yet submitted

        def submit() -> bool:
            nonlocal left
            n = size
            if items_per_task is None:  # guided: at most half of what is left a
                # worker, so that the last tasks are short and the workers finish
                # together
                n = min(n, max(1, -(-left // (2 * max(1, nworkers)))))
            batch = [job for _, job in zip(range(n), queue, strict=False)]
            if not batch:
                return False
            left -= len(batch)
            fut = client.submit(
                _task,
                fn,
                [
                    (name, payload, [str(p) for p in outs])
                    for name, payload, outs in batch
                ],
                params,
                retries,
                key=f"vision_cuts-{label}-{uuid.uuid4().hex}",
                pure=False,
                retries=retries,  # a task that raises outside the items' own tries
            )
            pending[fut.key] = {name: len(outs) for name, _, outs in batch}
            done.add(fut)
            return True

        for _ in range(limit):
            if not submit():
                break
        for fut in done:
            names = pending.pop(fut.key)
            # result(), not the status: a task that finished on a worker killed before
            # its result was fetched reads "lost" here, and result() waits for Dask to
            # compute it again
            try:
                report, seconds = fut.result()
            except Exception as exc:  # the task itself failed (its worker died each
                # time, or it was cancelled)
                for name in names:
                    summary.failed.append(
                        ItemError(name, f"{type(exc).__name__}: {exc}")
                    )
            else:
                for name, error in report:
                    if error is None:
                        summary.written.append(name)
                        summary.files_written += names[name]
                    else:
                        summary.failed.append(ItemError(name, error))
                if items_per_task is None and len(item_seconds) < probe:
                    item_seconds.append(seconds)
                    if len(item_seconds) == probe:
                        typical = sorted(item_seconds)[(probe - 1) // 2]
                        size = max(1, min(_MAX_ITEMS_PER_TASK, int(
                            _TASK_SECONDS / max(typical, 1e-6))))  # fmt: skip
            fut.release()
            finished += len(names)
            bar(finished, len(todo))
            submit()
    finally:
        if own and client is not None:
            client.close()  # and the cluster local_client started
        for folder in {p.parent / _PARTIAL for _, _, outs in jobs for p in outs}:
            if folder.is_dir():  # partial files of killed workers
                for f in folder.iterdir():
                    f.unlink(missing_ok=True)
                folder.rmdir()
        if not summary.written:  # an error before any output: no empty folders
            _remove_empty(made)
    summary.seconds = time.perf_counter() - t0
    return summary


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders that hold nothing (the deepest first)."""
    import contextlib

    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()


# ------------------------------------------------------------------ inputs
def _distinct_names(jobs: list, what: str) -> None:
    """Each output named once: inputs of one file name in different folders would
    write one output file in turn (which one stays depends on timing)."""
    seen: dict[str, Any] = {}
    for name, payload, _ in jobs:
        first = payload[0] if isinstance(payload, tuple) else payload
        if name in seen:
            raise ValueError(
                f"{what}: {str(seen[name])!r} and {str(first)!r} would both write the "
                f"output {name!r}; give the inputs distinct file names (or one output "
                "folder each)"
            )
        seen[name] = first


def _name_of(item: Any, index: int) -> str:
    if isinstance(item, (str, os.PathLike)):
        return Path(item).stem
    return f"item{index:06d}"


_IMAGE_SUFFIXES = {
    ".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".ppm", ".pgm", ".pnm", ".webp",
}  # fmt: skip


def _read_rgb(item: Any) -> np.ndarray:
    """An image given as a path (read as RGB) or as an array (as it is)."""
    if isinstance(item, (str, os.PathLike)):
        import cv2

        img = cv2.imread(str(item), cv2.IMREAD_COLOR)
        if img is None:
            raise ValueError(f"cannot read an image from {str(item)!r}")
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return np.asarray(item)


def _natural(path: Path) -> list:
    """Sort key of file names with their digit runs as numbers (frame_2 before
    frame_10), so that unpadded frame numbers keep frame order."""
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", str(path))
    ]


def _expand(items: Any, what: str) -> list:
    """A folder (its image files, in natural order: frame_2 before frame_10), a glob
    pattern (the same order), an existing file, or a sequence as it is."""
    if isinstance(items, (str, os.PathLike)):
        p = Path(items)
        if p.is_dir():
            files = sorted(
                (f for f in p.iterdir() if f.suffix.lower() in _IMAGE_SUFFIXES),
                key=_natural,
            )
        elif p.is_file():  # a file whose name holds glob characters is that file
            files = [p]
        else:
            import glob

            files = sorted((Path(f) for f in glob.glob(str(items))), key=_natural)
        if not files:
            raise ValueError(f"{what}: no image files in {str(items)!r}")
        return files
    if isinstance(items, np.ndarray) and items.ndim >= 3:
        return list(items)
    if not isinstance(items, Iterable):
        raise TypeError(
            f"{what} must be a folder, a glob pattern or a sequence, got "
            f"{type(items).__name__}"
        )
    return list(items)


def _out_dir(out_dir: Any) -> Path:
    """``out_dir`` as a path (made by :func:`_run` once every input has been
    checked: a call that fails on its inputs leaves no empty folder behind)."""
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"out_dir {str(path)!r} is a file, not a folder")
    for parent in path.parents:  # the nearest existing folder above it
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(
                    f"out_dir {str(path)!r} cannot be made: {str(parent)!r} is a "
                    "file, not a folder"
                )
            break
    return path


def _check_keywords(
    front_end: Callable,
    params: dict,
    taken: tuple[str, ...],
    what: str,
    check_values: Callable | None = None,
) -> None:
    """The keywords meant for ``front_end``, checked here before any worker starts: a
    name it does not take, or one that ``what`` sets itself for each item, is a
    TypeError naming it, and ``check_values`` (given the front end's keyword
    arguments with their defaults) raises the front end's own error for a bad value
    (in a worker either would fail every item in turn)."""
    import inspect

    signature = inspect.signature(front_end)
    _check_names(signature, params, taken, what, front_end.__name__)
    if check_values is not None:
        options = {
            name: p.default
            for name, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        check_values({**options, **params})


def _check_names(
    signature: Any, params: dict, taken: tuple[str, ...], what: str, name: str
) -> None:
    import inspect

    accepted = signature.parameters
    for key in params:
        if key in taken:
            raise TypeError(
                f"{what}() sets {key!r} itself for each item; it cannot be passed "
                f"on to {name}()"
            )
        if key not in accepted or accepted[key].kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            names = ", ".join(sorted(set(accepted) - set(taken)))
            raise TypeError(
                f"{what}() got the keyword {key!r}, which {name}() "
                f"does not take (it takes {names})"
            )


# ------------------------------------------------------------------ front ends
def _segment_one(payload: tuple, **params: Any) -> list:
    from .segmentation import grabcut

    item, rect = payload
    image = _read_rgb(item)
    if rect is None:  # the CLI's default box
        from .segmentation import default_box

        rect = default_box(image.shape[1], image.shape[0])
    result = grabcut(image, rect=rect, **params)
    return [np.asarray(result.mask, dtype=np.uint8) * 255]


def segment_many(
    images: Any,
    out_dir: Any,
    *,
    rects: Sequence | None = None,
    client: Any = None,
    workers: int | None = None,
    retries: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    max_in_flight: int | None = None,
    items_per_task: int | None = None,
    **grabcut_params: Any,
) -> RunSummary:
    """GrabCut over many images: ``out_dir/<name>.png`` (uint8, 255 = object) each.

    ``images``: a folder, a glob pattern, or a sequence of paths or arrays (arrays are
    named ``item000000``, ...). ``rects``: one ``(x, y, w, h)`` per image (None in it,
    or ``rects=None``: the CLI's default box, ``(w / 8, h / 16, 3 w / 4, 7 h / 8)``).
    Other keywords go to :func:`vision_cuts.grabcut` (``iterations``, ``backend``,
    ...). See the module
    docstring for ``client``, ``workers``, ``retries``, ``overwrite``, ``progress`` and
    ``max_in_flight``.
    """
    from .segmentation import check_grabcut_options, grabcut

    _check_keywords(
        grabcut, grabcut_params, ("image", "rect", "init"), "segment_many",
        check_grabcut_options,
    )  # fmt: skip
    items = _expand(images, "images")
    if rects is not None and len(rects) != len(items):
        raise ValueError(
            f"rects must hold one box per image ({len(items)}), got {len(rects)}"
        )
    out = _out_dir(out_dir)
    jobs = []
    for i, item in enumerate(items):
        rect = None if rects is None else rects[i]
        name = _name_of(item, i)
        jobs.append((name, (item, rect), [out / f"{name}.png"]))
    _distinct_names(jobs, "images")
    return _run(
        "segment",
        jobs,
        _segment_one,
        grabcut_params,
        client,
        workers,
        retries=retries,
        overwrite=overwrite,
        progress=progress,
        max_in_flight=max_in_flight,
        items_per_task=items_per_task,
    )


def _stereo_one(payload: tuple, **params: Any) -> list:
    from .stereo import stereo_disparity

    left, right = payload
    disp = stereo_disparity(_read_rgb(left), _read_rgb(right), **params)
    return [np.asarray(disp, dtype=np.float32)]


def stereo_many(
    pairs: Sequence,
    out_dir: Any,
    *,
    max_disparity: int,
    client: Any = None,
    workers: int | None = None,
    retries: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    max_in_flight: int | None = None,
    items_per_task: int | None = None,
    **stereo_params: Any,
) -> RunSummary:
    """``stereo_disparity`` over rectified pairs: ``out_dir/<name>.pfm`` each (the
    left image's name, or ``item000000``, ... for arrays). ``pairs``: a sequence of
    ``(left, right)``, paths or arrays. Other keywords go to
    :func:`vision_cuts.stereo_disparity`."""
    from .stereo import check_stereo_options, stereo_disparity

    _check_keywords(
        stereo_disparity, {"max_disparity": max_disparity, **stereo_params},
        ("left", "right"), "stereo_many", check_stereo_options,
    )  # fmt: skip
    if isinstance(pairs, (str, os.PathLike)) or not isinstance(pairs, Iterable):
        raise TypeError(
            f"pairs must be a sequence of (left, right), got {type(pairs).__name__}"
        )
    pairs = list(pairs)
    out = _out_dir(out_dir)
    jobs = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be (left, right), got {pair!r:.60}")
        name = _name_of(pair[0], i)
        jobs.append((name, tuple(pair), [out / f"{name}.pfm"]))
    _distinct_names(jobs, "pairs")
    return _run(
        "stereo",
        jobs,
        _stereo_one,
        {"max_disparity": max_disparity, **stereo_params},
        client,
        workers,
        retries=retries,
        overwrite=overwrite,
        progress=progress,
        max_in_flight=max_in_flight,
        items_per_task=items_per_task,
    )


_VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg"}


def _is_video(item: Any) -> bool:
    return (
        isinstance(item, (str, os.PathLike))
        and Path(item).suffix.lower() in _VIDEO_SUFFIXES
    )


def _video_length(path: Any) -> int:
    """The frames of a video, counted by decoding (the header's count can be off)."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"cannot open the video {str(path)!r}")
    n = 0
    while cap.grab():
        n += 1
    cap.release()
    return n


def _video_frames(path: str, start: int, stop: int) -> Iterator[np.ndarray]:
    """Frames ``start .. stop - 1`` of a video (RGB), decoded in order (exact, whatever
    the codec's seeking) as they are asked for."""
    import cv2

    cap = cv2.VideoCapture(path)
    try:
        for _ in range(start):
            if not cap.grab():
                raise ValueError(f"{path!r} has fewer than {start} frames")
        for _ in range(start, stop):
            ok, frame = cap.read()
            if not ok:
                raise ValueError(f"{path!r} has fewer than {stop} frames")
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    finally:
        cap.release()


def _chunk_ranges(frames: int, chunk: int) -> list[tuple[int, int]]:
    """``(start, stop)`` frame ranges of a sequence of ``frames`` frames: chunks of at
    most ``chunk`` frame pairs, as equal as possible (300 pairs by 32: ten of 30, not
    nine of 32 and one of 12, so that two workers get equal shares), neighbours
    sharing their border frame."""
    pairs = frames - 1
    n = -(-pairs // chunk)
    bounds = [pairs * i // n for i in range(n + 1)]
    return [(a, b + 1) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _flow_chunk(payload: tuple, **params: Any) -> list:
    """``payload``: ``("video", path, start, stop)`` or ``("frames", start, items)``
    (paths or arrays). An error about a frame names it by its index in the whole
    sequence and, where it is a file, by its path (optical_flow_frames counts the
    frames of the chunk from 0)."""
    from .optical_flow import optical_flow_frames

    # frames go in as they are read: optical_flow_frames reads the next frame on its
    # own thread while it solves the current pair, so decoding overlaps the flow
    if payload[0] == "video":
        start, items = payload[2], None
        frames = _video_frames(*payload[1:])
    else:
        start, items = payload[1], payload[2]
        frames = (_read_rgb(f) for f in items)
    try:
        return [r.dense for r in optical_flow_frames(frames, dense=True, **params)]
    except (ValueError, TypeError) as exc:
        if type(exc) not in (ValueError, TypeError):
            raise
        raise type(exc)(_frame_names(str(exc), start, items)) from None


def _frame_names(message: str, start: int, items: list | None) -> str:
    """``message`` with each ``frames[i]`` of a chunk that starts at frame ``start``
    written as ``frame <start + i>``, followed by the frame's path where it is a
    file."""

    def name(match: re.Match) -> str:
        i = int(match.group(1))
        text = f"frame {start + i}"
        if items is not None and i < len(items):
            if isinstance(items[i], (str, os.PathLike)):
                text += f" ({str(items[i])!r})"
        return text

    return re.sub(r"frames\[(\d+)\]", name, message)


def flow_many(
    sequences: Any,
    out_dir: Any,
    *,
    chunk: int = 32,
    client: Any = None,
    workers: int | None = None,
    retries: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    max_in_flight: int | None = None,
    items_per_task: int | None = None,
    **flow_params: Any,
) -> RunSummary:
    """Dense optical flow between the consecutive frames of one or more sequences:
    ``out_dir/<sequence>_<i>.flo`` for frames i -> i + 1 (i from 000000).

    ``sequences``: one sequence (a video file, read by the workers; a folder or a glob
    pattern of frames; a list of frame paths or arrays; an (n, h, w[, 3]) array) or a
    dict ``{name: sequence}`` (a video alone is named after its file). Each is cut into
    chunks of at most ``chunk`` frame pairs, as equal as possible, that share their
    border frames; a chunk is one task, warm-started within itself. Other keywords go to
    :func:`vision_cuts.optical_flow_frames`.
    """
    from .optical_flow import check_flow_options, optical_flow_frames

    _check_keywords(
        optical_flow_frames, flow_params, ("frames", "dense"), "flow_many",
        lambda options: check_flow_options({**options, "dense": True}),
    )  # fmt: skip
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    if isinstance(sequences, dict):
        named = sequences
    elif _is_video(sequences):
        named = {Path(sequences).stem: sequences}
    else:
        named = {"frames": sequences}
    out = _out_dir(out_dir)
    jobs = []
    for seq_name, seq in named.items():
        if (
            not isinstance(seq_name, str)
            or not seq_name.strip(". ")
            or any(c in seq_name for c in "/\\\0")
        ):
            raise ValueError(
                "sequences: a sequence name is the start of its output file names "
                "and must be a non-empty file name without path separators, got "
                f"{seq_name!r}"
            )
        if _is_video(seq):  # read by the workers, a chunk each
            count = _video_length(seq)
            frames = None
        else:
            frames = _expand(seq, f"sequences[{seq_name!r}]")
            count = len(frames)
        if count < 2:
            raise ValueError(
                f"sequence {seq_name!r} needs at least 2 frames, got {count}"
            )
        for start, stop in _chunk_ranges(count, chunk):
            part = (
                ("video", str(seq), start, stop)
                if frames is None
                else ("frames", start, frames[start:stop])
            )
            outs = [out / f"{seq_name}_{i:06d}.flo" for i in range(start, stop - 1)]
            jobs.append((f"{seq_name}[{start}:{stop}]", part, outs))
    return _run(
        "flow",
        jobs,
        _flow_chunk,
        flow_params,
        client,
        workers,
        retries=retries,
        overwrite=overwrite,
        progress=progress,
        max_in_flight=max_in_flight,
        items_per_task=items_per_task,
        unit="chunks",
    )


def _check_assignment_options(options: dict) -> None:
    from ._backend import _check_name
    from ._validate import check_flag

    check_flag(options["maximize"], "maximize")
    _check_name(options["backend"], "backend")


def _assignment_batch(payload: Any, **params: Any) -> list:
    from .assignment import linear_sum_assignment_batched

    if isinstance(payload, tuple) and payload and payload[0] == "npy":
        _, path, start, stop = payload
        costs = np.load(path, mmap_mode="r")[start:stop]
    else:
        costs = payload
    rows, cols = linear_sum_assignment_batched(np.ascontiguousarray(costs), **params)
    return [np.stack([np.asarray(rows), np.asarray(cols)])]


def assignment_many(
    costs: Any,
    out_dir: Any,
    *,
    batch: int = 256,
    client: Any = None,
    workers: int | None = None,
    retries: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    max_in_flight: int | None = None,
    items_per_task: int | None = None,
    **params: Any,
) -> RunSummary:
    """``linear_sum_assignment_batched`` over a (B, n, m) stack, ``batch`` problems a
    task: ``out_dir/assignment_<first problem>.npy`` holds the (2, b, min(n, m)) row
    and column indices of its problems (``[0]`` rows, ``[1]`` columns).

    ``costs``: a ``.npy`` file (each worker maps its own batches: the stack never
    passes through this process) or an array. Other keywords go to
    :func:`vision_cuts.linear_sum_assignment_batched` (``maximize``, ``backend``).
    """
    from .assignment import linear_sum_assignment_batched

    _check_keywords(
        linear_sum_assignment_batched, params, ("costs", "return_stats"),
        "assignment_many", _check_assignment_options,
    )  # fmt: skip
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    if isinstance(costs, (str, os.PathLike)):
        path = str(costs)
        try:
            shape = np.load(path, mmap_mode="r").shape
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read a .npy stack from {path!r}: {exc}") from None
        source = None
    else:
        source = np.asarray(costs)
        shape = source.shape
    if len(shape) != 3:
        raise ValueError(f"costs must be a (B, n, m) stack, got shape {tuple(shape)}")
    out = _out_dir(out_dir)
    jobs = []
    for start in range(0, shape[0], batch):
        stop = min(start + batch, shape[0])
        payload = ("npy", path, start, stop) if source is None else source[start:stop]
        jobs.append(
            (f"[{start}:{stop}]", payload, [out / f"assignment_{start:09d}.npy"])
        )
    return _run(
        "assignment",
        jobs,
        _assignment_batch,
        params,
        client,
        workers,
        retries=retries,
        overwrite=overwrite,
        progress=progress,
        max_in_flight=max_in_flight,
        items_per_task=items_per_task,
    )
