"""A header forced into the kernel's translation unit with `compile_flags=["-include", path]` (vllm-musa's
DeepGEMM preprocess kernels bring their atomic helpers so) sees what mcc declares before any header: the
kernel-language keywords and the device built-ins (`__device__`, `atomicAdd`). The simulator puts its
musa_runtime.h first, as mcc does its runtime header."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

HELPER = """#pragma once
__device__ __forceinline__ int claim_slot(int* cursor, int expert, int amount) {
  return atomicAdd(cursor + expert, amount);
}
"""


def _claim_rows(helper_path, tokens=96, experts=5):
    @T.prim_func
    def claim(expert_of: T.Tensor((tokens,), "int32"), cursor: T.Tensor((experts,), "int32"),
              row: T.Tensor((tokens,), "int32")):
        with T.Kernel(1, threads=tokens):
            tx = T.get_thread_binding(0)
            row[tx] = T.call_extern("int32", "claim_slot", T.address_of(cursor[0]), expert_of[tx], T.int32(1))

    return claim


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_forced_helper_header_uses_device_keywords_and_atomics(arch, tmp_path, monkeypatch):
    # its source calls the forced header's helper, so it does not compile alone: keep it out of the session's
    # archive, which test_device_compilers compiles source by source
    monkeypatch.delenv("TILELANG_SOURCE_ARCHIVE_DIR", raising=False)
    # g++ uses a precompiled header only as the first thing it reads, and a forced helper header puts
    # musa_runtime.h and the helper first: the prelude a build would precompile for these flags goes unused
    # (the build parses prelude.h as text either way), so it is not precompiled here (~6 s a test)
    monkeypatch.setenv("TILELANG_SIM_NO_PRELUDE", "1")
    helper = tmp_path / "claim_helper.h"
    helper.write_text(HELPER)
    kernel = tilelang.compile(_claim_rows(helper), target=f"musa -arch={arch}",
                              compile_flags=["-include", str(helper)])
    assert "row[(int)threadIdx.x] = claim_slot(&cursor[0], expert_of[(int)threadIdx.x], 1);" in (
        kernel.get_kernel_source())
    expert_of = (rand((96,), torch.float32, 4).abs() * 1000).int() % 5
    start = torch.tensor([0, 100, 200, 300, 400], dtype=torch.int32)
    cursor, row = start.clone(), torch.full((96,), -1, dtype=torch.int32)
    kernel(expert_of, cursor, row)
    counts = torch.bincount(expert_of.long(), minlength=5).int()
    torch.testing.assert_close(cursor, start + counts)
    for e in range(5):  # each token got its own row of its expert's range, whatever order the atomics ran in
        rows = row[expert_of == e].sort().values
        torch.testing.assert_close(rows, torch.arange(int(start[e]), int(start[e] + counts[e]), dtype=torch.int32))
