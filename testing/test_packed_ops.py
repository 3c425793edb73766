"""Packed two-lane arithmetic, T.add2 / sub2 / mul2 / fma2 / max2 / min2 / abs2, on `A[T.Ramp(2 * i, 1, 2)]`
vectors: printed as tl::<op>(...) calls on two-lane vectors, run in the simulator against torch on each lane."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]
N = 128
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
OPS = {
    "add2": (T.add2, 2, lambda a, b: a + b),
    "sub2": (T.sub2, 2, lambda a, b: a - b),
    "mul2": (T.mul2, 2, lambda a, b: a * b),
    "max2": (T.max2, 2, torch.fmax),  # a NaN lane yields the other operand, as fmaxf and __hmax2
    "min2": (T.min2, 2, torch.fmin),
    "abs2": (T.abs2, 1, torch.abs),
    # rounded once, as the fused instruction: the reference is computed in float32 and rounded
    "fma2": (T.fma2, 3, lambda a, b, c: (a.float() * b.float() + c.float()).to(a.dtype)),
}


def packed(op, arity, dtype):
    """Each of N threads computes one pair of lanes: Out[2t:2t+2] = op(In0[2t:2t+2], ...)."""

    @T.prim_func
    def pairs(X: T.Tensor((3, 2 * N), dtype), Out: T.Tensor((2 * N,), dtype)):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            lanes = T.Ramp(t * 2, 1, 2)
            operands = [X[k, lanes] for k in range(arity)]
            Out[lanes] = op(*operands)

    return pairs


def run(name, dtype, arch):
    op, arity, reference = OPS[name]
    kernel = tilelang.compile(packed(op, arity, dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    vec = {"float32": "float2", "float16": "half2", "bfloat16": "__mt_bfloat162"}[dtype]
    assert f"= tl::{name}(tl::vec_of(*reinterpret_cast<{vec}*>(X + " in source, source
    x, out = rand((3, 2 * N), DTYPES[dtype], 3), poison((2 * N,), DTYPES[dtype])
    x[0, :8] = torch.tensor([float("nan"), 1, -0.0, 0.0, 2, float("inf"), -3, 4])  # edge lanes for max2 / min2 / abs2
    kernel(x, out)
    torch.testing.assert_close(out, reference(*x[:arity]), equal_nan=True)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", list(OPS))
def test_packed_op_in_half_precision(name, arch):
    run(name, "float16", arch)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["add2", "fma2", "max2"])
def test_packed_op_in_other_dtypes(name, dtype):
    run(name, dtype, "mp_31")


def test_packed_op_operands_must_be_two_lane_vectors_of_one_dtype():
    with pytest.raises(tilelang.CompileError, match=r"T\.add2: the operands must share one dtype; got float16x2, "
                                                    r"float32x2") as info:
        @T.prim_func
        def mixed(A: T.Tensor((8,), "float16"), B: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=4):
                t = T.get_thread_binding()
                C[T.Ramp(t * 2, 1, 2)] = T.add2(A[T.Ramp(t * 2, 1, 2)], B[T.Ramp(t * 2, 1, 2)])

    assert "test_packed_ops.py" in str(info.value)

    with pytest.raises(tilelang.CompileError, match=r"T\.abs2: operand 0 must be a two-lane vector"):
        @T.prim_func
        def scalar(A: T.Tensor((8,), "float16"), C: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=4):
                t = T.get_thread_binding()
                C[t] = T.abs2(A[t])
