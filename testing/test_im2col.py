"""`T.im2col`: a tile of the im2col matrix of an NHWC image (rows: output pixels, columns: kernel taps x channels,
zero in the padding and past the matrix), and upstream's `T.Tensor(shape, dtype, buf.data)` view used beside it."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def im2col_reference(img, k, s, d, p):
    """(N * OH * OW, k * k * C): row (n, oh, ow), column (kh, kw, c), as T.im2col numbers them."""
    n, h, w, c = img.shape
    cols = torch.nn.functional.unfold(img.permute(0, 3, 1, 2).float(), k, dilation=d, padding=p, stride=s)
    cols = cols.view(n, c, k * k, -1).permute(0, 3, 2, 1)  # (n, pixels, taps, c)
    return cols.reshape(-1, k * k * c)


def im2col_tiles(N, H, W, C, k, s, d, p, bm, bk, scope):
    OH = (H + 2 * p - d * (k - 1) - 1) // s + 1
    OW = (W + 2 * p - d * (k - 1) - 1) // s + 1
    rows, cols = N * OH * OW, k * k * C

    @T.prim_func
    def tiles(img: T.Tensor((N, H, W, C), "float16"), out: T.Tensor((rows, cols), "float16")):
        with T.Kernel(T.ceildiv(cols, bk), T.ceildiv(rows, bm), threads=128) as (bx, by):
            if scope == "shared":
                col = T.alloc_shared((bm, bk), "float16")
            else:
                col = T.alloc_fragment((bm, bk), "float16")
            T.im2col(img, col, by, bx, k, s, d, p)
            T.copy(col, out[by * bm, bx * bk])

    return tiles, rows, cols


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("k, s, d, p", [(3, 1, 1, 1), (3, 2, 1, 0), (2, 1, 2, 2)])
def test_im2col_tiles_match_unfold(arch, k, s, d, p):
    N, H, W, C = 2, 5, 6, 8
    scope = "shared" if arch == "mp_31" else "fragment"
    func, rows, cols = im2col_tiles(N, H, W, C, k, s, d, p, 32, 16, scope)
    kernel = tilelang.compile(func, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "img[" in source and "? " in source, source  # a guarded gather (zero in the padding)
    img = rand((N, H, W, C), torch.float16, 3)
    out = poison((rows, cols), torch.float16)
    kernel(img, out)
    torch.testing.assert_close(out.float(), im2col_reference(img, k, s, d, p), rtol=0, atol=0)


def convolution(N, H, W, C, F, k, s, d, p, bm=32, bn=32, bk=32):
    """A convolution as a pipelined GEMM over im2col tiles, with the filter and output seen flat through
    `T.Tensor(shape, dtype, buf.data)`."""
    OH = (H + 2 * p - d * (k - 1) - 1) // s + 1
    OW = (W + 2 * p - d * (k - 1) - 1) // s + 1

    @T.prim_func
    def conv(img: T.Tensor((N, H, W, C), "float16"), filt: T.Tensor((k, k, C, F), "float16"),
             out: T.Tensor((N, OH, OW, F), "float16")):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=128) as (bx, by):
            col = T.alloc_shared((bm, bk), "float16")
            filt_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            filt_flat = T.Tensor((k * k * C, F), "float16", filt.data)
            out_flat = T.Tensor((N * OH * OW, F), "float16", out.data)
            T.clear(acc)
            for ki in T.Pipelined(T.ceildiv(k * k * C, bk), num_stages=2):
                T.im2col(img, col, by, ki, k, s, d, p)
                T.copy(filt_flat[ki * bk, bx * bn], filt_s)
                T.gemm(col, filt_s, acc)
            T.copy(acc, out_flat[by * bm, bx * bn])

    return conv, OH, OW


@pytest.mark.parametrize("arch", ARCHS)
def test_convolution_as_a_pipelined_gemm_over_im2col_tiles(arch):
    N, H, W, C, F, k, s, d, p = 2, 6, 6, 16, 32, 3, 1, 1, 1
    func, OH, OW = convolution(N, H, W, C, F, k, s, d, p)
    kernel = tilelang.compile(func, target=f"musa -arch={arch}")
    img, filt = rand((N, H, W, C), torch.float16, 1), rand((k, k, C, F), torch.float16, 2)
    out = poison((N, OH, OW, F), torch.float16)
    kernel(img, filt, out)
    ref = torch.conv2d(img.permute(0, 3, 1, 2).float(), filt.permute(3, 2, 0, 1).float(), stride=s, padding=p,
                       dilation=d).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=5e-2)
