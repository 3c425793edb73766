"""TVM's raw address form through `T`: `T.tvm_access_ptr(T.type_annotation(dtype), X.data, offset, extent, rw)`,
as TileOPs' AdaLN kernel passes it to `T.ptx_cp_async` (with a `predicate=`): the element at a flat offset of a 2-D
tile, marked like `T.access_ptr`; compiled for both arches, run in the simulator against torch; bad operands are
errors at their line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]
ROWS, COLS, PIECE = 4, 64, 8  # 4 x 64 halves, 8-element (16-byte) pieces: 32 pieces, one per thread
VALID = 40  # columns of the source that exist: pieces past them are zeros (the predicate)


def _piecewise_copy(dst_operand=None):
    @T.prim_func
    def main(A: T.Tensor((ROWS, VALID), "float16"), B: T.Tensor((ROWS, COLS), "float16")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((ROWS, COLS), "float16")
            for i, j in T.Parallel(ROWS, COLS // PIECE):
                col = j * PIECE
                T.ptx_cp_async(
                    dst_operand(S) if dst_operand else
                    T.tvm_access_ptr(T.type_annotation("float16"), S.data, i * COLS + col, PIECE, 2),
                    T.tvm_access_ptr(T.type_annotation("float16"), A.data, i * VALID + col, PIECE, 1),
                    PIECE, predicate=T.And(i < ROWS, col + PIECE <= VALID))
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S, B)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_tvm_access_ptr_addresses_a_flat_offset(arch):
    kernel = tilelang.compile(_piecewise_copy(), target=f"musa -arch={arch}")
    assert "cp_async" in kernel.get_kernel_source() or "memcpy_g2s" in kernel.get_kernel_source()
    a, b = rand((ROWS, VALID), torch.float16), torch.empty(ROWS, COLS, dtype=torch.float16)
    kernel(a, b)
    expected = torch.zeros(ROWS, COLS, dtype=torch.float16)
    expected[:, :VALID] = a
    assert torch.equal(b, expected)


@pytest.mark.parametrize("dst_operand, message", [
    (lambda S: T.tvm_access_ptr(T.type_annotation("float32"), S.data, 0, 8, 2),
     r"the first operand must be T.type_annotation\('float16'\)"),
    (lambda S: T.tvm_access_ptr(T.type_annotation("float16"), S, 0, 8, 2), r"must be a buffer's `.data`"),
    (lambda S: T.tvm_access_ptr(T.type_annotation("float16"), S.data, 0, 8, 4), "rw_mask must be 1"),
])
def test_bad_operands_are_errors_at_their_line(dst_operand, message):
    with pytest.raises(CompileError, match=message) as err:
        tilelang.compile(_piecewise_copy(dst_operand), target="musa -arch=mp_31")
    assert "test_tvm_access_ptr.py" in str(err.value)
