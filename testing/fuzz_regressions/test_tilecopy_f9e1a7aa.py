"""Fuzzer regression (tilecopy).

launch_error on mp_31: KernelLaunchError: kernel 'main_kernel' failed (call_packed returned -1): main_kernel:
cannot build the TME descriptor of tensor `A` (muTensorDescriptorEncode returned 1): its address and byte
strides must be multiples of 16

Found by `python -m tilelang_musa.fuzz --seed 41001 --families pipeline,warpspec,tilecopy,layout,gemm_combo,rownorm,carried --start 3 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31."""

import pytest

from tilelang_musa.fuzz.families.tilecopy import TileCopyDesc
from tilelang_musa.fuzz.runner import check

DESC = TileCopyDesc(shape=(12, 1), dynamic=(True, True), bm=8, bn=8, threads=64, dtype='float32', loop='pipelined',
    num_stages=1, via_fragment=False, slice_form=False, scale=1, data_seed=1734629253)


@pytest.mark.parametrize("arch", ['mp_31'])
def test_tilecopy_f9e1a7aa(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail


def _pipelined_copy(cols):
    """A T.Pipelined walk over the columns of A (rows of `cols` float32, or of a T.dynamic count)."""
    import tilelang.language as T

    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, cols), "float32"), B: T.Tensor((M, cols), "float32")):
        with T.Kernel(T.ceildiv(M, 8), threads=64) as by:
            S = T.alloc_shared((8, 8), "float32")
            for k in T.Pipelined(T.ceildiv(cols, 8), num_stages=2):
                T.copy(A[by * 8, k * 8], S)
                T.copy(S, B[by * 8, k * 8])

    return main


def test_the_compiler_chooses_tme_only_for_strides_it_can_prove_whole_16_byte_units():
    """The fix (tileop/tme_copy.py): a row stride known only at launch keeps a T.copy an element copy on mp_31;
    a constant stride of whole 16-byte units still takes the TME, and one of 4 bytes does not (as before)."""
    import tilelang
    import tilelang.language as T

    def source(cols):
        return tilelang.compile(_pipelined_copy(cols), target="musa -arch=mp_31").get_kernel_source()

    assert "tma_load" not in source(T.dynamic("N"))
    assert "tma_load" in source(64)
    assert "tma_load" not in source(1)
