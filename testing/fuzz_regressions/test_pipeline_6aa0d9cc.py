"""Fuzzer regression (pipeline).

compile_error on mp_31 and mp_22: CompileError: (in tl.InjectSoftwarePipeline) the pass failed on this program
(an internal check of the compiler: please report it): acc[i, j] = acc[i, j] + a directly, or for dynamic
usage, normalize using SeqStmt::Flatten()

Found by `python -m tilelang_musa.fuzz --seed 41001 --families pipeline,warpspec,tilecopy,layout,gemm_combo,rownorm,carried --start 21 --n 1 --arch mp_31,mp_22`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
mp_31 and mp_22."""

import pytest

from tilelang_musa.fuzz.families.pipeline import PipelineDesc
from tilelang_musa.fuzz.runner import check

DESC = PipelineDesc(M=17, K=16, bm=8, bk=16, threads=128, num_stages=1, dtype='float32', op='a', via_fragment=False,
    out='tile', config='default', explicit_order=True, dynamic=False, data_seed=1727951752)


@pytest.mark.parametrize("arch", ['mp_31', 'mp_22'])
def test_pipeline_6aa0d9cc(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
