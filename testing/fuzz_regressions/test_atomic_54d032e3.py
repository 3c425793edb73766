"""Fuzzer regression (atomic).

compile_error on mp_31 and mp_22, fixed: `T.Parallel under `if bx + r < 1`: a parallel loop is split among the
threads that run it, which must be a contiguous range of thread ids known at compile time, and this condition
does not give one` (PartitionParallelLoop), at `T.atomic_add(Out[0:w], A[bx * b + r, 0:w])` under `if bx * b +
r < n`. Cause: thread_guard.thread_conditions counted blockIdx as a thread index, so a block-uniform `if`
around a region atomic (a T.Parallel) was taken for a thread guard. The shrinker's minimum was n=1, width=1,
block=1; this test keeps a tail (5 rows in blocks of 2) so that the guard must also skip the missing row.

Found by `python -m tilelang_musa.fuzz --seed 7 --families atomic --start 0 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.atomic import AtomicDesc
from tilelang_musa.fuzz.runner import check

DESC = AtomicDesc(form='region', kind='add', n=5, width=40, block=2, threads=64, dtype='int32', data_seed=73510355)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_atomic_54d032e3(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
