"""Fuzzer regression (pipeline).

launch_error on mp_31 and mp_22 in checked mode, fixed: `data race on byte 3644 of shared `A_s`: this thread
loads it at line 46 while thread (30,0,0) stored it at line 22, with no barrier between them`. A T.Pipelined
loop over a T.dynamic K with 2 stages and K = 64 = one tile: the steady loop runs max(1 - 1, 0) = 0 times, and
TVM's ThreadSync took the barrier inside it as separating the prologue's stores from the epilogue's loads.
Fixed in transform/inject_software_pipeline.py: a steady loop whose trip count may be zero is followed by a
block barrier.

Found by `python -m tilelang_musa.fuzz --seed 42001 --families elementwise,copy,reduce,cumsum,gemm,softmax,atomic,pipeline,warpspec,tilecopy,layout,gemm_combo,rownorm,carried --start 208 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.pipeline import PipelineDesc
from tilelang_musa.fuzz.runner import check

DESC = PipelineDesc(M=192, K=64, bm=64, bk=64, threads=128, num_stages=2, dtype='bfloat16', op='a+b',
    via_fragment=False, out='row', config='default', explicit_order=True, dynamic=True, data_seed=772204532)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_pipeline_edc73eea(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
