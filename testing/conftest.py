"""Shared fixtures: every test runs on CPU through the simulator unless a MUSA device is present."""

import os

import pytest
import torch

# Tests compile many small kernels: keep their cache inside the test session.
os.environ.setdefault("TILELANG_EXECUTION_BACKEND", "sim")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    os.environ["TILELANG_CACHE_DIR"] = str(tmp_path_factory.mktemp("tilelang_cache"))
    yield


@pytest.fixture
def device() -> str:
    return "cpu"


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def poison(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype)
