"""Upstream main's rule: a thread-private local buffer (T.alloc_local) is not indexed by a T.Parallel loop variable
(each thread holds its own whole copy, while the loop spreads its iterations over the threads). An index no
parallel variable reaches is fine."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from tilelang_musa.ir.attrs import PARALLEL
from tilelang_musa.transform.check_parallel_local_index import check_parallel_local_index

from conftest import poison, rand

ARCHES = ["mp_22", "mp_31"]


def _local_store():
    @T.prim_func
    def main(out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.Parallel(32):
                local[i] = T.float32(1)
            out[0] = local[0]

    return main


def _local_load():
    @T.prim_func
    def main(out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.serial(32):
                local[i] = T.float32(i)
            for i in T.Parallel(32):
                out[i] = local[i]

    return main


def _nested_index():
    @T.prim_func
    def main(out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i, j in T.Parallel(8, 4):
                local[i * 4 + j] = T.float32(1)
            out[0] = local[0]

    return main


@pytest.mark.parametrize("make, line, var", [(_local_store, "for i in T.Parallel(32):", "i"),
                                             (_local_load, "for i in T.Parallel(32):", "i"),
                                             (_nested_index, "for i, j in T.Parallel(8, 4):", "i")])
def test_local_buffer_indexed_by_a_parallel_variable_is_an_error(make, line, var):
    with pytest.raises(ValueError, match=rf"Local buffer `local` is indexed by T.Parallel loop variable `{var}`") as e:
        tilelang.compile(make(), target="musa -arch=mp_31")
    assert "test_parallel_local_index.py" in str(e.value) and line in str(e.value), str(e.value)


@pytest.mark.parametrize("arch", ARCHES)
def test_parallel_independent_local_indices_run(arch):
    """A replicated scalar (`scale[0]`) and an inner T.vectorized lane (`scratch[lane]`) inside T.Parallel."""

    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), out: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=32):
            scale = T.alloc_local((1,), "float32")
            scale[0] = T.float32(2)
            scratch = T.alloc_local((4,), "float32")
            for i in T.Parallel(128):
                for lane in T.vectorized(4):
                    scratch[lane] = T.cast(lane, "float32")
                out[i] = A[i] * scale[0] + scratch[3]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, out = rand((128,), torch.float32, 3), poison((128,), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, a * 2 + 3.0)


def test_the_check_changes_nothing_it_accepts():
    """Before/after IR of an accepted program: the pass is a check only."""
    with IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name("main")
            out = Tb.arg("out", Tb.Buffer((8,), "float32"))
            scale = Tb.alloc_buffer((1,), "float32", scope="local")
            with Tb.serial(0, 8, annotations={PARALLEL: 1}) as i:
                Tb.buffer_store(out, scale[0] + tirx.Cast("float32", i), [i])
    func = ib.get()
    tvm.ir.assert_structural_equal(check_parallel_local_index(func), func)
