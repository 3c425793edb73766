"""Fuzzer regression (cumsum).

launch_error on mp_31 and mp_22 in checked mode, fixed (a false report of the checker): `uninitialised read:
shared load of `D` at element 2, read by a TME store, which no thread of this block has written`. T.cumsum of
int32 from S into D: the template writes D through a pointer it derives, which the shadow of written shared
bytes does not see, and a prefix sum of -1 is the poison's bytes. Fixed in
src/tl_templates/sim/sim/uninit_reads.h: an address handed to a template marks the whole buffer handed out
(counted written by the generated code's loads, and by a template's reads once two calls handed it out).

Found by `python -m tilelang_musa.fuzz --seed 42001 --families elementwise,copy,reduce,cumsum,gemm,softmax,atomic,pipeline,warpspec,tilecopy,layout,gemm_combo,rownorm,carried --start 116 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.cumsum import CumsumDesc
from tilelang_musa.fuzz.runner import check

DESC = CumsumDesc(scanned=100, kept=17, block=8, dim=1, reverse=False, scope='shared', in_place=False,
    dtype='int32', threads=64, data_seed=280602242)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_cumsum_1beddcba(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
