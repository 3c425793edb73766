"""T.view / T.reshape check that the view covers the viewed storage exactly: a mismatch is a CompileError naming
the line that is also an AssertionError (upstream asserts it); symbolic sizes must be provably equal; outside a
kernel a tensor annotation or declared buffer is checked and viewed the same way."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError


def view_program(N, shape, dtype, new_dtype=None):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor(shape, new_dtype or dtype)):
        with T.Kernel(1, threads=128):
            T.copy(T.view(A, shape, dtype=new_dtype), B)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_view_runs(arch):
    kernel = tilelang.compile(view_program(1024, [32, 32], "float32"), target=f"musa -arch={arch}")
    a, b = rand((1024,), torch.float32), poison((32, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.view(32, 32))


def test_view_size_mismatch_is_an_assertion_and_a_compile_error():
    with pytest.raises(AssertionError) as info:
        view_program(1024, [32, 33], "float32")
    assert isinstance(info.value, CompileError) and "test_view_sizes.py" in str(info.value)


def test_view_outside_kernel_symbolic_sizes():
    batch, seq = T.dynamic("batch"), T.dynamic("seq")
    src = T.Tensor([batch + 1, seq, 128], "float")
    viewed = T.view(src, [batch + 1, seq * 128])
    assert len(viewed.shape) == 2 and viewed.dtype == "float32"
    with pytest.raises(AssertionError):
        T.view(src, [batch + 1, seq * 129])


def test_view_outside_kernel_declared_buffer_dtype():
    A = tvm.tirx.decl_buffer((16, 32), "float4_e2m1fn", name="A")
    viewed = T.view(A, (16, 16), dtype=T.uint8)
    assert str(viewed.dtype) == "uint8" and tuple(int(d) for d in viewed.shape) == (16, 16)
    with pytest.raises(AssertionError):
        T.view(A, (16, 17), dtype=T.uint8)


def row_into_view_program(rows, cols, tile_cols, row):
    """One row of a shared tile wider than the view stored at view row `row`: the columns past `cols` belong to no
    element of the view and must be dropped, not written into the next row of the viewed tensor."""

    @T.prim_func
    def main(A: T.Tensor((1, tile_cols), "float32"), B: T.Tensor((rows * cols,), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((1, tile_cols), "float32")
            T.copy(A[0, 0], tile)
            B_rows = T.view(B, (rows, cols))
            T.copy(tile, B_rows[row, 0])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_store_through_a_global_view_is_guarded_by_the_views_shape(arch):
    rows, cols, tile_cols, row = 8, 20, 32, 2
    kernel = tilelang.compile(row_into_view_program(rows, cols, tile_cols, row), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # The guard is on the view's column (4-wide stores: 5 threads cover its 20 columns), not on B's total size.
    assert "((int)threadIdx.x) < 5)" in source, source
    a, b = rand((1, tile_cols), torch.float32), rand((rows * cols,), torch.float32, seed=1)
    expected = b.clone().view(rows, cols)
    expected[row] = a[0, :cols]
    kernel(a, b)
    torch.testing.assert_close(b.view(rows, cols), expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_view_inside_kernel_symbolic_sizes(arch):
    """A global tensor reshaped inside the kernel to a symbolic shape, `(tokens * topk,)`, and gathered from by
    position (a negative position reads nothing): its accesses are the tensor's own, through index arithmetic."""
    tokens, topk, rows = T.dynamic("tokens"), T.dynamic("topk"), T.dynamic("rows")

    @T.prim_func
    def main(W: T.Tensor((tokens, topk), "float32"), Pos: T.Tensor((rows,), "int32"),
             Out: T.Tensor((rows,), "float32")):
        with T.Kernel(T.ceildiv(rows, 64), threads=64) as bx:
            flat = T.reshape(W, (tokens * topk,))
            for i in T.Parallel(64):
                pos = Pos[bx * 64 + i]
                if pos >= 0:
                    Out[bx * 64 + i] = flat[pos] * 2.0
                else:
                    Out[bx * 64 + i] = -1.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "W[" in source and "flat" not in source, source
    w = rand((7, 5), torch.float32, 3)
    pos = torch.randint(-1, 35, (100,), dtype=torch.int32)
    out = poison((100,), torch.float32)
    kernel(w, pos, out)
    torch.testing.assert_close(out, torch.where(pos >= 0, w.reshape(-1)[pos.clamp(min=0).long()] * 2.0,
                                                torch.tensor(-1.0)))


def test_on_chip_view_needs_constant_shapes():
    n = T.dynamic("n")
    with pytest.raises(CompileError, match=r"`S` \(shared.dyn\) and the view need constant shapes"):
        @T.prim_func
        def main(A: T.Tensor((n, 64), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                T.reshape(S, (n,))
