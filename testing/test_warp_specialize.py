"""Explicit warp specialization: `T.ws(*squads)` regions run on the listed squads (128 threads each) only; tile ops
and T.Parallel loops over fragments inside a region are laid out and run on its threads (a fragment lives on the
threads of the one range that uses it); the barriers the compiler places inside a region cover its threads only
(a named barrier, an async barrier on mp_31; an error on mp_22); T.warpgroup_commit_batch / T.warpgroup_wait are
the SQMMA group commit and wait on mp_31 and nothing where gemms are synchronous."""

import functools
import inspect
import re

import pytest
import torch
import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.range_barriers import range_barriers
from tilelang_musa.transform.thread_sync import mark_thread_ranges
from tilelang_musa.transform.uniform_conditions import THREAD_INVARIANT

ARCHS = ["mp_31", "mp_22"]


def compile_for(func, arch, **configs):
    return tilelang.compile(func, target=f"musa -arch={arch}", pass_configs=configs or None)


def line_of(func, text):
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if text in line)


# -- T.ws: the region is an `if` on the linear thread id


def squad_marks():
    @T.prim_func
    def marks(B: T.Tensor((384,), "float32"), C: T.Tensor((384,), "float32")):
        with T.Kernel(1, threads=384):
            tx = T.get_thread_binding()
            with T.ws(0):
                B[tx] = 1.0
            with T.ws(1, 2):
                B[tx] = 2.0
            with T.ws(0, 2):  # not contiguous: fine for plain statements
                C[tx] = 3.0
            with T.ws(1):
                C[tx] = 4.0

    return marks


@pytest.mark.parametrize("arch", ARCHS)
def test_ws_runs_its_body_on_the_listed_squads(arch):
    kernel = compile_for(squad_marks(), arch)
    source = kernel.get_kernel_source()
    assert "if (((int)threadIdx.x) < 128) {" in source, source
    assert "if (128 <= ((int)threadIdx.x)) {" in source, source  # squads 1..2 = the rest of the block
    assert "if ((((int)threadIdx.x) < 128) || (256 <= ((int)threadIdx.x))) {" in source, source
    assert "if ((128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 256)) {" in source, source
    assert "tl.ws" not in source
    b, c = poison((384,), torch.float32), poison((384,), torch.float32)
    kernel(b, c)
    torch.testing.assert_close(b, torch.tensor([1.0] * 128 + [2.0] * 256))
    torch.testing.assert_close(c, torch.tensor([3.0] * 128 + [4.0] * 128 + [3.0] * 128))


# -- tile ops on part of the block


