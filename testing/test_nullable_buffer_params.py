"""Tensors the kernel never accesses may be left out as None (Moore Threads' and upstream's
transform/test_nullable_buffer_params). A size that only such tensors give is bound as upstream's binder binds it:
given by one dim of one tensor, it is 0 (the size of what was not passed; no access through that tensor can happen,
as None is accepted only for a tensor the kernel never touches); given by several, all left out, the call is an
UnboundSizeError (a RuntimeError, as upstream raises, and a ValueError, as the launcher's other argument checks)
naming them; a size the kernel never reads is 0 in any case."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.launcher import UnboundSizeError

ARCHS = ["mp_31", "mp_22"]


def _compile(func, arch):
    return tilelang.compile(func, target=f"musa -arch={arch}")


def poison(shape, dtype):  # integers: -1 (conftest's poison is NaN)
    return torch.full(shape, -1, dtype=dtype)


def _ints(n, seed):
    return torch.randint(-50, 50, (n,), dtype=torch.int32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_size_shared_by_tensors_left_out_needs_one_of_them(arch):
    m = T.dynamic("m")

    @T.prim_func
    def main(a: T.Tensor[(m,), T.int32], b: T.Tensor[(m,), T.int32], c: T.Tensor[(m,), T.int32],
             out: T.Tensor[(1,), T.int32]):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                out[0] = m

    kernel = _compile(main, arch)
    assert "int* __restrict__ out, int m)" in kernel.get_kernel_source()
    t = _ints(24, seed=5)
    for args in [(t, t, t), (t, None, None), (None, t, None), (None, None, t), (t, None, t)]:
        out = poison((1,), torch.int32)
        kernel(*args, out)
        assert out.item() == 24
    with pytest.raises(UnboundSizeError, match=r"nothing determines the size m, which the kernel reads: it requires "
                                               r"at least one non-null buffer among: a, b, c") as info:
        kernel(None, None, None, poison((1,), torch.int32))
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_size_only_one_tensor_gives_is_zero_when_it_is_left_out(arch):
    """Upstream's `test_nullable_single_source_shape`: `m` binds to 0 and the kernel runs."""
    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor[(m,), T.int32], out: T.Tensor[(2,), T.int32]):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                out[0] = m
                out[1] = 7
                for i in range(m):  # no iteration with m = 0
                    out[1] = out[1] + 1

    kernel = _compile(main, arch)
    assert "for (int i = 0; i < m; ++i) {" in kernel.get_kernel_source()
    out = poison((2,), torch.int32)
    kernel(_ints(5, seed=6), out)
    assert out.tolist() == [5, 12]
    out = poison((2,), torch.int32)
    kernel(None, out)
    assert out.tolist() == [0, 7]


@pytest.mark.parametrize("arch", ARCHS)
def test_unused_tensors_left_out_with_their_unread_size(arch):
    """Upstream's third case: both tensors giving `m` are left out, the kernel reads neither them nor `m`."""
    m = T.dynamic("m")

    @T.prim_func
    def main(a: T.Tensor[(m,), T.float16], b: T.Tensor[(m,), T.float16], out: T.Tensor[(4,), T.float16]):
        with T.Kernel(1, threads=32):
            fragment = T.alloc_fragment((4,), T.float32)
            T.copy(out, fragment)
            for i in T.Parallel(4):
                fragment[i] = fragment[i] * 2
            T.copy(fragment, out)

    kernel = _compile(main, arch)
    out = torch.randn(4, generator=torch.Generator().manual_seed(7)).half()
    expected = (out.float() * 2).half()
    kernel(None, None, out)
    torch.testing.assert_close(out, expected)
