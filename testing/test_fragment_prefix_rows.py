"""T.Parallel loops over the first rows of a fragment (`for i in T.Parallel(valid_h)` over `m[0:block_h]`, as a GQA
decode kernel does when a KV head serves fewer query heads than its tile has rows): the loop follows the box of a
fragment already placed, a fragment indexed the same way in the loop takes that fragment's layout whole, and a
fragment only ever reached in part is laid out as a whole-walking loop would lay it out."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

H, VH, N = 16, 4, 64  # tile rows, rows in use, columns


def softmax_state():
    """Per-row max and sum over the first VH rows, the max from a reduction over all H rows placed later."""

    @T.prim_func
    def f(S: T.Tensor((H, N), "float32"), O: T.Tensor((H,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((H, N), "float32")
            m = T.alloc_fragment((H,), "float32")
            l = T.alloc_fragment((H,), "float32")
            for i in T.Parallel(VH):  # before anything places m or l
                m[i] = -T.infinity("float32")
                l[i] = i + 1
            T.copy(S, acc)
            T.reduce_max(acc, m, dim=1, clear=False)
            for i in T.Parallel(VH):
                l[i] = l[i] * 2 + m[i]
            for i in T.Parallel(VH):
                O[i] = l[i]

    return f


def prefix_only():
    """A fragment nothing walks whole: every loop reaches its first VH elements only."""

    @T.prim_func
    def f(X: T.Tensor((H,), "float32"), O: T.Tensor((H,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.alloc_fragment((H,), "float32")
            for i in T.Parallel(VH):
                t[i] = X[i] * 3
            for i in T.Parallel(VH):
                O[i] = t[i] + X[i + VH]

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_rows_in_use_follow_the_reductions_layout(arch):
    kernel = tilelang.compile(softmax_state(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # l lives where m does (one row value per thread, rows 0..3 on the first 32 threads: 8 threads per row)
    assert "float m[1];" in src and "float l[1];" in src, src
    assert len(re.findall(r"if \(\(\(int\)threadIdx\.x\) < 32\)", src)) == 3, src
    s = rand((H, N), torch.float32, 3)
    out = poison((H,), torch.float32)
    kernel(s, out)
    ref = torch.arange(1, VH + 1, dtype=torch.float32) * 2 + s.max(dim=1).values[:VH]
    torch.testing.assert_close(out[:VH], ref)
    assert out[VH:].isnan().all()  # rows past VH are never stored


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fragment_reached_only_in_part_is_laid_out_whole(arch):
    kernel = tilelang.compile(prefix_only(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # 16 elements over 128 threads: one each on the first 16 threads, of which the first VH are used
    assert "float t[1];" in src, src
    assert re.search(rf"if \(\(\(int\)threadIdx\.x\) < {VH}\)", src), src
    x = rand((H,), torch.float32, 4)
    out = poison((H,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out[:VH], x[:VH] * 3 + x[VH:2 * VH])
    assert out[VH:].isnan().all()