def squads_split(m=64, n=64, k=32):
    """Squad 0: a gemm and the copy of its accumulator; squad 1: a T.Parallel fill of another output and a
    row reduction of a fragment (laid out over threads 128..255)."""

    @T.prim_func
    def split(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), X: T.Tensor((m, n), "float32"),
              C: T.Tensor((m, n), "float32"), D: T.Tensor((m, n), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((m, k), "float16")
            B_s = T.alloc_shared((k, n), "float16")
            C_l = T.alloc_fragment((m, n), "float32")
            X_l = T.alloc_fragment((m, n), "float32")
            r = T.alloc_fragment((m,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            with T.ws(0):
                T.gemm(A_s, B_s, C_l, clear_accum=True)
                T.copy(C_l, C)
            with T.ws(1):
                for i, j in T.Parallel(m, n):
                    D[i, j] = i * 0.5 + j
                T.copy(X, X_l)
                for i, j in T.Parallel(m, n):
                    X_l[i, j] = X_l[i, j] * 2.0
                T.reduce_max(X_l, r, dim=1)
                T.copy(r, R)

    return split


def check_split(kernel, m=64, n=64, k=32):
    a, b, x = rand((m, k), torch.float16, 1), rand((k, n), torch.float16, 2), rand((m, n), torch.float32, 3)
    c, d, r = poison((m, n), torch.float32), poison((m, n), torch.float32), poison((m,), torch.float32)
    kernel(a, b, x, c, d, r)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(d, torch.arange(m)[:, None] * 0.5 + torch.arange(n)[None, :].float())
    torch.testing.assert_close(r, (x * 2).amax(1))


def test_a_squad_runs_a_gemm_while_another_fills_and_reduces():
    """Squad 0's SQMMA gemm is one squad's (GM = GN = 1), its accumulator 64 x 64 / 128 = 32 floats a thread; the
    block barrier after the whole block's copies orders them before it, and nothing in squad 0's region writes the
    tiles, so the region has no barrier of its own. The fragments of squad 1 are laid out over its threads,
    numbered from 128 (`threadIdx.x - 128`)."""
    kernel = compile_for(squads_split(), "mp_31")
    source = kernel.get_kernel_source()
    assert "float C_l[32];" in source and "float X_l[32];" in source, source
    assert re.search(r"__syncthreads\(\);\n\s+if \(\(\(int\)threadIdx.x\) < 128\) \{\n\s+"
                     r"tl::gemm_ss_mp31_sqmma\w*<64, 64, 32, 1, 1,", source), source
    assert "tl::AllReduce<tl::MaxOp, 2, 1, 32>" in source, source
    assert "R[(((int)threadIdx.x) >> 1) - 64] = r[0];" in source, source  # row (tid - 128) / 2
    check_split(kernel)


def reduction_in_a_squad(threads=256, squad=1, m=32, n=64):
    @T.prim_func
    def rows(X: T.Tensor((m, n), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=threads):
            X_l = T.alloc_fragment((m, n), "float32")
            r = T.alloc_fragment((m,), "float32")
            with T.ws(squad):
                T.copy(X, X_l)
                T.reduce_sum(X_l, r, dim=1)
                T.copy(r, R)

    return rows


def test_a_reduction_in_a_squad_combines_its_rows_within_the_squad_on_mp22():
    """mp_22's 128-lane warp is the squad: the shuffles stay in it (mp_31's case is squad 1's reduction above)."""
    kernel = compile_for(reduction_in_a_squad(), "mp_22")
    source = kernel.get_kernel_source()
    assert "if (128 <= ((int)threadIdx.x)) {" in source, source
    assert "__syncthreads" not in source.split("if (128 <= ((int)threadIdx.x)) {", 1)[1], source
    x = rand((32, 64), torch.float32, 4)
    r = poison((32,), torch.float32)
    kernel(x, r)
    torch.testing.assert_close(r, x.sum(1), rtol=1e-5, atol=1e-5)


def row_sums_across_warps(m=2, n=512):
    @T.prim_func
    def wide(X: T.Tensor((m, n), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=384):
            X_l = T.alloc_fragment((m, n), "float32")
            r = T.alloc_fragment((m,), "float32")
            with T.ws(1, 2):
                T.copy(X, X_l)
                T.reduce_sum(X_l, r, dim=1)
                T.copy(r, R)

    return wide


def test_a_reduction_across_warps_in_a_region_exchanges_between_barriers_of_the_region():
    """A row spans 128 threads of squads 1..2: the partials of its four warps meet in shared memory between two
    barriers over the region's 256 threads (the template's __syncthreads would wait for squad 0)."""
    kernel = compile_for(row_sums_across_warps(), "mp_31")
    region = kernel.get_kernel_source().split("if (128 <= ((int)threadIdx.x)) {", 1)[1]
    assert "__syncthreads" not in region, region
    assert re.search(r"tl::barrier_sync\(1\);\n\s+tl::BatchAllReduce<tl::SumOp, 128, 1, 1, 32>::shuffle_and_store\("
                     r"&r_partial\[0\], &r_red_buf\[0\], \(\(int\)threadIdx.x\) - 128, 256\);\n\s+"
                     r"tl::barrier_sync\(1\);\n\s+tl::BatchAllReduce<[^>]*>::combine_stored\(", region), region
    x, r = rand((2, 512), torch.float32, 13), poison((2,), torch.float32)
    kernel(x, r)
    torch.testing.assert_close(r, x.sum(1), rtol=1e-5, atol=1e-4)


# -- producer / consumer kernels: regions ordered by asynchronous barriers


def barrier_pipelined_gemm(m=64, n=64, k=128, bk=32, stages=2):
    """Moore Threads' barrierpipe GEMM with the roles swapped: squad 0 copies k-tiles into a ring of `stages`
    buffers, squad 1 waits for each, multiplies and hands the buffer back (a gemm on threads 128..255, which its
    template numbers from 0)."""

    @T.prim_func
    def pipelined(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((stages, m, bk), "float16")
            B_s = T.alloc_shared((stages, bk, n), "float16")
            C_l = T.alloc_fragment((m, n), "float32")
            bars = T.alloc_barrier([128, 128] * stages)  # full[s], then empty[s]
            with T.ws(1):
                T.clear(C_l)
            for ko in range(k // bk):
                with T.ws(0):
                    T.mbarrier_wait_parity(bars[ko % stages + stages], ((ko // stages) % 2) ^ 1)
                    T.copy(A[0, ko * bk], A_s[ko % stages, :, :])
                    T.copy(B[ko * bk, 0], B_s[ko % stages, :, :])
                    T.mbarrier_arrive(bars[ko % stages])
                with T.ws(1):
                    T.mbarrier_wait_parity(bars[ko % stages], (ko // stages) % 2)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_l)
                    T.mbarrier_arrive(bars[ko % stages + stages])
            with T.ws(1):
                T.copy(C_l, C)

    return pipelined


def test_a_barrier_pipelined_gemm_runs_producer_and_consumer_squads():
    """The regions are ordered by the kernel's own barriers: no block barrier between them (the producer would wait
    there while the consumer waits for its next arrival), not even where ThreadSync sees squad 0's stores and the
    gemm's reads of the tiles meet; the gemm runs right after squad 1's wait."""
    kernel = compile_for(barrier_pipelined_gemm(), "mp_31")
    source = kernel.get_kernel_source()
    loop = source.split("for (int ko = 0; ko < 4; ++ko) {", 1)[1]
    assert "__syncthreads" not in loop and "barrier_sync" not in loop, source
    assert re.search(r"tl::barrier_wait\([^;]*\);\n\s+tl::gemm_ss_mp31_sqmma\w*<64, 64, 32, 1, 1,", loop), source
    a, b = rand((64, 128), torch.float16, 8), rand((128, 64), torch.float16, 9)
    c = poison((64, 64), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def warp_specialized_attention(seq=128, dim=64, block_m=128, block_n=64, consumers=256):
    """The FlashAttention forward of Moore Threads' kernels, scaled down: consumer squads 0 and 1 run the gemms,
    the online softmax and its reductions inside `with T.ws(0, 1): if tx < 256:`; squad 2 copies K and V."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e) / sqrt(dim)

    @T.prim_func
    def attention(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
                  V: T.Tensor((seq, dim), "float16"), O: T.Tensor((seq, dim), "float16")):
        with T.Kernel(seq // block_m, threads=consumers + 128) as bx:
            tx = T.get_thread_binding()
            Q_s = T.alloc_shared((block_m, dim), "float16")
            K_s = T.alloc_shared((block_n, dim), "float16")
            V_s = T.alloc_shared((block_n, dim), "float16")
            P_s = T.alloc_shared((block_m, block_n), "float16")
            acc_s = T.alloc_fragment((block_m, block_n), "float32")
            acc_s_cast = T.alloc_fragment((block_m, block_n), "float16")
            acc_o = T.alloc_fragment((block_m, dim), "float32")
            m = T.alloc_fragment((block_m,), "float32")
            m_prev = T.alloc_fragment((block_m,), "float32")
            rescale = T.alloc_fragment((block_m,), "float32")
            row_sum = T.alloc_fragment((block_m,), "float32")
            log_sum = T.alloc_fragment((block_m,), "float32")
            kv_ready = T.alloc_barrier(128)
            kv_free = T.alloc_barrier(consumers)
            with T.ws(2):
                for k in T.serial(seq // block_n):
                    T.barrier_wait(kv_free, (k & 1) ^ 1)
                    T.copy(K[k * block_n, 0], K_s)
                    T.copy(V[k * block_n, 0], V_s)
                    T.barrier_arrive(kv_ready)
            with T.ws(0, 1):
                if tx < consumers:
                    T.copy(Q[bx * block_m, 0], Q_s)
                    T.fill(acc_o, 0)
                    T.fill(log_sum, 0)
                    T.fill(m, -T.infinity("float32"))
                    for k in T.serial(seq // block_n):
                        T.barrier_wait(kv_ready, k & 1)
                        T.clear(acc_s)
                        T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                        T.copy(m, m_prev)
                        T.reduce_max(acc_s, m, dim=1, clear=False)
                        for i in T.Parallel(block_m):
                            rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                        for i, j in T.Parallel(block_m, block_n):
                            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                        T.reduce_sum(acc_s, row_sum, dim=1)
                        for i in T.Parallel(block_m):
                            log_sum[i] = log_sum[i] * rescale[i] + row_sum[i]
                        T.copy(acc_s, acc_s_cast)
                        for i, j in T.Parallel(block_m, dim):
                            acc_o[i, j] *= rescale[i]
                        T.copy(acc_s_cast, P_s)
                        T.gemm(P_s, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
                        T.barrier_arrive(kv_free)
                    for i, j in T.Parallel(block_m, dim):
                        acc_o[i, j] /= log_sum[i]
                    T.copy(acc_o, O[bx * block_m, 0])

    return attention


def test_warp_specialized_attention_runs_consumer_squads_beside_a_producer():
    """Both gemms are two squads' (GM = 2) on threads 0..255, the row reductions stay within 8 threads of a warp,
    and the producer squad's copies use threads 256..383."""
    kernel = compile_for(warp_specialized_attention(), "mp_31")
    source = kernel.get_kernel_source()
    assert "if (256 <= ((int)threadIdx.x)) {" in source and "if (((int)threadIdx.x) < 256) {" in source, source
    assert "tl::gemm_ss_mp31_sqmma_swizzled<128, 64, 64, 2, 1, false, true," in source, source
    assert "tl::AllReduce<tl::MaxOp, 8, 1, 32>" in source, source
    consumer = source.split("if (((int)threadIdx.x) < 256) {", 1)[1]
    assert "__syncthreads" not in consumer, source
    q, k, v = (rand((128, 64), torch.float16, seed) for seed in (10, 11, 12))
    o = poison((128, 64), torch.float16)
    kernel(q, k, v, o)
    reference = torch.softmax(q.float() @ k.float().T / 8.0, dim=1) @ v.float()
    torch.testing.assert_close(o.float(), reference, rtol=2e-2, atol=2e-2)


# -- T.warpgroup_commit_batch / T.warpgroup_wait


def async_gemm(m=64, n=64, k=32):
    @T.prim_func
    def gemm(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((m, k), "float16")
            B_s = T.alloc_shared((k, n), "float16")
            C_l = T.alloc_fragment((m, n), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True, wg_wait=-1)
            T.warpgroup_commit_batch()
            T.warpgroup_wait(0)
            T.copy(C_l, C)

    return gemm


@pytest.mark.parametrize("arch", ARCHS)
def test_warpgroup_commit_and_wait_are_the_sqmma_group_built_ins(arch):
    kernel = compile_for(async_gemm(), arch)
    source = kernel.get_kernel_source()
    if arch == "mp_31":
        assert "_nowait<" in source, source
        commit, wait = source.index("__musa_tce_commit_group();"), source.index("__musa_tce_wait_group(0);")
        assert source.index("_nowait<") < commit < wait, source
    else:  # mp_22's gemm is synchronous: nothing to commit or wait for
        assert "__musa_tce" not in source, source
    a, b = rand((64, 32), torch.float16, 5), rand((32, 64), torch.float16, 6)
    c = poison((64, 64), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_parallel_loops_in_else_branches_run_on_the_remaining_threads(arch):
    """`if tx < 64: ... elif tx < 96: <T.Parallel> else: <T.Parallel>`: the elif's loop is split among threads
    64..95 (`not (tx < 64)` bounds the thread id from below) and the else's among threads 96..127."""

    @T.prim_func
    def branches(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 64:
                B[tx] = A[tx]
            elif tx < 96:
                for i in T.Parallel(64):
                    B[64 + i] = A[64 + i] * 2.0
            else:
                for i in T.Parallel(128):
                    B[128 + i] = A[128 + i] * 3.0

    kernel = compile_for(branches, arch)
    source = kernel.get_kernel_source()
    # B[64 + 4 (tx - 64) ...] and B[128 + 4 (tx - 96) ...]: each loop counts its threads from its range's first
    assert "(((int)threadIdx.x) * 4) - 192)" in source and "(((int)threadIdx.x) * 4) - 256)" in source, source
    a, b = rand((256,), torch.float32, 12), poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a[:64], a[64:128] * 2, a[128:] * 3]))


# -- barriers inside a region


def test_a_barrier_inside_a_thread_range_becomes_a_barrier_over_that_range():
    """ThreadSync may place barriers under `if tx < 128:` (the condition is marked thread-invariant: every thread
    of the range takes it); RangeBarriers makes such a barrier `tvm_storage_sync("shared", id, 128)`, one id per
    range, and leaves a barrier outside any range a block barrier."""
    tx = tvm.ir.expr.Var("tx", "int32")
    s = Tb.buffer([256], "float32", scope="shared")
    out = Tb.buffer([256], "float32", scope="global")

    def sync(*named):
        return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared", *named))

    def kernel(inner_sync, outer_sync):
        inner = tirx.SeqStmt([tirx.BufferStore(s, tirx.const(1.0, "float32"), [tx]), inner_sync,
                              tirx.BufferStore(out, s[127 - tx], [tx])])
        body = tirx.SeqStmt([tirx.IfThenElse(tx < 128, inner, None), outer_sync,
                             tirx.BufferStore(out, s[tx], [tx])])
        iv = tirx.IterVar(tvm.ir.Range(0, 256), tx, 1, "threadIdx.x")
        func = tirx.PrimFunc([], tirx.AttrStmt(iv, "thread_extent", 256, body))
        return func.with_attr("target", tvm.target.Target({"kind": "musa", "arch": "mp_31"}))

    before, expected = kernel(sync(), sync()), kernel(sync(1, 128), sync())
    tvm.ir.assert_structural_equal(range_barriers(before).body, expected.body)
    marked = mark_thread_ranges(before)
    condition = marked.body.body.seq[0].condition
    assert isinstance(condition, tvm.ir.Call) and str(condition.op.name) == THREAD_INVARIANT


def staged_in_a_squad():
    @T.prim_func
    def staged(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            with T.ws(1):
                S[tx - 128] = A[tx - 128] * 2.0
                B[tx - 128] = S[255 - tx]  # another thread's element: a barrier between

    return staged


def test_a_barrier_in_a_squad_is_a_barrier_over_the_squad_on_mp31():
    """The store and the load of another thread's element need a barrier between them, inside T.ws(1): a barrier
    of squad 1's 128 threads (an async barrier), not __syncthreads, which squad 0 never reaches."""
    kernel = compile_for(staged_in_a_squad(), "mp_31")
    region = kernel.get_kernel_source().split("if (128 <= ((int)threadIdx.x)) {", 1)[1]
    assert "__syncthreads" not in region and "tl::barrier_sync(1);" in region, region
    a, b = rand((128,), torch.float32, 7), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2.0).flip(0))


def test_a_barrier_in_a_squad_is_an_error_on_mp22():
    with pytest.raises(tilelang.CompileError) as err:
        compile_for(staged_in_a_squad(), "mp_22")
    text = str(err.value)
    assert "T.ws(1) at" in text and "needs a barrier among its threads 128..255" in text, text
    assert "mp_22 has no barrier over part of a block" in text, text


# -- errors


def tile_op_in_scattered_squads():
    @T.prim_func
    def scattered(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=384):
            acc = T.alloc_fragment((64,), "float32")
            with T.ws(0, 2):
                T.fill(acc, 1.0)
                T.copy(acc, A)

    return scattered


def fragment_in_two_ranges():
    @T.prim_func
    def two(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            acc = T.alloc_fragment((64,), "float32")
            with T.ws(1):
                T.fill(acc, 1.0)
            with T.ws(0):
                T.copy(acc, A)

    return two


def squad_beyond_the_block():
    @T.prim_func
    def beyond(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            with T.ws(2):
                A[0] = 1.0

    return beyond


def test_a_tile_op_in_non_contiguous_squads_is_an_error_at_the_op():
    with pytest.raises(tilelang.CompileError) as err:
        compile_for(tile_op_in_scattered_squads(), "mp_31")
    text = str(err.value)
    assert "T.fill inside T.ws(0, 2) at" in text and "contiguous range of thread ids" in text, text
    assert "T.fill(acc, 1.0)" in text, text


def test_a_fragment_used_by_two_thread_ranges_is_an_error_naming_both():
    with pytest.raises(tilelang.CompileError) as err:
        compile_for(fragment_in_two_ranges(), "mp_31")
    text = str(err.value)
    assert "fragment `acc` is used by threads" in text, text
    assert "threads 0..127" in text and "threads 128..255" in text, text


def test_a_squad_beyond_the_block_is_an_error_at_the_ws():
    with pytest.raises(tilelang.CompileError) as err:
        squad_beyond_the_block()
    text = str(err.value)
    assert "T.ws(2): squad 2 would be threads 256..383, but the block has 256 threads" in text, text
    assert "with T.ws(2):" in text, text


def test_warpgroup_wait_takes_zero_to_two_pending_groups():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                T.warpgroup_wait(3)

    with pytest.raises(tilelang.CompileError, match=r"T.warpgroup_wait: num_pending must be 0, 1 or 2") as err:
        build()
    assert "T.warpgroup_wait(3)" in str(err.value)


def staged_epilogue_gemm(M=512, N=256, K=256, block=256, block_K=64):
    """The README GEMM's tiles (3 stages of A and B: the whole 192 KiB) with its result staged through a 128 KiB
    shared tile, which fits only in the bytes of A and B once the loop is done."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // block, M // block, threads=512) as (bx, by):
            A_s = T.alloc_shared((block, block_K), "float16")
            B_s = T.alloc_shared((block_K, block), "float16")
            C_s = T.alloc_shared((block, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * block, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block, bx * block])

    return gemm


def test_a_pipeline_whose_tiles_fit_only_by_sharing_bytes_stays_in_one_squad():
    """Pipeline planning sized the 3 stages with the epilogue's tile in the loop's bytes; a producer squad beside
    the consumers would keep every tile in use at once (320 KiB), so the loop is pipelined in one squad (TME loads
    on a barrier ring) and C_s takes A's and B's bytes after it."""
    kernel = compile_for(staged_epilogue_gemm(), "mp_31")
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(512" in source and "512 <= ((int)threadIdx.x)" not in source, source
    assert "tl::tma_load" in source, source
    a, b = rand((512, 256), torch.float16, 10), rand((256, 256), torch.float16, 11)
    c = poison((512, 256), torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(), rtol=2e-2, atol=2e-2)
