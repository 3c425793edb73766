"""Fuzzer regression (reduce).

launch_error on mp_31 and mp_22 in checked mode, fixed: `data race on byte 0 of shared `R`: this thread loads
it at line 28 while thread (3,0,0) stored it at line 37, with no barrier between them`. The program reduces a
row of 9 in chunks of 8 (a serial loop of T.reduce_sum(F, R, dim=1, clear=False) into a shared R). A shared
dst is staged through a fragment: each replica of a result loads R, combines, and stores R back at the same
address; TVM's ThreadSync takes equal indices for a thread's own element, so no barrier separated one thread's
write-back from another's read (in the same call, or in the next iteration): on hardware a replica could add
its partial sum to an already updated R. Fixed in language/reduce.py: the staging of a shared dst is fenced
with T.sync_threads() after the read and after the write-back.

Found by `python -m tilelang_musa.fuzz --seed 5000 --start 18 --n 1 --arch mp_31,mp_22 (program 18 of the 600-program batch)`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.reduce import ReduceDesc
from tilelang_musa.fuzz.runner import check

DESC = ReduceDesc(kind='sum', reduced=8, kept=1, block=2, dim=1, clear=True, src_scope='fragment',
    dst_scope='shared', dtype='float32', acc_dtype='float32', threads=32, data_seed=14672592, total=9)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_reduce_838e6912(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
