"""T.cumsum / T.cummax(annotations={...}): as in upstream, the annotations ride on the scan's IR call (for the
user's own passes and tools) and do not change the scan; keys the scan itself uses are rejected."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError


def _scans():
    @T.prim_func
    def main(A: T.Tensor((32,), T.float32), S: T.Tensor((32,), T.float32), M: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            sum_frag = T.alloc_fragment((32,), T.float32)
            max_frag = T.alloc_fragment((32,), T.float32)
            T.copy(A, sum_frag)
            T.copy(A, max_frag)
            T.cumsum(sum_frag, annotations={"test.scan": "cumsum"})
            T.cummax(max_frag, annotations={"test.scan": "cummax", "test.level": 2})
            T.copy(sum_frag, S)
            T.copy(max_frag, M)

    return main


def test_annotations_ride_on_the_scan_call():
    script = _scans().script()
    cumsum = next(line for line in script.splitlines() if "tl.tileop.cumsum" in line)
    cummax = next(line for line in script.splitlines() if "tl.tileop.cummax" in line)
    assert '"test.scan": "cumsum"' in cumsum
    assert '"test.scan": "cummax"' in cummax and '"test.level": 2' in cummax


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_annotated_scans_compute_as_without(arch):
    kernel = tilelang.compile(_scans(), target=f"musa -arch={arch}")
    assert "tl::Scan1D<32, tl::SumOp, false>" in kernel.get_kernel_source()
    a = rand((32,), torch.float32, 23)
    s, m = poison((32,), torch.float32), poison((32,), torch.float32)
    kernel(a, s, m)
    torch.testing.assert_close(s, a.cumsum(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m, a.cummax(0).values)


@pytest.mark.parametrize("annotations,message", [({"dim": 1}, "annotation key 'dim'"),
                                                 ({"tl.loc": "x"}, "annotation key 'tl.loc'"),
                                                 ({"k": [1, 2]}, "must be a string, number or bool")])
def test_bad_annotations_are_named(annotations, message):
    with pytest.raises(CompileError, match=message):
        @T.prim_func
        def main(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                tile = T.alloc_shared((32,), T.float32)
                T.copy(A, tile)
                T.cumsum(tile, annotations=annotations)
