"""SerializeDynamicParallelLevels: a run-time-extent T.Parallel level whose variable places no fragment element runs
serially in every thread (upstream accepts these nests); one whose variable does is still rejected."""

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_musa.ir.attrs import PARALLEL
from tilelang_musa.transform.serialize_dynamic_parallel_levels import serialize_dynamic_parallel_levels

from conftest import poison, rand


def program(uses_i: bool):
    A = T.dynamic("A")

    @T.prim_func
    def main(data: T.Tensor((128, A), "float32"), out: T.Tensor((128, 128), "float32")):
        with T.Kernel(128, threads=128) as (row,):
            frag = T.alloc_fragment([128], "float32")
            for i in T.Parallel(128):
                frag[i] = T.if_then_else(i < A, data[row, T.min(i, A - 1)], 5.0)
            for i in T.Parallel(A):
                for j in T.Parallel(64):
                    if uses_i:
                        frag[i % 64 + j] = 0.0
                    else:
                        frag[j] = 0.0
            for i in T.Parallel(128):
                out[row, i] = frag[i]

    return main


def _loops(func):
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, found.append)], order="pre")
    return found


def test_the_dynamic_level_becomes_serial_and_the_rest_is_unchanged():
    before = program(False)
    after = serialize_dynamic_parallel_levels(before)
    dynamic = [(b, a) for b, a in zip(_loops(before), _loops(after)) if not isinstance(b.extent, tirx.IntImm)]
    assert len(dynamic) == 1
    old, new = dynamic[0]
    assert PARALLEL in old.annotations and PARALLEL not in new.annotations
    assert new.kind == tirx.ForKind.SERIAL and new.loop_var.same_as(old.loop_var)
    tvm.ir.assert_structural_equal(new.body, old.body)  # the inner T.Parallel(64) nest as written
    tvm.ir.assert_structural_equal(serialize_dynamic_parallel_levels(after), after)  # nothing left to do


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_a_dynamic_level_not_indexing_fragments_runs(arch):
    kernel = tilelang.compile(program(False), target=f"musa -arch={arch}")
    data, out = rand((128, 100), torch.float32, 6), poison((128, 128), torch.float32)
    kernel(data, out)
    ref = torch.full((128, 128), 5.0)
    ref[:, :100] = data
    ref[:, :64] = 0.0
    torch.testing.assert_close(out, ref)


def test_a_dynamic_level_indexing_a_fragment_is_still_rejected():
    # the message names the fragment buffer, as upstream's check does (Moore Threads' copy of its test matches it)
    with pytest.raises(tilelang.CompileError, match=r"T.Parallel: loop `i` has extent A; it indexes fragment buffer "
                                                    r"`\w+`, whose layout .* must be compile-time constants"):
        tilelang.compile(program(True), target="musa -arch=mp_31")
