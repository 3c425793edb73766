"""A T.Parallel loop that binds a lane-varying value and chooses with T.if_then_else on it (`index = idx[i];
rows[i] = T.if_then_else(index >= 0, index, 0)`): the wheel's VectorizeLoop scalarizes such a store over a copy of
the binding's variable that it never binds, so the loop stays scalar and the kernel compiles and computes what
torch does on both arches (before: "variable `index` is used but not defined")."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]
N = 256


def clamp_rows():
    @T.prim_func
    def main(idx: T.Tensor((N,), "int32"), out: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=64):
            rows = T.alloc_shared((N,), "int32")
            for i in T.Parallel(N):
                index = idx[i]
                rows[i] = T.if_then_else(index >= 0 and index < 32, index, 0)
            for i in T.Parallel(N):
                out[i] = rows[i] * 2

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_choice_on_a_bound_lane_value_compiles_and_runs(arch):
    kernel = tilelang.compile(clamp_rows(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "index >= 0" in source.replace("(", "").replace(")", "") or "0 <= index" in source
    idx = torch.randint(-16, 48, (N,), dtype=torch.int32)
    out = torch.full((N,), -12345, dtype=torch.int32)  # poison: no output element may keep it
    kernel(idx, out)
    expected = torch.where((idx >= 0) & (idx < 32), idx, torch.zeros_like(idx)) * 2
    torch.testing.assert_close(out, expected)
