"""Reductions of fragments whose reduced line does not split evenly over the threads (upstream accepts them):
a row of 320 or 200 on 128 threads, a (2, 96) tile, columns of 320. The free plan left such a row on 80 threads
(not a power of two) or let rows straddle thread groups (`(x0 * 80 + x1 // 4) % 128`), and the reduction was a
CompileError. LayoutPlacement now gives the nest that places the fragment line_plan along the reduced dimension:
each line on a power-of-two group of threads, its pieces round-robin with the last round partial; the reduction
folds only the slots that hold an element, and element-wise loops and copies run only those."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

THREADS = 128
FLOAT_KINDS = ("sum", "max", "min", "abssum", "absmax")


def float_reductions(shape, dim):
    n = shape[1 - dim]
    out = (n,)

    @T.prim_func
    def main(A: T.Tensor(shape, "float32"), B: T.Tensor(out, "float32"), O: T.Tensor((7, n), "float32"),
             C: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=THREADS):
            x = T.alloc_fragment(shape, "float32")
            s = T.alloc_fragment(out, "float32")
            mx = T.alloc_fragment(out, "float32")
            mn = T.alloc_fragment(out, "float32")
            asum = T.alloc_fragment(out, "float32")
            amax = T.alloc_fragment(out, "float32")
            acc_s = T.alloc_fragment(out, "float32")
            acc_m = T.alloc_fragment(out, "float32")
            T.copy(A, x)
            T.reduce_sum(x, s, dim=dim)
            T.reduce_max(x, mx, dim=dim)
            T.reduce_min(x, mn, dim=dim)
            T.reduce_abssum(x, asum, dim=dim)
            T.reduce_absmax(x, amax, dim=dim)
            T.copy(B, acc_s)
            T.copy(B, acc_m)
            T.reduce_sum(x, acc_s, dim=dim, clear=False)
            T.reduce_max(x, acc_m, dim=dim, clear=False)
            for i, j in T.Parallel(shape[0], shape[1]):  # element-wise work on the padded fragment
                x[i, j] = x[i, j] * 2.0 + 1.0
            for i in T.Parallel(n):
                O[0, i] = s[i]
                O[1, i] = mx[i]
                O[2, i] = mn[i]
                O[3, i] = asum[i]
                O[4, i] = amax[i]
                O[5, i] = acc_s[i]
                O[6, i] = acc_m[i]
            T.copy(x, C)

    return main


def expected(a, b, dim):
    return torch.stack([a.sum(dim), a.amax(dim), a.amin(dim), a.abs().sum(dim), a.abs().amax(dim),
                        b + a.sum(dim), torch.maximum(b, a.amax(dim))])


CASES = [((1, 320), 1), ((3, 320), 1), ((8, 200), 1), ((2, 96), 1), ((4, 320), 0), ((96, 2), 0), ((200, 8), 0)]


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("shape,dim", CASES, ids=[f"{s[0]}x{s[1]}-dim{d}" for s, d in CASES])
def test_uneven_line_reductions_match_torch(arch, shape, dim):
    kernel = tilelang.compile(float_reductions(shape, dim), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    a = rand(shape, torch.float32, 7)
    b = rand((shape[1 - dim],), torch.float32, 8)
    o, c = poison((7, shape[1 - dim]), torch.float32), poison(shape, torch.float32)
    kernel(a, b, o, c)
    torch.testing.assert_close(o, expected(a, b, dim), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(c, a * 2 + 1)
    if dim == 1 and shape[0] * 32 <= THREADS:  # a row's threads: a power of two, combined by the template
        assert "tl::AllReduce<tl::SumOp, " in source


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_unit_row_of_320_reduces_over_128_threads(arch):
    """`T.copy(A[bx, 0], x)` into a (1, 320) fragment (a nest over the 320 columns alone), reduced along them."""
    cols = 320

    @T.prim_func
    def main(A: T.Tensor((4, cols), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=THREADS) as bx:
            x = T.alloc_fragment((1, cols), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, 0], x)
            T.reduce_sum(x, s, dim=1)
            S[bx] = s[0]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::AllReduce<tl::SumOp, 128, 1, " in kernel.get_kernel_source()
    a, s = rand((4, cols), torch.float32, 9), poison((4,), torch.float32)
    kernel(a, s)
    torch.testing.assert_close(s, a.sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("clear", [True, False])
def test_uneven_line_bitwise_reductions(arch, clear):
    shape = (2, 200)

    @T.prim_func
    def main(A: T.Tensor(shape, "int32"), B: T.Tensor((3, 2), "int32"), O: T.Tensor((3, 2), "int32")):
        with T.Kernel(1, threads=THREADS):
            x = T.alloc_fragment(shape, "int32")
            band = T.alloc_fragment((2,), "int32")
            bor = T.alloc_fragment((2,), "int32")
            bxor = T.alloc_fragment((2,), "int32")
            T.copy(A, x)
            for i in T.Parallel(2):
                band[i] = B[0, i]
                bor[i] = B[1, i]
                bxor[i] = B[2, i]
            T.reduce_bitand(x, band, dim=1, clear=clear)
            T.reduce_bitor(x, bor, dim=1, clear=clear)
            T.reduce_bitxor(x, bxor, dim=1, clear=clear)
            for i in T.Parallel(2):
                O[0, i] = band[i]
                O[1, i] = bor[i]
                O[2, i] = bxor[i]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    g = torch.Generator().manual_seed(11)
    # mostly-set bits so that AND keeps some, sparse ones so that OR does not saturate
    a = (torch.randint(0, 1 << 30, shape, generator=g, dtype=torch.int32) | 0x0F0F0F00) & ~torch.randint(
        0, 1 << 30, shape, generator=g, dtype=torch.int32).bitwise_and(0x10101)
    b = torch.randint(-(1 << 30), 1 << 30, (3, 2), generator=g, dtype=torch.int32)
    o = torch.full((3, 2), -7, dtype=torch.int32)
    kernel(a, b, o)
    want = torch.stack([a[:, 0], a[:, 0], a[:, 0]])
    for k in range(1, shape[1]):
        want = torch.stack([want[0] & a[:, k], want[1] | a[:, k], want[2] ^ a[:, k]])
    if not clear:
        want = torch.stack([want[0] & b[0], want[1] | b[1], want[2] ^ b[2]])
    torch.testing.assert_close(o, want)


@pytest.mark.parametrize("extents,line_dim,group,local", [
    ([1, 320], 1, 128, 4),  # 160 2-wide pieces on 128 threads: the second round on threads 0..31 only
    ([3, 320], 1, 32, 12),  # three rows on groups of 32 (the fourth group idle)
    ([8, 200], 1, 16, 16),
    ([4, 320], 0, 1, 12),  # columns of 4: each whole in one thread's slots
])
def test_line_plan_puts_each_line_on_a_power_of_two_group(extents, line_dim, group, local):
    import numpy as np

    from tilelang_musa.layout import reduce_threads
    from tilelang_musa.tileop.loop_plan import line_plan

    plan = line_plan(extents, THREADS, 4, line_dim)
    assert plan.local_size == local
    thread, slot = (a[..., 0] if a.ndim > len(extents) else a for a in plan.fragment.evaluate_all())
    pairs = set(zip(thread.ravel().tolist(), slot.ravel().tolist()))
    assert len(pairs) == thread.size and slot.max() < local  # one (thread, slot) per element
    splits = reduce_threads(plan.fragment, line_dim).splits
    assert [(s.count, s.scale) for s in splits] == ([(group, 1)] if group > 1 else [])
    # the inverse visits each element once: (thread, slot) pairs past a line's end are excluded by its condition
    import tvm
    seen = []
    for t in range(THREADS):
        for s in range(local):
            xs, cond = plan.inverse(tvm.tirx.const(t, "int32"), tvm.tirx.const(s, "int32"))
            ana = tvm.sym.Analyzer()
            if cond is None or int(ana.simplify(cond).value):
                seen.append(tuple(int(ana.simplify(x).value) for x in xs))
    assert sorted(seen) == sorted(np.ndindex(*extents))


def test_a_thread_map_whose_top_digit_is_partial_gets_its_slot_inferred():
    """`i % 128` over 320 elements: the slot is `i // 128` (3 slots, the last held by threads 0..63 only)."""
    from tilelang_musa.layout import Fragment

    f = Fragment([320], forward_thread_fn=lambda i: i % 128)
    assert int(f.local_size) == 3
    thread, slot = f.evaluate_all()
    assert slot.ravel().tolist() == [i // 128 for i in range(320)]
