"""Packaging: import hygiene, kernel names, the files the wheel ships, ``__all__``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import vision_cuts
from vision_cuts import _kernels

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "vision_cuts"
KERNELS = REPO / "kernels"
DATASETS = REPO / "datasets"
HEAVY = ("cupy", "cupyx", "cupy_backends", "cv2", "PyQt5")


def _clean_env() -> dict:
    env = dict(os.environ)
    env.pop("VISION_CUTS_BACKEND", None)
    return env


def _loaded_after(code: str, tmp_path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_modules(tmp_path):
    code = (
        "import json, sys\n"
        "import vision_cuts\n"
        "print(json.dumps({'file': vision_cuts.__file__,\n"
        f"    'heavy': sorted(m for m in sys.modules\n"
        f"                    if m.split('.')[0] in {HEAVY!r})}}))\n"
    )
    got = _loaded_after(code, tmp_path)
    # the subprocess imports the package under test (installed or editable)
    assert Path(got["file"]).resolve() == Path(vision_cuts.__file__).resolve()
    assert got["heavy"] == []


def test_submodules_import_without_cupy(tmp_path):
    """Only functions import CuPy: every module of the package imports without it."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import vision_cuts\n"
        "names = [m.name for m in pkgutil.walk_packages(vision_cuts.__path__,\n"
        "                                                'vision_cuts.')]\n"
        "# an editable install maps these folders in; pkgutil does not see them\n"
        "names += [n for n in ('vision_cuts.kernels', 'vision_cuts.datasets',\n"
        "                      'vision_cuts.datasets.synthetic') if n not in names]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({'names': names,\n"
        "    'cupy': sorted(m for m in sys.modules\n"
        "                   if m.split('.')[0].startswith('cupy'))}))\n"
    )
    got = _loaded_after(code, tmp_path)
    assert "vision_cuts.grid" in got["names"]
    assert "vision_cuts.datasets.synthetic" in got["names"]
    assert got["cupy"] == []


# ------------------------------------------------------------------------ kernels


def _module_constants(tree: ast.Module) -> dict:
    """Module-level ``NAME = "literal"`` assignments of a parsed file."""
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    consts[target.id] = node.value.value
    return consts


