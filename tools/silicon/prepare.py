"""Kernels for the simulator-against-silicon check (docs/SIM_VS_SILICON.md): compile, run in the simulator, bundle.

    python tools/silicon/prepare.py [--bundle tools/silicon/bundle] [--only NAME,...] [--no-sim]

Runs here, on the CPU. Each kernel of build_cases() is compiled for mp_31 (32-lane warps, like NVIDIA's), checked to use
only the generic subset of the generated MUSA C (no matrix instructions, TME, async copies or `__musa_*`
built-ins), and written to the bundle with its inputs (fixed seeds, never zeros, edge values included) and the
simulator's outputs (the package's normal path: `kernel(*tensors)` on CPU tensors):

    bundle/manifest.txt            what the C++ driver reads: per kernel its library name and its arguments
    bundle/meta.json               what compare.py reads: per output its dtype, shape and how to compare it
    bundle/kernels/NAME.mu         the generated kernel and host wrapper, as mcc would get them
    bundle/data/NAME.ARG.bin       the inputs, and the start of outputs that matter (atomics; others start 0xFF)
    bundle/sim/NAME.ARG.bin        the simulator's outputs

tools/silicon/run.sh builds the kernels with nvcc against tools/silicon/cuda_musa/ and runs them on an NVIDIA
GPU; compare.py then compares the GPU's outputs with bundle/sim/.
"""

import argparse
import json
import math
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

HERE = Path(__file__).resolve().parent
ARCH = "mp_31"

# Text a generated kernel must not contain to run on the CUDA shim: matrix instructions, TME, async copies and
# barriers, robust access and every other MUSA-only built-in.
NOT_GENERIC = re.compile(r"__musa_\w+|tl::gemm_|sqmma|wmma|tme_|memcpy_g2s|async_|robust|murand")

TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
               "int32": torch.int32, "int8": torch.int8, "int64": torch.int64,
               "int16": torch.int16}


# ---- inputs -----------------------------------------------------------------------------------------------------

def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


FLOAT_EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-45, -1e-45, 1.1754942e-38,
               1.17549435e-38, -1.17549435e-38, 3.4028235e38, -3.4028235e38, 1e30, -1e30, 88.72, 88.73, -87.3,
               -103.9, 128.0, -150.0, 65504.0, 65520.0, -65520.0, 6.1e-5, 5.96e-8, 2.98e-8, 3e-8, 1e-40,
               2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 127.5, -128.5, 128.0, -129.0, 255.5,
               1.5, 2.5, -2.5, 0.49999997, 1e6 + 0.5, 8388609.0, 16777217.0, 3.14159265, 1e4, 1e5, -1e5]


