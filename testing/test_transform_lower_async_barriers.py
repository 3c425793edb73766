"""LowerAsyncBarriers: MUSA's asynchronous barriers are integer ids 1..63. The T.alloc_barrier buffers get consecutive
ids in allocation order (their allocations go, each `b[i]` becomes `base + i`), then every named barrier
`T.sync_threads(id, count)` one id of its own and becomes `tl.async_barrier_sync(id)`. The kernel starts by recording
the ids used and initialising each (thread 0, counts in warps), then a block barrier. mp_22 has no asynchronous
barriers: each construct is an error naming it."""

import pytest
import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_async_barriers import LowerAsyncBarriers, lower_async_barriers
from tilelang_musa.transform.pass_base import run_pass

MP31 = determine_target("musa -arch=mp_31")
MP22 = determine_target("musa -arch=mp_22")


def user_op(name, *args):
    """A barrier op as the frontend emits it (attributes: its source line, which `without_locations` empties)."""
    T.evaluate(tvm.ir.Call(tvm.ir.Op.get(name), [T.int32(a) for a in args], attrs={}, ret_ty="int32"))


def barriers(target):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=128):
            bars = T.alloc_barrier([128, 64])
            done = T.alloc_barrier(32)
            tx = T.get_thread_binding()
            T.mbarrier_arrive(bars[1])
            T.mbarrier_wait_parity(bars[1], 0)
            T.mbarrier_arrive(done)
            if tx < 64:
                T.sync_threads(3, 64)
            A[tx] = 1.0

    return main


@T.prim_func
def barriers_expected(A: T.Tensor((128,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        T.evaluate(T.call_intrin("int32", "tl.async_bar_record", 4))
        if tx == 0:
            T.evaluate(T.call_intrin("int32", "tl.async_bar_init", 1, 4))  # bars[0]: 128 threads, 4 warps
            T.evaluate(T.call_intrin("int32", "tl.async_bar_init", 2, 2))  # bars[1]: 64 threads
            T.evaluate(T.call_intrin("int32", "tl.async_bar_init", 3, 1))  # done: 32 threads
            T.evaluate(T.call_intrin("int32", "tl.async_bar_init", 4, 2))  # named barrier 3 of 64 threads
        T.tvm_storage_sync("shared")
        T.evaluate(0)  # where the allocations were
        T.evaluate(0)
        user_op("tl.barrier_arrive", 2)  # bars[1]
        user_op("tl.barrier_wait", 2, 0)
        user_op("tl.barrier_arrive", 3)  # done[0]
        if tx < 64:
            T.evaluate(T.call_intrin("int32", "tl.async_barrier_sync", 4))
        A[tx] = 1.0


def test_barrier_buffers_and_named_barriers_become_initialised_ids_on_mp31():
    after = without_locations(lower_async_barriers(barriers(MP31)))
    tvm.ir.assert_structural_equal(after, without_locations(barriers_expected).with_attr("global_symbol", "main"))


def test_a_kernel_without_barriers_is_unchanged():
    @T.prim_func
    def plain(A: T.Tensor((128,), "float32")):
        T.func_attr({"target": MP31})
        with T.Kernel(1, threads=128):
            A[T.get_thread_binding()] = 1.0
            T.sync_threads()  # a block barrier stays __syncthreads()

    assert lower_async_barriers(plain).same_as(plain)


def test_a_barrier_buffer_on_mp22_is_an_error_at_its_allocation():
    with pytest.raises(CompileError, match=r"T.alloc_barrier: mp_22 has no asynchronous barriers") as error:
        run_pass(LowerAsyncBarriers(), tvm.IRModule({"main": barriers(MP22)}))
    assert error.value.loc is not None and error.value.loc.lineno == barriers.__code__.co_firstlineno + 5


def test_a_named_barrier_on_mp22_is_an_error_naming_it():
    @T.prim_func
    def named(A: T.Tensor((256,), "float32")):
        T.func_attr({"target": MP22})
        with T.Kernel(1, threads=256):
            if T.get_thread_binding() < 128:
                T.sync_threads(1, 128)

    with pytest.raises(CompileError, match=r"T.sync_threads\(1, 128\): a barrier over 128 of the block's 256 threads "
                                           r"needs an asynchronous barrier, which mp_22 does not have"):
        run_pass(LowerAsyncBarriers(), tvm.IRModule({"main": named}))
