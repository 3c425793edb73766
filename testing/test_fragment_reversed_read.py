"""A fragment read through an index map no inverter handles (`f[127 - i]`): the wheel's affine inverter returned a
wrong inverse, which the round-trip check caught as an internal AssertionError; now that inverter's result is
refused and the next one tried (NotInvertible when none works), and layout inference does not plan a loop through
a map it cannot invert: the loop runs on its own partition and reads `f` through shared memory."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.layout import _inverse
from tilelang_musa.layout._expr import make_vars

N = 128


def test_a_wrong_inverse_is_not_returned():
    (x,) = make_vars(1, "x")
    thread, slot = (127 - x) // 4, (3 - x) % 4
    with pytest.raises(_inverse.NotInvertible, match="does not round-trip"):
        _inverse.invert([slot, thread], [x], [N], [4, 32])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_reversed_fragment_read_runs_and_matches(arch):
    @T.prim_func
    def f(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            x = T.alloc_fragment((N,), "float32")
            y = T.alloc_fragment((N,), "float32")
            T.copy(A, x)
            for i in T.Parallel(N):
                y[i] = x[N - 1 - i] * 2.0
            T.copy(y, B)

    kernel = tilelang.compile(f, target=f"musa -arch={arch}")
    a, b = rand((N,), torch.float32, 5), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) * 2.0)
