"""Fuzzer regression (reduce).

launch_error on mp_31 and mp_22 in checked mode (TILELANG_SIM_CHECK=1), fixed in the simulator: `data race on
byte 0 of global `O`: this thread stores it at line 27 while thread (1,0,0) stored it at line 27, with no
barrier between them`. The program: an 8 x 1 fragment reduced along dim 0 into a (1,) fragment R, then
T.copy(R, O[0]). After the reduction every thread of the row's group holds R[0] (the layout replicates it) and
the copy's loop stores it from each replica; the race detector on global memory counts two stores of one byte
as a race even when they store the same value. Every T.reduce_* result copied to global memory
(test_reduce.py's pattern) failed this way in checked mode, on global outputs and on shared destinations of
T.reduce_*. Fixed by the checked stores (tl_sim::CheckedStore tells the race detector when a store leaves memory
unchanged).

Found by the reduce family in checked mode (first on a chunked reduction, then on plain ones), shrunk with
tilelang_musa.fuzz.shrink from ReduceDesc(kind='absmax', reduced=8, kept=12, block=4, dim=0, threads=128, ...).
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31."""

import pytest

from tilelang_musa.fuzz.families.reduce import ReduceDesc
from tilelang_musa.fuzz.runner import check

DESC = ReduceDesc(kind='sum', reduced=8, kept=1, block=1, dim=0, clear=True, src_scope='fragment',
    dst_scope='fragment', dtype='float32', acc_dtype='float32', threads=32, data_seed=1597594757, total=0)


@pytest.mark.parametrize("arch", ['mp_31'])
def test_reduce_6cb9b180(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
