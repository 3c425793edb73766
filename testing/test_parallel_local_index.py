"""A thread-private local buffer (T.alloc_local) indexed by a T.Parallel loop variable (CheckParallelLocalIndex).

Each thread holds its own whole copy, so a read `local[i]` in T.Parallel reads the thread's own copy, and a nest
that writes nothing but local buffers (and touches no fragment) runs in full in every thread, filling its whole
copy: Moore Threads' port's meaning (their testing/musa/common/test_copy_to_local.py, quoted below). A nest that
writes `local[i]` but is split over the threads would fill each copy only at its share: an error at the loop's
line, as upstream main's ParallelLocalIndexChecker raises for every such index."""

import re

import pytest
import torch
import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.ir.attrs import PARALLEL
from tilelang_musa.launcher import KernelLaunchError
from tilelang_musa.transform.check_parallel_local_index import check_parallel_local_index

ARCHES = ["mp_22", "mp_31"]


# Moore Threads' testing/musa/common/test_copy_to_local.py (tile-ai/tilelang-musa), its two kernels as written there.
@tilelang.jit(target="musa")
def kernel_with_copy(quant_scales):
    quant_scales: T.Tensor[[4], T.float32]
    out = T.empty((256,), T.float32)

    with T.Kernel(1, threads=256) as _:
        quant_local = T.alloc_local([4], T.float32)
        T.copy(quant_scales, quant_local)
        for i in T.Parallel(256):
            out[i] = quant_local[i // 64]

    return out


@tilelang.jit(target="musa")
def kernel_with_parallel_store(quant_scales):
    quant_scales: T.Tensor[[4], T.float32]
    out = T.empty((256,), T.float32)

    with T.Kernel(1, threads=256) as _:
        quant_local = T.alloc_local([4], T.float32)
        for i in T.Parallel(4):
            quant_local[i] = quant_scales[i]
        for i in T.Parallel(256):
            out[i] = quant_local[i // 64]

    return out


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kernel_builder", [kernel_with_copy, kernel_with_parallel_store])
def test_moore_threads_copy_to_local(kernel_builder, arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_ARCH", arch)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # no thread reads an element of its copy it did not write
    kernel = kernel_builder.compile()
    source = kernel.get_kernel_source()
    # every thread fills its whole copy: a loop over the 4 elements under no thread guard, not `quant_local[tx] = ...`
    assert re.search(r"for \(int i = 0; i < 4; \+\+i\) \{\n\s+quant_local\[i\] = quant_scales\[i\];", source), source
    assert not re.search(r"quant_local\[[^\]]*threadIdx", source.split("quant_local[i] = quant_scales[i]")[0]), source
    quant_scales = rand((4,), torch.float32, 5)
    out = kernel(quant_scales)
    torch.testing.assert_close(out, quant_scales.repeat_interleave(64), rtol=0, atol=0)


def _upstream_local_store():
    """Upstream main's `invalid_local_store`, with an output: a nest writing only the local copy."""
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), out: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            local = T.alloc_local((32,), "float32")
            for i in T.Parallel(32):
                local[i] = A[i] * 2
            for j in T.serial(32):
                out[tx, j] = local[j]

    return main, lambda a: (a * 2).expand(32, 32)


def _upstream_local_load():
    """Upstream main's `invalid_local_load`: a serial fill, then a read at the parallel index."""
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), out: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.serial(32):
                local[i] = A[i] + 1
            for i in T.Parallel(128):
                out[i] = local[i % 32]

    return main, lambda a: (a + 1).repeat(4)


def _upstream_nested_index():
    """Upstream main's `invalid_nested_parallel_index`: both variables of a T.Parallel(8, 4) index the copy."""
    @T.prim_func
    def main(A: T.Tensor((8, 4), "float32"), out: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            local = T.alloc_local((32,), "float32")
            for i, j in T.Parallel(8, 4):
                local[i * 4 + j] = A[i, j] - 3
            for k in T.serial(32):
                out[tx, k] = local[k]

    return main, lambda a: (a - 3).reshape(32).expand(64, 32)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("make", [_upstream_local_store, _upstream_local_load, _upstream_nested_index])
def test_upstream_rejected_local_indices_run_with_each_thread_owning_its_copy(make, arch, monkeypatch):
    """Upstream main rejects these three (its analysis test); they are well defined with every thread owning its
    whole copy, and run so, clean in checked mode."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    program, reference = make()
    kernel = tilelang.compile(program, target=f"musa -arch={arch}")
    params = program.params
    a = rand(tuple(program.buffer_map[params[0]].shape), torch.float32, 7)
    out = poison(tuple(program.buffer_map[params[1]].shape), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, reference(a))


def _split_by_global_store():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.Parallel(32):
                local[i] = A[i]
                out[i] = local[i] * 2
            out[0] = local[5]

    return main


def _split_by_fragment_read():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((32,), "float32")
            local = T.alloc_local((32,), "float32")
            T.copy(A, frag)
            for i in T.Parallel(32):
                local[i] = frag[i]
            out[0] = local[5]

    return main


def _split_by_atomic():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), count: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            local = T.alloc_local((32,), "float32")
            for i in T.Parallel(32):
                local[i] = A[i]
                T.atomic_add(count[0], 1)
            A[0] = local[3]

    return main


@pytest.mark.parametrize("make, reason", [
    (_split_by_global_store, r"it writes global buffer `out`"),
    (_split_by_fragment_read, r"it reads fragment `frag`, whose elements are spread over the threads"),
    (_split_by_atomic, r"it calls `tl::AtomicAdd`"),
])
def test_a_local_store_in_a_nest_split_over_the_threads_is_an_error(make, reason):
    with pytest.raises(ValueError, match=r"Local buffer `local` is indexed by T.Parallel loop variable `i` in a "
                                         r"nest the threads split among themselves \(" + reason) as e:
        tilelang.compile(make(), target="musa -arch=mp_31")
    message = str(e.value)
    assert "test_parallel_local_index.py" in message and "for i in T.Parallel(32):" in message, message


@pytest.mark.parametrize("arch", ARCHES)
def test_a_read_of_an_element_the_thread_never_wrote_is_named_in_checked_mode(arch, monkeypatch):
    """Reads at a parallel index are allowed; one of an element this thread's copy never got is checked mode's
    uninitialised read (here the fill covers 2 of the 4 elements)."""
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), out: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            local = T.alloc_local((4,), "float32")
            for i in T.Parallel(2):
                local[i] = A[i]
            for i in T.Parallel(256):
                out[i] = local[i // 64]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError, match=r"uninitialised read: fragment/local load of `local` at element [23]"):
        kernel(rand((4,), torch.float32, 1), poison((256,), torch.float32))


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
    """Before/after IR of accepted programs, a read and a local-only fill at parallel indices: the pass only checks."""
    with IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name("main")
            out = Tb.arg("out", Tb.Buffer((8,), "float32"))
            local = Tb.alloc_buffer((8,), "float32", scope="local")
            with Tb.serial(0, 8, annotations={PARALLEL: 1}) as i:
                Tb.buffer_store(local, tirx.Cast("float32", i), [i])
            with Tb.serial(0, 8, annotations={PARALLEL: 1}) as i:
                Tb.buffer_store(out, local[7 - i] + tirx.Cast("float32", i), [i])
    func = ib.get()
    tvm.ir.assert_structural_equal(check_parallel_local_index(func), func)
