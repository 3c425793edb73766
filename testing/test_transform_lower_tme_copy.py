"""LowerTmeCopy: a TME copy (`T.tma_copy`, and a `T.copy` store from shared memory) becomes the TME instruction, issued
by the first thread of the contiguous range that reaches it: a load adds its bytes to its barrier's phase, then loads
the box; a T.copy store is stored, committed and waited for. The tensors' descriptors are recorded in
`tl.tme_descriptors` for the host. mp_22 has no TME: a T.copy store falls back to a plain copy (a T.Parallel nest),
a T.tma_copy is an error naming it."""

import pytest
import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.ir.attrs import DESCRIPTORS_ATTR
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_tme_copy import LowerTmeCopy, lower_tme_copy
from tilelang_musa.transform.pass_base import run_pass

MP31 = determine_target("musa -arch=mp_31")
MP22 = determine_target("musa -arch=mp_22")
# [tensor, dtype, dims innermost first, byte strides of the outer dims]
DESCRIPTORS = {"desc_A": ["A", "float16", [T.int32(128), T.int32(64)], [T.int64(256)]],
               "desc_B": ["B", "float16", [T.int32(128), T.int32(64)], [T.int64(256)]]}


def user_op(name, *args):
    """A barrier op as the frontend emits it (attributes: its source line, which `without_locations` empties)."""
    T.evaluate(tvm.ir.Call(tvm.ir.Op.get(name), list(args), attrs={}, ret_ty="int32"))


def _assert_lowers_to(before, expected):
    after = without_locations(lower_tme_copy(before, {}))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


def load_then_store(target, tma_load=True):
    """A 16 x 64 half tile through shared memory: T.tma_copy in (when `tma_load`), a T.copy out by threads 64..127."""
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 128), "float16")):
        T.func_attr({"target": target})
        with T.Kernel(2, 4, threads=128) as (bx, by):
            S = T.alloc_shared((16, 64), "float16")
            bar = T.alloc_barrier(128)
            if tma_load:
                T.tma_copy(A[by * 16, bx * 64], S, barrier=bar)
                T.mbarrier_arrive(bar)
                T.mbarrier_wait_parity(bar, 0)
            if T.get_thread_binding() >= 64:
                T.copy(S, B[by * 16, bx * 64])

    return main


@T.prim_func
def load_then_store_expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 128), "float16")):
    T.func_attr({"target": MP31})
    with T.Kernel(2, 4, threads=128) as (bx, by):
        S = T.alloc_shared((16, 64), "float16")
        bar = T.alloc_barrier(128)
        tx = T.get_thread_binding()
        if tx == 0:
            T.evaluate(T.call_intrin("int32", "tl.barrier_expect_tx", bar[0], 16 * 64 * 2))
            # desc, barrier, tile, swizzle (sg, ss, sl), cache hints (inner, outer), 1 block of 2048 bytes,
            # box (64, 16) and coordinates innermost first
            T.evaluate(T.call_intrin("void", "tl.tme_load", "desc_A", bar[0], T.address_of(S[0, 0]), 0, 3, 1, 2, 2,
                                     1, 2048, 64, 16, bx * 64, by * 16))
        user_op("tl.barrier_arrive", bar[0])
        user_op("tl.barrier_wait", bar[0], T.int32(0))
        if tx >= 64:
            if tx == 64:  # the first of the threads that reach the store
                T.evaluate(T.call_intrin("void", "tl.tme_store", "desc_B", T.address_of(S[0, 0]), 0, 3, 1, 2, 2, 1,
                                         2048, 64, 16, bx * 64, by * 16))
                T.evaluate(T.call_intrin("void", "tl.tme_store_arrive"))
                T.evaluate(T.call_intrin("void", "tl.tme_store_wait"))


def test_tme_copies_are_issued_by_the_first_thread_that_reaches_them_on_mp31():
    _assert_lowers_to(load_then_store(MP31), load_then_store_expected.with_attr(DESCRIPTORS_ATTR, DESCRIPTORS))


@T.prim_func
def plain_store_expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 128), "float16")):
    T.func_attr({"target": MP22})
    with T.Kernel(2, 4, threads=128) as (bx, by):
        S = T.alloc_shared((16, 64), "float16")
        T.alloc_barrier(128)
        if T.get_thread_binding() >= 64:
            for i, j in T.Parallel(16, 64):
                B[by * 16 + i, bx * 64 + j] = S[i, j]


def test_a_copy_store_on_mp22_falls_back_to_a_plain_copy():
    _assert_lowers_to(load_then_store(MP22, tma_load=False), plain_store_expected)


def test_tma_copy_on_mp22_is_an_error_naming_it():
    with pytest.raises(CompileError, match=r"T.tma_copy: mp_22 has no TME \(the tensor memory engine exists on mp_31"):
        run_pass(LowerTmeCopy({}), tvm.IRModule({"main": load_then_store(MP22)}))


def test_a_kernel_without_tme_copies_is_unchanged():
    assert lower_tme_copy(plain_store_expected, {}).same_as(plain_store_expected)


def test_a_fresh_equal_shared_layout_reuses_the_plan(monkeypatch):
    """Every compile builds the shared tiles' layouts afresh: the plan found for a layout is kept by its structure and
    the tile, so planning the same copy again searches nothing; another tile of the buffer searches."""
    from tvm import tirx

    from tilelang_musa.layout.swizzle import make_sqmma_swizzled_layout
    from tilelang_musa.tileop import tme_copy as module
    from tilelang_musa.tileop.region import Region

    S = tirx.decl_buffer((32, 64), "float16", "S", scope="shared.dyn")
    whole = Region(S, (T.int32(0), T.int32(0)), (T.int32(32), T.int32(64)))
    module._PLANS.clear()
    first = module._match_layout(whole, make_sqmma_swizzled_layout(S), [32, 64], 2)
    assert first.sg and first.bytes_total == 32 * 64 * 2  # the swizzle was matched
    monkeypatch.setattr(module, "_search_plan", lambda *a: pytest.fail("searched again"))
    assert module._match_layout(whole, make_sqmma_swizzled_layout(S), [32, 64], 2) is first
    lower_half = Region(S, (T.int32(16), T.int32(0)), (T.int32(16), T.int32(64)))
    with pytest.raises(BaseException, match="searched again"):
        module._match_layout(lower_half, make_sqmma_swizzled_layout(S), [16, 64], 2)