def _literal(node: ast.AST | None, consts: dict) -> str | re.Pattern | None:
    """A string literal or module constant as str, an f-string as a regex, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = [
            re.escape(v.value) if isinstance(v, ast.Constant) else r"\w+"
            for v in node.values
        ]
        return re.compile("".join(parts))
    return None


def _call_arg(call: ast.Call, pos: int, keyword: str) -> ast.AST | None:
    if len(call.args) > pos:
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def requested_from_python() -> tuple[list, list]:
    """(kernel names, kernel files) that vision_cuts/*.py request by literal.

    Kernel names: ``get_kernel(module, "name")`` and ``module.get_function("name")``
    (template arguments stripped); files: ``get_module("file.cu", ...)``. Each entry
    is ``(where, name_or_pattern)``.
    """
    names, files = [], []
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        consts = _module_constants(tree)
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            fname = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            if fname == "get_kernel":
                arg = _call_arg(call, 1, "func")
            elif fname == "get_function":
                arg = _call_arg(call, 0, "name")
            elif fname == "get_module":
                arg = _call_arg(call, 0, "name")
            else:
                continue
            value = _literal(arg, consts)
            if value is None:
                continue  # a variable (e.g. inside _kernels.get_kernel itself)
            if isinstance(value, str):
                value = value.split("<")[0].strip()
            where = f"{path.name}:{call.lineno}"
            (files if fname == "get_module" else names).append((where, value))
    return names, files


def test_kernel_files_are_the_source_tree():
    on_disk = sorted(p.name for p in KERNELS.glob("*.cu"))
    assert _kernels.kernel_files() == on_disk


def test_requested_kernels_exist():
    names, files = requested_from_python()
    cu = _kernels.kernel_files()
    defined = {k for f in cu for k in _kernels.kernel_names(f)}
    for where, name in names:
        if isinstance(name, re.Pattern):
            assert any(name.fullmatch(k) for k in defined), (
                f'{where}: no extern "C" __global__ kernel in kernels/*.cu matches '
                f"{name.pattern!r}"
            )
        else:
            assert name in defined, (
                f'{where}: kernel {name!r} is not an extern "C" __global__ in '
                f"kernels/*.cu (defined: {sorted(defined)})"
            )
    for where, name in files:
        assert isinstance(name, str), f"{where}: kernel file given as an f-string"
        assert name in cu, f"{where}: get_module({name!r}) but kernels/ has {cu}"
    # vacuous only while Python asks for no kernel at all
    assert names or not files


def test_kernel_sources_inline_their_includes():
    for name in _kernels.kernel_files():
        src = _kernels.kernel_source(name)
        assert not re.search(r'^\s*#include\s+"[^"]+\.cuh"', src, flags=re.M), name
        assert len(set(_kernels.kernel_names(name))) == len(_kernels.kernel_names(name))
    with pytest.raises(FileNotFoundError, match="no_such_file.cu"):
        _kernels.kernel_source("no_such_file.cu")


def test_kernel_names_parser(monkeypatch):
    src = """
    #include <cstdint>
    extern "C" __global__ void plain(int* a) {}
    extern "C" __global__ __launch_bounds__(256) void bounds_before(int* a) {}
    extern "C" __global__ void __launch_bounds__(VC_NT, 2)
    bounds_after(int* a) {}
    extern "C"   __global__   void
        spaced (const int* __restrict__ a) {}
    __global__ void not_extern_c(int* a) {}
    __device__ int helper(int a) { return a; }
    template <typename T> __global__ void templated(T* a) {}
    """
    monkeypatch.setattr(_kernels, "kernel_source", lambda name: src)
    assert _kernels.kernel_names("fake.cu") == [
        "plain",
        "bounds_before",
        "bounds_after",
        "spaced",
    ]


@pytest.mark.gpu
def test_every_kernel_module_compiles():
    """Each .cu file compiles on its own (#ifndef defaults) and exports its kernels."""
    pytest.importorskip("cupy")
    files = _kernels.kernel_files()
    if not files:
        pytest.skip("kernels/ has no .cu files yet")
    for name in files:
        module = _kernels.get_module(name)
        for kernel in _kernels.kernel_names(name):
            assert _kernels.get_kernel(module, kernel) is not None
        assert _kernels.get_module(name) is module  # memoised per device


# ------------------------------------------------------------------ distribution


def _copy_source(dst: Path) -> Path:
    """A clean copy of what a build reads, so building writes nothing into the repo."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    dst.mkdir()
    shutil.copy2(REPO / "pyproject.toml", dst)
    for extra in ("README.md", "LICENSE"):
        if (REPO / extra).exists():
            shutil.copy2(REPO / extra, dst)
    if not (dst / "README.md").exists():  # pyproject names it; not the subject here
        (dst / "README.md").write_text("# vision-cuts\n")
    for folder in ("vision_cuts", "kernels", "datasets", "apps"):
        shutil.copytree(REPO / folder, dst / folder, ignore=ignore)
    return dst


def _check_shipped(files: set[str]):
    """The built package holds the kernels, the datasets and every module."""
    kernel_sources = sorted(
        p.name for p in KERNELS.iterdir() if p.suffix in (".cu", ".cuh")
    )
    for name in kernel_sources:
        assert f"vision_cuts/kernels/{name}" in files, f"kernels/{name} is not shipped"
    assert "vision_cuts/kernels/__init__.py" in files
    for path in sorted(DATASETS.glob("*.py")):
        assert f"vision_cuts/datasets/{path.name}" in files, f"datasets/{path.name}"
    for path in sorted(PACKAGE.glob("*.py")):
        assert f"vision_cuts/{path.name}" in files, f"vision_cuts/{path.name}"
    for path in sorted((REPO / "apps").glob("*.py")):
        assert f"vision_cuts/apps/{path.name}" in files, f"apps/{path.name}"
    # shipped inside the package only: a top-level ``datasets`` would shadow
    # Hugging Face's, and no tests, caches or numba artefacts ride along
    tops = {f.split("/")[0] for f in files}
    assert not tops & {"datasets", "kernels", "tests", "benchmarks", "apps"}
    assert not [f for f in files if "__pycache__" in f or f.endswith((".nbi", ".nbc"))]


def test_build_py_ships_kernels_and_datasets(tmp_path):
    """setuptools' build_py (what bdist_wheel packs) collects the right files."""
    src = _copy_source(tmp_path / "src")
    out = tmp_path / "lib"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import setuptools; setuptools.setup()",
            "-q",
            "build_py",
            "-d",
            str(out),
        ],
        cwd=src,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    _check_shipped(files)


def _can_build_wheels() -> bool:
    return (
        importlib.util.find_spec("wheel") is not None
        or importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
    )


@pytest.mark.skipif(
    not _can_build_wheels(),
    reason="no bdist_wheel: setuptools < 70.1 needs the 'wheel' package",
)
def test_wheel_ships_kernels_and_datasets(tmp_path):
    src = _copy_source(tmp_path / "src")
    dist = tmp_path / "dist"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(dist),
            str(src),
        ],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (wheel,) = dist.glob("vision_cuts-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        files = {n for n in zf.namelist() if ".dist-info/" not in n}
    _check_shipped(files)


# ------------------------------------------------------------------------ __all__


PUBLIC_MODULES = [
    "vision_cuts",
    "vision_cuts.grid",
    "vision_cuts.maxflow",
    "vision_cuts.exceptions",
    "vision_cuts._backend",
    "vision_cuts._kernels",
    "vision_cuts._validate",
    "vision_cuts._maxflow_cpu",
    "vision_cuts.datasets.synthetic",
    "vision_cuts.segmentation",
    "vision_cuts.assignment",
    "vision_cuts.datasets.grabcut",
]


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_all_names_exist(modname):
    module = importlib.import_module(modname)
    names = module.__all__
    assert len(names) == len(set(names)), f"{modname}.__all__ has duplicates"
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{modname}.__all__ names missing attributes: {missing}"


def test_public_surface():
    names = vision_cuts.__all__
    assert all(not n.startswith("_") for n in names)
    assert len(set(names)) == len(names) == len(sorted(names))
    for n in names:  # every public name exists and says what it is
        obj = getattr(vision_cuts, n)
        assert (obj.__doc__ or "").strip(), f"{n} has no docstring"
    for n in (
        "grid_energy",
        "grid_graph",
        "maxflow_grid",
        "GridEnergy",
        "MinCut",
        "NonSubmodularError",
        "BackendUnavailableError",
        "gpu_available",
    ):
        assert n in names
    assert isinstance(vision_cuts.__version__, str)
