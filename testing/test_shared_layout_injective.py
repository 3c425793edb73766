"""T.annotate_layout on a shared buffer: a many-to-one layout would make distinct elements share one address, so it
is rejected naming the buffer and two colliding coordinates; an injective one (here with padding) runs."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Layout

from conftest import poison, rand


def transpose_through(layout_fn):
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((16, 16), "float32")
            T.annotate_layout({s: Layout((16, 16), layout_fn)})
            T.copy(A, s)
            for i, j in T.Parallel(16, 16):
                B[i, j] = s[j, i]

    return main


def test_a_many_to_one_shared_layout_is_rejected_with_the_colliding_coordinates():
    with pytest.raises(tilelang.CompileError, match=r"test_shared_layout_injective.py:\d+(.*\n)+.*the layout of shared "
                                                    r"buffer `s` must be injective \(each element its own place\), but "
                                                    r"s\[0, 0\] and s\[0, 8\] both map to physical coordinates \[0, 0\]"):
        transpose_through(lambda i, j: [i, j % 8])


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_an_injective_padded_shared_layout_runs(arch):
    kernel = tilelang.compile(transpose_through(lambda i, j: [i * 17 + j]), target=f"musa -arch={arch}")
    a, b = rand((16, 16), torch.float32, 11), poison((16, 16), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.T)
