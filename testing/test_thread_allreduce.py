"""T.tvm_thread_allreduce over any subset of the block's thread axes (LowerThreadAllreduce): the reduction
template where the group is a power-of-two strided run of the linear thread id, shared memory otherwise."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]
AXES = "xyz"


def _allreduce_kernel(extents, axes, reducer, identity):
    """Each thread of one block loads A[tz, ty, tx] and stores the combine over its group to B[tz, ty, tx]."""
    X, Y, Z = extents

    @T.prim_func
    def main(A: T.Tensor((Z, Y, X), "float32"), B: T.Tensor((Z, Y, X), "float32")):
        with T.Kernel(1, threads=(X, Y, Z)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tz = T.get_thread_binding(2)
            reduced = T.alloc_local((1,), "float32")
            tvars = {"x": tx, "y": ty, "z": tz}
            with T.attr(T.comm_reducer(reducer, [T.float32(identity)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tz, ty, tx], True, reduced[0],
                                                  *[tvars[a] for a in axes], dtype="handle"))
            B[tz, ty, tx] = reduced[0]

    return main


CASES = [
    # (X, Y, Z), reduced axes, expected form
    ((8, 4, 2), "y", "tl::AllReduce<tl::SumOp, 4, 8,"),
    ((4, 4, 2), "z", "tl::AllReduce<tl::SumOp, 2, 16,"),
    ((4, 2, 4), "xy", "tl::AllReduce<tl::SumOp, 8, 1,"),
    ((2, 4, 4), "yz", "tl::AllReduce<tl::SumOp, 16, 2,"),
    ((64, 1, 1), "x", "tl::AllReduce<tl::SumOp, 64, 1,"),
    ((16, 8, 1), "y", "red_buf"),        # a span of 128 threads in a 2-D block
    ((4, 3, 2), "y", "red_buf"),         # extent 3
    ((5, 4, 3), "xz", "red_buf"),        # x and z, not y
    ((6, 5, 1), "xy", "red_buf"),
    ((3, 4, 5), "xyz", "red_buf"),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("extents,axes,form", CASES, ids=[f"{e[0]}x{e[1]}x{e[2]}-{a}" for e, a, _ in CASES])
def test_sum_over_thread_axes(arch, extents, axes, form):
    kernel = tilelang.compile(_allreduce_kernel(extents, axes, lambda x, y: x + y, 0.0),
                              target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert form in source
    if form == "red_buf":
        assert "tl::AllReduce" not in source
    X, Y, Z = extents
    a, b = rand((Z, Y, X), torch.float32, 7), poison((Z, Y, X), torch.float32)
    kernel(a, b)
    dims = [2 - AXES.index(c) for c in axes]
    torch.testing.assert_close(b, a.sum(dim=dims, keepdim=True).expand_as(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_max_over_y_and_z_in_shared_memory(arch):
    extents = (3, 5, 2)
    kernel = tilelang.compile(_allreduce_kernel(extents, "zy", lambda x, y: T.max(x, y), -float("inf")),
                              target=f"musa -arch={arch}")
    a, b = rand((2, 5, 3), torch.float32, 8), poison((2, 5, 3), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.amax(dim=(0, 1), keepdim=True).expand_as(a))


def test_reduction_over_a_block_index_is_an_error():
    @T.prim_func
    def main(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            tx = T.get_thread_binding(0)
            reduced = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[bx, tx], True, reduced[0], bx, dtype="handle"))
            B[bx] = reduced[0]

    with pytest.raises(tilelang.CompileError, match="is not a threadIdx axis"):
        tilelang.compile(main, target="musa -arch=mp_31")
