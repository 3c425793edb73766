"""Block-level GEMM device templates (`src/tl_templates/musa/gemm_{mp22_mma,mp31_wmma,mp31_sqmma}.h`), run in the
CPU simulator through handwritten kernels (`testing/sim_kernels/tpl_gemm_*.mu`, harness in tpl_gemm_harness.mu).

Each kernel loads A and B into shared memory and calls the template three times (ClearAccum on a NaN-poisoned
accumulator, accumulate again, accumulate into random values), storing every thread's accumulator slots. The test
reassembles C through `make_gemm_accumulator_fragment` (the contract of tilelang_musa/layout/mma_layouts.py) and
compares with numpy on fresh random float16 / bfloat16 inputs. Outputs start poisoned (NaN).

Also covered: WMMA's register-operand forms (rs / sr / rr; operands given as `make_gemm_{a,b}_fragment` images and
NaN in the unused shared copy), SQMMA's issue-without-wait form, and the static_asserts on invalid instantiations.
Each kernel file is built once per session with the simulator's g++ command; the file takes about 25 s.
"""

from __future__ import annotations

import ctypes
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from tilelang_musa.layout import make_gemm_a_fragment, make_gemm_accumulator_fragment, make_gemm_b_fragment

REPO = Path(__file__).resolve().parents[1]
KERNELS = Path(__file__).resolve().parent / "sim_kernels"

DTYPES = {"float16": (0, torch.float16), "bfloat16": (1, torch.bfloat16)}  # name -> (kernels' dtype code, torch)

# path -> (kernel file, arch, instruction of the contract, group size)
PATHS = {
    "mp22_mma": ("tpl_gemm_mp22", 220, "mp_22.mma.m32n32k16", 128),
    "mp31_wmma": ("tpl_gemm_wmma", 310, "mp_31.wmma.m16n8k16", 32),
    "mp31_sqmma": ("tpl_gemm_sqmma", 310, None, 128),  # the instruction depends on the tile: sqmma_instruction()
}

# (M, N, K, GM, GN, TransA, TransB), as instantiated by each kernel file (both dtypes)
CASES = {
    "mp22_mma": [(32, 32, 16, 1, 1, 0, 0), (64, 128, 32, 2, 2, 0, 0), (64, 128, 32, 2, 2, 0, 1),
                 (64, 128, 32, 2, 2, 1, 0), (64, 128, 32, 2, 2, 1, 1), (128, 64, 48, 2, 1, 0, 1),
                 (32, 96, 16, 1, 3, 1, 0)],
    "mp31_wmma": [(16, 8, 16, 1, 1, 0, 0), (64, 64, 32, 2, 2, 0, 0), (64, 64, 32, 2, 2, 0, 1),
                  (64, 64, 32, 2, 2, 1, 0), (64, 64, 32, 2, 2, 1, 1), (128, 32, 48, 4, 1, 0, 1),
                  (16, 64, 16, 1, 4, 1, 0)],
    "mp31_sqmma": [(64, 64, 64, 1, 1, 0, 0), (128, 128, 32, 2, 1, 0, 0), (64, 128, 128, 1, 2, 0, 0),
                   (64, 128, 128, 1, 2, 0, 1), (64, 128, 128, 1, 2, 1, 0), (64, 128, 128, 1, 2, 1, 1),
                   (64, 32, 48, 2, 1, 1, 0), (16, 128, 64, 1, 1, 0, 0), (96, 32, 64, 1, 1, 0, 1)],
}
# register-operand forms of tpl_gemm_wmma.mu: (kernel variant, form) -> cases
WMMA_REGISTER_CASES = {(1, "rs"): [(64, 64, 32, 2, 2, 0, 0), (64, 64, 32, 2, 2, 1, 1)],
                       (2, "sr"): [(64, 64, 32, 2, 2, 0, 0), (64, 64, 32, 2, 2, 1, 1)],
                       (3, "rr"): [(64, 64, 32, 2, 2, 0, 1), (32, 32, 48, 1, 2, 1, 0)]}
# cases of tpl_gemm_sqmma.mu also instantiated with gemm_ss_mp31_sqmma_nowait + sqmma_wait (kernel variant 1)
SQMMA_NOWAIT_CASES = [(64, 128, 128, 1, 2, 1, 1), (96, 32, 64, 1, 1, 0, 1)]

