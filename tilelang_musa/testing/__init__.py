"""`import tilelang.testing`: the helpers upstream TileLang's and TileLang-MUSA's test files and examples use.

    @tilelang.testing.requires_musa                      # runs on a MUSA device or in the CPU simulator
    @tilelang.testing.requires_musa_compute_version_ge(3, 1)
    def test_gemm():
        ...
        tilelang.testing.torch_assert_close(c, ref, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01)

    if __name__ == "__main__":
        tilelang.testing.main()                          # pytest on this file

Gates (see gates.py): requires_musa (true where kernels can run, the simulator included), requires_musa_device,
requires_musa_compute_version[_ge/_gt/_eq/_lt/_le] (on the current target's arch), requires_package; the CUDA,
ROCm, Metal and LLVM gates (and the CUDA compute-version family) always skip, saying why. Comparisons:
torch_assert_close (upstream's mismatch-ratio check), assert_allclose (numpy's). References and tolerances:
matmul_naive, matmul_reference, cast_to_output_dtype, is_fp8_dtype, get_tolerance, list_tolerance_profiles,
get_tilelang_type. Running: main, set_random_seed, process_func and regression (perf_regression.py).

Importing this package does not import pytest: a gate imports it when it decorates, `main` when it runs. Under
pytest it also imports `tvm.testing`, so that test files written for upstream (whose `tilelang.testing` imports it)
can say `tvm.testing.parameter(...)` after `import tvm`.
"""

from __future__ import annotations

import inspect
import random
import sys

from ..utils.tensor import torch_assert_close
from .compare import assert_allclose
from .dtypes import get_tilelang_type
from .gates import (
    _check_is_cdna, _check_is_cuda_or_cdna, _check_is_gfx950, musa_runtime, requires_cdna, requires_cuda,
    requires_cuda_compute_version, requires_cuda_compute_version_eq, requires_cuda_compute_version_ge,
    requires_cuda_compute_version_gt, requires_cuda_compute_version_le, requires_cuda_compute_version_lt,
    requires_cuda_or_cdna, requires_gfx950, requires_llvm, requires_metal, requires_musa,
    requires_musa_compute_version, requires_musa_compute_version_eq, requires_musa_compute_version_ge,
    requires_musa_compute_version_gt, requires_musa_compute_version_le, requires_musa_compute_version_lt,
    requires_musa_device, requires_package, requires_rocm,
)
from .perf_regression import process_func, regression
from .reference import cast_to_output_dtype, is_fp8_dtype, matmul_naive, matmul_reference
from .tolerance import get_tolerance, list_tolerance_profiles

if sys.modules.get("pytest") is not None:  # under pytest, a test file's `tvm.testing.parameter(...)` finds tvm.testing,
    import tvm.testing  # noqa: F401  as upstream's tilelang.testing imports it (free: pytest is already loaded)

__all__ = [
    "assert_allclose", "cast_to_output_dtype", "get_tilelang_type", "get_tolerance", "is_fp8_dtype",
    "list_tolerance_profiles", "main", "matmul_naive", "matmul_reference", "musa_runtime", "process_func",
    "regression", "requires_cdna", "requires_cuda", "requires_cuda_compute_version",
    "requires_cuda_compute_version_eq", "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
    "requires_cuda_compute_version_le", "requires_cuda_compute_version_lt", "requires_cuda_or_cdna",
    "requires_gfx950", "requires_llvm", "requires_metal", "requires_musa", "requires_musa_compute_version",
    "requires_musa_compute_version_eq", "requires_musa_compute_version_ge", "requires_musa_compute_version_gt",
    "requires_musa_compute_version_le", "requires_musa_compute_version_lt", "requires_musa_device",
    "requires_package", "requires_rocm", "set_random_seed", "torch_assert_close",
]


def main() -> None:
    """Run pytest on the file that calls this (`if __name__ == "__main__": tilelang.testing.main()`), passing on
    the script's command-line arguments, and exit with pytest's status."""
    import pytest

    caller_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([caller_file, *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's `random`, numpy and torch (CPU, and every CUDA / MUSA device torch can see)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds the devices of every initialised accelerator backend
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    musa = getattr(torch, "musa", None)  # present once torch_musa is imported
    if musa is not None and musa.is_available():
        musa.manual_seed_all(seed)
