"""LowerWaitSqmma: where SQMMA exists (mp_31) `T.wait_sqmma(n)` becomes `tl::sqmma_wait<n>()`, and
`T.warpgroup_commit_batch()` / `T.warpgroup_wait(n)` the built-ins `__musa_tce_commit_group()` /
`__musa_tce_wait_group(n)`; elsewhere (mp_22) gemms complete synchronously and the three become no-ops."""

import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_wait_sqmma import lower_wait_sqmma

MP31 = determine_target("musa -arch=mp_31")
MP22 = determine_target("musa -arch=mp_22")


def waits(target):
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        T.func_attr({"target": target})
        with T.Kernel(1, threads=128):
            T.warpgroup_commit_batch()
            A[0] = 1.0
            T.warpgroup_wait(1)
            T.wait_sqmma(2)

    return main


def _assert_lowers_to(before, expected):
    tvm.ir.assert_structural_equal(without_locations(lower_wait_sqmma(before)),
                                   without_locations(expected).with_attr("global_symbol", "main"))


def test_waits_become_the_sqmma_built_ins_on_mp31():
    @T.prim_func
    def expected(A: T.Tensor((32,), "float32")):
        T.func_attr({"target": MP31})
        with T.Kernel(1, threads=128):
            T.call_extern("int32", "__musa_tce_commit_group")
            A[0] = 1.0
            T.call_extern("int32", "__musa_tce_wait_group", 1)
            T.call_extern("int32", "tl::sqmma_wait<2>")

    _assert_lowers_to(waits(MP31), expected)


def test_waits_are_dropped_on_mp22_where_gemms_are_synchronous():
    @T.prim_func
    def expected(A: T.Tensor((32,), "float32")):
        T.func_attr({"target": MP22})
        with T.Kernel(1, threads=128):
            T.evaluate(0)
            A[0] = 1.0
            T.evaluate(0)
            T.evaluate(0)

    _assert_lowers_to(waits(MP22), expected)


def test_a_kernel_without_waits_is_left_unchanged():
    @T.prim_func
    def no_waits(A: T.Tensor((32,), "float32")):
        T.func_attr({"target": MP31})
        with T.Kernel(1, threads=128):
            T.call_extern("int32", "other")
            A[0] = 1.0

    assert lower_wait_sqmma(no_waits).same_as(no_waits)
