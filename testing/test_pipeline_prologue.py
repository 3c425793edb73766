"""A pipelined loop whose loads depend on statements before it: a grouped GEMM finds each block's group with a
loop over an offsets table into a `T.alloc_var`, then binds the row it starts at. On mp_31 the warp-specialized
producer squad runs its own copy of that per-thread setup (the loads' addresses need it), and a binding that reads
the group stays after the loop that finds it (it was hoisted above it: every row read an uninitialized group)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def grouped_gemm(sizes, K, N, bm=32, bn=32, bk=32, threads=128):
    """C[rows of group g] = A[rows of g] @ B[g]; each group's rows padded to whole blocks of bm."""
    G, total = len(sizes), sum(sizes)
    blocks = sum((s + bm - 1) // bm for s in sizes)

    @T.prim_func
    def gg(A: T.Tensor((total, K), "float16"), B: T.Tensor((G, K, N), "float16"), C: T.Tensor((total, N), "float16"),
           offsets: T.Tensor((G,), "int32"), padded: T.Tensor((G,), "int32"), counts: T.Tensor((G,), "int32")):
        with T.Kernel(blocks, T.ceildiv(N, bn), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            g = T.alloc_var("int32")
            g = 0
            for i in range(G):
                g = T.if_then_else(bx * bm >= padded[i], i, g)
            row = bx * bm - padded[g] + offsets[g]
            rows = T.min(bm, counts[g] + padded[g] - bx * bm)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[row:row + bm, k * bk:(k + 1) * bk], A_s)
                T.copy(B[g, k * bk:(k + 1) * bk, by * bn:(by + 1) * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                if i < rows:
                    C[row + i, by * bn + j] = acc[i, j]

    return gg


def tables(sizes, bm):
    offsets, padded = [0], [0]
    for s in sizes[:-1]:
        offsets.append(offsets[-1] + s)
        padded.append(padded[-1] + (s + bm - 1) // bm * bm)
    return [torch.tensor(x, dtype=torch.int32) for x in (offsets, padded, sizes)]


@pytest.mark.parametrize("arch", ARCHS)
def test_grouped_gemm_group_found_before_the_pipeline(arch):
    sizes, K, N = [5, 40, 13], 64, 32
    kernel = tilelang.compile(grouped_gemm(sizes, K, N), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    body = source[source.index("__global__"):]
    find = body.index("g = 0;")
    assert body.index("const int row = ") > find, source  # the binding follows the loop finding the group
    if arch == "mp_31":
        producer = body[body.index("if (128 <= ((int)threadIdx.x)) {"):body.index("if (((int)threadIdx.x) < 128) {")]
        assert "g = 0;" in producer and "tl::tma_load" in producer, source  # its own copy of the setup
    else:
        assert "tl::tma_load" not in source
    A, B = rand((sum(sizes), K), torch.float16, 1), rand((len(sizes), K, N), torch.float16, 2)
    offsets, padded, counts = tables(sizes, 32)
    C = poison((sum(sizes), N), torch.float16)
    kernel(A, B, C, offsets, padded, counts)
    ref = torch.cat([A[o:o + s].float() @ B[i].float() for i, (o, s) in enumerate(zip(offsets.tolist(), sizes))])
    torch.testing.assert_close(C.float(), ref, rtol=1e-2, atol=1e-2)
