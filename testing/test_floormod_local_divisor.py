"""`h % T.cast(v[j], T.int64)`: a floor modulo of int64 values by a local array's element (DeepSeek's engram hash
does this per n-gram table). TVM lowers it to `Let rmod = truncmod(h, d) in Select(...)`, printed as a lambda that
binds `rmod`; the simulator's checked build tracks whether the stored value is defined with the Select's condition,
which names `rmod` and is evaluated outside that lambda: it must bind `rmod` again (a compile error before)."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]


def floormod_kernel(n=128, tables=4):
    @T.prim_func
    def main(H: T.Tensor((n,), T.int64), V: T.Tensor((tables,), T.int32), Off: T.Tensor((tables,), T.int32),
             Out: T.Tensor((n, tables), T.int32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            divisors = T.alloc_local((tables,), T.int32)
            offsets = T.alloc_local((tables,), T.int32)
            result = T.alloc_local((tables,), T.int32)
            h = T.alloc_var(T.int64)
            for j in T.unroll(tables):
                divisors[j] = V[j]
                offsets[j] = Off[j]
            h = H[tx]
            for j in T.unroll(tables):
                result[j] = T.cast(h % T.cast(divisors[j], T.int64) + offsets[j], T.int32)
            for j in T.unroll(tables):
                Out[tx, j] = result[j]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_int64_floormod_by_a_local_divisor(arch):
    kernel = tilelang.compile(floormod_kernel(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "const int64_t rmod = " in source, source  # the Let, as the device code binds it
    generator = torch.Generator().manual_seed(11)
    h = torch.randint(-(1 << 40), 1 << 40, (128,), dtype=torch.int64, generator=generator)
    v = torch.tensor([7, 1000003, -13, 65536], dtype=torch.int32)  # a negative divisor: floor semantics
    off = torch.randint(-1000, 1000, (4,), dtype=torch.int32, generator=generator)
    out = torch.full((128, 4), -12345, dtype=torch.int32)  # poisoned: no result is -12345
    kernel(h, v, off, out)
    want = (torch.remainder(h[:, None], v.to(torch.int64)[None, :]) + off.to(torch.int64)).to(torch.int32)
    torch.testing.assert_close(out, want)
