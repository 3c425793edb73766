"""T.Parallel(..., prefer_async=True, annotations={...}): upstream's cp.async hint and loop annotations (its
minference example prefetches K and V so, then commits and waits itself). Both are kept on the outermost loop;
the copies stay synchronous, so the user's T.ptx_commit_group / T.ptx_wait_group find nothing in flight. In the
simulator against torch on mp_22 and mp_31; bad values are errors at the line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

NO_COMMIT_WAIT = "parallel_async_without_async_commit_wait"


def prefetch_rows():
    """Rows idx[k] of K (zero past `count`) into a two-stage tile, stage by stage, as minference's Prefetch does."""

    @T.prim_func
    def gather(K: T.Tensor((128, 64), "float16"), idx: T.Tensor((64,), "int32"), count: T.int32,
               O: T.Tensor((2, 32, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((2, 32, 64), "float16")
            for stage in T.serial(2):
                for i, j in T.Parallel(32, 64, prefer_async=True, annotations={NO_COMMIT_WAIT: True}):
                    tile[stage, i, j] = T.if_then_else(stage * 32 + i < count, K[idx[stage * 32 + i], j], 0)
                T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.copy(tile, O)

    return gather


def test_the_hint_and_the_annotations_are_kept_on_the_outermost_loop():
    loops = []
    tvm_func = prefetch_rows()
    tilelang.tvm.tirx.stmt_functor.post_order_visit(
        tvm_func.body, lambda n: loops.append(n) if isinstance(n, tilelang.tvm.tirx.For) else None)
    outer = [loop for loop in loops if "parallel_prefer_async" in loop.annotations]
    assert len(outer) == 1 and bool(outer[0].annotations[NO_COMMIT_WAIT])
    assert outer[0].extent.value == 32  # the nest's outermost loop (i), not j


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_the_prefetched_rows_equal_torchs_gather(arch):
    kernel = tilelang.compile(prefetch_rows(), target=f"musa -arch={arch}")
    k = rand((128, 64), torch.float16, 21)
    idx = torch.randperm(128, dtype=torch.int32)[:64].contiguous()
    out = poison((2, 32, 64), torch.float16)
    kernel(k, idx, 50, out)
    expected = k[idx.long()].clone()
    expected[50:] = 0
    torch.testing.assert_close(out, expected.view(2, 32, 64), rtol=0, atol=0)


@pytest.mark.parametrize("kwargs,message", [
    ({"prefer_async": "yes"}, "T.Parallel: prefer_async='yes' must be True, False or None"),
    ({"annotations": [("a", 1)]}, "T.Parallel: annotations=[('a', 1)] must be a dict of str keys"),
])
def test_bad_values_are_errors_at_the_line(kwargs, message):
    with pytest.raises(tilelang.CompileError, match="T.Parallel") as info:
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64, **kwargs):
                    A[i] = 0.0
    assert message in str(info.value) and "for i in T.Parallel(64, **kwargs):" in str(info.value)


def test_the_hint_warns_once_that_the_copies_are_synchronous(monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(tilelang.TileLangWarning, match=r"prefer_async=True\): the loop's copies are synchronous"):
        prefetch_rows()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prefetch_rows()  # once per process
