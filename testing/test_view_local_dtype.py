"""T.view of a thread's local buffer as another dtype: the same bytes seen as other elements (a register bitcast):
`bf16 r[8]` viewed as `fp16 [8]` (same width) and `bf16 w[4]` viewed as `fp8 [8]` (narrower) are reinterpreting
pointers over the local array, read and written through either name. Fragments viewed as another dtype stay an
error naming the construct (shared tiles: test_view_shared_dtype.py)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N = 128


def program():
    @T.prim_func
    def main(A: T.Tensor((N, 8), "bfloat16"), S: T.Tensor((N,), "float32"), W: T.Tensor((N, 8), "uint8"),
             B: T.Tensor((N, 8), "bfloat16"), C: T.Tensor((N, 8), "float16")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            r = T.alloc_local([8], "bfloat16")
            r_fp16 = T.view(r, [8], "float16")
            w = T.alloc_local([4], "bfloat16")
            w_fp8 = T.view(w, [8], "float8_e4m3")
            w_u8 = T.view(w, [8], "uint8")
            for v in T.vectorized(8):
                r[v] = A[tx, v]
            # A's bf16 bits read as fp16, scaled in fp16, stored back as bits of r
            for v in T.vectorized(8):
                r_fp16[v] = r_fp16[v] * T.Cast("float16", S[tx])
            for v in T.vectorized(8):
                B[tx, v] = r[v]
            # bytes written through one view, fp8 values read through another
            for v in T.serial(8):
                w_u8[v] = W[tx, v]
            for v in T.vectorized(8):
                C[tx, v] = T.Cast("float16", w_fp8[v])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_local_buffer_viewed_as_another_dtype(arch):
    kernel = tilelang.compile(program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "half_t* r_fp16 = reinterpret_cast<half_t*>(r);" in source, source
    assert "fp8_e4_t* w_fp8 = reinterpret_cast<fp8_e4_t*>(w);" in source, source
    assert "unsigned char* w_u8 = reinterpret_cast<unsigned char*>(w);" in source, source
    a, s = rand((N, 8), torch.bfloat16, 1), torch.rand(N) + 0.5
    # finite e4m3 bytes only (0x7f / 0xff are NaN)
    wbytes = torch.randint(0, 0x7f, (N, 8), dtype=torch.uint8) | (torch.randint(0, 2, (N, 8), dtype=torch.uint8) << 7)
    b, c = poison((N, 8), torch.bfloat16), poison((N, 8), torch.float16)
    kernel(a, s, wbytes, b, c)
    expected_b = (a.view(torch.float16) * s.half()[:, None]).view(torch.bfloat16)
    assert torch.equal(b.view(torch.int16), expected_b.view(torch.int16))
    torch.testing.assert_close(c, wbytes.view(torch.float8_e4m3fn).half())


def test_fragments_viewed_as_another_dtype_are_an_error():
    with pytest.raises(tilelang.CompileError, match=r"T.view: a local.fragment buffer viewed as another "
                                                    r"dtype \(bfloat16 -> float16\) is not supported"):
        @T.prim_func
        def main(A: T.Tensor((N,), "bfloat16")):
            with T.Kernel(1, threads=N):
                t = T.alloc_fragment([N], "bfloat16")
                T.view(t, [N], "float16")
