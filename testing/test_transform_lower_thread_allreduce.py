"""LowerThreadAllreduce: TVMScript's raw `T.tvm_thread_allreduce` under a `reduce_scope` attribute combines a value over
the threads that differ only along the named thread axes. A group that is a power-of-two strided run of the linear
thread id becomes the reduction template `tl::AllReduce<Op, Threads, Scale, warp>` (the target's warp size: 32 on
mp_31, 128 on mp_22), with a shared scratch tile past 32 threads; any other group meets in shared memory, every member
combining the group's values in one fixed order."""

import pytest
import tvm

import tilelang.language as T
from conftest import marked_temporary, without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_thread_allreduce import LowerThreadAllreduce, lower_thread_allreduce
from tilelang_musa.transform.pass_base import run_pass

TARGETS = {"mp_31": determine_target("musa -arch=mp_31"), "mp_22": determine_target("musa -arch=mp_22")}


def row_sum(target, X, Y=1, axis="x", combiner=lambda x, y: x + y):
    """Each thread of a (X, Y) block combines A[ty, tx] over its group along `axis` into B[ty, tx]."""
    @T.prim_func
    def main(A: T.Tensor((Y, X), "float32"), B: T.Tensor((Y, X), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=(X, Y)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            reduced = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(combiner, [T.float32(0)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[ty, tx], True, reduced[0], tx if axis == "x" else ty,
                                                  dtype="handle"))
            B[ty, tx] = reduced[0]

    return main


def _assert_lowers_to(before, expected):
    after = without_locations(lower_thread_allreduce(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@pytest.mark.parametrize("arch,warp", [("mp_31", 32), ("mp_22", 128)])
def test_a_warp_wide_sum_is_the_reduction_template_for_the_targets_warp(arch, warp):
    target = TARGETS[arch]

    @T.prim_func
    def expected(A: T.Tensor((1, 32), "float32"), B: T.Tensor((1, 32), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=(32, 1)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            reduced = T.alloc_local((1,), "float32")
            reduced[0] = T.call_extern("float32", f"tl::AllReduce<tl::SumOp, 32, 1, {warp}>", A[ty, tx],
                                       T.address_of(reduced[0]))
            B[ty, tx] = reduced[0]

    _assert_lowers_to(row_sum(target, 32), expected)


def test_a_group_past_32_threads_meets_in_a_shared_scratch_tile():
    target = TARGETS["mp_31"]

    @T.prim_func
    def expected(A: T.Tensor((1, 64), "float32"), B: T.Tensor((1, 64), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=(64, 1)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            red_buf = T.alloc_shared((64,), "float32")
            reduced = T.alloc_local((1,), "float32")
            reduced[0] = T.call_extern("float32", "tl::AllReduce<tl::SumOp, 64, 1, 32>", A[ty, tx],
                                       T.address_of(red_buf[0]))
            B[ty, tx] = reduced[0]

    # red_buf is the compiler's temporary: PlanDynamicSharedMemory may give its bytes to others between its uses
    _assert_lowers_to(row_sum(target, 64), marked_temporary(expected, "red_buf"))


def test_a_group_of_three_threads_meets_in_shared_memory_in_a_fixed_order():
    """Along threadIdx.y of a (4, 3) block: 3 is not a power of two, so no template."""
    target = TARGETS["mp_31"]

    @T.prim_func
    def expected(A: T.Tensor((3, 4), "float32"), B: T.Tensor((3, 4), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=(4, 3)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            red_buf = T.alloc_shared((12,), "float32")
            red_acc = T.alloc_local((1,), "float32")
            reduced = T.alloc_local((1,), "float32")
            T.tvm_storage_sync("shared")  # the readers of an earlier reduction are done
            red_buf[tx + 4 * ty] = A[ty, tx]
            T.tvm_storage_sync("shared")
            red_acc[0] = T.float32(0)
            for ry in T.serial(3):
                red_acc[0] = red_acc[0] + red_buf[tx + 4 * ry]
            reduced[0] = red_acc[0]
            B[ty, tx] = reduced[0]

    _assert_lowers_to(row_sum(target, 4, 3, axis="y"), marked_temporary(expected, "red_buf"))


def test_a_kernel_without_reductions_is_unchanged_and_a_difference_is_an_error():
    @T.prim_func
    def plain(A: T.Tensor((32,), "float32")):
        T.func_attr({"target": TARGETS["mp_31"]})
        with T.Kernel(1, threads=32):
            A[T.get_thread_binding()] = 0.0

    assert lower_thread_allreduce(plain).same_as(plain)
    difference = row_sum(TARGETS["mp_31"], 32, combiner=lambda x, y: x - y)
    with pytest.raises(CompileError, match=r"T.comm_reducer: the combiner `x - y` is not a sum, product, max, min or "
                                           r"bitwise"):
        run_pass(LowerThreadAllreduce(), tvm.IRModule({"main": difference}))
