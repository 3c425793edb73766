"""T.reduce_* over fragments laid on part of the block: a thread range at an offset, several groups, groups that
together fill the block. Each output combines exactly the threads its layout places the row on."""

import re
import pytest
import torch

import tilelang
import tilelang.language as T

from conftest import poison, rand

ARCHES = ["mp_22", "mp_31"]


def normalize_rows(rows: int, width: int, offset: int, group: int, block: int, vec: int = 8):
    """x / x.sum(1) with x on threads [offset, offset + width / vec), and the sums replicated over those threads."""

    @T.prim_func
    def main(x: T.Tensor((rows, width), "float32"), out: T.Tensor((rows, width), "float32")):
        with T.Kernel(1, threads=block):
            x_frag = T.alloc_fragment((rows, width), "float32")
            sums = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (offset + j // vec, i * vec + j % vec)),
                sums: T.Fragment(sums.shape, forward_fn=lambda i, rep: (offset + rep, i), replicate=group),
            })
            for i, j in T.Parallel(rows, width):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, sums, dim=1)
            for i, j in T.Parallel(rows, width):
                out[i, j] = x_frag[i, j] / sums[i]

    return main


def row_groups(block: int, stride: int, group: int = 64):
    """Row i on threads [i * stride, i * stride + group): two groups, each reducing its own row."""

    @T.prim_func
    def main(x: T.Tensor((2, 512), "float32"), out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=block):
            x_frag = T.alloc_fragment((2, 512), "float32")
            sums = T.alloc_fragment((2,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (i * stride + j // 8, j % 8)),
                sums: T.Fragment(sums.shape, forward_fn=lambda i, rep: (i * stride + rep, 0), replicate=group),
            })
            for i, j in T.Parallel(2, 512):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, sums, dim=1)
            for i in T.Parallel(2):
                out[i] = sums[i]

    return main


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("rows,offset", [(4, 0), (2, 32)])
def test_reduce_over_a_thread_range_matches_torch(arch, rows, offset):
    """64 of 128 threads hold the rows: at [0, 64), and at the offset range [32, 96)."""
    kernel = tilelang.compile(normalize_rows(rows, 512, offset, 64, 128), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    warp = 128 if arch == "mp_22" else 32
    if offset:  # off the aligned 64-thread spans: combined over the whole block, the others adding nothing
        re_ok = re.search(rf"tl::(AllReduce<tl::SumOp, 128, 1, {warp}>|BatchAllReduce<tl::SumOp, 128, 1, \d+, {warp}>)", source)
        assert re_ok, "the 128-thread combine"
        assert "if ((32 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 96))" in source
    else:
        re_ok = re.search(rf"tl::(AllReduce<tl::SumOp, 64, 1, {warp}>|BatchAllReduce<tl::SumOp, 64, 1, \d+, {warp}>)", source)
        assert re_ok, "the 64-thread combine"
    x = rand((rows, 512), torch.float32, 3 + offset).abs() + 0.1
    out = poison((rows, 512), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x / x.sum(1, keepdim=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("block,stride", [(128, 64), (256, 64), (256, 128)])
def test_reduce_in_several_thread_groups_matches_torch(arch, block, stride):
    """Two 64-thread groups: filling a 128-thread block, adjacent in a 256-thread one, or apart in it."""
    kernel = tilelang.compile(row_groups(block, stride), target=f"musa -arch={arch}")
    x = rand((2, 512), torch.float32, block + stride)
    out = poison((2,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-4)


GAP_GUARD = {2: "if ((((int)threadIdx.x) < 64) || ((128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 192)))",
             3: "if (((((int)threadIdx.x) < 64) || ((128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 192))) || "
                "((256 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 320)))"}
TORCH_REDUCE = {"sum": lambda x, d: x.sum(d), "max": lambda x, d: x.amax(d), "min": lambda x, d: x.amin(d),
                "absmax": lambda x, d: x.abs().amax(d), "abssum": lambda x, d: x.abs().sum(d)}


def groups_with_gaps(kind: str, dim: int, rows: int, block: int, clear: bool = True):
    """Row i (of `rows`, reduced along `dim`) on threads [128 i, 128 i + 64) of `block`: the threads between the
    ranges, and past the last, hold no slot of x_frag or of the result. With clear=False the results start at 1."""
    shape = (rows, 512) if dim == 1 else (512, rows)

    def place(a, b):
        i, j = (a, b) if dim == 1 else (b, a)
        return i * 128 + j // 8, j % 8

    @T.prim_func
    def main(x: T.Tensor(shape, "float32"), out: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=block):
            x_frag = T.alloc_fragment(shape, "float32")
            red = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=place),
                red: T.Fragment(red.shape, forward_fn=lambda i, rep: (i * 128 + rep, 0), replicate=64),
            })
            T.copy(x, x_frag)
            if not clear:
                T.fill(red, 1.0)
            getattr(T, f"reduce_{kind}")(x_frag, red, dim=dim, clear=clear)
            T.copy(red, out)

    return main


def check_gap_kernel(kernel, arch: str, kind: str, rows: int) -> None:
    """Every thread combines (the gap threads' spans of 64 combine identities, apart from the rows'); only the
    holders fold x_frag and write the result."""
    source = kernel.get_kernel_source()
    warp = 128 if arch == "mp_22" else 32
    functor = {"sum": "SumOp", "abssum": "SumOp", "max": "MaxOp", "absmax": "MaxOp", "min": "MinOp"}[kind]
    combine = f"red_partial[0] = tl::AllReduce<tl::{functor}, 64, 1, {warp}>(red_partial[0], &red_red_buf[0]);"
    assert combine in source, "the 64-thread combine, run by every thread, into the partial"
    body = source[source.index(combine.split(" = ")[0] + " = "):]
    assert source.count(GAP_GUARD[rows]) == 2, "the fold and the store, each under the holders' guard"
    assert GAP_GUARD[rows] + " {\n    red[0] = " in body, "the result stored by the holders only"


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kind,dim,rows,block", [("sum", 1, 2, 256), ("max", 1, 2, 256), ("min", 0, 2, 256),
                                                 ("absmax", 0, 3, 384), ("abssum", 1, 3, 512)])
