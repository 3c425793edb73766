"""Fuzzer regression (cumsum).

compile_error on mp_31: LayoutError: cannot invert Fragment([40, 1], threads=32, local=2: (o0, o1) -> thread
o0 % 32, slot o0 // 32): 40 inputs cannot cover the 64 points of the output box [2, 32]

Found by `python -m tilelang_musa.fuzz --seed 42002 --families elementwise,copy,reduce,cumsum,gemm,softmax,atomic,pipeline,warpspec,tilecopy,layout,gemm_combo,rownorm,carried --start 6950 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.cumsum import CumsumDesc
from tilelang_musa.fuzz.runner import check

DESC = CumsumDesc(scanned=40, kept=2, block=1, dim=0, reverse=False, scope='fragment', in_place=True,
    dtype='float32', threads=32, data_seed=1434087957)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_cumsum_ccb81e2e(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
