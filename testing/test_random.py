"""Random numbers: `T.rng_init`, `T.rng_rand`, `T.rng_rand_float` print murand's API (state type, murand_init,
murand, murand_uniform[_double], murand_normal[_double]) and draw, in the simulator, cuRAND's streams.

The references below are pure-Python models of cuRAND's three generators, written from its documented algorithms.
GOLDEN holds values that cuRAND itself (CUDA 13.0 curand_kernel.h, on an NVIDIA H200) returned for the same calls:
the integer and uniform streams must match them bit for bit. Normals go through the device's sin / cos / log, so
they are compared with a tolerance."""

import inspect
import math

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

PHILOX, XORWOW, MRG = "curandStatePhilox4_32_10_t", "curandStateXORWOW_t", "curandStateMRG32k3a_t"
STATE_TYPES = {PHILOX: "murandStatePhilox4_32_10_t", XORWOW: "murandStateXORWOW_t", MRG: "murandStateMRG32k3a_t"}
U32 = 0xFFFFFFFF
SENTINEL = 0xDEADBEEF


# ---- Python models of cuRAND's generators ------------------------------------------------------------------------
def philox4x32_10(ctr, key):
    """One Philox4x32-10 block: 4 counter words and 2 key words -> 4 output words (Triton's tl.randint4x too)."""
    c, (k0, k1) = list(ctr), key
    for rnd in range(10):
        if rnd:
            k0, k1 = (k0 + 0x9E3779B9) & U32, (k1 + 0xBB67AE85) & U32
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & U32, (p0 >> 32) ^ c[3] ^ k1, p0 & U32]
    return c


