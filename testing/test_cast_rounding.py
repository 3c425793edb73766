"""`T.cast(x, dtype, round=, sat=, rbits=)` (upstream 0.1.13's keywords): upstream's argument checks in its words,
the conversions printed as `tl::convert_rounded` / `tl::convert_stochastic` on both arches, and every mode and
saturation run in the simulator bit for bit against a reference built from the target's list of values (and against
torch where torch has the same conversion: round to nearest even, saturating or not)."""

import os

import numpy as np
import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]
MODES = ["rn", "rz", "rp", "rm", "rs"]
# (mode, sat) of each output row of the kernel below, in order.
ROWS = [(mode, sat) for mode in MODES for sat in (True, False)]
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn,
         "float8_e5m2": torch.float8_e5m2}
BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8,
        torch.float8_e5m2: torch.uint8}
C_TYPE = {"float16": "half_t", "bfloat16": "bfloat16_t", "float8_e4m3fn": "tl::fp8_e4_t", "float8_e5m2": "tl::fp8_e5_t"}
# The largest finite magnitude's code; the code after it (infinity, or NaN for e4m3fn); the format's mantissa bits.
FORMATS = {"float16": (0x7BFF, 10), "bfloat16": (0x7F7F, 7), "float8_e4m3fn": (0x7E, 3), "float8_e5m2": (0x7B, 2)}
M = 1024


# ---- upstream's argument checks (tilelang/language/tir/ir.py's cast) ---------------------------------------------

def test_argument_checks_in_upstreams_words():
    with pytest.raises(ValueError, match="Invalid round"):
        T.cast(1.0, "float8_e4m3fn", round="invalid")
    with pytest.raises(ValueError, match="Invalid sat"):
        T.cast(1.0, "float8_e4m3fn", sat="invalid")
    with pytest.raises(ValueError, match="rbits is required"):
        T.cast(1.0, "float8_e4m3fn", round="rs")
    with pytest.raises(ValueError, match="rbits is only valid"):
        T.cast(1.0, "float8_e4m3fn", round="rn", rbits=T.int32(42))
    for mode in ("rn", "rz", "rp", "rm"):
        call = T.cast(T.float32(1.0), "float8_e4m3fn", round=mode)
        assert isinstance(call, tirx.Call) and call.dtype == "float8_e4m3fn"
    for sat in (True, False):
        assert isinstance(T.cast(T.float32(1.0), "float8_e4m3fn", sat=sat), tirx.Call)
    stochastic = T.cast(tirx.Var("x", "float16"), "bfloat16", round="rs", rbits=tirx.Var("r", "int32"))
    assert stochastic.args[1].dtype == "float32" and stochastic.args[2].dtype == "uint32"


def test_a_plain_cast_is_unchanged():
    x = tirx.Var("x", "float32")
    assert isinstance(T.cast(x, "float8_e4m3fn"), tirx.Cast)
    assert isinstance(T.cast(x, "float16", round=""), tirx.Cast)


@pytest.mark.parametrize("args, match", [
    (dict(dtype="float4_e2m1fn", round="rz"), r"converts to float16, bfloat16, float8_e4m3fn, float8_e5m2; "
                                              r"got float4_e2m1fn"),
    (dict(dtype="int8", round="rn"), r"got int8"),
    (dict(dtype="float16", round="rs", rbits=1.5), r"rbits must be a scalar integer"),
])
def test_unsupported_combinations_are_named(args, match):
    dtype = args.pop("dtype")
    with pytest.raises(TypeError, match=match):
        T.cast(tirx.Var("x", "float32"), dtype, **args)
    with pytest.raises(TypeError, match=r"converts a scalar float32, float16 or bfloat16; got float64"):
        T.cast(tirx.Var("x", "float64"), "float16", round="rz")


