"""The math and bit-operation names of upstream TileLang (T.tan, T.erf, T.fmod, T.bitwise_and, T.shift_right, ...):
each compiles to its MUSA math-library call or C operator on both archs and matches torch in the simulator."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N = 256
UNARY = {
    "tan": (T.tan, torch.tan, "tanf("), "sinh": (T.sinh, torch.sinh, "sinhf("),
    "cosh": (T.cosh, torch.cosh, "coshf("), "atan": (T.atan, torch.atan, "atanf("),
    "erf": (T.erf, torch.erf, "erff("), "exp10": (T.exp10, lambda x: torch.pow(10.0, x), "exp10f("),
    "log10": (T.log10, lambda x: torch.log10(x.abs() + 0.5), "log10f("),
    "log1p": (T.log1p, lambda x: torch.log1p(x.abs()), "log1pf("),
    "nearbyint": (T.nearbyint, lambda x: torch.round(x * 3.0), "nearbyintf("),
    "asin": (T.asin, lambda x: torch.asin(x / (x.abs() + 1.0)), "asinf("),
    "acos": (T.acos, lambda x: torch.acos(x / (x.abs() + 1.0)), "acosf("),
    "atanh": (T.atanh, lambda x: torch.atanh(x / (x.abs() + 1.0)), "atanhf("),
    "asinh": (T.asinh, torch.asinh, "asinhf("), "acosh": (T.acosh, lambda x: torch.acosh(x.abs() + 1.0), "acoshf("),
}
# arguments that keep each function in its domain: log10 of |x| + 0.5, log1p of |x|, nearbyint of 3x
ARGUMENT = {"log10": lambda x: T.abs(x) + 0.5, "log1p": T.abs, "nearbyint": lambda x: x * 3.0,
            "asin": lambda x: x / (T.abs(x) + 1.0), "acos": lambda x: x / (T.abs(x) + 1.0),
            "atanh": lambda x: x / (T.abs(x) + 1.0), "acosh": lambda x: T.abs(x) + 1.0}


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_unary_math(arch):
    """Every name of UNARY in one kernel (row k of B is the k-th name's result): one build per arch, a message
    naming the function that differs."""
    names = list(UNARY)

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((len(names), N), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                for k, name in enumerate(names):  # a Python loop: one statement per name
                    B[k, i] = UNARY[name][0](ARGUMENT.get(name, lambda x: x)(A[i]))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    for name in names:  # whole names: atanf( holds tanf(
        assert re.search(rf"(?<!\w){re.escape(UNARY[name][2])}", source), f"T.{name}: no {UNARY[name][2]} call"
    a = rand((N,), torch.float32, 51)
    b = poison((len(names), N), torch.float32)
    kernel(a, b)
    for k, name in enumerate(names):
        torch.testing.assert_close(b[k], UNARY[name][1](a), rtol=1e-5, atol=1e-5,
                                   msg=lambda message, name=name: f"T.{name}: {message}")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fmod_and_bit_operations(arch):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), X: T.Tensor((N,), "int32"), F: T.Tensor((N,), "float32"),
             Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                F[i] = T.fmod(A[i] * 10.0, 3.0)
                Y[i] = T.bitwise_xor(T.bitwise_and(X[i], 0xFF0), T.bitwise_or(T.shift_left(X[i], 3), 1)) \
                    + T.shift_right(X[i], 2) + T.bitwise_not(X[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "fmodf(" in source and all(op in source for op in (" & ", " ^ ", " | ", " << ", " >> ", "~"))
    a = rand((N,), torch.float32, 52)
    x = torch.randint(-2**20, 2**20, (N,), generator=torch.Generator().manual_seed(53), dtype=torch.int32)
    f, y = poison((N,), torch.float32), torch.full((N,), -7, dtype=torch.int32)
    kernel(a, x, f, y)
    torch.testing.assert_close(f, torch.fmod(a * 10.0, 3.0), rtol=1e-5, atol=1e-5)
    expected = ((x & 0xFF0) ^ ((x << 3) | 1)) + (x >> 2) + (~x)
    assert torch.equal(y, expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_math_in_a_vectorized_loop_runs_lane_by_lane(arch, dtype):
    """A plain elementwise loop is vectorized; its math calls become the lane-wise tl::vmath overloads (16-bit
    lanes computed in float)."""

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                B[i] = T.exp(A[i]) + T.sigmoid(A[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::vmath::expf(" in source
    if dtype == "float16":
        assert "tl::vec_cast<half_t>(tl::vmath::expf(tl::vec_cast<float>(" in source
    torch_dtype = getattr(torch, dtype)
    a = rand((N,), torch_dtype, 54)
    b = poison((N,), torch_dtype)
    kernel(a, b)
    x = a.float()
    tol = 1e-5 if dtype == "float32" else 2e-2
    torch.testing.assert_close(b.float(), torch.exp(x) + torch.sigmoid(x), rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_wide_int_literals_in_bitwise_operators_keep_their_value(arch):
    """The stock wheel makes `x & 0x100000000` on an int64 `x & 0` and rejects `u & 0xFFFFFFFF` on a uint32:
    a Python int beside an integer expression takes its type (upstream's test_tilelang_intimm, plus numerics)."""
    from tvm import tirx

    assert (tirx.Var("u", "uint32") & 0xFFFFFFFF).b.value == 0xFFFFFFFF
    assert (0x100000000 | tirx.Var("v", "int64")).a.value == 0x100000000
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "int64"), B: T.Tensor((N,), "int64"), C: T.Tensor((N,), "int64")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            B[tx] = (A[tx] & 0x7FFFFFFF00000000) ^ 0x100000000
            C[tx] = T.bitwise_or(A[tx] & 0xFFFFFFFF, 0x4000000000)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "4294967296" in kernel.get_kernel_source()
    a = torch.randint(-(1 << 62), 1 << 62, (N,), generator=torch.Generator().manual_seed(41))
    b, c = torch.full((N,), -7, dtype=torch.int64), torch.full((N,), -7, dtype=torch.int64)  # poisoned
    kernel(a, b, c)
    assert torch.equal(b, (a & 0x7FFFFFFF00000000) ^ 0x100000000)
    assert torch.equal(c, (a & 0xFFFFFFFF) | 0x4000000000)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_isnan_isinf_isfinite(arch, dtype):
    """One MUSA built-in call each (upstream checks `isfinite(` in the source), on NaN, +-inf and numbers."""
    N = 128
    name = str(dtype).split(".")[1]

    @T.prim_func
    def main(X: T.Tensor((N,), name), Y: T.Tensor((N, 3), "int32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            finite = T.alloc_var(T.bool)
            finite = T.isfinite(X[tx])
            Y[tx, 0] = T.if_then_else(finite, 1, 0)
            Y[tx, 1] = T.if_then_else(T.isnan(X[tx]), 1, 0)
            Y[tx, 2] = T.if_then_else(T.isinf(X[tx]), 1, 0)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "isfinite(" in src and "isnan(" in src and "isinf(" in src
    x = rand((N,), dtype, 42)
    x[::4], x[1::8], x[5::8] = float("nan"), float("inf"), float("-inf")
    y = torch.full((N, 3), -7, dtype=torch.int32)
    kernel(x, y)
    assert torch.equal(y, torch.stack([x.isfinite(), x.isnan(), x.isinf()], 1).int())


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_fast_rcp_is_an_approximate_reciprocal(arch, dtype):
    """Upstream main's T.fast_rcp: `__fdividef(1.0f, x)` (16-bit floats through float32; float64 exactly)."""
    torch_dtype = getattr(torch, dtype)

    @T.prim_func
    def main(A: T.Tensor((32,), dtype), B: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            B[tx] = T.fast_rcp(A[tx])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert ("__fdividef(1.000000e+00f, " in source) == (dtype != "float64"), source
    a = (torch.rand((32,), generator=torch.Generator().manual_seed(4)) * 4 + 0.25).to(torch_dtype)
    b = torch.full((32,), float("nan"), dtype=torch_dtype)
    kernel(a, b)
    tol = 2e-3 if dtype in ("float32", "float64") else 2e-2
    torch.testing.assert_close(b, (1.0 / a.double()).to(torch_dtype), rtol=tol, atol=tol)


def test_fast_rcp_of_an_integer_is_an_error():
    with pytest.raises(TypeError, match="T.fast_rcp only supports floating-point inputs, but got int32"):
        @T.prim_func
        def main(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                B[0] = T.fast_rcp(A[0])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_binary_float_math(arch):
    """T.copysign (a bfloat16 pair too: through float), T.hypot, T.atan2, T.nextafter, T.ldexp: upstream's TIR names
    (DeepSeek's engram gate takes `T.copysign(T.sqrt(...), x)`)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), H: T.Tensor((N,), "bfloat16"),
             E: T.Tensor((N,), "int32"), Out: T.Tensor((5, N), "float32"), HOut: T.Tensor((N,), "bfloat16")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Out[0, i] = T.copysign(T.sqrt(T.abs(A[i])), B[i])
                Out[1, i] = T.hypot(A[i], B[i])
                Out[2, i] = T.atan2(A[i], B[i])
                Out[3, i] = T.nextafter(A[i], B[i])
                Out[4, i] = T.ldexp(A[i], E[i])
                HOut[i] = T.copysign(H[i], B[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert all(f in source for f in ("copysignf(", "hypotf(", "atan2f(", "nextafterf(", "ldexpf(")), source
    a, b = rand((N,), torch.float32, 54), rand((N,), torch.float32, 55)
    h = rand((N,), torch.float32, 56).to(torch.bfloat16)
    e = torch.randint(-8, 8, (N,), generator=torch.Generator().manual_seed(57), dtype=torch.int32)
    out, h_out = poison((5, N), torch.float32), poison((N,), torch.bfloat16)
    kernel(a, b, h, e, out, h_out)
    torch.testing.assert_close(out[0], torch.copysign(a.abs().sqrt(), b))
    torch.testing.assert_close(out[1], torch.hypot(a, b))
    torch.testing.assert_close(out[2], torch.atan2(a, b))
    torch.testing.assert_close(out[3], torch.nextafter(a, b), rtol=0, atol=0)
    torch.testing.assert_close(out[4], torch.ldexp(a, e.float()), rtol=0, atol=0)
    torch.testing.assert_close(h_out, torch.copysign(h, b).to(torch.bfloat16), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_truncdiv_and_truncmod(arch):
    """T.truncdiv / T.truncmod round toward zero (C's `/` and `%`), unlike T.floordiv / T.floormod, on negative
    values too (DeepSeek's TileKernels MoE mask_indices_by_tp uses them); constants fold the same way."""
    assert (T.truncdiv(-7, 2), T.truncmod(-7, 2), T.truncdiv(7, -2), T.truncmod(7, -2)) == (-3, -1, -3, 1)

    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), D: T.Tensor((N,), "int32"), Q: T.Tensor((N,), "int32"),
             R: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Q[i] = T.truncdiv(X[i], D[i])
                R[i] = T.truncmod(X[i], D[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert ") / tl::vec_of(" in source and ") % tl::vec_of(" in source, source  # C integer division
    g = torch.Generator().manual_seed(58)
    x = torch.randint(-1000, 1000, (N,), generator=g, dtype=torch.int32)
    d = torch.randint(1, 50, (N,), generator=g, dtype=torch.int32) * torch.where(torch.rand(N, generator=g) < 0.5, -1, 1)
    q, r = torch.full((N,), -7, dtype=torch.int32), torch.full((N,), -7, dtype=torch.int32)
    kernel(x, d.int(), q, r)
    torch.testing.assert_close(q, torch.div(x, d, rounding_mode="trunc").int())
    torch.testing.assert_close(r, torch.fmod(x, d).int())


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_popcount_and_clz(arch):
    """T.popcount / T.clz of 32- and 64-bit integers, upstream's TIR names (DeepSeek's TileKernels MoE mapping counts
    a warp's ballot with T.popcount)."""

    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int64"), Out: T.Tensor((4, N), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Out[0, i] = T.popcount(X[i])
                Out[1, i] = T.clz(X[i])
                Out[2, i] = T.Cast("int32", T.popcount(Y[i]))
                Out[3, i] = T.Cast("int32", T.clz(Y[i]))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert all(f in source for f in ("__popc(", "__clz(", "__popcll(", "__clzll(")), source
    g = torch.Generator().manual_seed(59)
    x = torch.randint(-2**31, 2**31 - 1, (N,), generator=g, dtype=torch.int64)
    y = torch.randint(-2**62, 2**62, (N,), generator=g, dtype=torch.int64) >> torch.randint(0, 60, (N,), generator=g)
    out = torch.full((4, N), -1, dtype=torch.int32)
    kernel(x.int(), y, out)
    x32 = [v & 0xFFFFFFFF for v in x.tolist()]
    y64 = [v & 0xFFFFFFFFFFFFFFFF for v in y.tolist()]
    assert out[0].tolist() == [bin(v).count("1") for v in x32]
    assert out[1].tolist() == [32 - v.bit_length() for v in x32]
    assert out[2].tolist() == [bin(v).count("1") for v in y64]
    assert out[3].tolist() == [64 - v.bit_length() for v in y64]


def test_popcount_of_a_float_is_an_error_at_the_line():
    from tilelang_musa.errors import CompileError

    def main(A: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Out[i] = T.popcount(A[i])

    with pytest.raises(CompileError, match="T.popcount: expects a 32- or 64-bit integer scalar; got float32") as err:
        T.prim_func(main)
    assert "Out[i] = T.popcount(A[i])" in str(err.value)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_unary_math_of_a_python_number(arch):
    """`x / T.sqrt(float(d))` (TileOPs' engram gate): a Python number is a float32 constant, as TVM converts it;
    anything else is an error at the line."""
    d = 256

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] / T.sqrt(float(d)) + T.exp(1)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((N,), torch.float32), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a / 16.0 + torch.exp(torch.tensor(1.0)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="T.sqrt takes an expression or a number; got str"):
        T.sqrt("16")
