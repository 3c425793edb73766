"""A barrier that only part of a block reaches (`if tx < 128:` around shared-memory work): on mp_31 a barrier over
those threads; on mp_22, which has none, the `if` is cut in two around a block barrier where that keeps the program's
meaning (test_regions_cut_at_barriers.py), else an error that names the `if` by its condition and its source line
(here a value loaded before the barrier is used after it: the second half could not load it again)."""

import inspect

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def half_block_reversal():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            if tx < 128:
                w = A[tx] * 2.0
                S[tx] = w
                B[tx] = S[127 - tx] + w  # another thread's element: a barrier among threads 0..127

    return main


def test_on_mp22_the_error_names_the_if_and_its_line():
    lines, first = inspect.getsourcelines(half_block_reversal)
    line = first + next(k for k, text in enumerate(lines) if "if tx < 128:" in text)
    with pytest.raises(tilelang.CompileError) as err:
        tilelang.compile(half_block_reversal(), target="musa -arch=mp_22")
    text = str(err.value)
    assert f"`if thread_x < 128` at {__file__}:{line} needs a barrier among its threads 0..127" in text, text
    assert "mp_22 has no barrier over part of a block" in text, text


def test_on_mp31_the_threads_of_the_if_wait_for_each_other():
    kernel = tilelang.compile(half_block_reversal(), target="musa -arch=mp_31")
    region = kernel.get_kernel_source().split("if (((int)threadIdx.x) < 128) {", 1)[1]
    assert "tl::barrier_sync(1);" in region and "__syncthreads" not in region, region
    a, b = rand((128,), torch.float32, 3), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2.0).flip(0) + a * 2.0)