def test_an_error_in_a_kernel_names_the_line():
    with pytest.raises(tilelang.CompileError, match=r"(?s)round=\"rs\".*rbits is required"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float16")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    B[i] = T.cast(A[i], "float16", round="rs")


# ---- the reference --------------------------------------------------------------------------------------------

def _magnitudes(dtype: str) -> np.ndarray:
    """The format's finite non-negative values by code (0 .. largest finite), then one step past the largest."""
    max_code, _ = FORMATS[dtype]
    codes = torch.arange(max_code + 2, dtype=torch.int32)
    values = codes.to(BITS[TORCH[dtype]]).view(TORCH[dtype]).double().numpy().copy()
    values[-1] = values[-2] + (values[-2] - values[-3])  # past the largest: its step again (not infinity or NaN)
    return values


def reference_bits(x: np.ndarray, rbits: np.ndarray, dtype: str, mode: str, sat: bool) -> np.ndarray:
    """The codes (sign included; -1 for NaN) of x (float32) converted: neighbours found in the list of values."""
    values = _magnitudes(dtype)
    max_code, _ = FORMATS[dtype]
    sign_bit = 0x8000 if dtype in ("float16", "bfloat16") else 0x80
    has_inf = dtype != "float8_e4m3fn"
    out = np.empty(x.shape, dtype=np.int64)
    for n, (v, r) in enumerate(zip(x.astype(np.float64), rbits.astype(np.int64) & 0xFFFFFFFF)):
        if np.isnan(v):
            out[n] = -1
            continue
        negative = bool(np.signbit(v))
        mag = abs(v)
        if np.isinf(mag):
            code = max_code if sat else (max_code + 1 if has_inf else -1)
        else:
            lo = min(int(np.searchsorted(values, mag, side="right")) - 1, max_code + 1)
            if lo == max_code + 1:  # at or beyond the step past the largest
                code, inexact, fraction = lo, mag > values[lo], 0.0
            else:
                step = values[lo + 1] - values[lo]
                fraction = (mag - values[lo]) / step
                code, inexact = lo, mag != values[lo]
            up = {"rn": fraction > 0.5 or (fraction == 0.5 and code % 2 == 1), "rz": False,
                  "rp": inexact and not negative, "rm": inexact and negative,
                  "rs": int(np.floor(fraction * 2.0**32)) + int(r) >= 2**32}[mode]
            code += int(up)
            if code > max_code:
                toward_zero = mode == "rz" or (mode == "rp" and negative) or (mode == "rm" and not negative)
                code = max_code if sat or toward_zero else (max_code + 1 if has_inf else -1)
        out[n] = -1 if code == -1 else code | (sign_bit if negative else 0)
    return out


def _bits_of(t: torch.Tensor) -> np.ndarray:
    """Codes of a tensor of the target dtype, -1 where NaN."""
    bits = t.view(BITS[t.dtype]).to(torch.int64).numpy() & (0xFFFF if t.element_size() == 2 else 0xFF)
    return np.where(torch.isnan(t.float()).numpy(), -1, bits)


def _inputs(dtype: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 values over the whole range of the format (subnormals, exact values, exact ties, past the largest),
    with random mantissa bits, a few specials; and random 32-bit rbits."""
    g = torch.Generator().manual_seed(seed)
    values = torch.from_numpy(_magnitudes(dtype)).float()
    _, man = FORMATS[dtype]
    lowest = float(values[1]).__abs__()
    top = float(values[-2])
    exps = torch.empty(M // 2).uniform_(np.log2(lowest) - 3, np.log2(top) + 2, generator=g)
    scattered = torch.exp2(exps) * (1 + torch.rand(M // 2, generator=g))
    picks = torch.randint(0, len(values) - 1, (M // 4,), generator=g)
    exact = values[picks]
    ties = (values[picks] + values[picks + 1]) / 2
    x = torch.cat([scattered, exact, ties])
    x = torch.where(torch.rand(M, generator=g) < 0.5, -x, x)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), top, -top,
                             torch.finfo(torch.float32).max, 1e-45, -1e-45, lowest / 2, 3.4e38])
    x[:len(specials)] = specials
    rbits = torch.randint(-2**31, 2**31, (M,), generator=g, dtype=torch.int64).to(torch.int32)
    return x.float(), rbits


def _kernel(dtype: str, arch: str):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), R: T.Tensor((M,), "int32"), B: T.Tensor((len(ROWS), M), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(M):
                B[0, i] = T.cast(A[i], dtype, round="rn", sat=True)
                B[1, i] = T.cast(A[i], dtype, round="rn", sat=False)
                B[2, i] = T.cast(A[i], dtype, round="rz", sat=True)
                B[3, i] = T.cast(A[i], dtype, round="rz", sat=False)
                B[4, i] = T.cast(A[i], dtype, round="rp")
                B[5, i] = T.cast(A[i], dtype, round="rp", sat=False)
                B[6, i] = T.cast(A[i], dtype, round="rm", sat=True)
                B[7, i] = T.cast(A[i], dtype, round="rm", sat=False)
                B[8, i] = T.cast(A[i], dtype, round="rs", rbits=R[i])
                B[9, i] = T.cast(A[i], dtype, round="rs", sat=False, rbits=R[i])

    return tilelang.compile(main, target=f"musa -arch={arch}")


def test_reference_agrees_with_torch_to_nearest_even():
    for dtype, torch_dtype in TORCH.items():
        x, rbits = _inputs(dtype, 1)
        x = x[torch.isfinite(x)]
        saturating = dtype == "float8_e4m3fn"  # torch saturates e4m3fn (no infinity), overflows the others
        ours = reference_bits(x.numpy(), rbits.numpy()[:len(x)], dtype, "rn", saturating)
        assert (ours == _bits_of(x.to(torch_dtype))).all(), dtype


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", list(TORCH))
def test_every_mode_bit_for_bit(dtype, arch):
    kernel = _kernel(dtype, arch)
    source = kernel.get_kernel_source()
    for mode, enum in (("rn", "kNearestEven"), ("rz", "kTowardZero"), ("rp", "kUp"), ("rm", "kDown")):
        for sat in ("true", "false"):
            assert f"tl::convert_rounded<{C_TYPE[dtype]}, tl::Rounding::{enum}, {sat}>(" in source
    assert f"tl::convert_stochastic<{C_TYPE[dtype]}, true>(" in source
    assert f"tl::convert_stochastic<{C_TYPE[dtype]}, false>(" in source

    seed = int.from_bytes(os.urandom(4), "little")
    x, rbits = _inputs(dtype, seed)
    out = torch.full((len(ROWS), M), 0x55, dtype=BITS[TORCH[dtype]]).view(TORCH[dtype])  # poisoned
    kernel(x, rbits, out)
    for row, (mode, sat) in enumerate(ROWS):
        expected = reference_bits(x.numpy(), rbits.numpy(), dtype, mode, sat)
        got = _bits_of(out[row])
        bad = np.nonzero(got != expected)[0]
        assert len(bad) == 0, (f"{dtype} round={mode} sat={sat} (seed {seed}): x={x[bad[:4]].tolist()} "
                               f"got {[hex(v) for v in got[bad[:4]]]} expected {[hex(v) for v in expected[bad[:4]]]}")
    # Where torch has the same conversion: to nearest even, saturating (clamped first) or not.
    finite_max = float(torch.finfo(TORCH[dtype]).max)
    assert (_bits_of(out[0]) == _bits_of(x.clamp(-finite_max, finite_max).to(TORCH[dtype]))).all()
    if dtype != "float8_e4m3fn":  # torch's e4m3fn conversion saturates: no non-saturating one to compare
        assert (_bits_of(out[1]) == _bits_of(x.to(TORCH[dtype]))).all()
    # Stochastic rounding lands on a neighbour: the one below (toward zero) or the one above.
    low, high = _bits_of(out[2]), reference_bits(x.numpy(), rbits.numpy(), dtype, "rp", True)
    high = np.where(x.numpy() < 0, reference_bits(x.numpy(), rbits.numpy(), dtype, "rm", True), high)
    assert ((_bits_of(out[8]) == low) | (_bits_of(out[8]) == high)).all()


# ---- CUDA's directed conversions by name (__float2half_rz, __float2bfloat16_rd, ...) ------------------------------
DIRECTED = {"rz": "rz", "rd": "rm", "ru": "rp"}  # the name's suffix -> the reference's mode


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,name", [("float16", "half"), ("bfloat16", "bfloat16")])
def test_directed_conversions_called_by_name(dtype, name, arch):
    """`T.call_extern(T.float16, "__float2half_rz", x)`, as the MUSA port of DeepSeek's TileKernels writes its e5m6
    cast: the simulator's fp16/bf16 API has CUDA's directed conversions (overflow toward zero gives the largest
    finite value, as non-saturating rz does)."""
    suffixes = list(DIRECTED)

    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((len(suffixes), M), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(M):
                for k, suffix in enumerate(suffixes):  # a Python loop: one call per name
                    B[k, i] = T.call_extern(dtype, f"__float2{name}_{suffix}", A[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert all(f"__float2{name}_{s}(" in source for s in suffixes)
    x, rbits = _inputs(dtype, 5)
    out = torch.full((len(suffixes), M), 0x55, dtype=BITS[TORCH[dtype]]).view(TORCH[dtype])
    kernel(x, out)
    for row, suffix in enumerate(suffixes):
        expected = reference_bits(x.numpy(), rbits.numpy(), dtype, DIRECTED[suffix], False)
        got = _bits_of(out[row])
        bad = np.nonzero(got != expected)[0]
        assert len(bad) == 0, (f"__float2{name}_{suffix}: x={x[bad[:4]].tolist()} got {[hex(v) for v in got[bad[:4]]]} "
                               f"expected {[hex(v) for v in expected[bad[:4]]]}")
