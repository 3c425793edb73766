"""The simulator runtime built at install time (tools/build_sim_runtime.py, run by CMake): its key is the one a kernel
build computes, so a kernel library links the installed runtime and builds none into the cache; a key that does not
match (other headers) falls back to the lazy build; the recipe's arch table is target.py's."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa._paths import include_root, simulator_headers
from tilelang_musa.jit import sim_runtime, sim_runtime_recipe
from tilelang_musa.jit.toolchains import SimToolchain
from tilelang_musa.target import ARCHS

ROOT = Path(__file__).resolve().parents[1]
N = 1024


def add_one_program(threads=128):
    @T.prim_func
    def add_one(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = A[bx * threads + i] + 1.0

    return add_one


def needed_runtime(library: Path) -> list[str]:
    """The RUNPATH entries of a kernel library (where it finds its runtime)."""
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(RUNPATH)" in line]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package directory whose lib/sim_runtime/ holds what the install-time build made for mp_31."""
    package = tmp_path / "package"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_sim_runtime.py"), "--out",
                           str(package / sim_runtime.PREBUILT_DIR), "--arch", "mp_31"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setattr(sim_runtime, "package_dirs", lambda: [package])
    monkeypatch.setattr(sim_runtime, "_built", {})
    return package


def test_the_recipes_archs_are_the_targets():
    assert sim_runtime_recipe.ARCHS == {name: arch.musa_arch for name, arch in ARCHS.items()}


def test_the_recipes_compiler_identity_is_the_toolchains():
    assert sim_runtime_recipe.compiler_identity(SimToolchain()._cxx()) == SimToolchain().identity()


def test_the_key_leaves_out_where_the_headers_lie(tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(simulator_headers(), copy / "tl_templates" / "sim")
    key = sim_runtime_recipe.runtime_key
    flags = sim_runtime_recipe.base_flags(310, include_root(), simulator_headers(), [])
    moved = sim_runtime_recipe.base_flags(310, copy, copy / "tl_templates" / "sim", [])
    assert flags != moved
    assert key("sim:x", flags, include_root(), simulator_headers()) == key("sim:x", moved, copy,
                                                                          copy / "tl_templates" / "sim")
    (copy / "tl_templates" / "sim" / "musa.h").write_text("// edited\n")
    sim_runtime_recipe.headers_digest.cache_clear()
    assert key("sim:x", flags, include_root(), simulator_headers()) != key("sim:x", moved, copy,
                                                                          copy / "tl_templates" / "sim")


def test_a_kernel_links_the_installed_runtime_and_builds_none(installed, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(cache))
    kernel = tilelang.compile(add_one_program(), out_idx=[-1], target="musa -arch=mp_31")
    [prebuilt] = (installed / sim_runtime.PREBUILT_DIR).glob("*/libtilelang_musa_sim_mp_31.so")
    [library] = kernel.directory.glob("*.so")
    assert needed_runtime(library) == [str(prebuilt.parent)]
    assert not (cache / sim_runtime.RUNTIME_DIR).exists()
    a = rand((N,), torch.float32, 3)
    torch.testing.assert_close(kernel(a), a + 1.0)


def test_a_runtime_for_other_headers_is_not_taken(installed, tmp_path, monkeypatch):
    """An installed runtime whose key does not match (here: renamed to another key) is ignored: the kernel builds
    its own runtime into the cache and links that."""
    [prebuilt] = (installed / sim_runtime.PREBUILT_DIR).glob("*/libtilelang_musa_sim_mp_31.so")
    prebuilt.parent.rename(prebuilt.parent.with_name("0" * 24))
    cache = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(cache))
    kernel = tilelang.compile(add_one_program(threads=64), out_idx=[-1], target="musa -arch=mp_31")
    [library] = kernel.directory.glob("*.so")
    [runpath] = needed_runtime(library)
    assert Path(runpath).parent == cache / sim_runtime.RUNTIME_DIR
    a = rand((N,), torch.float32, 4)
    torch.testing.assert_close(kernel(a), a + 1.0)
