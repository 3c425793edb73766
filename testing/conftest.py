"""Shared fixtures: every test runs on CPU through the simulator unless a MUSA device is present."""

import os

import pytest
import torch

os.environ.setdefault("TILELANG_EXECUTION_BACKEND", "sim")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """The session's kernels are cached in a directory of its own. The user's examples call
    `tilelang.disable_cache()` when imported (test_gemm imports the GEMM example at collection): enable it again."""
    import tilelang

    # A session started by test_checked_mode.py reuses its parent's kernels (TILELANG_TEST_CACHE_DIR).
    shared = os.environ.get("TILELANG_TEST_CACHE_DIR")
    os.environ["TILELANG_CACHE_DIR"] = shared or str(tmp_path_factory.mktemp("tilelang_cache"))
    tilelang.enable_cache()
    yield


@pytest.fixture(autouse=True, scope="session")
def kernel_archive(tmp_path_factory):
    """Every MUSA source the session generates is kept here (TILELANG_SOURCE_ARCHIVE_DIR): the tests marked
    `after_all_kernels` (test_device_compilers.py) compile them all with clang and nvcc, after every other test."""
    archive = tmp_path_factory.mktemp("generated_kernels")
    os.environ["TILELANG_SOURCE_ARCHIVE_DIR"] = str(archive)
    yield archive


# archive file name -> the test that first generated it, for the reports of test_device_compilers.py
GENERATED_BY: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _attribute_generated_kernels(kernel_archive, request):
    before = set(os.listdir(kernel_archive))
    yield
    for name in set(os.listdir(kernel_archive)) - before:
        GENERATED_BY.setdefault(name, request.node.nodeid)


def pytest_collection_modifyitems(config, items):
    """Tests marked `after_all_kernels` run last (a stable sort keeps every other order)."""
    items.sort(key=lambda item: item.get_closest_marker("after_all_kernels") is not None)


@pytest.fixture
def device() -> str:
    return "cpu"


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def poison(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype)
