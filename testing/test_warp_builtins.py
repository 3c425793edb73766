"""Warp built-ins: lane and warp indices on the arch's warp (32 lanes on mp_31, 128 on mp_22), `T.sync_warp`, and
the shuffles `T.shfl_xor / shfl_down / shfl_up / shfl_sync`, in the simulator against a torch model of the warp."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

THREADS = 256
WARP = {"mp_31": 32, "mp_22": 128}


def warp_program():
    @T.prim_func
    def main(A: T.Tensor((THREADS,), "float32"), Lane: T.Tensor((THREADS,), "int32"),
             Warp: T.Tensor((THREADS,), "int32"), Lane8: T.Tensor((THREADS,), "int32"),
             Out: T.Tensor((4, THREADS), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            Lane[tx] = T.get_lane_idx()
            Warp[tx] = T.get_warp_idx()
            Lane8[tx] = T.get_lane_idx(8)
            v = A[tx]
            T.sync_warp()
            Out[0, tx] = T.shfl_xor(v, 1)
            Out[1, tx] = T.shfl_down(v, 2)
            Out[2, tx] = T.shfl_up(v, 3)
            Out[3, tx] = T.shfl_sync(v, 5)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_lanes_warps_and_shuffles(arch):
    kernel = tilelang.compile(warp_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    for text in ("tl::get_lane_idx()", "tl::get_warp_idx()", "tl::get_lane_idx<8>()", "__syncwarp()",
                 "__shfl_xor_sync(", "__shfl_down_sync(", "__shfl_up_sync(", "__shfl_sync("):
        assert text in source, text
    a = rand((THREADS,), torch.float32, 61)
    lane, warp, lane8 = (torch.full((THREADS,), -1, dtype=torch.int32) for _ in range(3))
    out = torch.full((4, THREADS), float("nan"))
    kernel(a, lane, warp, lane8, out)
    ws = WARP[arch]
    t = torch.arange(THREADS)
    assert torch.equal(lane, (t % ws).int()) and torch.equal(warp, (t // ws).int())
    assert torch.equal(lane8, (t % 8).int())
    base, own = t - t % ws, t % ws
    torch.testing.assert_close(out[0], a[base + (own ^ 1)])
    torch.testing.assert_close(out[1], a[torch.where(own + 2 < ws, t + 2, t)])
    torch.testing.assert_close(out[2], a[torch.where(own >= 3, t - 3, t)])
    torch.testing.assert_close(out[3], a[base + 5])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_shfl_sync_in_cuda_argument_order(arch):
    """`T.shfl_sync(mask, value, lane[, width])` (CUDA's order, as upstream accepts it) means
    `T.shfl_sync(value, lane, width, mask)`: here lane 3 of each group of 16, and lane 0 of the whole warp."""

    @T.prim_func
    def main(A: T.Tensor((THREADS,), "float32"), Out: T.Tensor((2, THREADS), "float32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            v = T.alloc_local([1], "float32")
            v[0] = A[tx]
            Out[0, tx] = T.shfl_sync(0xFFFFFFFF, v[0], 3, 16)
            Out[1, tx] = T.shfl_sync(0xFFFFFFFF, v[0], 0)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "__shfl_sync(4294967295u, v[0], 3, 16)" in source, source
    assert "__shfl_sync(4294967295u, v[0], 0)" in source, source
    a = rand((THREADS,), torch.float32, 62)
    out = torch.full((2, THREADS), float("nan"))
    kernel(a, out)
    t = torch.arange(THREADS)
    torch.testing.assert_close(out[0], a[t - t % 16 + 3])
    torch.testing.assert_close(out[1], a[t - t % WARP[arch]])


def test_warp_builtins_need_a_kernel():
    with pytest.raises(tilelang.CompileError, match="`T.get_lane_idx` must be used inside"):
        @T.prim_func
        def main(A: T.Tensor((1,), "int32")):
            A[0] = T.get_lane_idx()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_warp_votes_and_block_predicate_counts(arch):
    """T.any_sync / all_sync / ballot_sync / activemask / __ffs on 32-lane warps (a 32-lane mask cannot hold a
    128-lane warp, so mp_22 takes the block votes only), and T.syncthreads_count / and / or on both."""
    warp = WARP[arch]

    @T.prim_func
    def block_votes(A: T.Tensor((THREADS,), "int32"), Out: T.Tensor((3, THREADS), "int32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            Out[0, tx] = T.syncthreads_count(A[tx] > 0)
            Out[1, tx] = T.syncthreads_and(A[tx] > -5)
            Out[2, tx] = T.syncthreads_or(A[tx] > 4)

    kernel = tilelang.compile(block_votes, target=f"musa -arch={arch}")
    assert "__syncthreads_count(" in kernel.get_kernel_source()
    a = torch.randint(-5, 5, (THREADS,), dtype=torch.int32, generator=torch.Generator().manual_seed(51))
    out = torch.full((3, THREADS), -7, dtype=torch.int32)
    kernel(a, out)
    assert (out[0] == (a > 0).sum()).all()
    assert ((out[1] != 0) == bool((a > -5).all())).all() and ((out[2] != 0) == bool((a > 4).any())).all()
    if warp != 32:
        return

    @T.prim_func
    def votes(A: T.Tensor((THREADS,), "int32"), Out: T.Tensor((3, THREADS), "int32"),
              Mask: T.Tensor((2, THREADS), "int64")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            Out[0, tx] = T.any_sync(A[tx] > 3)
            Out[1, tx] = T.all_sync(A[tx] > -4)
            Mask[0, tx] = T.cast(T.ballot_sync(A[tx] > 0), "int64")
            Mask[1, tx] = T.cast(T.activemask(), "int64")
            Out[2, tx] = T.__ffs(T.ballot(A[tx] > 0)) - 1

    kernel = tilelang.compile(votes, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "__ballot_sync(" in src and "__ffsll(" in src and "__any_sync(" in src
    out, mask = torch.full((3, THREADS), -7, dtype=torch.int32), torch.full((2, THREADS), -7, dtype=torch.int64)
    kernel(a, out, mask)
    lanes = (a > 0).view(-1, 32).long()
    bits = (lanes << torch.arange(32)).sum(1)
    assert torch.equal(mask[0], bits.repeat_interleave(32)) and (mask[1] == 0xFFFFFFFF).all()
    assert torch.equal(out[0] != 0, (a > 3).view(-1, 32).any(1).repeat_interleave(32))
    assert torch.equal(out[1] != 0, (a > -4).view(-1, 32).all(1).repeat_interleave(32))
    first = torch.where(lanes.any(1), lanes.argmax(1), torch.full((THREADS // 32,), -1))
    assert torch.equal(out[2].long(), first.repeat_interleave(32))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_warp_matches(arch):
    """T.match_any_sync: the lanes holding the caller's value; T.match_all_sync: the mask if the warp agrees, else
    0. Modelled on 32-lane warps (a 32-bit mask cannot name a 128-lane warp's lanes: mp_22 is a clear error)."""

    @T.prim_func
    def matches(A: T.Tensor((THREADS,), "int32"), B: T.Tensor((THREADS // 32,), "float32"),
                Out: T.Tensor((3, THREADS), "int64")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            Out[0, tx] = T.cast(T.match_any_sync(A[tx]), "int64")
            Out[1, tx] = T.cast(T.match_all_sync(B[tx // 32]), "int64")
            Out[2, tx] = T.cast(T.match_all_sync(A[tx]), "int64")

    kernel = tilelang.compile(matches, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "__match_any_sync(" in src and "tl::match_all_sync(" in src
    a = torch.randint(0, 3, (THREADS,), dtype=torch.int32, generator=torch.Generator().manual_seed(52))
    b = rand((THREADS // 32,), torch.float32, 53)
    out = torch.full((3, THREADS), -7, dtype=torch.int64)
    if WARP[arch] != 32:
        with pytest.raises(RuntimeError, match="__match_any_sync .* is not modelled"):
            kernel(a, b, out)
        return
    kernel(a, b, out)
    lanes = a.view(-1, 32)
    same = (lanes[:, :, None] == lanes[:, None, :]).long()  # [warp, lane, other lane]
    assert torch.equal(out[0], (same << torch.arange(32)).sum(2).reshape(-1))
    assert (out[1] == 0xFFFFFFFF).all()  # one value per warp: every warp agrees
    agree = (lanes == lanes[:, :1]).all(1).repeat_interleave(32)
    assert torch.equal(out[2], torch.where(agree, 0xFFFFFFFF, 0))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_warp_group_index_counts_groups_of_warps(arch):
    @T.prim_func
    def main(Default: T.Tensor((512,), "int32"), Pairs: T.Tensor((512,), "int32")):
        with T.Kernel(1, threads=512):
            tx = T.get_thread_binding()
            Default[tx] = T.get_warp_group_idx()
            Pairs[tx] = T.get_warp_group_idx(16, 2)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::get_warp_idx() >> 2" in source and "tl::get_warp_idx<16>() >> 1" in source
    default, pairs = (torch.full((512,), -1, dtype=torch.int32) for _ in range(2))
    kernel(default, pairs)
    t = torch.arange(512)
    assert torch.equal(default, (t // (WARP[arch] * 4)).int()) and torch.equal(pairs, (t // 32).int())


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_tvm_warp_shuffle_spellings(arch):
    """TVM's `T.tvm_warp_shuffle(mask, value, lane, width, warp_size)` (upstream's Hadamard transform) and its
    _down / _up forms are the shuffles above within groups of `width` lanes."""
    width = 16

    @T.prim_func
    def main(A: T.Tensor((THREADS,), "float32"), Out: T.Tensor((3, THREADS), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            v = A[tx]
            Out[0, tx] = T.tvm_warp_shuffle(0xFFFFFFFF, v, (tx ^ 4) % width, width, width)
            Out[1, tx] = T.tvm_warp_shuffle_down(0xFFFFFFFF, v, 1, width, width)
            Out[2, tx] = T.tvm_warp_shuffle_up(0xFFFFFFFF, v, 2, width, width)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "__shfl_sync(" in source and "__shfl_down_sync(" in source and "__shfl_up_sync(" in source
    a = rand((THREADS,), torch.float32, 62)
    out = torch.full((3, THREADS), float("nan"))
    kernel(a, out)
    t = torch.arange(THREADS)
    base, own = t - t % width, t % width
    torch.testing.assert_close(out[0], a[base + (own ^ 4)])
    torch.testing.assert_close(out[1], a[torch.where(own + 1 < width, t + 1, t)])
    torch.testing.assert_close(out[2], a[torch.where(own >= 2, t - 2, t)])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_shfl_sync_takes_cuda_argument_order(arch):
    """`T.shfl_sync(mask, value, src_lane[, width])` (CUDA's order, as upstream accepts) of a T.alloc_var: the
    same shuffle as `T.shfl_sync(value, src_lane, width)`."""
    @T.prim_func
    def main(A: T.Tensor((THREADS,), "float32"), Out: T.Tensor((2, THREADS), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var(T.float32, init=0)
            v = A[tx] * 2.0
            Out[0, tx] = T.shfl_sync(0xFFFFFFFF, v, 3)
            Out[1, tx] = T.shfl_sync(0xFFFFFFFF, v, 5, 16)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "__shfl_sync(4294967295u, v, 3)" in source and "__shfl_sync(4294967295u, v, 5, 16)" in source, \
        source
    a = rand((THREADS,), torch.float32, 62)
    out = torch.full((2, THREADS), float("nan"))
    kernel(a, out)
    t = torch.arange(THREADS)
    ws = WARP[arch]
    torch.testing.assert_close(out[0], a[t - t % ws + 3] * 2.0)
    torch.testing.assert_close(out[1], a[t - t % 16 + 5] * 2.0)
