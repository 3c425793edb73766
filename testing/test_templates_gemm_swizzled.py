"""SQMMA block GEMM on operands in the SQMMA swizzled shared-memory layout
(`tl::gemm_ss_mp31_sqmma_swizzled` in src/tl_templates/musa/gemm_mp31_sqmma.h), run in the CPU simulator through
testing/sim_kernels/tpl_gemm_sqmma_swz.mu (on the harness of tpl_gemm_harness.mu).

A and B are permuted in Python into the storage of `make_sqmma_swizzled_layout` (the compiler's choice: default
continuity, canonical granularity) or of `make_xor_swizzle_layout` with other continuities / granularities, and
uploaded so that the harness's plain copies place every element at its physical offset. The kernel runs the
template three times (ClearAccum on a NaN-poisoned accumulator, accumulate, accumulate into random values); the
test reassembles C through `make_gemm_accumulator_fragment` and compares with numpy, float16 and bfloat16.
Invalid instantiations must fail to compile with messages naming the rule (tpl_gemm_sqmma_swz_static_checks.mu).
"""

from __future__ import annotations

import ctypes
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from sim_build import build_shared
from test_templates_gemm import DTYPES, case_id, ptr, random_tile, sim_compile_command, sqmma_instruction
from tilelang_musa.layout import make_gemm_accumulator_fragment
from tilelang_musa.layout.swizzle import make_sqmma_swizzled_layout, make_xor_swizzle_layout, swizzle_alignment

KERNELS = Path(__file__).resolve().parent / "sim_kernels"
ARCH = 310
SQUAD = 128

# Variants of tpl_gemm_sqmma_swz.mu (its `Storage`): 0 the compiler's layout; 1 narrow column blocks (K-major
# operands 32 elements, MN-major 64), canonical swizzles; 2 default continuity, SG64 on both, _nowait form.
NARROW = {True: 32, False: 64}  # k_major -> continuity cap of variant 1
CASES = {
    0: [(256, 256, 64, 2, 2, 0, 0), (256, 256, 64, 2, 2, 1, 1), (256, 256, 64, 4, 1, 1, 0), (256, 256, 64, 1, 4, 0, 1),
        (64, 64, 64, 1, 1, 0, 0), (128, 64, 128, 2, 1, 1, 1), (64, 128, 128, 1, 2, 0, 1)],
    1: [(128, 128, 64, 2, 2, 0, 0), (128, 128, 64, 2, 2, 1, 1)],
    2: [(128, 64, 64, 1, 1, 1, 0)],
}  # fmt: skip


