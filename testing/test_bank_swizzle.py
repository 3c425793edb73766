"""Upstream's bank swizzles, make_{quarter,half,full}_bank_swizzled_layout: the xor pattern of 16-byte chunks,
leading dims as Layout.expand gives them, and a shared tile annotated with one, copied in and read across rows in
the simulator against torch."""

import numpy as np
import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.layout import (
    make_full_bank_swizzled_layout, make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout,
)

MAKERS = {"quarter": make_quarter_bank_swizzled_layout, "half": make_half_bank_swizzled_layout,
          "full": make_full_bank_swizzled_layout}


def chunk_table(layout, rows, cols, vec):
    """The physical 16-byte chunk of each logical chunk, per row."""
    ii, jj = np.meshgrid(np.arange(rows), np.arange(0, cols, vec), indexing="ij")
    return layout.evaluate(ii, jj)[0] // vec


def test_full_bank_swizzle_xors_the_chunk_with_the_row():
    table = chunk_table(make_full_bank_swizzled_layout(8, 64, 16), 8, 64, 8)
    assert (table == np.arange(8)[:, None] * 8 + (np.arange(8)[None, :] ^ np.arange(8)[:, None])).all()


@pytest.mark.parametrize("kind,bits", [("quarter", 1), ("half", 2)])
def test_narrower_swizzles_xor_groups_of_chunks_with_the_rows_place_in_its_period(kind, bits):
    group = 1 << bits
    table = chunk_table(MAKERS[kind](16, 8 * group, 16), 16, 8 * group, 8)
    s = np.arange(16)[:, None] % 8
    expected = (np.arange(16)[:, None] // 8) * 8 * group + s * group + (np.arange(group)[None, :] ^ (s >> (3 - bits)))
    assert (table == expected).all()


@pytest.mark.parametrize("kind", list(MAKERS))
def test_leading_dims_expand_the_2d_layout(kind):
    make = MAKERS[kind]
    two = make(tirx.decl_buffer((8, 64), "float16", name="A2", scope="shared"))
    assert two.is_bijective()
    assert make(tirx.decl_buffer((2, 8, 64), "float16", name="A3", scope="shared")).is_equal(two.expand([2]))
    assert make(tirx.decl_buffer((3, 2, 8, 64), "float16", name="A4", scope="shared")).is_equal(two.expand([3, 2]))


def test_a_row_narrower_than_the_swizzle_is_refused():
    with pytest.raises(ValueError, match=r"make_full_bank_swizzled_layout: the last dim \(32\) must be a multiple "
                                         r"of 64"):
        make_full_bank_swizzled_layout(8, 32, 16)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_bank_swizzled_shared_tile_keeps_the_values(kind, arch):
    rows, cols = 32, 64

    @T.prim_func
    def transpose_through_shared(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((cols, rows), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((rows, cols), "float16")
            T.annotate_layout({S: MAKERS[kind](S)})
            T.copy(A, S)
            for j, i in T.Parallel(cols, rows):
                B[j, i] = S[i, j]

    kernel = tilelang.compile(transpose_through_shared, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert " ^ " in source, source  # the swizzle is in the shared-memory addresses
    a, b = rand((rows, cols), torch.float16, 21), poison((cols, rows), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a.t().contiguous())
