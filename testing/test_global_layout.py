"""T.annotate_layout on a global tensor renumbers its elements: every read and write of `K[x]` goes to
`K[layout(x)]` (as Moore Threads' FlashAttention permutes the rows of K). Layouts that are not a bijection over
the tensor, and fragments, are rejected at the annotation's line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N, D, BLOCK = 64, 32, 16


def interleave(i):
    """Row i of the logical tensor lives in physical row (i % 4) * 16 + i // 4."""
    return (i % 4) * (N // 4) + i // 4


def permuted_copy(out_shape=None):
    @T.prim_func
    def main(K: T.Tensor((N, D), "float16"), O: T.Tensor((N, D), "float16"), P: T.Tensor((N, D), "float16")):
        with T.Kernel(N // BLOCK, threads=64) as bx:
            T.annotate_layout({
                K: T.Layout((N, D), lambda i, j: (interleave(i), j)),
                P: T.Layout((N, D), lambda i, j: ((interleave(i) * D + j) // 64, (interleave(i) * D + j) % 64))
                if out_shape == "flat" else T.Layout((N, D), lambda i, j: (interleave(i), j)),
            })
            S = T.alloc_shared((BLOCK, D), "float16")
            T.copy(K[bx * BLOCK, 0], S)  # reads rows through K's layout
            T.copy(S, O[bx * BLOCK, 0])  # plain
            T.copy(S, P[bx * BLOCK, 0])  # writes rows through P's layout

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("out_shape", ["same", "flat"])
def test_global_layout_renumbers_reads_and_writes(arch, out_shape):
    kernel = tilelang.compile(permuted_copy(out_shape), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # thread t copies logical row bx * 16 + t // 4, i.e. physical row ((t // 4) % 4) * 16 + bx * 4 + t // 16
    assert "K + ((((((((int)threadIdx.x) & 15) >> 2) * 512) + (((int)blockIdx.x) * 128))" in source, source
    k = rand((N, D), torch.float16, 21)
    o, p = poison((N, D), torch.float16), poison((N, D), torch.float16)
    kernel(k, o, p)
    rows = torch.tensor([interleave(i) for i in range(N)])
    torch.testing.assert_close(o, k[rows])  # O[i] = K[layout(i)]
    expected = torch.empty_like(k)
    expected[rows] = k[rows]  # P[layout(i)] = O[i] = K[layout(i)]
    torch.testing.assert_close(p, expected)


def test_global_layout_must_be_a_bijection():
    def build():
        @T.prim_func
        def main(K: T.Tensor((N, D), "float16"), O: T.Tensor((N, D), "float16")):
            with T.Kernel(1, threads=64) as bx:
                T.annotate_layout({K: T.Layout((N, D), lambda i, j: (i // 2, j))})
                T.copy(K[0:BLOCK, 0:D], O[0:BLOCK, 0:D])

        return main

    with pytest.raises(tilelang.CompileError, match="must be a bijection onto its 2048 elements") as info:
        build()
    assert "T.annotate_layout({K: T.Layout" in str(info.value)


def test_global_tensor_takes_no_fragment():
    def build():
        @T.prim_func
        def main(K: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.annotate_layout({K: T.Fragment((128,), forward_thread_fn=lambda i: i, forward_index_fn=lambda i: 0)})
                K[0] = 1.0

        return main

    with pytest.raises(tilelang.CompileError, match="global buffer `K` needs a T.Layout, not a T.Fragment"):
        build()


def column_interleave(j):
    """Column j of the logical tensor lives in physical column (j % 2) * 16 + j // 2: a row's run is not memory's."""
    return (j % 2) * (D // 2) + j // 2


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("moves", ["columns", "rows"])
def test_a_pipelined_load_through_a_layout(arch, moves):
    """A T.Pipelined load of a renumbered tensor is never TME (a descriptor cannot renumber). Where the layout moves
    whole rows only, its LDLMS pieces (planned on the logical indices) are still runs of memory: the load stays
    asynchronous. Where it breaks a row's runs it loads synchronously, element by element through the layout;
    before, the pieces read misaligned, wrong runs of K."""
    @T.prim_func
    def main(K: T.Tensor((N, D), "float16"), O: T.Tensor((N, D), "float32")):
        with T.Kernel(1, threads=64):
            if moves == "rows":
                T.annotate_layout({K: T.Layout((N, D), lambda i, j: (interleave(i), j))})
            else:
                T.annotate_layout({K: T.Layout((N, D), lambda i, j: (i, column_interleave(j)))})
            S = T.alloc_shared((BLOCK, D), "float16")
            for k in T.Pipelined(N // BLOCK, num_stages=2):
                T.copy(K[k * BLOCK, 0], S)
                for i, j in T.Parallel(BLOCK, D):
                    O[k * BLOCK + i, j] = S[i, j]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert ("cp_async" in source) == (moves == "rows") and "tme" not in source.lower(), source
    k = rand((N, D), torch.float16, 22)
    o = poison((N, D), torch.float32)
    kernel(k, o)
    rows = torch.tensor([interleave(i) for i in range(N)])
    columns = torch.tensor([column_interleave(j) for j in range(D)])
    torch.testing.assert_close(o, (k[rows] if moves == "rows" else k[:, columns]).float())


def test_the_kernel_cache_tells_layouts_of_a_parameter_apart():
    """Two programs that differ only in a parameter's T.annotate_layout are two kernels: the structural hash of the
    annotation map (keyed by the parameters' Vars) left the layouts out, so the second compile got the first's
    cached kernel."""
    def build(moves):
        @T.prim_func
        def main(K: T.Tensor((N, D), "float16"), O: T.Tensor((N, D), "float16")):
            with T.Kernel(1, threads=64):
                if moves == "rows":
                    T.annotate_layout({K: T.Layout((N, D), lambda i, j: (interleave(i), j))})
                else:
                    T.annotate_layout({K: T.Layout((N, D), lambda i, j: (i, column_interleave(j)))})
                T.copy(K, O)

        return main

    rows, columns = (tilelang.compile(build(m), target="musa -arch=mp_31") for m in ("rows", "columns"))
    assert rows.get_kernel_source() != columns.get_kernel_source()
    k = rand((N, D), torch.float16, 23)
    o = poison((N, D), torch.float16)
    columns(k, o)
    torch.testing.assert_close(o, k[:, torch.tensor([column_interleave(j) for j in range(D)])])