# gemm_mp31_sqmma.h's SqmmaAtom order: fewest instructions, then the larger m
SQMMA_ORDER = ((128, 128), (128, 64), (64, 128), (128, 32), (64, 64), (32, 128), (64, 32), (32, 64), (64, 16),
               (32, 32), (16, 64))


def sqmma_instruction(M: int, N: int, GM: int, GN: int) -> str:
    """The SQMMA instruction the template picks for a block tile (written from the header's comment)."""
    tile_m, tile_n = M // GM, N // GN
    m, n = next((m, n) for m, n in SQMMA_ORDER if tile_m % m == 0 and tile_n % n == 0)
    return f"mp_31.sqmma.m{m}n{n}"


from sim_build import build_shared, sim_compile_command  # noqa: E402


@pytest.fixture(scope="module")
def build(session_dir):
    """build(path) -> ctypes library. The first call starts every kernel file's build, two at a time; the session's
    processes share the libraries (sim_build.build_shared: xdist's workers build each once)."""
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {}

    def compile_one(path: str):
        name, arch = PATHS[path][:2]
        return build_shared(session_dir / "sim_kernels", name,
                            lambda output: sim_compile_command(KERNELS / f"{name}.mu", output, arch))

    def _build(path: str):
        if not futures:
            for p in CASES:
                futures[p] = pool.submit(compile_one, p)
        output, stderr = futures[path].result()
        if output is None:
            pytest.fail(f"compiling {PATHS[path][0]}.mu failed:\n{stderr[-6000:]}")
        lib = ctypes.CDLL(str(output))
        lib.get_last_error.restype = ctypes.c_char_p
        return lib

    yield _build
    pool.shutdown(wait=True)


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