def float_mixture(n: int, seed: int) -> torch.Tensor:
    """fp32: log-uniform magnitudes over [2^-30, 2^30] with random signs, uniform [-10, 10], a sprinkle of
    subnormals, exact halves (ties for rounding to integers), then FLOAT_EDGES at the front. No zeros except the
    edge values +-0."""
    g = gen(seed)
    quarter = n // 4
    mag = torch.exp2(torch.rand(quarter * 2, generator=g, dtype=torch.float64) * 60 - 30)
    sign = torch.where(torch.rand(quarter * 2, generator=g) < 0.5, -1.0, 1.0).double()
    uni = torch.rand(quarter, generator=g, dtype=torch.float64) * 20 - 10
    sub_bits = torch.randint(1, 1 << 23, (quarter // 4,), generator=g, dtype=torch.int32)
    subs = sub_bits.view(torch.float32).double() * torch.where(torch.rand(quarter // 4, generator=g) < 0.5, -1.0, 1.0).double()
    halves = (torch.randint(-300, 300, (n,), generator=g).double() + 0.5)
    x = torch.cat([torch.tensor(FLOAT_EDGES, dtype=torch.float64), mag * sign, uni, subs, halves])[:n]
    x = x.float()
    x[x == 0] = 0.75  # only the edge values are zero
    x[: len(FLOAT_EDGES)] = torch.tensor(FLOAT_EDGES, dtype=torch.float32)
    return x


def all_16bit_patterns(dtype: torch.dtype) -> torch.Tensor:
    """Every 16-bit pattern once (exhaustive for fp16 and bf16: every value, subnormals, +-0, +-inf, NaNs)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).clone()


def int32_mixture(n: int, seed: int) -> torch.Tensor:
    g = gen(seed)
    edges = torch.tensor([1, -1, 2, -2, 7, -7, 127, 128, -128, -129, 255, 256, 2**24 + 1, -(2**24 + 1), 2**31 - 1,
                          -(2**31), -(2**31) + 1, 2**30, 16777217, 33554435, 1 << 20, -(1 << 20) - 1], dtype=torch.int64)
    parts = [edges, torch.randint(-200, 200, (n // 4,), generator=g),
             torch.randint(-(2**31), 2**31, (n // 2,), generator=g, dtype=torch.int64),
             torch.randint(-(2**16), 2**16, (n,), generator=g)]
    x = torch.cat(parts)[:n].to(torch.int32)
    x[x == 0] = 3
    return x


def int8_all(n: int) -> torch.Tensor:
    x = (torch.arange(n) % 256 - 128).to(torch.int8)
    return x


# ---- kernels ----------------------------------------------------------------------------------------------------

@dataclass
class Arg:
    name: str
    dtype: str
    shape: tuple
    init: torch.Tensor  # initial contents (inputs: the data; outputs: poison or the atomics' start)
    out: bool = False
    keep_init: bool = False  # an output whose start matters (atomics); other outputs start as 0xFF bytes
    compare: dict = field(default_factory=dict)  # compare.py's instructions for an output


@dataclass
class Case:
    name: str
    program: Callable  # () -> prim_func
    args: list[Arg]
    pass_configs: dict = field(default_factory=dict)
    note: str = ""


def poison(shape, dtype: str) -> torch.Tensor:
    if dtype.startswith("int"):
        return torch.full(shape, -77, dtype=TORCH_DTYPE[dtype])
    return torch.full(shape, -12345.0, dtype=TORCH_DTYPE[dtype])


def build_cases() -> list[Case]:
    import tilelang.language as T
    from tvm import tirx

    cases: list[Case] = []

    # -- unary math: one input vector, one output row per function ------------------------------------------------
    unary = {
        "exp": T.exp, "exp2": T.exp2, "exp10": T.exp10, "log": T.log, "log2": T.log2, "log10": T.log10,
        "log1p": T.log1p, "sqrt": T.sqrt, "rsqrt": T.rsqrt, "sin": T.sin, "cos": T.cos, "tan": T.tan,
        "sinh": T.sinh, "cosh": T.cosh, "tanh": T.tanh, "atan": T.atan, "erf": T.erf, "sigmoid": T.sigmoid,
        "abs": T.abs, "floor": T.floor, "ceil": T.ceil, "trunc": T.trunc, "round": T.round,
        "nearbyint": T.nearbyint, "neg": lambda x: -x, "square": lambda x: x * x,
    }
    fast = {"__exp": T.__exp, "__exp10": T.__exp10, "__log": T.__log, "__log2": T.__log2, "__log10": T.__log10,
            "__sin": T.__sin, "__cos": T.__cos, "__tan": T.__tan, "ieee_fsqrt_rn": T.ieee_fsqrt,
            "ieee_frcp_rn": T.ieee_frcp, "ieee_frsqrt": T.ieee_frsqrt,
            "ieee_fsqrt_rz": lambda x: T.ieee_fsqrt(x, "rz"), "ieee_frcp_ru": lambda x: T.ieee_frcp(x, "ru"),
            "ieee_frcp_rd": lambda x: T.ieee_frcp(x, "rd")}

    def unary_case(dtype: str, fns: dict, x: torch.Tensor, tag: str) -> Case:
        names = list(fns)
        F, N = len(names), x.numel()

        def program():
            @T.prim_func
            def main(X: T.Tensor((N,), dtype), Y: T.Tensor((F, N), dtype)):
                with T.Kernel(N // 1024, threads=256) as bx:
                    for f_idx, name in enumerate(names):
                        for i in T.Parallel(1024):
                            Y[f_idx, bx * 1024 + i] = fns[name](X[bx * 1024 + i])
            return main

        return Case(f"{tag}_{dtype}", program, [
            Arg("X", dtype, (N,), x),
            Arg("Y", dtype, (F, N), poison((F, N), dtype), out=True, compare={"rows": names, "mode": "math"}),
        ])

    xf = float_mixture(1 << 16, 1)
    cases.append(unary_case("float32", unary, xf, "math"))
    cases.append(unary_case("float32", fast, xf, "fastmath"))
    for dt in ("float16", "bfloat16"):
        cases.append(unary_case(dt, unary, all_16bit_patterns(TORCH_DTYPE[dt]), "math"))

    # -- binary / ternary arithmetic ------------------------------------------------------------------------------
    binary = {
        "add": lambda a, b, c: a + b, "sub": lambda a, b, c: a - b, "mul": lambda a, b, c: a * b,
        "div": lambda a, b, c: a / b, "mul_add": lambda a, b, c: a * b + c, "pow": lambda a, b, c: T.pow(a, b),
        "fmod": lambda a, b, c: T.fmod(a, b), "max": lambda a, b, c: T.max(a, b), "min": lambda a, b, c: T.min(a, b),
    }
    ieee = {f"ieee_{op}_{m}": (lambda op, m: lambda a, b, c: getattr(T, f"ieee_{op}")(a, b, rounding_mode=m))(op, m)
            for op in ("add", "sub", "mul", "fdiv") for m in ("rn", "rz", "ru", "rd")}
    ieee.update({f"ieee_fmaf_{m}": (lambda m: lambda a, b, c: T.ieee_fmaf(a, b, c, rounding_mode=m))(m)
                 for m in ("rn", "rz", "ru", "rd")})

    def binary_case(dtype: str, fns: dict, a, b, c, tag: str) -> Case:
        names = list(fns)
        F, N = len(names), a.numel()

        def program():
            @T.prim_func
            def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype),
                     Y: T.Tensor((F, N), dtype)):
                with T.Kernel(N // 1024, threads=256) as bx:
                    for f_idx, name in enumerate(names):
                        for i in T.Parallel(1024):
                            Y[f_idx, bx * 1024 + i] = fns[name](A[bx * 1024 + i], B[bx * 1024 + i], C[bx * 1024 + i])
            return main

        return Case(f"{tag}_{dtype}", program, [
            Arg("A", dtype, (N,), a), Arg("B", dtype, (N,), b), Arg("C", dtype, (N,), c),
            Arg("Y", dtype, (F, N), poison((F, N), dtype), out=True, compare={"rows": names, "mode": "math"}),
        ])

    n = 1 << 15
    a32 = float_mixture(n, 2)
    b32 = float_mixture(n, 3)[torch.randperm(n, generator=gen(4))]
    c32 = float_mixture(n, 5)[torch.randperm(n, generator=gen(6))]
    # a share of exact-cancellation and near-cancellation cases for the fused multiply-add question
    k = n // 8
    c32[-k:] = -(a32[-k:].double() * b32[-k:].double()).float()
    cases.append(binary_case("float32", binary, a32, b32, c32, "arith"))
    cases.append(binary_case("float32", ieee, a32, b32, c32, "ieee"))
    for dt in ("float16", "bfloat16"):
        td = TORCH_DTYPE[dt]
        g = gen(7 if dt == "float16" else 8)
        pat = all_16bit_patterns(td)
        idx_a = torch.randint(0, 65536, (n,), generator=g)
        idx_b = torch.randint(0, 65536, (n,), generator=g)
        a16 = torch.cat([pat[idx_a[: n // 2]], a32[: n // 2].to(td)])
        b16 = torch.cat([pat[idx_b[: n // 2]], b32[: n // 2].to(td)])
        c16 = torch.cat([pat[torch.randint(0, 65536, (n // 2,), generator=g)], c32[: n // 2].to(td)])
        fns = {k_: v for k_, v in binary.items() if dt != "bfloat16" or k_ not in ("pow", "fmod")}  # float-only in TVM
        cases.append(binary_case(dt, fns,
                                 a16, b16, c16, "arith"))

    # -- casts between every pair -------------------------------------------------------------------------------
    cast_types = ["float32", "float16", "bfloat16", "int32", "int8"]
    ncast = 1 << 15
    cast_inputs = {
        "float32": float_mixture(ncast, 9),
        "float16": all_16bit_patterns(torch.float16)[torch.randperm(65536, generator=gen(10))[:ncast]],
        "bfloat16": all_16bit_patterns(torch.bfloat16)[torch.randperm(65536, generator=gen(11))[:ncast]],
        "int32": int32_mixture(ncast, 12),
        "int8": int8_all(ncast),
    }
    # fp32 values on and beside the 16-bit formats' rounding ties
    f32 = cast_inputs["float32"]
    base16 = all_16bit_patterns(torch.float16)[torch.randperm(65536, generator=gen(13))[:4096]].float()
    f32[-8192:-4096] = torch.where(base16.isfinite(), base16 * (1 + 2.0 ** -11), 1.25)
    basebf = all_16bit_patterns(torch.bfloat16)[torch.randperm(65536, generator=gen(14))[:4096]].float()
    f32[-4096:] = torch.where(basebf.isfinite(), basebf * (1 + 2.0 ** -8), 1.25)
    pairs = [(s, d) for s in cast_types for d in cast_types if s != d]

    def cast_program():
        @T.prim_func
        def main(X0: T.Tensor((ncast,), "float32"), X1: T.Tensor((ncast,), "float16"),
                 X2: T.Tensor((ncast,), "bfloat16"), X3: T.Tensor((ncast,), "int32"), X4: T.Tensor((ncast,), "int8"),
                 Y: T.Tensor((len(pairs), ncast), "int32")):
            srcs = {"float32": X0, "float16": X1, "bfloat16": X2, "int32": X3, "int8": X4}
            with T.Kernel(ncast // 1024, threads=256) as bx:
                for p_idx, (s, d) in enumerate(pairs):
                    for i in T.Parallel(1024):
                        # the converted value's bits, widened to int32 (sign-extended for 16 and 8 bits)
                        v = T.cast(srcs[s][bx * 1024 + i], d)
                        if d in ("float16", "bfloat16"):
                            Y[p_idx, bx * 1024 + i] = T.cast(T.reinterpret(v, "int16"), "int32")
                        elif d == "float32":
                            Y[p_idx, bx * 1024 + i] = T.reinterpret(v, "int32")
                        else:
                            Y[p_idx, bx * 1024 + i] = T.cast(v, "int32")
        return main

    cases.append(Case("casts", cast_program, [
        *(Arg(f"X{j}", t, (ncast,), cast_inputs[t]) for j, t in enumerate(cast_types)),
        Arg("Y", "int32", (len(pairs), ncast), poison((len(pairs), ncast), "int32"), out=True,
            compare={"rows": [f"{s}->{d}" for s, d in pairs], "mode": "cast"}),
    ]))

    # -- integer division and remainder ---------------------------------------------------------------------------
    nint = 1 << 15
    for dt in ("int32", "int8", "int64"):
        g = gen(20)
        if dt == "int8":
            a = int8_all(nint)
            b = torch.randint(-128, 128, (nint,), generator=g).to(torch.int8)
            b[b == 0] = -1
            bad = (a == -128) & (b == -1)
            b[bad] = -2  # INT_MIN / -1 is undefined in C (the result overflows)
        else:
            a = int32_mixture(nint, 21).to(TORCH_DTYPE[dt])
            if dt == "int64":
                a = a * torch.randint(1, 1 << 20, (nint,), generator=g) - 12345
            b = torch.cat([torch.tensor([-1, 1, -2, 2, 3, -3, 7, -7, 2**31 - 1, -(2**31)]),
                           torch.randint(-9, 10, (nint // 2,), generator=g),
                           torch.randint(-(2**20), 2**20, (nint,), generator=g)])[:nint].to(TORCH_DTYPE[dt])
            b[b == 0] = 5
            lo = torch.iinfo(TORCH_DTYPE[dt]).min
            b[(a == lo) & (b == -1)] = -2
        ops = {
            "floordiv": lambda x, y: T.floordiv(x, y), "floormod": lambda x, y: T.floormod(x, y),
            "truncdiv": lambda x, y: tirx.truncdiv(x, y), "truncmod": lambda x, y: tirx.truncmod(x, y),
            "floordiv_c3": lambda x, y: T.floordiv(x, 3), "floormod_c3": lambda x, y: T.floormod(x, 3),
            "floordiv_cm7": lambda x, y: T.floordiv(x, -7), "floormod_cm7": lambda x, y: T.floormod(x, -7),
            "truncdiv_cm7": lambda x, y: tirx.truncdiv(x, -7), "truncmod_c16": lambda x, y: tirx.truncmod(x, 16),
            "floordiv_c16": lambda x, y: T.floordiv(x, 16), "floormod_c16": lambda x, y: T.floormod(x, 16),
            "shr": lambda x, y: T.shift_right(x, 3),
        }
        names = list(ops)

        def int_program(dt=dt, names=names, ops=ops):
            @T.prim_func
            def main(A: T.Tensor((nint,), dt), B: T.Tensor((nint,), dt), Y: T.Tensor((len(names), nint), dt)):
                with T.Kernel(nint // 1024, threads=256) as bx:
                    for o_idx, name in enumerate(names):
                        for i in T.Parallel(1024):
                            Y[o_idx, bx * 1024 + i] = ops[name](A[bx * 1024 + i], B[bx * 1024 + i])
            return main

        cases.append(Case(f"intdiv_{dt}", int_program, [
            Arg("A", dt, (nint,), a), Arg("B", dt, (nint,), b),
            Arg("Y", dt, (len(names), nint), poison((len(names), nint), dt), out=True,
                compare={"rows": names, "mode": "exact"}),
        ]))

    # -- warp shuffles ----------------------------------------------------------------------------------------------
    threads = 256
    for dt in ("float32", "float16", "bfloat16", "int32"):
        def shfl_program(dt=dt):
            @T.prim_func
            def main(A: T.Tensor((threads,), dt), Out: T.Tensor((9, threads), dt)):
                with T.Kernel(1, threads=threads) as bx:
                    tx = T.get_thread_binding()
                    v = A[tx]
                    Out[0, tx] = T.shfl_xor(v, 1)
                    Out[1, tx] = T.shfl_xor(v, 16)
                    Out[2, tx] = T.shfl_down(v, 2)
                    Out[3, tx] = T.shfl_down(v, 31)
                    Out[4, tx] = T.shfl_up(v, 3)
                    Out[5, tx] = T.shfl_up(v, 17)
                    Out[6, tx] = T.shfl_sync(v, 5)
                    Out[7, tx] = T.shfl_sync(v, tx * 7 + 3)
                    Out[8, tx] = T.shfl_xor(v, 7)
            return main

        x = all_16bit_patterns(TORCH_DTYPE[dt])[torch.randperm(65536, generator=gen(30))[:threads]] \
            if dt in ("float16", "bfloat16") else (float_mixture(threads, 31) if dt == "float32"
                                                   else int32_mixture(threads, 32))
        cases.append(Case(f"shfl_{dt}", shfl_program, [
            Arg("A", dt, (threads,), x),
            Arg("Out", dt, (9, threads), poison((9, threads), dt), out=True,
                compare={"rows": ["xor1", "xor16", "down2", "down31", "up3", "up17", "idx5", "idx7t+3", "xor7"],
                         "mode": "exact"}),
        ]))

    # -- block reductions across threads ----------------------------------------------------------------------------
    rows, cols = 16, 256
    for dt in ("float32", "float16", "int32"):
        def reduce_program(dt=dt):
            acc = "int32" if dt == "int32" else "float32"

            @T.prim_func
            def main(X: T.Tensor((rows, cols), dt), S: T.Tensor((5, rows), acc)):
                with T.Kernel(1, threads=128) as bx:
                    tile = T.alloc_fragment((rows, cols), acc)
                    r = T.alloc_fragment((rows,), acc)
                    T.copy(X, tile)
                    T.reduce_sum(tile, r, dim=1)
                    T.copy(r, S[0, :])
                    T.reduce_max(tile, r, dim=1)
                    T.copy(r, S[1, :])
                    T.reduce_min(tile, r, dim=1)
                    T.copy(r, S[2, :])
                    T.reduce_abssum(tile, r, dim=1)
                    T.copy(r, S[3, :])
                    T.reduce_absmax(tile, r, dim=1)
                    T.copy(r, S[4, :])
            return main

        if dt == "int32":
            x = torch.randint(-1000, 1000, (rows, cols), generator=gen(40)).int()
            x[x == 0] = 1
        else:
            x = (torch.randn(rows, cols, generator=gen(41)) * torch.exp2(torch.randint(-8, 8, (rows, cols),
                                                                                        generator=gen(42)).float()))
            x[x == 0] = 0.5
            x[3, 17] = -0.0
            x = x.to(TORCH_DTYPE[dt])
        acc = "int32" if dt == "int32" else "float32"
        cases.append(Case(f"reduce_{dt}", reduce_program, [
            Arg("X", dt, (rows, cols), x),
            Arg("S", acc, (5, rows), poison((5, rows), acc), out=True,
                compare={"rows": ["sum", "max", "min", "abssum", "absmax"], "mode": "exact"}),
        ]))

    # -- scalar (not vectorized) arithmetic: one element a thread, the contraction question in plain C ------------
    nsc = 1 << 14
    scalar_ops = {
        "mul_add": lambda a, b, c: a * b + c, "mul_sub": lambda a, b, c: a * b - c,
        "sub_mul": lambda a, b, c: c - a * b, "two_products": lambda a, b, c: a * b + c * c,
        "mul": lambda a, b, c: a * b, "add": lambda a, b, c: a + c, "div": lambda a, b, c: a / b,
    }
    for dt in ("float32", "float16", "bfloat16"):
        names = list(scalar_ops) + (["ieee_fmaf_rn"] if dt == "float32" else [])

        def scalar_program(dt=dt, names=names):
            @T.prim_func
            def main(A: T.Tensor((nsc,), dt), B: T.Tensor((nsc,), dt), C: T.Tensor((nsc,), dt),
                     Y: T.Tensor((len(names), nsc), dt)):
                with T.Kernel(nsc // 256, threads=256) as bx:
                    tx = T.get_thread_binding()
                    j = bx * 256 + tx
                    for o_idx, name in enumerate(names):
                        if name == "ieee_fmaf_rn":
                            Y[o_idx, j] = T.ieee_fmaf(A[j], B[j], C[j])
                        else:
                            Y[o_idx, j] = scalar_ops[name](A[j], B[j], C[j])
            return main

        td = TORCH_DTYPE[dt]
        sa, sb, sc = a32[-nsc:].to(td), b32[-nsc:].to(td), c32[-nsc:].to(td)  # fp32: the last 4096 cancel exactly
        if dt != "float32":  # the second half: c = -(a*b) rounded to the 16-bit type, a near-cancellation
            sc[nsc // 2:] = (-(sa[nsc // 2:].double() * sb[nsc // 2:].double())).to(td)
        cases.append(Case(f"scalar_arith_{dt}", scalar_program, [
            Arg("A", dt, (nsc,), sa), Arg("B", dt, (nsc,), sb), Arg("C", dt, (nsc,), sc),
            Arg("Y", dt, (len(names), nsc), poison((len(names), nsc), dt), out=True,
                compare={"rows": names, "mode": "math"}),
        ]))

    # -- warp and block votes, matches ----------------------------------------------------------------------------
    def vote_program():
        @T.prim_func
        def main(A: T.Tensor((threads,), "int32"), Out: T.Tensor((6, threads), "int32"),
                 Mask: T.Tensor((3, threads), "int64")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                Out[0, tx] = T.syncthreads_count(A[tx] > 0)
                Out[1, tx] = T.syncthreads_and(A[tx] > -5)
                Out[2, tx] = T.syncthreads_or(A[tx] > 4)
                Out[3, tx] = T.any_sync(A[tx] > 3)
                Out[4, tx] = T.all_sync(A[tx] > -4)
                Out[5, tx] = T.__ffs(T.ballot(A[tx] > 0)) - 1
                Mask[0, tx] = T.cast(T.ballot_sync(A[tx] > 0), "int64")
                Mask[1, tx] = T.cast(T.match_any_sync(A[tx] % 3), "int64")
                Mask[2, tx] = T.cast(T.match_all_sync(A[tx] // 100), "int64")
        return main

    va = torch.randint(-5, 5, (threads,), generator=gen(80)).int()
    va[va == 0] = 1
    va[64:96] = 7  # a warp where every lane agrees
    cases.append(Case("votes", vote_program, [
        Arg("A", "int32", (threads,), va),
        Arg("Out", "int32", (6, threads), poison((6, threads), "int32"), out=True,
            compare={"rows": ["syncthreads_count", "syncthreads_and", "syncthreads_or", "any_sync", "all_sync",
                              "ffs_ballot"], "mode": "exact"}),
        Arg("Mask", "int64", (3, threads), poison((3, threads), "int64"), out=True,
            compare={"rows": ["ballot_sync", "match_any_sync", "match_all_sync"], "mode": "exact"}),
    ]))

    # -- prefix sums (scan.h fixes the order: float sums bit-exact) -----------------------------------------------
    H, W = 32, 128
    for dim, reverse in ((1, False), (0, True)):
        def scan_program(dim=dim, reverse=reverse):
            @T.prim_func
            def main(A: T.Tensor((H, W), "float32"), B: T.Tensor((H, W), "float32")):
                with T.Kernel(1, threads=128):
                    S = T.alloc_shared((H, W), "float32")
                    T.copy(A, S)
                    T.cumsum(S, dim=dim, reverse=reverse)
                    T.copy(S, B)
            return main

        xs = torch.randn(H, W, generator=gen(90 + dim)) * torch.exp2(torch.randint(-10, 10, (H, W), generator=gen(92)).float())
        xs[xs == 0] = 0.5
        cases.append(Case(f"cumsum_dim{dim}{'_reverse' if reverse else ''}", scan_program, [
            Arg("A", "float32", (H, W), xs),
            Arg("B", "float32", (H, W), poison((H, W), "float32"), out=True, compare={"mode": "exact"}),
        ]))

    # -- atomics -------------------------------------------------------------------------------------------------
    nat, bins = 1 << 14, 64

    def atomic_program():
        @T.prim_func
        def main(X: T.Tensor((nat,), "float32"), I: T.Tensor((nat,), "int32"), Xh: T.Tensor((nat,), "float16"),
                 Idx: T.Tensor((nat,), "int32"), Sf: T.Tensor((bins,), "float32"), Si: T.Tensor((bins,), "int32"),
                 Sh: T.Tensor((bins,), "float16"), Xb: T.Tensor((nat,), "bfloat16"), Sb: T.Tensor((bins,), "bfloat16"),
                 Mx: T.Tensor((bins,), "float32"), Mn: T.Tensor((bins,), "float32"),
                 Imx: T.Tensor((bins,), "int32"), Counter: T.Tensor((1,), "int32"), Tickets: T.Tensor((nat,), "int32")):
            with T.Kernel(nat // 256, threads=256) as bx:
                tx = T.get_thread_binding()
                j = bx * 256 + tx
                T.atomic_add(Sf[Idx[j]], X[j])
                T.atomic_add(Si[Idx[j]], I[j])
                T.atomic_add(Sh[Idx[j]], Xh[j])
                T.atomic_add(Sb[Idx[j]], Xb[j])
                T.atomic_max(Mx[Idx[j]], X[j])
                T.atomic_min(Mn[Idx[j]], X[j])
                T.atomic_max(Imx[Idx[j]], I[j])
                Tickets[j] = T.atomic_add(Counter[0], 1, return_prev=True)
        return main

    g = gen(50)
    xa = torch.randn(nat, generator=g)
    xa[xa == 0] = 0.25
    cases.append(Case("atomics", atomic_program, [
        Arg("X", "float32", (nat,), xa),
        Arg("I", "int32", (nat,), torch.randint(-(2**20), 2**20, (nat,), generator=g).int()),
        Arg("Xh", "float16", (nat,), (torch.rand(nat, generator=g) * 0.25 + 0.01).half()),
        Arg("Idx", "int32", (nat,), torch.randint(0, bins, (nat,), generator=g).int()),
        Arg("Sf", "float32", (bins,), torch.full((bins,), 0.5), out=True, keep_init=True, compare={"mode": "sum", "rtol": 1e-4}),
        Arg("Si", "int32", (bins,), torch.full((bins,), 3, dtype=torch.int32), out=True, keep_init=True, compare={"mode": "exact"}),
        Arg("Sh", "float16", (bins,), torch.full((bins,), 0.5, dtype=torch.float16), out=True, keep_init=True,
            compare={"mode": "sum", "rtol": 2e-2}),
        Arg("Xb", "bfloat16", (nat,), (torch.rand(nat, generator=g) * 0.25 + 0.01).bfloat16()),
        Arg("Sb", "bfloat16", (bins,), torch.full((bins,), 0.5, dtype=torch.bfloat16), out=True, keep_init=True,
            compare={"mode": "sum", "rtol": 0.1}),  # 8 bits: both orders land ~4% from the exact sum
        Arg("Mx", "float32", (bins,), torch.full((bins,), -1e30), out=True, keep_init=True, compare={"mode": "exact"}),
        Arg("Mn", "float32", (bins,), torch.full((bins,), 1e30), out=True, keep_init=True, compare={"mode": "exact"}),
        Arg("Imx", "int32", (bins,), torch.full((bins,), -(2**31), dtype=torch.int32), out=True, keep_init=True,
            compare={"mode": "exact"}),
        Arg("Counter", "int32", (1,), torch.full((1,), 10, dtype=torch.int32), out=True, keep_init=True, compare={"mode": "exact"}),
        Arg("Tickets", "int32", (nat,), poison((nat,), "int32"), out=True, compare={"mode": "permutation"}),
    ]))

    # -- barriers with a shared-memory exchange ---------------------------------------------------------------------
    bt = 256

    def barrier_program():
        @T.prim_func
        def main(A: T.Tensor((4, bt), "int32"), Out: T.Tensor((4, bt), "int32")):
            with T.Kernel(4, threads=bt) as bx:
                tx = T.get_thread_binding()
                buf = T.alloc_shared((bt,), "int32")
                acc = T.alloc_var("int32")
                acc = A[bx, tx]
                for r in T.serial(8):
                    buf[tx] = acc
                    T.sync_threads()
                    acc = acc * 3 + buf[(tx * 37 + r * 11 + 5) % bt]
                    T.sync_threads()
                Out[bx, tx] = acc
        return main

    cases.append(Case("barrier_exchange", barrier_program, [
        Arg("A", "int32", (4, bt), torch.randint(-1000, 1000, (4, bt), generator=gen(60)).int() | 1),
        Arg("Out", "int32", (4, bt), poison((4, bt), "int32"), out=True, compare={"mode": "exact"}),
    ]))

    # -- vectorized copies through shared memory (bits, NaN payloads included) ------------------------------------
    M, Nc = 64, 256
    for dt in ("float16", "bfloat16", "int8", "float32"):
        def copy_program(dt=dt):
            @T.prim_func
            def main(A: T.Tensor((M, Nc), dt), B: T.Tensor((M, Nc), dt)):
                with T.Kernel(M // 16, threads=128) as bx:
                    s = T.alloc_shared((16, Nc), dt)
                    T.copy(A[bx * 16, 0], s)
                    T.copy(s, B[bx * 16, 0])
            return main

        if dt in ("float16", "bfloat16"):
            x = all_16bit_patterns(TORCH_DTYPE[dt])[torch.randperm(65536, generator=gen(70))[:M * Nc]].reshape(M, Nc)
        elif dt == "int8":
            x = int8_all(M * Nc).reshape(M, Nc)
        else:
            x = torch.randint(-(2**31), 2**31, (M * Nc,), generator=gen(71), dtype=torch.int64).to(torch.int32) \
                .view(torch.float32).reshape(M, Nc)  # every bit pattern kind, signalling NaNs included
        cases.append(Case(f"copy_{dt}", copy_program, [
            Arg("A", dt, (M, Nc), x),
            Arg("B", dt, (M, Nc), poison((M, Nc), dt), out=True, compare={"mode": "exact"}),
        ]))

    return cases


# ---- bundle -----------------------------------------------------------------------------------------------------

def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def compile_case(case: Case):
    import tilelang

    kernel = tilelang.compile(case.program(), target=f"musa -arch={ARCH}", pass_configs=case.pass_configs)
    source = kernel.get_kernel_source()
    body = "\n".join(line for line in source.splitlines() if not line.startswith("#include"))
    bad = sorted(set(NOT_GENERIC.findall(body)))
    return kernel, source + "\n" + kernel.get_host_source(), bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=HERE / "bundle")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--no-sim", action="store_true", help="write kernels and inputs only (no simulator run)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    args = parser.parse_args(argv)

    cases = build_cases()
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.name in wanted]
    bundle: Path = args.bundle
    if bundle.exists() and not args.only:
        shutil.rmtree(bundle)
    for sub in ("kernels", "data", "sim"):
        (bundle / sub).mkdir(parents=True, exist_ok=True)
    meta_path = bundle / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() and args.only else {}

    for case in cases:
        t0 = time.time()
        try:
            kernel, text, bad = compile_case(case)
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the others still run
            print(f"FAILED {case.name}: {type(e).__name__}: {str(e).splitlines()[-1] if str(e) else ''}", file=sys.stderr)
            continue
        if bad:
            print(f"skip {case.name}: not generic ({', '.join(bad)})", file=sys.stderr)
            continue
        (bundle / "kernels" / f"{case.name}.mu").write_text(text)
        tensors = [a.init.clone().contiguous() for a in case.args]
        for a, t in zip(case.args, tensors):
            assert tuple(t.shape) == tuple(a.shape) and t.dtype == TORCH_DTYPE[a.dtype], (case.name, a.name)
            if a.out and not a.keep_init:
                t.view(torch.uint8 if t.element_size() == 1 else TORCH_DTYPE[f"int{8 * t.element_size()}"]).fill_(-1)
            else:
                (bundle / "data" / f"{case.name}.{a.name}.bin").write_bytes(tensor_bytes(t))
        if not args.no_sim:
            kernel(*tensors)
            for a, t in zip(case.args, tensors):
                if a.out:
                    (bundle / "sim" / f"{case.name}.{a.name}.bin").write_bytes(tensor_bytes(t))
        meta[case.name] = {
            "note": case.note,
            "args": [{"name": a.name, "dtype": a.dtype, "shape": list(a.shape), "out": a.out, "init": not a.out or a.keep_init,
                      "bytes": a.init.numel() * a.init.element_size(), "compare": a.compare} for a in case.args],
        }
        print(f"{case.name}: {time.time() - t0:.1f} s", flush=True)

    meta_path.write_text(json.dumps(meta, indent=1))
    # the driver's manifest: `kernel NAME NARGS`, then per argument `arg ARG BYTES OUT(0|1) INIT(0|1)`
    lines = []
    for name, m in meta.items():
        lines.append(f"kernel {name} {len(m['args'])}")
        lines += [f"arg {a['name']} {a['bytes']} {int(a['out'])} {int(a['init'])}" for a in m["args"]]
    (bundle / "manifest.txt").write_text("\n".join(lines) + "\n")
    print(f"{len(meta)} kernels in {bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
