"""The GEMM, reduction, copy and FlashAttention tests again, in the simulator's checked mode (issue 9 §2).

Checked mode is a launch-time switch (TILELANG_SIM_CHECK=1): the race detector watches shared memory and the
threads of a block run in an order drawn from TILELANG_SIM_SEED. So these runs reuse the kernels this session
already built (TILELANG_TEST_CACHE_DIR), and cost only the launches. They run last, after the kernels exist."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTING = Path(__file__).resolve().parent
SUITES = ["test_gemm.py", "test_reduce.py", "test_copy.py", "test_flash_attention.py"]
# Tests of what a compile says (a warning): a cache hit runs no pass, so they cannot pass on the kept kernels.
COMPILE_TIME_ONLY = ["test_annotated_fragment_layout_is_used_and_conflicts_are_reported",
                     "test_flash_attention_on_wmma_exchanges_p_through_shared_memory"]


@pytest.mark.after_all_kernels
# One seed in CI (time): TILELANG_SIM_SEED=2 and others by hand, e.g. `TILELANG_SIM_CHECK=1 TILELANG_SIM_SEED=2 pytest
# testing/test_gemm.py`.
@pytest.mark.parametrize("seed", [1])
def test_kernel_suites_pass_in_checked_mode(seed, tmp_path, after_all_kernels_ready):
    env = dict(os.environ, TILELANG_SIM_CHECK="1", TILELANG_SIM_SEED=str(seed),
               TILELANG_TEST_CACHE_DIR=os.environ["TILELANG_CACHE_DIR"])
    cmd = [sys.executable, "-m", "pytest", *SUITES, "-q", "-x", "-p", "no:cacheprovider", f"--basetemp={tmp_path}",
           "-k", " and ".join(f"not {name}" for name in COMPILE_TIME_ONLY)]
    proc = subprocess.run(cmd, cwd=TESTING, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, (f"checked mode, TILELANG_SIM_SEED={seed}:\n{proc.stdout[-6000:]}\n"
                                  f"{proc.stderr[-2000:]}")