class Philox:
    def __init__(self, seed, subsequence, offset):
        self.key = (seed & U32, seed >> 32)
        self.position = (subsequence << 66) + offset  # counter = position // 4, word = position % 4

    def block(self, index):
        return philox4x32_10([(index >> (32 * k)) & U32 for k in range(4)], self.key)

    def next(self):
        value = self.block(self.position // 4)[self.position % 4]
        self.position += 1
        return value

    def next4(self):  # curand4: four outputs, the generator moves by a whole block
        words = self.block(self.position // 4) + self.block(self.position // 4 + 1)
        self.position += 4
        return words[(self.position - 4) % 4:][:4]

    def uniform_double(self):
        return self.next() * 2.0**-32 + 2.0**-32


class Xorwow:
    """Stepped state by state: offsets are small here; the 2^67-step subsequences are checked against GOLDEN."""

    def __init__(self, seed, subsequence, offset):
        assert subsequence == 0
        t0 = 1099087573 * ((seed & U32) ^ 0xAAD26B49) & U32
        t1 = 2591861531 * ((seed >> 32) ^ 0xF7DCEFDD) & U32
        self.d = (6615241 + t1 + t0) & U32
        self.v = [(123456789 + t0) & U32, 362436069 ^ t0, (521288629 + t1) & U32, 88675123 ^ t1, (5783321 + t0) & U32]
        for _ in range(offset):
            self.next()

    def next(self):
        v = self.v
        t = v[0] ^ (v[0] >> 2)
        self.v = v[1:] + [(v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & U32]
        self.d = (self.d + 362437) & U32
        return (self.v[4] + self.d) & U32

    def next4(self):
        return [self.next() for _ in range(4)]

    def uniform_double(self):
        x, y = self.next(), self.next()
        return ((y << 21) ^ x) * 2.0**-53 + 2.0**-54


M1, M2 = 4294967087, 4294944443


class Mrg32k3a:
    def __init__(self, seed, subsequence, offset):
        assert subsequence == 0
        self.s1, self.s2 = [12345] * 3, [12345] * 3
        if seed:
            x1, x2 = (seed & U32) ^ 0x55555555, (seed >> 32) ^ 0xAAAAAAAA
            self.s1 = [x1 * 12345 % M1, x2 * 12345 % M1, x1 * 12345 % M1]
            self.s2 = [x2 * 12345 % M2, x1 * 12345 % M2, x2 * 12345 % M2]
        for _ in range(offset):
            self.combined()

    def combined(self):
        s1, s2 = self.s1, self.s2
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
        self.s1, self.s2 = s1[1:] + [p1], s2[1:] + [p2]
        return p1 - p2 + (M1 if p1 <= p2 else 0)

    def next(self):
        return int(self.combined() * 1.000000048662)

    def uniform(self):
        return np.float32(self.combined() * 2.3283065498378288e-10)

    def uniform_double(self):
        return self.combined() * 2.3283065498378288e-10


def f32(x):
    return np.float32(x)


def draw(gen, kind, cache):
    """One T.rng_rand* draw from `gen` (cuRAND's formulas; normals keep the second Box-Muller value in `cache`)."""
    if kind == "int":
        return gen.next()
    if kind == "f32":
        return gen.uniform() if isinstance(gen, Mrg32k3a) else f32(gen.next()) * f32(2.0**-32) + f32(2.0**-33)
    if kind == "f64":
        return gen.uniform_double()
    if kind in cache:
        return cache.pop(kind)
    if kind == "n32":
        if isinstance(gen, Mrg32k3a):
            u, v = gen.uniform(), gen.uniform() * f32(6.2831855)
        else:
            u = f32(gen.next()) * f32(2.0**-32) + f32(2.0**-33)
            c = float(f32(2.3283064e-10) * f32(6.2831855))
            v = f32(gen.next() * c + c / 2)
        s = math.sqrt(-2.0 * math.log(u))
        cache[kind] = s * math.cos(v)
        return s * math.sin(v)
    if isinstance(gen, Mrg32k3a):  # n64
        u, v = gen.uniform_double(), gen.uniform_double() * 2.0
    else:
        x0, x1, y0, y1 = gen.next4()
        u = ((x1 << 21) ^ x0) * 2.0**-53 + 2.0**-54
        v = ((y1 << 21) ^ y0) * 2.0**-52 + 2.0**-53
    s = math.sqrt(-2.0 * math.log(u))
    cache[kind] = s * math.cos(v * math.pi)
    return s * math.sin(v * math.pi)


MODELS = {PHILOX: Philox, XORWOW: Xorwow, MRG: Mrg32k3a}


def test_philox_model_matches_random123_known_answers():
    assert philox4x32_10([0] * 4, (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10([U32] * 4, (U32, U32)) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], (0xA4093822, 0x299F31D0)) == [
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


# ---- upstream's kernel, unchanged but for the device ---------------------------------------------------------------
@tilelang.jit
def tilelang_rand_1d(M=64, seed=42, generator="curandStatePhilox4_32_10_t"):
    num_per_thread = 8
    threads = 1
    blk_M = num_per_thread * threads

    @T.prim_func
    def rand_kernel(
        A: T.Tensor((M,), "uint32"),
        B: T.Tensor((M,), "float32"),
        C: T.Tensor((M,), "float64"),
        D: T.Tensor((M,), "float32"),
        E: T.Tensor((M,), "float64"),
    ):
        with T.Kernel(T.ceildiv(M, threads * num_per_thread), threads=threads) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * blk_M + tx * num_per_thread, generator=generator)
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (bx * threads + i) * num_per_thread
                idx = offsets + j
                if idx < M:
                    A[idx] = T.rng_rand()
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (bx * threads + i) * num_per_thread
                idx = offsets + j
                if idx < M:
                    B[idx] = T.rng_rand_float()
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (bx * threads + i) * num_per_thread
                idx = offsets + j
                if idx < M:
                    C[idx] = T.rng_rand_float(bit=64)
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (bx * threads + i) * num_per_thread
                idx = offsets + j
                if idx < M:
                    D[idx] = T.rng_rand_float(dist="normal")
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (bx * threads + i) * num_per_thread
                idx = offsets + j
                if idx < M:
                    E[idx] = T.rng_rand_float(bit=64, dist="normal")

    return rand_kernel


def check_murand_source(source, generator):
    assert '#include "tl_templates/musa/random.h"' in source
    assert f"TL_RNG_DECLARE({STATE_TYPES[generator]}(), 0);" in source
    for call in ("murand_init(", "murand(TL_RNG_STATE(0))", "murand_uniform(TL_RNG_STATE(0))",
                 "murand_uniform_double(TL_RNG_STATE(0))", "murand_normal(TL_RNG_STATE(0))",
                 "murand_normal_double(TL_RNG_STATE(0))"):
        assert call in source, call


@pytest.mark.parametrize("generator, seed, M", [(PHILOX, 123, 64), (XORWOW, 0, 60), (MRG, 42, 60)])
def test_upstream_rand_kernel_draws_curands_streams(generator, seed, M):
    """Upstream's kernel: each block's one thread starts at offset 8 * bx of subsequence 0 and draws 8 of each kind
    in turn from one state. With M = 60 the last block draws 4 of each kind (its draws are under `if idx < M`)."""
    kernel = tilelang_rand_1d(M, seed, generator)
    check_murand_source(kernel.get_kernel_source(), generator)
    out = {"int": torch.full((M,), SENTINEL, dtype=torch.uint32), "f32": torch.full((M,), float("nan")),
           "f64": torch.full((M,), float("nan"), dtype=torch.float64), "n32": torch.full((M,), float("nan")),
           "n64": torch.full((M,), float("nan"), dtype=torch.float64)}
    kernel(*out.values())
    expected = {kind: [] for kind in out}
    for bx in range(-(-M // 8)):
        gen, cache = MODELS[generator](seed, 0, bx * 8), {}
        for kind in expected:
            expected[kind] += [draw(gen, kind, cache) for _ in range(min(8, M - bx * 8))]
    assert torch.equal(out["int"].long(), torch.tensor(expected["int"], dtype=torch.long))
    assert torch.equal(out["f32"], torch.tensor(np.array(expected["f32"], dtype=np.float32)))
    assert torch.equal(out["f64"], torch.tensor(expected["f64"], dtype=torch.float64))
    torch.testing.assert_close(out["n32"], torch.tensor(expected["n32"], dtype=torch.float32), rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(out["n64"], torch.tensor(expected["n64"], dtype=torch.float64), rtol=1e-13,
                               atol=1e-13)


# ---- cuRAND's own outputs ------------------------------------------------------------------------------------------
# (generator, seed, subsequence, offset) -> (8 x curand(); then, after a fresh curand_init, 4 x (curand_uniform's
# float bits, curand_uniform_double's double bits, curand_normal's, curand_normal_double's, curand)), as cuRAND
# (CUDA 13.0) returned them on an H200.
GOLDEN = {
    (PHILOX, 0x123456789ABCDEF, 1, 1 << 40): (
        [0x11712B0B, 0x513D883B, 0x5EB57004, 0x16DEC87D, 0x90B27E0D, 0xD5E4D427, 0xA86295E1, 0x17B28115],
        [(0x3D8B8958, 0x3FD44F620F000000, 0x3F402BEB, 0x3FD514129E97C7C7, 0x61F71A9D),
         (0x3F51AA6C, 0x3FEDC623C1400000, 0x3F98CF82, 0x3FE007900CBAEE3D, 0x5385E4C6),
         (0x3F5D795B, 0x3FDCEA5598400000, 0xBFEDD28D, 0x3FF1B91675DEA745, 0x360303A3),
         (0x3EA77C91, 0x3FEF74B3B4800000, 0x3D116D68, 0x3FDA3ADD6D6F1520, 0x5100AD52)]),
    (XORWOW, 7, 1000003, 123456789): (
        [0x223FD1F1, 0x19CF1CF9, 0xBBFA8245, 0xA6EB819A, 0x333F102F, 0x27A69018, 0xF06D7DD7, 0x43C09668],
        [(0x3E08FF48, 0x3FE77F50516F1CFA, 0x3F614100, 0xBFCC405680491B0B, 0x5E0B6446),
         (0x3F40BA36, 0x3FC784A9F99D4AE6, 0x3E91D000, 0xBFD1BC84BA90B7DA, 0xA59FB375),
         (0x3EB5CBE8, 0x3FEB3BDFDD9C4110, 0x3F406CB4, 0xBFD1601292394025, 0x7AD5B344),
         (0x3F1845AE, 0x3FE52AAF96CDEF18, 0x3F89346E, 0xC0047D62EA1390F8, 0xC7838DDE)]),
    (MRG, 7, 1000003, 123456789): (
        [0x361A493C, 0x1D37CFA7, 0x28B23022, 0x246A0683, 0x1CFE0EBB, 0xF18E1EBF, 0xD3CC99BC, 0xE8A93205],
        [(0x3E586925, 0x3FBD37CFA7DA9089, 0x3FBF5587, 0xBFE72F99A13734DF, 0xD3CC99BC),
         (0x3F68A932, 0x3FBCF2FAA4A25EA1, 0x3F99CBB5, 0x3FFF51638B1C8428, 0x52CD9D2D),
         (0x3F72F82C, 0x3F993C97289A7769, 0xBF543894, 0xBFD2C02976B4D99A, 0x1C135259),
         (0x3F5357C6, 0x3FC7AE14F1551F1A, 0x3EA9ABDC, 0xBFF08154B9F109F5, 0xEC099E28)]),
}


def golden_program(generator):
    """The calls GOLDEN records, with (seed, subsequence, offset) read from a tensor; a second T.rng_init restarts."""

    @T.prim_func
    def main(S: T.Tensor((3,), "int64"), I0: T.Tensor((8,), "uint32"), F32: T.Tensor((4,), "float32"),
             F64: T.Tensor((4,), "float64"), N32: T.Tensor((4,), "float32"), N64: T.Tensor((4,), "float64"),
             I1: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=1):
            T.rng_init(S[0], S[1], S[2], generator=generator)
            for i in T.serial(8):
                I0[i] = T.rng_rand()
            T.rng_init(S[0], S[1], S[2], generator=generator)
            for i in T.serial(4):
                F32[i] = T.rng_rand_float()
                F64[i] = T.rng_rand_float(64)
                N32[i] = T.rng_rand_float(dist="normal")
                N64[i] = T.rng_rand_float(64, "normal")
                I1[i] = T.rng_rand()

    return main


def bits(t):
    return [int(x) & (U32 if t.dtype == torch.int32 else 2**64 - 1) for x in t.tolist()]


@pytest.mark.parametrize("key", list(GOLDEN), ids=lambda key: key[0][11:-2])
def test_simulator_reproduces_curands_outputs(key):
    """Large subsequences (2^67-, 2^76-step skips) and offsets (a carry into the Philox counter's high half)."""
    generator, seed, subsequence, offset = key
    kernel = tilelang.compile(golden_program(generator), target="musa -arch=mp_31")
    assert "TL_RNG_DECLARE(" + STATE_TYPES[generator] + "(), 1);" in kernel.get_kernel_source()
    ints, rows = GOLDEN[key]
    out = [torch.full((8,), SENTINEL, dtype=torch.uint32), torch.full((4,), float("nan")),
           torch.full((4,), float("nan"), dtype=torch.float64), torch.full((4,), float("nan")),
           torch.full((4,), float("nan"), dtype=torch.float64), torch.full((4,), SENTINEL, dtype=torch.uint32)]
    kernel(torch.tensor([seed, subsequence, offset], dtype=torch.int64), *out)
    i0, f32_, f64_, n32, n64, i1 = out
    assert i0.long().tolist() == ints
    assert i1.long().tolist() == [row[4] for row in rows]
    assert bits(f32_.view(torch.int32)) == [row[0] for row in rows]
    assert bits(f64_.view(torch.int64)) == [row[1] for row in rows]
    cuda_n32 = torch.tensor([row[2] for row in rows], dtype=torch.int64).to(torch.int32).view(torch.float32)
    cuda_n64 = torch.tensor([row[3] - (2**64 if row[3] >= 2**63 else 0) for row in rows]).view(torch.float64)
    # cuRAND's device path uses __sincosf and sincospi; the simulator the host's sinf / cosf and sin / cos
    torch.testing.assert_close(n32, cuda_n32, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(n64, cuda_n64, rtol=1e-13, atol=1e-13)


def test_mrg32k3a_subsequences_beyond_curands_tables_are_reported_not_modelled():
    kernel = tilelang.compile(golden_program(MRG), target="musa -arch=mp_31")
    out = [torch.zeros(8, dtype=torch.uint32), torch.zeros(4), torch.zeros(4, dtype=torch.float64), torch.zeros(4),
           torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.uint32)]
    with pytest.raises(RuntimeError, match=r"murand_init\(MRG32k3a\): subsequence 2251799813685248 is not modelled"):
        kernel(torch.tensor([7, 2**51, 0]), *out)


# ---- defaults, both archs ------------------------------------------------------------------------------------------
def default_subsequence_program(blocks, threads, draws):
    @T.prim_func
    def main(Out: T.Tensor((blocks * threads * draws,), "uint32")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            T.rng_init(2024)
            for k in T.serial(draws):
                Out[(bx * threads + tx) * draws + k] = T.rng_rand()

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_default_subsequence_is_the_global_thread_index(arch):
    """Upstream's default: subsequence threadIdx.x + blockIdx.x * blockDim.x, offset 0, Philox."""
    blocks, threads, draws = 3, 4, 5
    kernel = tilelang.compile(default_subsequence_program(blocks, threads, draws), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "TL_RNG_DECLARE(murandStatePhilox4_32_10_t(), 0);" in source
    assert "murand_init(2024ull, " in source and "murand(TL_RNG_STATE(0))" in source
    out = torch.full((blocks * threads * draws,), SENTINEL, dtype=torch.uint32)
    kernel(out)
    expected = []
    for thread in range(blocks * threads):
        gen = Philox(2024, thread, 0)
        expected += [gen.next() for _ in range(draws)]
    assert out.long().tolist() == expected


def test_kernels_without_random_numbers_do_not_include_murand():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            A[T.get_thread_binding()] = 1.0

    assert "random.h" not in tilelang.compile(main, target="musa -arch=mp_31").get_kernel_source()


# ---- errors ----------------------------------------------------------------------------------------------------------
def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def compile_error(body):
    with pytest.raises(tilelang.CompileError) as info:
        T.prim_func(body)
    return info.value


def test_unknown_generator_names_the_choices():
    def main(A: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=4):
            T.rng_init(1, generator="curandStateSobol32_t")

    err = compile_error(main)
    assert "T.rng_init: unknown generator 'curandStateSobol32_t'" in err.message
    assert '"curandStateXORWOW_t"' in err.message and err.loc.lineno == line_of(main, "T.rng_init")


@pytest.mark.parametrize("call, message", [
    ("bit", "T.rng_rand_float: bit must be 32 or 64; got 16"),
    ("dist", "T.rng_rand_float: dist must be \"uniform\" or \"normal\"; got 'poisson'"),
])
def test_bad_bit_or_distribution(call, message):
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            T.rng_init(1)
            if call == "bit":
                A[0] = T.rng_rand_float(bit=16)
            else:
                A[0] = T.rng_rand_float(dist="poisson")

    err = compile_error(main)
    assert err.message == message and err.loc.lineno == line_of(main, f"T.rng_rand_float({call}")


def test_drawing_before_rng_init():
    def main(A: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=4):
            A[0] = T.rng_rand()

    err = compile_error(main)
    assert "T.rng_rand: no generator to draw from; call T.rng_init(seed, ...) earlier" in err.message
    assert err.loc.lineno == line_of(main, "T.rng_rand()")


def test_drawing_after_the_scope_of_rng_init_has_ended():
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            for i in T.serial(2):
                T.rng_init(i)
            A[0] = T.rng_rand_float()

    err = compile_error(main)
    assert f"the generator of T.rng_init at line {line_of(main, 'T.rng_init')} is out of scope" in err.message
    assert err.loc.lineno == line_of(main, "T.rng_rand_float()")


@pytest.mark.parametrize("seed, message", [(-1, "seed must be in [0, 2**64)"), (1.5, "seed must be an integer")])
def test_bad_seed(seed, message):
    def main(A: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=4):
            T.rng_init(seed)

    assert message in compile_error(main).message
