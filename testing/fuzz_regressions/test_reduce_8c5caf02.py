"""Fuzzer regression (reduce).

mismatch on mp_31 and mp_22, a fuzzer false positive, fixed in the fuzzer: `arg 1: 1/1 elements differ; got
0.4375, expected 0.404297`. The program sums 256 bfloat16 inputs in a bfloat16 fragment (32 threads sum 8
each, then a butterfly over 32 lanes): emulating exactly that order in bfloat16 gives 0.4375, so the kernel is
right and the float32 reference's tolerance (2e-2 of a result that cancels to 0.40) was too tight. The
tolerance of a sum accumulated in float16/bfloat16 now covers the rounding of its partial sums (reduce.py:
accumulation_atol).

Found by `python -m tilelang_musa.fuzz --ray --seed 42002 --start 4332 --n 1 --arch mp_31,mp_22 (program 4332 of the fourth campaign run)`; not shrunk (the finding is the tolerance: smaller or float32 variants pass).
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.reduce import ReduceDesc
from tilelang_musa.fuzz.runner import check

DESC = ReduceDesc(kind='sum', reduced=256, kept=1, block=1, dim=0, clear=True, src_scope='fragment',
    dst_scope='fragment', dtype='bfloat16', acc_dtype='bfloat16', threads=128, data_seed=2112625642, total=0)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_reduce_8c5caf02(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
