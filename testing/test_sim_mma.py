"""The simulator's matrix built-ins (src/tl_templates/sim/sim/): mp_31 WMMA, mp_22 warp MMA and mp_31 SQMMA.

Every test draws fresh operands, places them where the hardware expects them -- per-lane register images built
with the lane/value maps of docs MUSA_LAYOUTS.md sections 1-2, or an image of shared memory built with the SQMMA
addressing and swizzle of section 3, all written here from the document independently of the simulator -- runs a
handwritten kernel (testing/sim_kernels/mma_*.mu), and reassembles D with the documented accumulator map. The
reference accumulates in float32 in the simulator's documented order (C first, then k ascending, each product and
sum rounded to fp32), so float results must match bit for bit; integers wrap modulo 2^32.
"""

from __future__ import annotations

import ctypes
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
KERNELS = Path(__file__).resolve().parent / "sim_kernels"

ILLEGAL_INSTRUCTION = 715
LAUNCH_FAILURE = 719


from sim_build import SimLibrary as Kernel  # noqa: E402
from tilelang_musa.jit.toolchains import SIM_FAST_MATH_FLAGS  # noqa: E402
from sim_build import build_shared, sim_compile_command as compile_command  # noqa: E402


@pytest.fixture(scope="module")
def build(session_dir):
    """build(name, arch) -> Kernel, built once per test session (sim_build.build_shared)."""
    cache: dict[tuple[str, int], Kernel] = {}

    def _build(name: str, arch: int) -> Kernel:
        if (name, arch) not in cache:
            source = KERNELS / f"{name}.mu"
            output, stderr = build_shared(session_dir / "sim_kernels", f"{name}_{arch}",
                                          lambda out: compile_command(source, out, arch))
            if output is None:
                pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
            cache[(name, arch)] = Kernel(output, source)
        return cache[(name, arch)]

    return _build


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


# ---- element formats ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    name: str
    bits: int
    is_float: bool


F16, BF16, TF32 = Format("f16", 16, True), Format("bf16", 16, True), Format("tf32", 32, True)
S8, U8 = Format("s8", 8, False), Format("u8", 8, False)
E4M3, E5M2 = Format("e4m3", 8, True), Format("e5m2", 8, True)
# mp_31 mma_type codes (mutlass MP31::TceABDtype) for (A, B)
MMA_TYPE = {(U8, U8): 0, (S8, S8): 1, (F16, F16): 2, (BF16, BF16): 3, (TF32, TF32): 4, (E4M3, E4M3): 5,
            (E5M2, E5M2): 6, (E4M3, E5M2): 11, (E5M2, E4M3): 12}  # fmt: skip