def test_reduce_over_thread_groups_with_gaps_matches_torch(arch, kind, dim, rows, block):
    """Rows on [0, 64) and [128, 192) (and [256, 320)) of the block, reduced along either dim."""
    kernel = tilelang.compile(groups_with_gaps(kind, dim, rows, block), target=f"musa -arch={arch}")
    check_gap_kernel(kernel, arch, kind, rows)
    x = rand((rows, 512) if dim == 1 else (512, rows), torch.float32, 11 + rows + dim)
    out = poison((rows,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, TORCH_REDUCE[kind](x, dim), rtol=1e-5, atol=1e-4)


def normalize_with_gaps(rows: int, block: int):
    """out = x / (1 + x.sum(1)) with row i on threads [128 i, 128 i + 64): the sums start at 1 (T.fill, every
    replica), the reduction adds to them (clear=False), and every thread of a row divides by its own copy."""

    @T.prim_func
    def main(x: T.Tensor((rows, 512), "float32"), out: T.Tensor((rows, 512), "float32")):
        with T.Kernel(1, threads=block):
            x_frag = T.alloc_fragment((rows, 512), "float32")
            sums = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (i * 128 + j // 8, j % 8)),
                sums: T.Fragment(sums.shape, forward_fn=lambda i, rep: (i * 128 + rep, 0), replicate=64),
            })
            T.copy(x, x_frag)
            T.fill(sums, 1.0)
            T.reduce_sum(x_frag, sums, dim=1, clear=False)
            for i, j in T.Parallel(rows, 512):
                out[i, j] = x_frag[i, j] / sums[i]

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_reduce_with_gaps_into_kept_results_in_checked_mode(arch, monkeypatch):
    """clear=False over rows with gaps between them, in checked mode (the exchange through shared memory, the
    reads of unwritten registers). Every replica of `sums` is filled, not only replica 0: the other 63 threads of
    each row divide by their own copy."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(normalize_with_gaps(3, 384), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert f"{GAP_GUARD[3]} {{\n    sums[0] = sums[0] + sums_partial[0];" in source
    assert "if ((((int)threadIdx.x) & 127) < 64) {\n      sums[0] = 1.000000e+00f;" in source, "every replica"
    x = rand((3, 512), torch.float32, 5).abs()
    out = poison((3, 512), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x / (1 + x.sum(1, keepdim=True)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHES)
def test_reduce_of_a_fragment_leaving_slots_unused_matches_torch(arch):
    """40 columns on 32 threads x 2 slots: threads 8..31 of each row hold one element, so their second slot is
    folded under a guard of the slot (and the others fold it), checked against torch with the max's -inf rows."""

    @T.prim_func
    def main(x: T.Tensor((2, 40), "float32"), out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=64):
            x_frag = T.alloc_fragment((2, 40), "float32")
            red = T.alloc_fragment((2,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (i * 32 + j % 32, j // 32)),
                red: T.Fragment(red.shape, forward_fn=lambda i, rep: (i * 32 + rep, 0), replicate=32),
            })
            T.copy(x, x_frag)
            T.reduce_max(x_frag, red, dim=1)
            T.copy(red, out)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "if ((((int)threadIdx.x) & 31) < 8) {\n    red_partial[0] = tl::max(red_partial[0], x_frag[1]);" in source
    x = rand((2, 40), torch.float32, 40) - 10  # below zero: a folded unwritten slot or a lost one shows
    out = poison((2,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x.amax(1))


@pytest.mark.parametrize("arch", ARCHES)
def test_reduce_on_a_range_off_warp_boundaries_matches_torch(arch):
    """Threads [16, 80): upstream rejects it (its full-mask shuffles need whole warps); the whole block combines it
    here, the threads outside the range adding the identity."""
    kernel = tilelang.compile(normalize_rows(1, 512, 16, 64, 128), target=f"musa -arch={arch}")
    x = rand((1, 512), torch.float32, 16).abs() + 0.1
    out = poison((1, 512), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x / x.sum(1, keepdim=True), rtol=1e-5, atol=1e-6)


def test_groups_no_aligned_span_separates_are_rejected_with_the_line():
    """Rows on [16, 80) and [80, 144) of 256 threads: every aligned span holding one whole group holds part of the
    other, so no combine keeps the rows apart."""

    @T.prim_func
    def main(x: T.Tensor((2, 512), "float32"), out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=256):
            x_frag = T.alloc_fragment((2, 512), "float32")
            sums = T.alloc_fragment((2,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (16 + i * 64 + j // 8, j % 8)),
                sums: T.Fragment(sums.shape, forward_fn=lambda i, rep: (16 + i * 64 + rep, 0), replicate=64),
            })
            T.copy(x, x_frag)
            T.reduce_sum(x_frag, sums, dim=1)
            T.copy(sums, out)

    with pytest.raises(tilelang.CompileError, match=r"test_reduce_thread_ranges.py:\d+(.*\n)+.*T.reduce_sum: the rows "
                                                    r"of `x_frag` are held by thread groups \[16, 80\), \[80, 144\)"):
        tilelang.compile(main, target="musa -arch=mp_31")


def test_a_layout_leaving_slots_and_threads_unused_is_rejected_with_the_line():
    """40 columns on 32 threads x 2 slots per row, rows 64 threads apart: no single padded extent makes the layout
    a bijection, so the copy into it (a parallel loop) cannot be split among the threads: a named error."""

    @T.prim_func
    def main(x: T.Tensor((2, 40), "float32"), out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=128):
            x_frag = T.alloc_fragment((2, 40), "float32")
            red = T.alloc_fragment((2,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (i * 64 + j % 32, j // 32)),
                red: T.Fragment(red.shape, forward_fn=lambda i, rep: (i * 64 + rep, 0), replicate=32),
            })
            T.copy(x, x_frag)
            T.reduce_max(x_frag, red, dim=1)
            T.copy(red, out)

    with pytest.raises(tilelang.CompileError, match=r"test_reduce_thread_ranges.py:\d+(.*\n)+.*T.copy\(x, x_frag\)"
                                                    r"(.*\n)+the parallel loop over `\w+` .*cannot split it among the "
                                                    r"threads by the layout of the fragment it walks"):
        tilelang.compile(main, target="musa -arch=mp_31")


@pytest.mark.parametrize("arch", ARCHES)
def test_softmax_numerator_over_rows_with_a_gap_matches_torch(arch):
    """The result's layout inferred (not annotated) from rows on [0, 64) and [128, 192) of 256 threads, then read
    back by every thread of its row: exp(x - max)."""

    @T.prim_func
    def main(x: T.Tensor((2, 512), "float32"), out: T.Tensor((2, 512), "float32")):
        with T.Kernel(1, threads=256):
            x_frag = T.alloc_fragment((2, 512), "float32")
            row_max = T.alloc_fragment((2,), "float32")
            T.annotate_layout({x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (i * 128 + j // 8, j % 8))})
            T.copy(x, x_frag)
            T.reduce_max(x_frag, row_max, dim=1)
            for i, j in T.Parallel(2, 512):
                x_frag[i, j] = T.exp(x_frag[i, j] - row_max[i])
            T.copy(x_frag, out)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert GAP_GUARD[2] + " {\n    row_max[0] = row_max_partial[0];" in kernel.get_kernel_source()
    x = rand((2, 512), torch.float32, 3)
    out = poison((2, 512), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, torch.exp(x - x.amax(1, keepdim=True)), rtol=1e-5, atol=1e-6)