def random_tile(shape, dtype: torch.dtype, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(raw 16-bit storage, exact float64 values) of a random tile rounded to `dtype`."""
    t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    return t.view(torch.int16).numpy().copy(), t.double().numpy()


NAN_BITS = {"float16": 0x7E00, "bfloat16": 0x7FC0}


def fragment_image(fragment, raw: np.ndarray, threads: int, dtype: str) -> np.ndarray:
    """[thread][slot] image of an operand fragment holding `raw` (in the buffer's logical order). The fragment
    must fill every slot of every thread exactly once per replica (asserted)."""
    thread, slot = fragment.evaluate_all()  # buffer shape + [replicas]
    slots = int(slot.max()) + 1
    assert len(set(zip(thread.ravel().tolist(), slot.ravel().tolist()))) == thread.size == threads * slots
    image = np.empty((threads, slots), dtype=np.int16)
    image[thread, slot] = np.broadcast_to(raw[..., None], thread.shape)
    return image


def run_gemm(lib, path: str, variant: int, case, dtype: str, rng: np.random.Generator):
    """Launch one case: (A, B as logical float64 values, c0 as [threads][slots], out as [3][threads][slots]).
    WMMA variants 1-3 (rs, sr, rr) pass A, B or both as K-major operand fragments instead, and NaN in that
    operand's shared tile, so that reading the wrong copy shows."""
    M, N, K, GM, GN, ta, tb = case
    group = PATHS[path][3]
    threads = GM * GN * group
    slots = M * N // threads
    code, torch_dtype = DTYPES[dtype]
    a_raw, a = random_tile((K, M) if ta else (M, K), torch_dtype, rng)
    b_raw, b = random_tile((N, K) if tb else (K, N), torch_dtype, rng)
    a_frag = np.zeros((threads, M * K // (GM * group)), dtype=np.int16)
    b_frag = np.zeros((threads, N * K // (GN * group)), dtype=np.int16)
    if path == "mp31_wmma" and variant in (1, 3):
        fragment = make_gemm_a_fragment(PATHS[path][2], M, K, GM, GN, bits=16, k_major=True, transposed=bool(ta))
        a_frag = fragment_image(fragment, a_raw, threads, dtype)
        a_raw = np.full_like(a_raw, NAN_BITS[dtype])
    if path == "mp31_wmma" and variant in (2, 3):
        fragment = make_gemm_b_fragment(PATHS[path][2], N, K, GM, GN, bits=16, k_major=True, transposed=bool(tb))
        b_frag = fragment_image(fragment, b_raw, threads, dtype)
        b_raw = np.full_like(b_raw, NAN_BITS[dtype])
    c0 = rng.standard_normal((threads, slots)).astype(np.float32)
    out = np.full((3, threads, slots), np.nan, dtype=np.float32)
    rc = lib.run(variant, M, N, K, GM, GN, ta, tb, code, ptr(a_raw), ptr(b_raw), ptr(a_frag), ptr(b_frag), ptr(c0),
                 ptr(out))
    assert rc == 0, lib.get_last_error().decode()
    return (a.T if ta else a), (b.T if tb else b), c0, out


def case_id(case) -> str:
    M, N, K, GM, GN, ta, tb = case
    return f"{M}x{N}x{K}-g{GM}x{GN}-{'T' if ta else 'N'}{'T' if tb else 'N'}"


def check_gemm(build, path: str, case, dtype: str, instruction: str, variant: int = 0):
    M, N, K, GM, GN, _, _ = case
    threads = GM * GN * PATHS[path][3]
    rng = np.random.default_rng(zlib.crc32(repr((path, variant, case, dtype)).encode()))
    a, b, c0, out = run_gemm(build(path), path, variant, case, dtype, rng)
    thread, slot = (x[..., 0] for x in make_gemm_accumulator_fragment(instruction, M, N, GM, GN).evaluate_all())
    # the contract puts every element in its own (thread, slot), covering all of them
    assert len(set(zip(thread.ravel().tolist(), slot.ravel().tolist()))) == threads * out.shape[2]
    ab = a @ b
    for phase, expected in enumerate((ab, 2 * ab, c0[thread, slot] + ab)):
        got = out[phase][thread, slot]
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * np.sqrt(K),
                                   err_msg=f"{path} {case_id(case)} {dtype}: phase {phase}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES["mp22_mma"], ids=case_id)
def test_mp22_mma(build, case, dtype):
    check_gemm(build, "mp22_mma", case, dtype, PATHS["mp22_mma"][2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES["mp31_wmma"], ids=case_id)
def test_mp31_wmma(build, case, dtype):
    check_gemm(build, "mp31_wmma", case, dtype, PATHS["mp31_wmma"][2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant, form, case",
                         [(v, f, c) for (v, f), cases in WMMA_REGISTER_CASES.items() for c in cases],
                         ids=lambda x: case_id(x) if isinstance(x, tuple) else str(x))
def test_mp31_wmma_register_operands(build, variant, form, case, dtype):
    check_gemm(build, "mp31_wmma", case, dtype, PATHS["mp31_wmma"][2], variant=variant)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES["mp31_sqmma"], ids=case_id)
def test_mp31_sqmma(build, case, dtype):
    check_gemm(build, "mp31_sqmma", case, dtype, sqmma_instruction(*case[:2], *case[3:5]))


@pytest.mark.parametrize("case", SQMMA_NOWAIT_CASES, ids=case_id)
def test_mp31_sqmma_nowait(build, case):
    check_gemm(build, "mp31_sqmma", case, "float16", sqmma_instruction(*case[:2], *case[3:5]), variant=1)


# arch -> the static_assert messages tpl_gemm_static_checks.mu must produce when built for it (one kernel each)
STATIC_CHECKS = {
    220: ["M must be a multiple of GM x the instruction's m", "the m16n8k16 warp WMMA needs mp_31 or newer",
          "SQMMA needs mp_31 or newer"],
    310: ["the m32n32k16 warp MMA exists on mp_22 only",
          "K must be a multiple of the instruction's k", "takes float16 or bfloat16 operands",
          "float16/bfloat16 operands accumulate in float32", "A and B must have the same element type",
          "must be a power of two from 8 to 256 bytes", "no SQMMA shape divides the squad tile"],
}


def test_static_checks(tmp_path):
    """Invalid instantiations fail to compile with a message naming the violated rule."""

    def compile_for(arch):
        cmd = sim_compile_command(KERNELS / "tpl_gemm_static_checks.mu", tmp_path / f"checks{arch}.o", arch,
                                  ("-fsyntax-only",))
        return subprocess.run(cmd, capture_output=True, text=True)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(STATIC_CHECKS, pool.map(compile_for, STATIC_CHECKS)))
    for arch, messages in STATIC_CHECKS.items():
        proc = results[arch]
        assert proc.returncode != 0, f"tpl_gemm_static_checks.mu compiled for arch {arch}, but must fail"
        missing = [m for m in messages if m not in proc.stderr]
        assert not missing, f"arch {arch}: missing {missing} in:\n{proc.stderr[-6000:]}"
