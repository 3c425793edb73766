"""TVMScript's explicit conditions through `T` (`with T.If(c): with T.Then(): ... with T.Else(): ...`, and the
logical `T.And` / `T.Or` / `T.Not`), as upstream re-exports them and TileOPs' kernels write them: compiled for both
arches, run in the simulator against torch; misuse is an error at the kernel's line."""

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]
M, N, BLOCK = 50, 96, 32


def _masked_tiles(tiles: int):
    """Copies whole tiles with T.copy under `T.If`, the last (ragged) one element by element under `T.Else`,
    masking with T.And; F flags each row from its first three columns with T.And / T.Or / T.Not."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), F: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, BLOCK), threads=128) as bx:
            tile = T.alloc_shared((BLOCK, N), "float32")
            for t in T.serial(tiles):
                with T.If(bx < tiles - 1):
                    with T.Then():
                        T.copy(A[bx * BLOCK, 0], tile)
                    with T.Else():
                        for i, j in T.Parallel(BLOCK, N):
                            if T.And(bx * BLOCK + i < M, j < N):
                                tile[i, j] = A[bx * BLOCK + i, j] * 2.0
                for i, j in T.Parallel(BLOCK, N):
                    with T.If(bx * BLOCK + i < M), T.Then():
                        B[bx * BLOCK + i, j] = tile[i, j] + t
                for i in T.Parallel(BLOCK):
                    with T.If(T.And(bx * BLOCK + i < M, True)), T.Then():
                        row = bx * BLOCK + i
                        F[row] = T.if_then_else(
                            T.Or(T.And(A[row, 0] > 0, A[row, 1] > 0), T.Not(A[row, 2] > 0)), 1, 0)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_if_then_else_frames_and_logical_names(arch):
    tiles = 2
    kernel = tilelang.compile(_masked_tiles(tiles), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "} else {" in source and "&&" in source and "||" in source
    a, b, f = rand((M, N), torch.float32), torch.empty(M, N), torch.empty(M, dtype=torch.int32)
    kernel(a, b, f)
    expected = a.clone()
    last = (M // BLOCK) * BLOCK  # the ragged tile's rows went through the T.Else branch
    expected[last:] *= 2.0
    torch.testing.assert_close(b, expected + (tiles - 1))
    assert f.tolist() == (((a[:, 0] > 0) & (a[:, 1] > 0)) | ~(a[:, 2] > 0)).int().tolist()


def test_logical_names_build_expressions_outside_a_kernel():
    x = tirx.Var("x", "int32")
    assert isinstance(T.And(x < 4, x > 0), tirx.And) and isinstance(T.Or(x < 4, True), tirx.Or)
    assert isinstance(T.Not(x < 4), tirx.Not)
    with pytest.raises(TypeError, match=r"T.And: a condition must be a boolean .* got a int32 expression `x`"):
        T.And(x, x < 4)


def _misused(form: str):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            if form == "then_outside":
                with T.Then():
                    A[0] = 1.0
            elif form == "else_first":
                with T.If(bx < 1):
                    with T.Else():
                        A[0] = 1.0
            elif form == "no_then":
                with T.If(bx < 1):
                    A[0] = 1.0
            elif form == "int_condition":
                with T.If(bx + 1), T.Then():
                    A[0] = 1.0

    return main


@pytest.mark.parametrize("form, message", [
    ("then_outside", r"`with T.Then\(\):` belongs directly inside a `with T.If\(cond\):`"),
    ("else_first", r"`with T.Else\(\):` belongs after the `with T.Then\(\):`"),
    ("no_then", r"holds no `with T.Then\(\):`"),
    ("int_condition", r"T.If: a condition must be a boolean .* got a int32 expression"),
])
def test_misplaced_frames_are_errors_at_their_line(form, message):
    with pytest.raises(CompileError, match=message) as err:
        tilelang.compile(_misused(form), target="musa -arch=mp_31")
    assert "test_script_conditions.py" in str(err.value)