def operand_layout(variant: int, shape: tuple[int, int], dtype: str, k_major: bool):
    """The layout the kernel's variant stores an operand tile (stored rows x cols) in."""
    if variant == 0:
        return make_sqmma_swizzled_layout((list(shape), dtype), k_major=k_major)
    cols, elem = shape[1], 2
    if variant == 1:
        return make_xor_swizzle_layout(list(shape), dtype, 16 if k_major else 32,
                                       continuity=min(cols, NARROW[k_major]))
    return make_xor_swizzle_layout(list(shape), dtype, 64, continuity=min(cols, 256 // elem))


def swizzled_image(layout, raw: np.ndarray) -> np.ndarray:
    """`raw` (stored rows x cols) placed at the layout's physical element offsets; every offset filled once."""
    rows, cols = raw.shape
    (phys,) = layout.evaluate(np.arange(rows)[:, None], np.arange(cols)[None, :])
    assert sorted(phys.ravel().tolist()) == list(range(raw.size)), "the layout is not a permutation of the tile"
    image = np.empty(raw.size, dtype=raw.dtype)
    image[phys.ravel()] = raw.ravel()
    return image


@pytest.fixture(scope="module")
def lib(session_dir):
    output, stderr = build_shared(session_dir / "sim_kernels", "tpl_gemm_sqmma_swz",
                                  lambda out: sim_compile_command(KERNELS / "tpl_gemm_sqmma_swz.mu", out, ARCH))
    if output is None:
        pytest.fail(f"compiling tpl_gemm_sqmma_swz.mu failed:\n{stderr[-6000:]}")
    library = ctypes.CDLL(str(output))
    library.get_last_error.restype = ctypes.c_char_p
    return library


def run_swizzled(lib, variant: int, case, dtype: str, rng: np.random.Generator):
    M, N, K, GM, GN, ta, tb = case
    threads = GM * GN * SQUAD
    slots = M * N // threads
    code, torch_dtype = DTYPES[dtype]
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    a_raw, a = random_tile(a_shape, torch_dtype, rng)
    b_raw, b = random_tile(b_shape, torch_dtype, rng)
    a_layout = operand_layout(variant, a_shape, dtype, k_major=not ta)
    b_layout = operand_layout(variant, b_shape, dtype, k_major=bool(tb))
    # the harness puts B right after A (and A at the 1024-aligned shared address 0): B must start on its period
    b_granularity = 64 if variant == 2 else (16 if tb else 32)
    assert (M * K * 2) % swizzle_alignment(b_granularity) == 0, f"{case_id(case)}: B would be misaligned"
    a_image, b_image = swizzled_image(a_layout, a_raw), swizzled_image(b_layout, b_raw)
    if variant == 0:  # the tile really is laid out (not just the identity): the swizzle moved elements
        assert not np.array_equal(a_image, a_raw.ravel()) and not np.array_equal(b_image, b_raw.ravel())
    unused = np.zeros(1, dtype=np.int16)
    c0 = rng.standard_normal((threads, slots)).astype(np.float32)
    out = np.full((3, threads, slots), np.nan, dtype=np.float32)
    rc = lib.run(variant, M, N, K, GM, GN, ta, tb, code, ptr(a_image), ptr(b_image), ptr(unused), ptr(unused),
                 ptr(c0), ptr(out))
    assert rc == 0, lib.get_last_error().decode()
    return (a.T if ta else a), (b.T if tb else b), c0, out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant, case", [(v, c) for v, cases in CASES.items() for c in cases],
                         ids=lambda x: case_id(x) if isinstance(x, tuple) else f"v{x}")
def test_sqmma_swizzled(lib, variant, case, dtype):
    M, N, K, GM, GN, _, _ = case
    rng = np.random.default_rng(zlib.crc32(repr(("swz", variant, case, dtype)).encode()))
    a, b, c0, out = run_swizzled(lib, variant, case, dtype, rng)
    fragment = make_gemm_accumulator_fragment(sqmma_instruction(M, N, GM, GN), M, N, GM, GN)
    thread, slot = (x[..., 0] for x in fragment.evaluate_all())
    ab = a @ b
    for phase, expected in enumerate((ab, 2 * ab, c0[thread, slot] + ab)):
        np.testing.assert_allclose(out[phase][thread, slot], expected, rtol=1e-2, atol=1e-2 * np.sqrt(K),
                                   err_msg=f"v{variant} {case_id(case)} {dtype}: phase {phase}")


STATIC_CHECKS = [
    "an N-major B's continuity must be a multiple of the SQMMA atom's n",
    "an M-major A's continuity must be a multiple of the SQMMA atom's m",
    "a K-major A's continuity must be a multiple of 16 elements",
    "a K-major B's continuity must be a multiple of 16 elements",
    "an operand's continuity must divide its stored row length",
    "the swizzle granularity must be 0, 16, 32 or 64 bytes",
    "must be a power of two from 8 to 256 bytes",
]


def test_static_checks(tmp_path):
    """Instantiations that SQMMA descriptors cannot express fail to compile, naming the rule."""
    cmd = sim_compile_command(KERNELS / "tpl_gemm_sqmma_swz_static_checks.mu", tmp_path / "checks.o", ARCH,
                              ("-fsyntax-only",))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode != 0, "tpl_gemm_sqmma_swz_static_checks.mu compiled, but must fail"
    missing = [m for m in STATIC_CHECKS if m not in proc.stderr]
    assert not missing, f"missing {missing} in:\n{proc.stderr[-6000:]}"