def draw(fmt: Format, shape, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random elements: (raw bits as uint32, the value the matrix unit sees: float32 or int64)."""
    x = rng.standard_normal(shape).astype(np.float32)
    if fmt is F16:
        h = x.astype(np.float16)
        return h.view(np.uint16).astype(np.uint32), h.astype(np.float32)
    if fmt is TF32:  # the low 13 bits are random and must be ignored
        bits = x.view(np.uint32)
        return bits.copy(), (bits & np.uint32(0xFFFFE000)).view(np.float32)
    if fmt in (BF16, E4M3, E5M2):
        dtype, view = {"bf16": (torch.bfloat16, torch.int16), "e4m3": (torch.float8_e4m3fn, torch.int8),
                       "e5m2": (torch.float8_e5m2, torch.int8)}[fmt.name]  # fmt: skip
        t = torch.from_numpy(x * (8 if fmt.bits == 8 else 1)).to(dtype)
        raw = t.view(view).numpy().astype(np.int64) & ((1 << fmt.bits) - 1)
        return raw.astype(np.uint32), t.to(torch.float32).numpy()
    lo, hi = (-128, 128) if fmt is S8 else (0, 256)
    v = rng.integers(lo, hi, size=shape)
    return (v & 0xFF).astype(np.uint32), v.astype(np.int64)


def draw_accumulator(is_float: bool, shape, rng) -> np.ndarray:
    """C as 32-bit words: float32 bits, or int32 two's complement."""
    if is_float:
        return rng.standard_normal(shape).astype(np.float32).view(np.uint32)
    return rng.integers(-(2**31), 2**31, size=shape).astype(np.int64).astype(np.uint32)


def mma_reference(c_words: np.ndarray, a: np.ndarray, b: np.ndarray, is_float: bool, use_c: bool = True):
    """D = C + sum_k A[:, k] B[:, k]^T in the documented order; a is (M, K), b is (N, K); words in, words out."""
    if is_float:
        acc = c_words.view(np.float32).copy() if use_c else np.zeros(c_words.shape, np.float32)
        for k in range(a.shape[1]):
            acc = (acc + (a[:, k, None] * b[None, :, k]).astype(np.float32)).astype(np.float32)
        return acc.view(np.uint32)
    acc = c_words.astype(np.int64) if use_c else np.zeros(c_words.shape, np.int64)
    acc = acc + a.astype(np.int64) @ b.astype(np.int64).T
    return (acc & 0xFFFFFFFF).astype(np.uint32)


# ---- register images ------------------------------------------------------------------------------------------------


def pack(raw: np.ndarray, lanes: int, bits: int, operand_map) -> np.ndarray:
    """Per-lane register words (lanes, words) holding raw[row, col] at the (lane, value) the map gives."""
    rows, cols = raw.shape
    values = rows * cols // lanes
    per_word = 32 // bits
    t, v = np.meshgrid(np.arange(lanes), np.arange(values), indexing="ij")
    r, k = operand_map(t, v, rows, cols, bits)
    assert len(set(zip(r.ravel().tolist(), k.ravel().tolist()))) == rows * cols, "the map must be a bijection"
    words = np.zeros((lanes, values // per_word), dtype=np.uint64)
    np.add.at(words, (t, v // per_word), raw[r, k].astype(np.uint64) << ((v % per_word) * bits).astype(np.uint64))
    return words.astype(np.uint32)


def unpack(words: np.ndarray, rows: int, cols: int, accumulator_map) -> np.ndarray:
    lanes, count = words.shape
    t, v = np.meshgrid(np.arange(lanes), np.arange(count), indexing="ij")
    m, n = accumulator_map(t, v, rows, cols)
    out = np.zeros((rows, cols), dtype=np.uint32)
    out[m, n] = words
    return out


# MUSA_LAYOUTS.md section 1 (mp_31 WMMA, 32 lanes), p = 32 / bits elements per register.
def mp31_k_major(t, v, rows, depth, bits):
    p = 32 // bits
    blocks = depth // (4 * p)
    v0, v1, v2 = v % p, v // p % blocks, v // (p * blocks)
    return t // 4 + 8 * v2, p * (t % 4) + v0 + 4 * p * v1


def mp31_mn_major(t, v, rows, depth, bits):
    p = 32 // bits
    blocks = rows // 8
    t0, t1 = t % (bits // 4), t // (bits // 4)
    v0, v1, v2 = v % p, v // p % blocks, v // (p * blocks)
    return p * t0 + v0 + 8 * v1, t1 + (128 // bits) * v2


def mp31_accumulator(t, v, rows, cols):
    return t // 8 + 4 * (v // (cols // 8)), t % 8 + 8 * (v % (cols // 8))


# MUSA_LAYOUTS.md section 2 (mp_22 m32n32, 128 lanes).
def mp22_k_major(t, v, rows, depth, bits):
    if bits == 16:
        return ((t >> 2) & 15) + 16 * (v >> 1), 2 * (t & 3) + (v & 1) + 8 * (t >> 6)
    if bits == 32:
        return ((t >> 2) & 15) + 16 * v, (t & 3) + 4 * (t >> 6)
    return ((t >> 2) & 15) + 16 * (v >> 2), 4 * (t & 3) + (v & 3) + 16 * (t >> 6)


def mp22_mn_major(t, v, rows, depth, bits):
    if bits == 16:
        return 2 * (t & 7) + (v & 1) + 16 * (v >> 1), t >> 3
    if bits == 32:
        return (t & 15) + 16 * v, t >> 4
    return 4 * (t & 3) + (v & 3) + 16 * (v >> 2), t >> 2


def mp22_accumulator(t, v, rows, cols):
    return ((t >> 3) & 3) + 4 * (t >> 6) + 8 * (v >> 1), (t & 7) + 8 * ((t >> 5) & 1) + 16 * (v & 1)


# MUSA_LAYOUTS.md section 3 (SQMMA accumulator, 128 threads of a squad).
def squad_accumulator(t, v, rows, cols):
    w, lane, blocks = t // 32, t % 32, cols // 16
    return lane // 8 + 4 * w + 16 * (v // (2 * blocks)), lane % 8 + 8 * (v % 2) + 16 * (v // 2 % blocks)


# ---- mp_31 WMMA ------------------------------------------------------------------------------------------------------

WMMA_SHAPES = [(16, 8, 4), (16, 8, 8), (16, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 32), (16, 16, 64)]
WMMA_FORMS = {  # shape -> element widths it takes (mutlass MP31_MxNxK atoms)
    (16, 8, 4): (32,), (16, 8, 8): (16, 32), (16, 8, 16): (16, 8), (8, 16, 16): (16, 8),
    (16, 16, 16): (16, 32, 8), (16, 16, 32): (16, 8), (16, 16, 64): (8,),
}  # fmt: skip
TYPE_PAIRS = {16: [(F16, F16), (BF16, BF16)], 32: [(TF32, TF32)],
              8: [(S8, S8), (U8, U8), (E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2), (E5M2, E4M3)]}  # fmt: skip
WMMA_CASES = [(shape, pair) for shape in WMMA_SHAPES for bits in WMMA_FORMS[shape] for pair in TYPE_PAIRS[bits]]
WMMA_PARAMS = 15  # mma_wmma.mu's Param enum


def wmma_params(shape, pair, layout_num, **overrides) -> np.ndarray:
    m, n, k = shape
    bits = pair[0].bits
    p = dict(shape=WMMA_SHAPES.index(shape), a_words=m * k * bits // 1024, b_words=n * k * bits // 1024,
             c_words=m * n // 32, arg5=0, arg6=0, arg7=0, sat=0, signed=int(pair[0] is S8), layout=layout_num,
             type=MMA_TYPE[pair], alias=0, odd_lane=-1, odd_layout=0, exiting_lane=-1)  # fmt: skip
    p.update(overrides)
    assert len(p) == WMMA_PARAMS
    return np.array(list(p.values()), dtype=np.int32)


def run_wmma(lib, shape, pair, tnsp_a, tnsp_b, rng, warps=2, alias=0):
    """Run one problem per warp; returns (D words per warp, expected D words per warp)."""
    m, n, k = shape
    fa, fb = pair
    a_map = mp31_mn_major if tnsp_a else mp31_k_major
    b_map = mp31_mn_major if tnsp_b else mp31_k_major
    images, expected = ([], [], []), []
    for _ in range(warps):
        (a_raw, a_val), (b_raw, b_val) = draw(fa, (m, k), rng), draw(fb, (n, k), rng)
        c = draw_accumulator(fa.is_float, (m, n), rng)
        images[0].append(pack(a_raw, 32, fa.bits, a_map))
        images[1].append(pack(b_raw, 32, fb.bits, b_map))
        images[2].append(pack(c, 32, 32, lambda t, v, r, cc, _: mp31_accumulator(t, v, r, cc)))
        expected.append(mma_reference(c, a_val, b_val, fa.is_float))
    a_img, b_img, c_img = (np.ascontiguousarray(np.concatenate(x)) for x in images)
    d_img = np.zeros_like(c_img)
    params = wmma_params(shape, pair, ((tnsp_a << 1) | tnsp_b) ^ 1, alias=alias)
    code = lib.run(ptr(a_img), ptr(b_img), ptr(c_img), ptr(d_img), ptr(params), 32 * warps)
    assert code == 0, lib.error()
    got = [unpack(d_img[32 * w : 32 * (w + 1)], m, n, mp31_accumulator) for w in range(warps)]
    return got, expected


WMMA_IDS = [f"m{m}n{n}k{k}-{a.name}x{b.name}" for (m, n, k), (a, b) in WMMA_CASES]


@pytest.mark.parametrize("shape,pair", WMMA_CASES, ids=WMMA_IDS)
def test_wmma_matches_numpy_for_every_operand_layout(build, shape, pair):
    lib = build("mma_wmma", 310)
    rng = np.random.default_rng(WMMA_CASES.index((shape, pair)))
    for tnsp_a in (0, 1):
        for tnsp_b in (0, 1):
            got, expected = run_wmma(lib, shape, pair, tnsp_a, tnsp_b, rng, alias=tnsp_a ^ tnsp_b)
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(g, e, err_msg=f"tnspA={tnsp_a} tnspB={tnsp_b}")


def wmma_error(lib, threads=32, **overrides) -> tuple[int, str]:
    zeros = np.zeros(threads * 8, dtype=np.uint32)
    d = np.zeros_like(zeros)
    params = wmma_params((16, 8, 16), (F16, F16), 1, **overrides)
    code = lib.run(ptr(zeros), ptr(zeros), ptr(zeros), ptr(d), ptr(params), threads)
    return code, lib.error() if code else ""


@pytest.mark.parametrize("overrides,message", [
    (dict(layout=4), "layout_num 4 is not ((tnspA << 1) | tnspB) ^ 1 in [0, 3]"),
    (dict(type=4), "mma_type 4 (tf32 x tf32) has no m16n8k16 form; this shape takes f16, bf16 and 8-bit"),
    (dict(type=8), "mma_type 8 is not modelled"),
    (dict(type=1, signed=0), "argument 9 (signed) is 0, but must be 1 for mma_type 1 (1 only for S8S8)"),
    (dict(sat=1), "arguments 5-8 must be 0 (got 0, 0, 0, 1)"),
    (dict(arg6=2), "arguments 5-8 must be 0 (got 0, 2, 0, 0)"),
])  # fmt: skip
def test_wmma_rejects_bad_arguments(build, overrides, message):
    lib = build("mma_wmma", 310)
    code, error = wmma_error(lib, **overrides)
    line = lib.line_of("case 2: __musa_wmma_m16n8k16_mma")
    assert code == ILLEGAL_INSTRUCTION
    assert error.startswith("kernel wmma_kernel: block (0,0,0), thread (0,0,0): ")
    assert f"__musa_wmma_m16n8k16_mma (mma_wmma.mu:{line}): {message}" in error


def test_wmma_lanes_must_agree(build):
    lib = build("mma_wmma", 310)
    code, error = wmma_error(lib, odd_lane=5, odd_layout=3)
    assert code == LAUNCH_FAILURE
    assert "the lanes of warp 0 disagree on argument 10: lane 0 passes 1, lane 5 passes 3" in error


def test_wmma_missing_lane_fails_the_launch(build):
    lib = build("mma_wmma", 310)
    code, error = wmma_error(lib, exiting_lane=7)
    line = lib.line_of("case 2: __musa_wmma_m16n8k16_mma")
    assert code == LAUNCH_FAILURE
    assert ("thread (7,0,0): divergent __musa_wmma_m16n8k16_mma: this thread exited while 7 of 32 threads of warp 0 "
            f"wait at __musa_wmma_m16n8k16_mma (mma_wmma.mu:{line})") in error  # fmt: skip


def test_wmma_needs_a_whole_warp(build):
    lib = build("mma_wmma", 310)
    code, error = wmma_error(lib, threads=48)
    assert code == LAUNCH_FAILURE
    assert "thread (32,0,0): __musa_wmma_m16n8k16_mma" in error
    assert "needs all 32 lanes of warp 1, but the block's last warp has only 16 threads" in error


# ---- mp_22 warp MMA -------------------------------------------------------------------------------------------------

MP22_KINDS = [(F16, 16), (BF16, 16), (TF32, 8), (S8, 32)]  # fmma, bfmma, tfmma, imma: format and K


def mp22_params(kind=0, layout=0, **overrides) -> np.ndarray:
    p = dict(kind=kind, arg5=0, arg6=0, arg7=0, arg8=0, arg9=1, layout=layout, odd_lane=-1, odd_layout=0,
             exiting_lane=-1)  # fmt: skip
    p.update(overrides)
    return np.array(list(p.values()), dtype=np.int32)


@pytest.mark.parametrize("kind", range(4), ids=["fmma", "bfmma", "tfmma", "imma"])
@pytest.mark.parametrize("layout", range(4), ids=["TT", "TN", "NT", "NN"])
def test_mp22_mma_matches_numpy(build, kind, layout):
    lib = build("mma_mp22", 220)
    fmt, k = MP22_KINDS[kind]
    rng = np.random.default_rng(100 + 4 * kind + layout)
    a_map = mp22_mn_major if layout & 2 else mp22_k_major  # bit 1: A is M-major
    b_map = mp22_k_major if layout & 1 else mp22_mn_major  # bit 0: B is K-major
    images, expected = ([], [], []), []
    for _ in range(2):  # two 128-lane warps
        (a_raw, a_val), (b_raw, b_val) = draw(fmt, (32, k), rng), draw(fmt, (32, k), rng)
        c = draw_accumulator(fmt.is_float, (32, 32), rng)
        images[0].append(pack(a_raw, 128, fmt.bits, a_map))
        images[1].append(pack(b_raw, 128, fmt.bits, b_map))
        images[2].append(pack(c, 128, 32, lambda t, v, r, cc, _: mp22_accumulator(t, v, r, cc)))
        expected.append(mma_reference(c, a_val, b_val, fmt.is_float))
    a_img, b_img, c_img = (np.ascontiguousarray(np.concatenate(x)) for x in images)
    d_img = np.zeros_like(c_img)
    params = mp22_params(kind, layout)
    assert lib.run(ptr(a_img), ptr(b_img), ptr(c_img), ptr(d_img), ptr(params), 256) == 0, lib.error()
    for w in range(2):
        np.testing.assert_array_equal(unpack(d_img[128 * w : 128 * (w + 1)], 32, 32, mp22_accumulator), expected[w])


def test_mp22_mma_errors(build):
    lib = build("mma_mp22", 220)
    zeros = np.zeros(256 * 8, dtype=np.uint32)
    d = np.zeros_like(zeros)
    line = lib.line_of("case 0: __musa_fmma_m32n32k16_mma")

    def run(threads=256, **overrides):
        code = lib.run(ptr(zeros), ptr(zeros), ptr(zeros), ptr(d), ptr(mp22_params(**overrides)), threads)
        return code, lib.error()

    assert run(layout=5) == (ILLEGAL_INSTRUCTION, "kernel mp22_kernel: block (0,0,0), thread (0,0,0): "
                             f"__musa_fmma_m32n32k16_mma (mma_mp22.mu:{line}): layout 5 is not 0 (TT), 1 (TN), 2 (NT) "
                             "or 3 (NN)")  # fmt: skip
    code, error = run(arg9=0)
    assert code == ILLEGAL_INSTRUCTION and "arguments 5-9 must be 0, 0, 0, 0, 1 as mutlass passes them" in error
    code, error = run(odd_lane=100, odd_layout=2)
    assert code == LAUNCH_FAILURE
    assert "lanes of warp 0 disagree on argument 10: lane 0 passes 0, lane 100 passes 2" in error
    code, error = run(exiting_lane=64)
    assert code == LAUNCH_FAILURE and "divergent __musa_fmma_m32n32k16_mma: this thread exited while 64 of 128" in error
    code, error = run(threads=192)
    assert code == LAUNCH_FAILURE and "needs all 128 lanes of warp 1, but the block's last warp has only 64" in error


# ---- architecture gating --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,arch,builtin,archs", [
    ("mma_wmma", 220, "__musa_wmma_m16n8k4_mma", "mp_31/mp_32 (WMMA on 32-lane warps)"),
    ("mma_sqmma", 220, "__musa_sqmma_m16n64_mma", "mp_31/mp_32 (SQMMA on a squad of 4 warps)"),
    ("mma_mp22", 310, "__musa_fmma_m32n32k16_mma", "mp_22 (MMA on 128-lane warps)"),
])  # fmt: skip
def test_builtins_of_another_arch_do_not_compile(tmp_path, name, arch, builtin, archs):
    proc = subprocess.run(compile_command(KERNELS / f"{name}.mu", tmp_path / "x.so", arch), capture_output=True,
                          text=True)  # fmt: skip
    assert proc.returncode != 0
    assert (f"{builtin} is a built-in of {archs} only, but this library is compiled with -D__MUSA_ARCH__={arch}"
            in proc.stderr)  # fmt: skip


# ---- mp_31 SQMMA ----------------------------------------------------------------------------------------------------

SQMMA_SHAPES = [(16, 64), (32, 32), (32, 64), (32, 128), (64, 16), (64, 32), (64, 64), (64, 128), (128, 32), (128, 64),
                (128, 128)]  # fmt: skip
SQMMA_PARAMS = 28  # mma_sqmma.mu's Param enum
SQMMA_WAIT, COMMIT_WAIT_ALL, TWO_GROUPS, UNCOMMITTED, OVERWRITE_FIRST, WAIT_GROUP_ARG = range(6)
NOT_WRITTEN = 0x7FC0DEAD  # what mma_sqmma.mu puts in D when D does not alias C
SWIZZLE_CODE = {0: 0, 16: 1, 32: 2, 64: 3}


def swizzle(address: np.ndarray, granularity: int) -> np.ndarray:
    """The SQMMA swizzle of an absolute shared address: 256-byte line, `granularity`-byte chunks (0 = none)."""
    if granularity == 0:
        return address
    shift = {16: 4, 32: 5, 64: 6}[granularity]
    return address ^ (((address >> 8) & (256 // granularity - 1)) << shift)


@dataclass(frozen=True)
class Placement:
    """Where an R x depth operand of `size`-byte elements lives: K-major rows of `stride` bytes, or MN-major k-rows."""

    rows: int
    depth: int
    size: int
    k_major: bool
    granularity: int

    @property
    def stride(self) -> int:  # the descriptor's leading stride: the row pitch (K-major) or the k-row pitch (MN-major)
        return self.depth * self.size if self.k_major else self.rows * self.size

    @property
    def bytes(self) -> int:
        return (self.rows if self.k_major else self.depth) * self.stride

    def step(self, k: int) -> int:
        """Unswizzled bytes from one K block of `k` to the next (added to the descriptor's start)."""
        return k * (self.size if self.k_major else self.stride)

    def place(self, image: np.ndarray, raw: np.ndarray, start: int) -> None:
        r, k = np.meshgrid(np.arange(self.rows), np.arange(self.depth), indexing="ij")
        linear = start + (r * self.stride + k * self.size if self.k_major else r * self.size + k * self.stride)
        physical = swizzle(linear, self.granularity)
        assert len(np.unique(physical)) == raw.size
        for byte in range(self.size):
            image[physical + byte] = (raw >> (8 * byte)) & 0xFF


def canonical_granularity(k_major: bool, size: int) -> int:
    """MUSA_LAYOUTS.md section 3: K-major SG16; MN-major SG16 / SG32 / SG64 for 1-, 2- and 4-byte elements."""
    return 16 if k_major else {1: 16, 2: 32, 4: 64}[size]


@dataclass
class SqmmaRun:
    d: list[np.ndarray]  # per squad, (M, N) words
    early: list[np.ndarray]  # D as read before the (last) wait
    expected: list[np.ndarray]
    c: list[np.ndarray]
    after_first: list[np.ndarray]  # the expected D after only the first operation


def sqmma_run(lib, rng, shape=(64, 64), pair=(F16, F16), k=16, ops=1, a_k_major=True, b_k_major=True,
              a_granularity=None, b_granularity=None, negate=(0, 0), overwrite=0, squads=1, mode=SQMMA_WAIT, alias=1,
              threads=None, arena=None, place_granularity=None, **overrides) -> tuple[int, SqmmaRun | str, dict]:
    """Place fresh operands for each squad, run mma_sqmma.mu, and return (error code, the run or the error message,
    the kernel parameters). `overrides` replace kernel parameters after the operands are placed."""
    m, n = shape
    fa, fb = pair
    size = fa.bits // 8
    gran_a = canonical_granularity(a_k_major, size) if a_granularity is None else a_granularity
    gran_b = canonical_granularity(b_k_major, size) if b_granularity is None else b_granularity
    a = Placement(m, k * ops, size, a_k_major, gran_a)
    b = Placement(n, k * ops, size, b_k_major, gran_b)
    for placement in (a, b):
        assert placement.stride in (8, 16, 32, 64, 128, 256), "the leading stride must have a descriptor code"
    a_off = 3 * 256  # away from line 0, whose addresses no swizzle moves
    b_off = (a_off + a.bytes + 255) // 256 * 256 + 5 * 256
    squad_stride = (b_off + b.bytes + 255) // 256 * 256 + 256
    needed = squad_stride * squads
    images = [rng.integers(0, 256, size=needed, dtype=np.uint8) for _ in range(2)]  # garbage around the operands
    words = m * n // 128
    c_img = np.zeros((128 * squads, words), dtype=np.uint32)
    result = SqmmaRun([], [], [], [], [])
    placing_a = a if place_granularity is None else Placement(m, k * ops, size, a_k_major, place_granularity)
    for s in range(squads):
        c = draw_accumulator(fa.is_float, (m, n), rng)
        c_img[128 * s : 128 * (s + 1)] = pack(c, 128, 32, lambda t, v, r, cc, _: squad_accumulator(t, v, r, cc))
        result.c.append(c)
        operands = []
        for image in images:  # OVERWRITE_FIRST copies the second image over the first before the wait
            (a_raw, a_val), (b_raw, b_val) = draw(fa, (m, k * ops), rng), draw(fb, (n, k * ops), rng)
            placing_a.place(image, a_raw, a_off + s * squad_stride)
            b.place(image, b_raw, b_off + s * squad_stride)
            operands.append((a_val * (-1 if negate[0] else 1), b_val * (-1 if negate[1] else 1)))
        a_val, b_val = operands[1 if mode == OVERWRITE_FIRST else 0]
        acc = c
        for op in range(ops):
            chunk = slice(op * k, (op + 1) * k)
            acc = mma_reference(acc, a_val[:, chunk], b_val[:, chunk], fa.is_float, use_c=not overwrite)
            if op == 0:
                result.after_first.append(acc)
        result.expected.append(acc)
    params = dict(shape=SQMMA_SHAPES.index(shape), words=words, tnsp_a=int(not a_k_major), tnsp_b=int(b_k_major),
                  scale_a=negate[0], scale_b=negate[1], scale_d=overwrite, sat=0, inst_k=k, type=MMA_TYPE[pair],
                  ops=ops, mode=mode, alias=alias,
                  a_off=a_off, a_stride=a.stride.bit_length() - 3, a_swizzle=SWIZZLE_CODE[gran_a], a_step=a.step(k),
                  a_extra=0,
                  b_off=b_off, b_stride=b.stride.bit_length() - 3, b_swizzle=SWIZZLE_CODE[gran_b], b_step=b.step(k),
                  b_extra=0,
                  squad_stride=squad_stride, odd_thread=-1, odd_scale_d=0, exiting=-1, wait_group_n=0)  # fmt: skip
    params.update(overrides)
    assert len(params) == SQMMA_PARAMS
    values = np.array(list(params.values()), dtype=np.int32)
    arena = needed if arena is None else arena
    d_img, early_img = np.zeros_like(c_img), np.zeros_like(c_img)
    threads = 128 * squads if threads is None else threads
    code = lib.run(ptr(images[0]), arena, ptr(images[1]), ptr(c_img), ptr(d_img), ptr(early_img), ptr(values), threads)
    if code != 0:
        return code, lib.error(), params
    for s in range(squads):
        rows = slice(128 * s, 128 * (s + 1))
        result.d.append(unpack(d_img[rows], m, n, squad_accumulator))
        result.early.append(unpack(early_img[rows], m, n, squad_accumulator))
    return 0, result, params


def check_sqmma(run: SqmmaRun, alias: int = 1) -> None:
    for s, (d, expected, c, early) in enumerate(zip(run.d, run.expected, run.c, run.early)):
        np.testing.assert_array_equal(d, expected, err_msg=f"squad {s}")
        np.testing.assert_array_equal(early, c if alias else np.full_like(c, NOT_WRITTEN), err_msg=f"squad {s} early")


def sqmma_ok(lib, rng, **kwargs) -> SqmmaRun:
    code, run, _ = sqmma_run(lib, rng, **kwargs)
    assert code == 0, run
    return run


@pytest.mark.parametrize("shape", SQMMA_SHAPES, ids=[f"m{m}n{n}" for m, n in SQMMA_SHAPES])
def test_sqmma_every_shape(build, shape):
    lib = build("mma_sqmma", 310)
    rng = np.random.default_rng(200 + SQMMA_SHAPES.index(shape))
    majors = (True, True), (False, False), (True, False), (False, True)
    for k, (a_k_major, b_k_major) in zip((16, 32, 64, 16), majors):
        run = sqmma_ok(lib, rng, shape=shape, k=k, a_k_major=a_k_major, b_k_major=b_k_major)
        check_sqmma(run)


SQMMA_FORMATS = [((BF16, BF16), 32), ((TF32, TF32), 8), ((TF32, TF32), 32), ((S8, S8), 64), ((U8, U8), 128),
                 ((E4M3, E4M3), 32), ((E5M2, E5M2), 64), ((E4M3, E5M2), 128), ((E5M2, E4M3), 32)]  # fmt: skip


@pytest.mark.parametrize("pair,k", SQMMA_FORMATS, ids=[f"{a.name}x{b.name}-k{k}" for (a, b), k in SQMMA_FORMATS])
def test_sqmma_formats_and_majors(build, pair, k):
    lib = build("mma_sqmma", 310)
    rng = np.random.default_rng(300 + SQMMA_FORMATS.index((pair, k)))
    for a_k_major in (True, False):
        for b_k_major in (True, False):
            run = sqmma_ok(lib, rng, shape=(64, 32), pair=pair, k=k, a_k_major=a_k_major, b_k_major=b_k_major)
            check_sqmma(run)


def test_sqmma_tf32_m128_with_both_operands_k_major(build):
    lib = build("mma_sqmma", 310)
    check_sqmma(sqmma_ok(lib, np.random.default_rng(5), shape=(128, 128), pair=(TF32, TF32), k=16))


@pytest.mark.parametrize("granularity", [0, 16, 32, 64])
def test_sqmma_swizzle_granularities(build, granularity):
    lib = build("mma_sqmma", 310)
    rng = np.random.default_rng(400 + granularity)
    for a_k_major, b_k_major in ((True, True), (False, False)):
        run = sqmma_ok(lib, rng, shape=(64, 64), k=32, a_k_major=a_k_major, b_k_major=b_k_major,
                       a_granularity=granularity, b_granularity=granularity)  # fmt: skip
        check_sqmma(run)


def test_sqmma_applies_the_swizzle_of_the_descriptor(build):
    """Operands stored unswizzled but read through an SG32 descriptor give another product."""
    lib = build("mma_sqmma", 310)
    run = sqmma_ok(lib, np.random.default_rng(6), shape=(64, 64), k=32, a_granularity=32, place_granularity=0)
    assert not np.array_equal(run.d[0], run.expected[0])
    run = sqmma_ok(lib, np.random.default_rng(6), shape=(64, 64), k=32, a_granularity=0, place_granularity=0)
    np.testing.assert_array_equal(run.d[0], run.expected[0])


@pytest.mark.parametrize("negate", [(1, 0), (0, 1), (1, 1)], ids=["-A", "-B", "-A-B"])
def test_sqmma_negate_flags(build, negate):
    lib = build("mma_sqmma", 310)
    rng = np.random.default_rng(500 + 2 * negate[0] + negate[1])
    check_sqmma(sqmma_ok(lib, rng, shape=(32, 64), pair=(BF16, BF16), k=32, negate=negate, b_k_major=False))


@pytest.mark.parametrize("alias", [1, 0], ids=["d_is_c", "d_apart"])
def test_sqmma_overwrite_ignores_c(build, alias):
    lib = build("mma_sqmma", 310)
    run = sqmma_ok(lib, np.random.default_rng(7 + alias), shape=(64, 32), k=16, overwrite=1, alias=alias)
    check_sqmma(run, alias)


@pytest.mark.parametrize("mode", [SQMMA_WAIT, COMMIT_WAIT_ALL], ids=["sqmma_wait", "commit_wait_group0"])
@pytest.mark.parametrize("alias", [1, 0], ids=["d_is_c", "d_apart"])
def test_sqmma_k_walk_chains_and_d_is_stale_until_the_wait(build, mode, alias):
    """Four SQMMAs walk K by advancing the descriptors and accumulate without waiting; reading D before the wait
    sees the values it had before the issues (C, or what the kernel left in D)."""
    lib = build("mma_sqmma", 310)
    rng = np.random.default_rng(8 + 2 * mode + alias)
    run = sqmma_ok(lib, rng, shape=(128, 64), pair=(F16, F16), k=32, ops=4, a_k_major=False, mode=mode, alias=alias)
    check_sqmma(run, alias)


def test_sqmma_squads_work_independently(build):
    lib = build("mma_sqmma", 310)
    run = sqmma_ok(lib, np.random.default_rng(9), shape=(64, 128), k=16, ops=2, squads=2)
    check_sqmma(run)
    assert not np.array_equal(run.d[0], run.d[1])


def test_sqmma_wait_group_leaves_the_newest_groups_in_flight(build):
    lib = build("mma_sqmma", 310)
    run = sqmma_ok(lib, np.random.default_rng(10), shape=(32, 32), k=16, ops=2, mode=TWO_GROUPS)
    np.testing.assert_array_equal(run.early[0], run.after_first[0])  # after wait_group(1): only the first group
    np.testing.assert_array_equal(run.d[0], run.expected[0])


def test_sqmma_wait_group_ignores_uncommitted_operations(build):
    lib = build("mma_sqmma", 310)
    run = sqmma_ok(lib, np.random.default_rng(11), shape=(32, 32), k=16, ops=2, mode=UNCOMMITTED)
    np.testing.assert_array_equal(run.early[0], run.after_first[0])  # wait_group(0) skipped the uncommitted op
    np.testing.assert_array_equal(run.d[0], run.expected[0])  # __musa_sqmma_wait waits for it


def test_sqmma_reads_shared_memory_when_it_completes(build):
    """Operands overwritten between the issue and the wait are read as overwritten (the documented choice)."""
    lib = build("mma_sqmma", 310)
    check_sqmma(sqmma_ok(lib, np.random.default_rng(12), shape=(64, 64), k=32, mode=OVERWRITE_FIRST))


def sqmma_error(lib, **kwargs) -> tuple[int, str, dict]:
    code, message, params = sqmma_run(lib, np.random.default_rng(13), **kwargs)
    assert code != 0, "the launch should have failed"
    return code, message, params


@pytest.mark.parametrize("kwargs,code,message", [
    (dict(a_stride=0), ILLEGAL_INSTRUCTION,
     "descriptor A (0x{a:08x}): leading stride code 0 is not 1..6 (8 to 256 bytes)"),
    (dict(a_off=3 * 256 + 8), ILLEGAL_INSTRUCTION,
     "descriptor A (0x{a:08x}): start address 776 is not a multiple of 16 bytes"),
    (dict(b_extra=1 << 23), ILLEGAL_INSTRUCTION,
     "descriptor B (0x{b:08x}): bits 23-31 are 0x1; only bits 0-22 are defined"),
    (dict(arena=4096), LAUNCH_FAILURE, "outside the launch's 4096 bytes of dynamic shared memory"),
    (dict(inst_k=24), ILLEGAL_INSTRUCTION, "k = 24 is not 16, 32 or 64 for f16 operands"),
    (dict(sat=1), ILLEGAL_INSTRUCTION, "sat is 1; saturation is not modelled, pass 0"),
    (dict(scale_d=2), ILLEGAL_INSTRUCTION, "scaleD is 2; it must be 0 or 1"),
    (dict(type=7), ILLEGAL_INSTRUCTION, "mma_type 7 is not modelled"),
    (dict(shape=(32, 128), pair=(TF32, TF32), k=8), ILLEGAL_INSTRUCTION, "has no tf32 form"),
    (dict(shape=(128, 64), pair=(TF32, TF32), k=8, b_k_major=False), ILLEGAL_INSTRUCTION,
     "tf32 at M = 128 needs both operands K-major"),
    (dict(pair=(S8, S8), k=32, negate=(1, 0)), ILLEGAL_INSTRUCTION,
     "scaleA/scaleB negate floating-point operands only"),
    (dict(mode=WAIT_GROUP_ARG, wait_group_n=3), ILLEGAL_INSTRUCTION,
     "__musa_tce_wait_group (mma_sqmma.mu:{wait}): n = 3 is not 0, 1 or 2"),
])  # fmt: skip
def test_sqmma_rejects_bad_instructions(build, kwargs, code, message):
    lib = build("mma_sqmma", 310)
    got, error, p = sqmma_error(lib, **kwargs)
    assert got == code, error
    assert error.startswith("kernel sqmma_kernel: block (0,0,0), thread (")
    a = p["a_off"] | p["a_stride"] << 18 | p["a_swizzle"] << 21 | p["a_extra"]
    b = p["b_off"] | p["b_stride"] << 18 | p["b_swizzle"] << 21 | p["b_extra"]
    assert message.format(a=a, b=b, wait=lib.line_of("__musa_tce_wait_group(p[kWaitGroupN])")) in error


def test_sqmma_threads_of_a_squad_must_agree(build):
    lib = build("mma_sqmma", 310)
    got, error, _ = sqmma_error(lib, odd_thread=77, odd_scale_d=1)
    assert got == LAUNCH_FAILURE
    line = lib.line_of("case 6: __musa_sqmma_m64n64_mma")
    assert (f"__musa_sqmma_m64n64_mma (mma_sqmma.mu:{line}): the threads of squad 0 disagree on scaleD: thread 0 "
            "passes 0, thread 77 passes 1") in error  # fmt: skip


def test_sqmma_needs_the_whole_squad(build):
    lib = build("mma_sqmma", 310)
    line = lib.line_of("case 6: __musa_sqmma_m64n64_mma")
    got, error, _ = sqmma_error(lib, exiting=3)
    assert got == LAUNCH_FAILURE
    assert ("thread (3,0,0): divergent __musa_sqmma_m64n64_mma: this thread exited while 4 of 128 threads of squad 0 "
            f"wait at __musa_sqmma_m64n64_mma (mma_sqmma.mu:{line})") in error  # fmt: skip
    got, error, _ = sqmma_error(lib, threads=96)
    assert got == LAUNCH_FAILURE
    assert (f"thread (95,0,0): __musa_sqmma_m64n64_mma (mma_sqmma.mu:{line}) needs all 128 threads of squad 0 "
            "(4 warps), but the block's last squad has only 96") in error  # fmt: skip


def test_shared_address_of_static_shared_memory_fails(build):
    lib = build("mma_sqmma", 310)
    out = np.zeros(1, dtype=np.int32)
    assert lib.run_static_smem_address(ptr(out)) == LAUNCH_FAILURE
    line = lib.line_of("__cvta_generic_to_shared(scratch)")
    assert f"__cvta_generic_to_shared (mma_sqmma.mu:{line}): 0x" in lib.error()
    assert "is not in the dynamic shared memory buffer buf_dyn_shmem" in lib.error()


# ---- the row kernel under the kernel's own compiler flags ------------------------------------------------------------


def _has_fma() -> bool:
    try:
        return " fma " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not _has_fma(), reason="needs an x86 CPU with FMA")
@pytest.mark.parametrize("count", [40, 37], ids=["two_rows_at_once", "one_row_16_4_1_lanes"])
def test_row_kernel_keeps_the_documented_rounding_under_fast_math_and_fma(tmp_path, count):
    """Kernels may be built with fast math and FMA contraction (the user's flags); the vectorized row kernel the
    matrix models share must still round each product and each sum to fp32, as the scalar reference does. tf32
    values down to 2^-100 make products that underflow fp32, where a fused multiply-add rounds differently; at -O3
    with reassociation allowed, a plain scalar loop's sum order changes (the scalar loop this replaced did)."""
    source, output = KERNELS / "mma_row_kernel.mu", tmp_path / "mma_row_kernel.so"
    # fast math spelled out: `-ffast-math` would link crtfastmath, which sets flush-to-zero for the whole test process
    command = compile_command(source, output, 310) + ["-O3", *SIM_FAST_MATH_FLAGS, "-ffp-contract=fast", "-mfma"]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lib = Kernel(output, source)
    rng = np.random.default_rng(7)
    rows, depth = 7, 32  # an odd row count: the last row goes alone
    def draw(shape):
        mantissa = rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        return (mantissa * 2.0 ** rng.integers(-100, 20, shape)).astype(np.float32).view(np.uint32) & 0xFFFFE000
    a, b = draw((rows, depth)).view(np.float32), draw((count, depth)).view(np.float32)
    c = draw((rows, count))
    got = np.full((rows, count), 0xFFFFFFFF, np.uint32)
    assert lib.accumulate_rows(ptr(a), ptr(b), ptr(c), rows, depth, count, ptr(got)) == 0
    expected = mma_reference(c, a, b, is_float=True)
    np.testing.assert_array_equal(got, expected)
    assert (expected.view(np.float32) != 0).all()
