"""Two `T.dynamic("n")` calls make two distinct sizes, as in upstream (each call is a new `tirx.Var`; upstream's
printers give the second a fresh name). Before, both printed as `int n` and g++ rejected the host wrapper's
`int n, int n`. The later one is now renamed `n_1` everywhere: kernel parameters, host wrapper, launcher binding."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.ir.attrs import SIZE_PARAMS_ATTR

ARCHS = ["mp_31", "mp_22"]


def _two_sizes_named_n():
    n1, n2 = T.dynamic("n"), T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n1,), "float32"), B: T.Tensor((n2,), "float32"), C: T.Tensor((n2,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S = T.alloc_shared((n2,), "float32")  # a buffer shaped by the renamed size follows the rename
            for i in T.serial(T.ceildiv(n1, 32)):
                if i * 32 + tx < n1:
                    A[i * 32 + tx] = A[i * 32 + tx] + 1
            for i in T.serial(T.ceildiv(n2, 32)):
                if i * 32 + tx < n2:
                    S[i * 32 + tx] = B[i * 32 + tx] * 2
            for i in T.serial(T.ceildiv(n2, 32)):
                if i * 32 + tx < n2:
                    C[i * 32 + tx] = S[i * 32 + tx]

    return main


def test_same_name_sizes_stay_distinct_parameters():
    func = _two_sizes_named_n()
    assert sorted(str(n) for n in func.attrs[SIZE_PARAMS_ATTR]) == ["n", "n_1"]
    names = [p.name for p in func.params]
    assert len(names) == len(set(names)), names
    a_len, b_len = func.params[0].ty.shape[0], func.params[1].ty.shape[0]
    assert not a_len.same_as(b_len) and {a_len.name, b_len.name} == {"n", "n_1"}


@pytest.mark.parametrize("arch", ARCHS)
def test_same_name_sizes_bind_from_their_own_tensors(arch):
    kernel = tilelang.compile(_two_sizes_named_n(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "int n, int n_1" in source or "int n_1, int n" in source
    a, b = rand((45,), torch.float32, seed=3), rand((70,), torch.float32, seed=4)
    c = poison((70,), torch.float32)
    expected_a = a + 1
    kernel(a, b, c)
    torch.testing.assert_close(a, expected_a)
    torch.testing.assert_close(c, b * 2)
