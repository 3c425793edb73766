"""Rows gathered through an index tensor into a shared tile (sparse attention's KV gather):
- a T.Parallel copy loop `tile[i, d] = src[idx[i], d]` vectorizes along d: `idx[i]` is the same for every lane
  (read once and broadcast), the row it selects is contiguous;
- a T.Parallel nest of element `T.async_copy(src[idx[i], d], tile[i, d])` (or `T.copy(..., force_async_copy=True)`,
  or `src_robust_desc=`; the row may be bound first, `r = idx[i]`) is cut into 16-byte row pieces, issued as one group (one commit a nest), each piece's row
  index read once; rows outside the tensor (-1) are zero-filled by the pieces' predicate.
Each printed for mp_31 and mp_22 and run in the simulator against torch on random rows."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]
N_SRC, ROWS, COLS, BLOCK = 100, 64, 128, 16


def random_rows(seed, with_missing=True):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, N_SRC, (ROWS,), generator=g, dtype=torch.int32)
    if with_missing:
        idx[::7] = -1
    return idx


def gathered(src, idx):
    rows = src[idx.clamp(min=0).long()]
    return torch.where((idx >= 0)[:, None], rows, torch.zeros((), dtype=src.dtype))


def masked_gather(dtype):
    @T.prim_func
    def gather(src: T.Tensor((N_SRC, COLS), dtype), idx: T.Tensor((ROWS,), "int32"),
               out: T.Tensor((ROWS, COLS), dtype)):
        with T.Kernel(ROWS // BLOCK, threads=128) as b:
            tile = T.alloc_shared((BLOCK, COLS), dtype)
            for i, d in T.Parallel(BLOCK, COLS):
                row = idx[b * BLOCK + i]
                tile[i, d] = T.if_then_else(row >= 0, src[T.max(row, 0), d], T.cast(0, dtype))
            T.copy(tile, out[b * BLOCK:(b + 1) * BLOCK, :])

    return gather


@pytest.mark.parametrize("arch", ARCHS)
def test_a_gathered_row_copy_loop_moves_16_bytes_an_access(arch):
    """The row index is one load a thread shares over its 8 lanes; the row is read and stored 8 bfloat16 at once."""
    kernel = tilelang.compile(masked_gather("bfloat16"), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert re.search(r"\*reinterpret_cast<tl::vec<bfloat16_t, 8>\*>\(tile \+ [^;]*\? \(\*reinterpret_cast<"
                     r"tl::vec<bfloat16_t, 8>\*>\(src \+ \(\(row \* 128\)", source), source
    src, idx = rand((N_SRC, COLS), torch.bfloat16, 1), random_rows(2)
    out = poison((ROWS, COLS), torch.bfloat16)
    kernel(src, idx, out)
    torch.testing.assert_close(out, gathered(src, idx), rtol=0, atol=0)


def test_a_column_chosen_per_lane_through_a_bound_index_stays_element_wise():
    """`c = perm[d]` depends on the innermost variable through a binding: `src[i, c]` moves with the lanes but not
    contiguously, so the loop is not vectorized (a lane-invariant read would wrongly broadcast perm[d])."""

    @T.prim_func
    def permute_columns(src: T.Tensor((ROWS, COLS), "float32"), perm: T.Tensor((COLS,), "int32"),
                        out: T.Tensor((ROWS, COLS), "float32")):
        with T.Kernel(ROWS // BLOCK, threads=128) as b:
            tile = T.alloc_shared((BLOCK, COLS), "float32")
            for i, d in T.Parallel(BLOCK, COLS):
                c = perm[d]
                tile[i, d] = src[b * BLOCK + i, c]
            T.copy(tile, out[b * BLOCK:(b + 1) * BLOCK, :])

    kernel = tilelang.compile(permute_columns, target="musa -arch=mp_31")
    assert "tl::vec<float, 4>*>(src" not in kernel.get_kernel_source()
    src, perm = rand((ROWS, COLS), torch.float32, 3), torch.randperm(COLS, generator=torch.Generator().manual_seed(4))
    out = poison((ROWS, COLS), torch.float32)
    kernel(src, perm.to(torch.int32), out)
    torch.testing.assert_close(out, src[:, perm], rtol=0, atol=0)


def async_gather(dtype, mode):
    @T.prim_func
    def gather(src: T.Tensor((N_SRC, COLS), dtype), idx: T.Tensor((ROWS,), "int32"),
               out: T.Tensor((ROWS, COLS), dtype)):
        with T.Kernel(ROWS // BLOCK, threads=128) as b:
            tile = T.alloc_shared((BLOCK, COLS), dtype)
            desc = T.make_robust_desc(T.address_of(src[0, 0]), N_SRC * COLS * 2)
            for i, d in T.Parallel(BLOCK, COLS):
                if mode == "async_copy":
                    T.async_copy(src[idx[b * BLOCK + i], d], tile[i, d])
                elif mode == "bound_row":
                    r = idx[b * BLOCK + i]
                    T.async_copy(src[r, d], tile[i, d])
                elif mode == "force_async_copy":
                    T.copy(src[idx[b * BLOCK + i], d], tile[i, d], force_async_copy=True)
                else:
                    T.copy(src[idx[b * BLOCK + i], d], tile[i, d], src_robust_desc=desc)
            if mode in ("async_copy", "bound_row"):
                T.ptx_wait_group(0)
            T.copy(tile, out[b * BLOCK:(b + 1) * BLOCK, :])

    return gather


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", ["async_copy", "bound_row", "force_async_copy", "robust"])
def test_a_parallel_nest_of_element_async_copies_gathers_16_byte_row_pieces(arch, mode):
    """One 16-byte piece per (row, 8 columns), its row index bound once, the nest committed once; rows of -1 (out of
    the tensor) zero-filled."""
    kernel = tilelang.compile(async_gather("bfloat16", mode), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    piece = "tl::robust_copy<16>(" if mode == "robust" else "tl::cp_async_gs_conditional<16>("
    row = "r" if mode == "bound_row" else "src_row"  # the user's binding, or the one the lowering makes
    assert source.count(piece) == 1 and f"const int {row} = idx[" in source, source
    assert f"{row} < 100" in source, source  # the piece's predicate: the gathered row lies in src
    if mode != "robust":
        assert source.count("tl::cp_async_commit();") == 1 and source.count("tl::cp_async_wait<0>();") == 1, source
    src, idx = rand((N_SRC, COLS), torch.bfloat16, 5), random_rows(6)
    out = poison((ROWS, COLS), torch.bfloat16)
    kernel(src, idx, out)
    torch.testing.assert_close(out, gathered(src, idx), rtol=0, atol=0)


def test_gathered_element_async_copies_that_cannot_form_pieces_are_an_error_at_the_line():
    """Columns 1..63 of float16 rows: no 4-byte piece is aligned, so the 2-byte element copies are rejected."""

    @T.prim_func
    def odd(src: T.Tensor((N_SRC, 64), "float16"), idx: T.Tensor((16,), "int32"), out: T.Tensor((16, 63), "float16")):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((16, 63), "float16")
            for i, d in T.Parallel(16, 63):
                T.async_copy(src[idx[i], d + 1], tile[i, d])
            T.ptx_wait_group(0)
            T.copy(tile, out)

    with pytest.raises(tilelang.CompileError) as info:
        tilelang.compile(odd, target="musa -arch=mp_31")
    message = str(info.value)
    assert "T.async_copy" in message and "4/8/16-byte pieces" in message and "test_gathered_rows.py" in message, \
        message
