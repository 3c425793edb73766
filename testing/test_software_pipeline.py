"""`T.Pipelined`: PipelinePlanning (a stage and an order per statement) and InjectSoftwarePipeline (prologue,
steady state, epilogue; multi-buffered shared tiles; LDLMS loads in commit groups), on mp_22 and mp_31."""


import re
import warnings

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.ir.attrs import ASYNC_ATTR, PIPELINED_ATTR
from tilelang_musa.target import determine_target
from tilelang_musa.tileop.async_copy import ASYNC_ISSUE
from tilelang_musa.transform.inject_software_pipeline import inject_software_pipeline
from tilelang_musa.transform.pass_base import run_pass
from tilelang_musa.transform.warp_specialize_pipeline import WarpSpecializePipeline
from tilelang_musa.transform.pipeline_planning import SCHEDULE_ORDER, SCHEDULE_STAGE, PipelinePlanning, \
    pipeline_planning

ARCHS = ["mp_22", "mp_31"]
GEMM_INSTRUCTION = {"mp_22": "tl::gemm_ss_mp22_mma", "mp_31": "tl::gemm_ss_mp31_sqmma"}


def gemm_program(M, N, K, bm=64, bn=64, bk=32, threads=128, **pipelined):
    """The classic upstream GEMM with the given `T.Pipelined` arguments."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), **pipelined):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def attention_body(num_stages=None, **schedule):
    """FlashAttention's loop shape: load K, scores = Q K^T, stage P, load V, O += P V."""
    pipelined = dict(schedule) if num_stages is None else dict(num_stages=num_stages)

    @T.prim_func
    def main(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((256, 64), "float16"), V: T.Tensor((256, 64), "float16"),
             O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((64, 64), "float16")
            K_s = T.alloc_shared((64, 64), "float16")
            V_s = T.alloc_shared((64, 64), "float16")
            P_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(Q, Q_s)
            T.clear(acc)
            for k in T.Pipelined(4, **pipelined):
                T.copy(K[k * 64, 0], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                T.copy(S, P_s)
                T.copy(V[k * 64, 0], V_s)
                T.gemm(P_s, V_s, acc)
            T.copy(acc, O)

    return main


def with_target(func, arch="mp_31"):
    return func.with_attr("target", determine_target(f"musa -arch={arch}"))


def planned(func, arch="mp_31"):
    mod = run_pass(PipelinePlanning(), tvm.IRModule({"main": with_target(func, arch)}))
    return without_locations(mod["main"])


def schedule_of(func):
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda f: found.append(f) if SCHEDULE_STAGE in f.annotations
                                         else None)], order="pre")
    (loop,) = found
    return [int(x) for x in loop.annotations[SCHEDULE_STAGE]], [int(x) for x in loop.annotations[SCHEDULE_ORDER]]


# -- PipelinePlanning ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_num_stages_puts_the_loads_first_and_the_gemm_num_stages_minus_one_stages_later(num_stages):
    """Upstream's rule: loads in stage 0, emitted before the compute, which runs num_stages - 1 stages later (for
    num_stages=1 the loads follow the gemm, one stage ahead: single-buffered)."""
    before = gemm_program(128, 128, 128, num_stages=num_stages)
    if num_stages == 1:
        expected = gemm_program(128, 128, 128, stage=[0, 0, 1], order=[1, 2, 0])
    else:
        expected = gemm_program(128, 128, 128, stage=[0, 0, num_stages - 1], order=[0, 1, 2])
    tvm.ir.assert_structural_equal(planned(before), planned(expected))


def test_attention_loads_follow_their_last_user_and_the_compute_runs_num_stages_later():
    """K is loaded right after the gemm reading it, V after its gemm; the copies are not all at the end of the
    order, so the compute stays in stage num_stages (upstream's rule)."""
    assert schedule_of(planned(attention_body(num_stages=2))) == ([0, 2, 2, 0, 2], [1, 0, 2, 4, 3])
    tvm.ir.assert_structural_equal(planned(attention_body(num_stages=2)),
                                   planned(attention_body(stage=[0, 2, 2, 0, 2], order=[1, 0, 2, 4, 3])))


def test_num_stages_zero_and_a_body_without_loads_are_not_pipelined():
    assert not _scheduled_loops(planned(gemm_program(128, 128, 128, num_stages=0)))

    @T.prim_func
    def no_loads(X: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128,), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=3):
                for i in T.Parallel(128):
                    acc[i] += X[i] * k
            T.copy(acc, X)

    assert not _scheduled_loops(planned(no_loads))


def _scheduled_loops(func):
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda f: found.append(f) if SCHEDULE_STAGE in f.annotations
                                         else None)], order="pre")
    return found


def test_a_schedule_running_a_statement_before_what_it_reads_is_an_error_naming_both():
    with pytest.raises(CompileError, match=r"statement 2 .*uses `A_s` from statement 0.*stage 0, order 0 vs stage 0"):
        planned(gemm_program(128, 128, 128, stage=[0, 0, 0], order=[1, 2, 0]))
    with pytest.raises(CompileError, match=r"one entry per statement of the loop body \(3"):
        planned(gemm_program(128, 128, 128, stage=[0, 1], order=[0, 1]))
    with pytest.raises(CompileError, match=r"give both stage= and order="):
        planned(gemm_program(128, 128, 128, stage=[0, 0, 1]))


# -- InjectSoftwarePipeline -----------------------------------------------------------------------------------------

def _issued(func):
    """`expected` as the injector writes it: its global-to-shared copies issued asynchronously (no wait)."""
    def on_call(node, mutator):
        if (isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tl.tileop.copy"
                and str(node.args[0].source.ty.storage_scope) == "global"
                and str(node.args[1].source.ty.storage_scope).startswith("shared")):
            attrs = {k: v for k, v in (node.attrs or {}).items()}
            attrs[ASYNC_ATTR] = ASYNC_ISSUE
            return tvm.ir.Call(node.op, list(node.args), attrs=attrs, ret_ty="int32")
        return node

    return tvm_ffi.structural_mutate(func, [(tvm.ir.Call, on_call)])


def _flat(func):
    """Nested statement sequences flattened (the pass puts its sequence where the loop was)."""
    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        out = []
        for child in node.seq:
            out += list(child.seq) if isinstance(child, tirx.SeqStmt) else [child]
        return tirx.SeqStmt(out)

    func = tvm_ffi.structural_mutate(func, [(tirx.SeqStmt, on_seq)])
    func = tirx.transform.StmtSimplify()(tvm.IRModule({"main": func}))["main"]
    return without_locations(func.with_attr("global_symbol", "main"))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_schedule_of_stage_zero_only_is_the_loop_in_order(arch):
    """stage=[0, 0, 0]: no prologue or epilogue, nothing hoisted: the pass returns the steady loop itself (it built
    a sequence of that one statement, which TVM refuses: found by the fuzzer's pipeline family); the copies stay
    synchronous (no later stage reads them)."""
    before = gemm_program(64, 64, 128, num_stages=1, stage=[0, 0, 0], order=[0, 1, 2])

    @T.prim_func
    def expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"),
                 C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(4):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    got = inject_software_pipeline(pipeline_planning(with_target(before, arch)), {})
    tvm.ir.assert_structural_equal(_flat(got), _flat(with_target(expected, arch)))


def test_three_stage_gemm_becomes_prologue_ring_and_epilogue():
    """K = 128, bk = 32: four iterations. The loads of iteration k + 2 are issued (into version (k + 2) % 3) before
    the gemm of iteration k, which waits until at most 2 groups are in flight; the epilogue commits empty groups so
    the counts hold, and ends waiting for everything. No barrier precedes the loads: the copies' destinations are
    marked as written, and ThreadSync places the barrier that protects the versions read before (the end-to-end
    test below shows where)."""
    before = gemm_program(64, 64, 128, num_stages=3)

    @T.prim_func
    def expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"),
                 C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((3, 64, 32), "float16")
            B_s = T.alloc_shared((3, 32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            T.copy(A[by * 64, 0], A_s[0, 0:64, 0:32])
            T.copy(B[0, bx * 64], B_s[0, 0:32, 0:64])
            T.ptx_commit_group()
            T.copy(A[by * 64, 32], A_s[1, 0:64, 0:32])
            T.copy(B[32, bx * 64], B_s[1, 0:32, 0:64])
            T.ptx_commit_group()
            for k in T.serial(2):
                T.copy(A[by * 64, (k + 2) * 32], A_s[(k + 2) % 3, 0:64, 0:32])
                T.copy(B[(k + 2) * 32, bx * 64], B_s[(k + 2) % 3, 0:32, 0:64])
                T.ptx_commit_group()
                T.ptx_wait_group(2)
                T.gemm(A_s[k % 3, 0:64, 0:32], B_s[k % 3, 0:32, 0:64], C_l)
            T.ptx_commit_group()
            T.ptx_wait_group(2)
            T.gemm(A_s[2, 0:64, 0:32], B_s[2, 0:32, 0:64], C_l)
            T.ptx_commit_group()
            T.ptx_wait_group(2)
            T.gemm(A_s[0, 0:64, 0:32], B_s[0, 0:32, 0:64], C_l)
            T.evaluate(T.call_extern("int32", "tl::cp_async_wait<0>"))  # the last (empty) groups; no barrier
            T.copy(C_l, C[by * 64, bx * 64])

    got = inject_software_pipeline(pipeline_planning(with_target(before, "mp_22")), {})
    tvm.ir.assert_structural_equal(_flat(got), _flat(with_target(_issued(expected), "mp_22")))


def _pipelined_tme(func):
    """`expected` as the injector writes it: its T.tma_copy loads are the pipeline's (not the user's explicit ones)."""
    def on_call(node, mutator):
        if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tl.tileop.tme_copy":
            attrs = {k: v for k, v in (node.attrs or {}).items()}
            attrs.update({"explicit": False, PIPELINED_ATTR: True})
            return tvm.ir.Call(node.op, list(node.args), attrs=attrs, ret_ty="int32")
        return node

    return tvm_ffi.structural_mutate(func, [(tvm.ir.Call, on_call)])


def test_on_mp31_the_loads_are_tme_copies_on_a_ring_of_async_barriers():
    """The same GEMM on mp_31: each stage's tiles are loaded by the TME onto barrier full[v] of a 3-barrier ring;
    every thread arrives after the loads (the leader's expect-tx comes first) and waits with the parity of the
    barrier's use before the gemm. No commit groups."""
    before = gemm_program(64, 64, 128, num_stages=3)

    @T.prim_func
    def expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"),
                 C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            full = T.alloc_barrier([128, 128, 128])
            A_s = T.alloc_shared((3, 64, 32), "float16")
            B_s = T.alloc_shared((3, 32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for p in T.unroll(2, explicit=True):
                T.evaluate(T.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))  # the compiler's
                T.tma_copy(A[by * 64:by * 64 + 64, p * 32:p * 32 + 32], A_s[p, 0:64, 0:32], barrier=full[p])
                T.tma_copy(B[p * 32:p * 32 + 32, bx * 64:bx * 64 + 64], B_s[p, 0:32, 0:64], barrier=full[p])
                T.barrier_arrive(full[p])
            for k in T.serial(2):
                T.evaluate(T.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))  # the compiler's
                T.tma_copy(A[by * 64:by * 64 + 64, (k + 2) * 32:(k + 2) * 32 + 32], A_s[(k + 2) % 3, 0:64, 0:32],
                           barrier=full[(k + 2) % 3])
                T.tma_copy(B[(k + 2) * 32:(k + 2) * 32 + 32, bx * 64:bx * 64 + 64], B_s[(k + 2) % 3, 0:32, 0:64],
                           barrier=full[(k + 2) % 3])
                T.barrier_arrive(full[(k + 2) % 3])
                T.barrier_wait(full[k % 3], k // 3 % 2)
                T.gemm(A_s[k % 3, 0:64, 0:32], B_s[k % 3, 0:32, 0:64], C_l)
            T.barrier_wait(full[2], 0)
            T.gemm(A_s[2, 0:64, 0:32], B_s[2, 0:32, 0:64], C_l)
            T.barrier_wait(full[0], 1)
            T.gemm(A_s[0, 0:64, 0:32], B_s[0, 0:32, 0:64], C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    got = inject_software_pipeline(pipeline_planning(with_target(before)), {})
    want = tirx.transform.UnrollLoop()(tvm.IRModule({"main": with_target(_pipelined_tme(expected))}))["main"]
    tvm.ir.assert_structural_equal(_flat(got), _flat(want))


def _compile(func, arch, **configs):
    return tilelang.compile(func, out_idx=[-1], target=f"musa -arch={arch}",
                            pass_configs={getattr(tilelang.PassConfigKey, k): v for k, v in configs.items()})


def test_tl_enable_async_copy_false_keeps_the_ring_with_synchronous_loads():
    kernel = _compile(gemm_program(128, 64, 128, num_stages=3), "mp_22", TL_ENABLE_ASYNC_COPY=False)
    source = kernel.get_kernel_source()
    assert "async_copy" not in source
    assert "(A_s + (((((k + 2) % 3) * 2048)" in source, "the tiles keep their three versions"
    a, b = rand((128, 128), torch.float16, 1), rand((128, 64), torch.float16, 2)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=2e-2)


@pytest.fixture
def fresh_warnings(monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())


def test_a_tile_used_after_the_loop_keeps_the_loop_in_order_with_a_warning(fresh_warnings):
    """B_s would need one copy per stage, but the kernel reads it after the loop (the last iteration's tile), where
    no copy is the current one: the loop runs in order, and says so."""
    @T.prim_func
    def main(A: T.Tensor((64, 96), "float16"), B: T.Tensor((96, 64), "float16"), C: T.Tensor((64, 64), "float32"),
             D: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(3, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)
            T.copy(B_s, D)

    with pytest.warns(tilelang.TileLangWarning, match="T.Pipelined runs in order: `B_s` would need one copy per"):
        kernel = tilelang.compile(main, target="musa -arch=mp_22")
    assert "cp_async_gs" not in kernel.get_kernel_source()
    a, b = rand((64, 96), torch.float16, 13), rand((96, 64), torch.float16, 14)
    c, d = poison((64, 64), torch.float32), poison((32, 64), torch.float16)
    kernel(a, b, c, d)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(d, b[64:])


def test_shared_memory_too_small_for_num_stages_pipelines_fewer_with_a_warning(fresh_warnings):
    """The user's GEMM (256x256x64 fp16 tiles, num_stages=3: 192 KB) on mp_22 (72 KB): the planner's arena does not
    fit at three stages nor at two; one fits (fit_pipeline_stages.py), with one warning naming the loop."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "gemm"))
    from gemm import matmul

    tilelang.enable_cache()  # the example disables it when first imported; later tests of this process need it
    program = matmul.compile(M=256, N=256, K=128, block_M=256, block_N=256, block_K=64).program
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = tilelang.lower(program, target="musa -arch=mp_22")
    messages = [str(w.message) for w in caught if issubclass(w.category, tilelang.TileLangWarning)]
    assert len(messages) == 1 and re.search(r"num_stages=3\) would need \d+ bytes of shared memory as planned .* "
                                            r"73728 per block; pipelined with num_stages=1 instead", messages[0])
    source = lowered.kernel_source
    assert "tl::cp_async_wait<0>();" in source and "tl::cp_async_wait<1>();" not in source  # one stage


SIZES = {"mp_22": (128, 128, 64, "float16"), "mp_31": (128, 256, 64, "float32")}


def gemm_in_a_uniform_branch(arch, stages=2):
    """A GEMM whose body sits in `if bx < n:` (block-uniform), with an epilogue tile C_s. Counted over the whole
    branch, A_s and B_s at two stages plus C_s pass the target's shared memory (mp_22: 64 + 32 KB of 72; mp_31:
    96 + 128 KB of 192); PlanDynamicSharedMemory, counting the branch's statements, gives C_s the bytes of A_s and
    B_s (in use only after the loop), and the arena fits."""
    bm, bn, bk, cdt = SIZES[arch]

    @T.prim_func
    def main(A: T.Tensor((bm, 2 * bk), "float16"), B: T.Tensor((2 * bk, bn), "float16"), C: T.Tensor((bm, bn), cdt),
             n: T.int32):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_s = T.alloc_shared((bm, bn), cdt)
            acc = T.alloc_fragment((bm, bn), "float32")
            if bx < n:
                T.clear(acc)
                for k in T.Pipelined(2, num_stages=stages):
                    T.copy(A[0, k * bk], A_s)
                    T.copy(B[k * bk, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C_s)
                T.copy(C_s, C[0, 0])

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_stages_that_fit_only_thanks_to_the_planners_sharing_are_kept(arch, fresh_warnings):
    bm, bn, bk, cdt = SIZES[arch]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = tilelang.compile(gemm_in_a_uniform_branch(arch), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert f"&A_s[{bm * bk}]" in source  # the second stage's copy of A_s
    if arch == "mp_22":
        assert "half_t* C_s = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source  # C_s has A_s's bytes
        assert "tl::cp_async_wait<1>();" in source  # two stages: one load in flight
    a, b = rand((bm, 2 * bk), torch.float16, 21), rand((2 * bk, bn), torch.float16, 22)
    c = poison((bm, bn), getattr(torch, cdt))
    kernel(a, b, c, 1)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_a_schedule_that_does_not_fit_even_in_order_is_the_planners_error(fresh_warnings):
    """Past the limit at every stage count and unpipelined: the error of the last try (in order), naming the tiles."""
    with pytest.raises(CompileError, match=r"needs \d+ bytes of shared memory but the target allows 73728"):
        tilelang.lower(gemm_program(256, 256, 256, bm=256, bn=256, bk=128, threads=256, num_stages=2),
                       target="musa -arch=mp_22")


def test_tiles_used_only_after_the_loop_leave_the_loop_its_stages(fresh_warnings):
    """Three stages of A_s and B_s (48 KB) and the epilogue's C_s (32 KB) together pass mp_22's 72 KB, but C_s is in
    use only after the loop and shares their bytes: all three stages stay, without a warning."""
    @T.prim_func
    def main(A: T.Tensor((256, 128), "float16"), B: T.Tensor((128, 256), "float16"),
             C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=3):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.copy(C_s, C[by * 128, bx * 128])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = tilelang.compile(main, target="musa -arch=mp_22")
    source = kernel.get_kernel_source()
    assert "tl::cp_async_wait<2>();" in source  # three stages: two loads in flight
    assert "half_t* C_s = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source
    a, b = rand((256, 128), torch.float16, 15), rand((128, 256), torch.float16, 16)
    c = poison((256, 256), torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_a_fragment_written_and_read_in_different_stages_is_an_error_naming_it():
    # S (a fragment) is written by the gemm in stage 0 and read by the copy in stage 1: it would need versions.
    with pytest.raises(CompileError, match=r"`S` \(local.fragment\) is written in one pipeline stage and read"):
        tilelang.compile(attention_body(stage=[0, 0, 1, 1, 1], order=[0, 1, 2, 3, 4]), target="musa -arch=mp_31")


# -- WarpSpecializePipeline ------------------------------------------------------------------------------------------

def test_on_mp31_warp_specialization_adds_a_producer_squad_on_full_and_empty_rings():
    """The default on mp_31: 128 more threads (squad 1) load each iteration's tiles by TME into slot k % 3 once the
    consumers have freed it (empty), and arrive on full; the original squad waits full, runs the gemm, frees the
    slot. The statements around the loop run on the consumers."""
    before = gemm_program(64, 64, 128, num_stages=3)

    @T.prim_func
    def expected(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"),
                 C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=256) as (bx, by):
            full = T.alloc_barrier([128, 128, 128])
            empty = T.alloc_barrier([128, 128, 128])
            A_s = T.alloc_shared((3, 64, 32), "float16")
            B_s = T.alloc_shared((3, 32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            with T.ws(1):
                for k in T.serial(4):
                    T.barrier_wait(empty[k % 3], T.bitwise_xor(k // 3 % 2, 1))
                    T.tma_copy(A[by * 64:by * 64 + 64, k * 32:k * 32 + 32], A_s[k % 3, 0:64, 0:32], barrier=full[k % 3])
                    T.tma_copy(B[k * 32:k * 32 + 32, bx * 64:bx * 64 + 64], B_s[k % 3, 0:32, 0:64], barrier=full[k % 3])
                    T.barrier_arrive(full[k % 3])
            with T.ws(0):
                T.clear(C_l)
                for k in T.serial(4):
                    T.barrier_wait(full[k % 3], k // 3 % 2)
                    T.gemm(A_s[k % 3, 0:64, 0:32], B_s[k % 3, 0:32, 0:64], C_l)
                    T.barrier_arrive(empty[k % 3])
                T.copy(C_l, C[by * 64, bx * 64])

    got = run_pass(WarpSpecializePipeline({}), tvm.IRModule({"main": pipeline_planning(with_target(before))}))["main"]
    want = _pipelined_tme(with_target(expected))
    tvm.ir.assert_structural_equal(_flat(_without_ws_labels(got)), _flat(_without_ws_labels(want)))


def _without_ws_labels(func):
    """T.ws regions with their labels (which name the source line) blanked."""
    def on_attr(node, mutator):
        node = mutator.default_mutate(node)
        if str(node.attr_key) == "tl.ws":
            return tirx.AttrStmt(node.node, node.attr_key, tvm.ir.expr.StringImm(""), node.body)
        return node

    return tvm_ffi.structural_mutate(func, [(tirx.AttrStmt, on_attr)])


@pytest.mark.parametrize("disable", [False, True])
def test_tl_disable_warp_specialized_keeps_one_squad(disable, checked):
    kernel = _compile(gemm_program(130, 72, 168, num_stages=2), "mp_31", TL_DISABLE_WARP_SPECIALIZED=disable)
    source = kernel.get_kernel_source()
    assert ("__launch_bounds__(128" if disable else "__launch_bounds__(256") in source
    assert ("if (128 <= ((int)threadIdx.x))" in source) != disable
    assert "tl::tma_load<" in source
    a, b = rand((130, 168), torch.float16, 11), rand((168, 72), torch.float16, 12)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=3e-2)


# -- Numerics in the simulator (checked mode: a missing wait or barrier is an error) ----------------------------------

# (T.Pipelined arguments, the wait before the gemm: groups committed after the one it needs)
SCHEDULES = [
    pytest.param(dict(num_stages=1), 0, id="num_stages=1"),  # gemm(k - 1), then the loads of k
    pytest.param(dict(num_stages=2), 1, id="num_stages=2"),  # loads of k + 1, gemm(k)
    pytest.param(dict(num_stages=3), 2, id="num_stages=3"),  # loads of k + 2, gemm(k)
    pytest.param(dict(order=[1, 2, 0], stage=[0, 0, 2]), 1, id="order=[1,2,0],stage=[0,0,2]"),  # gemm(k - 2), loads
    pytest.param(dict(order=[0, 1, 2], stage=[0, 0, 1]), 1, id="order=[0,1,2],stage=[0,0,1]"),
]


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "5")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule, wait", SCHEDULES)
def test_pipelined_gemm_with_tails_matches_torch(arch, schedule, wait, checked):
    M, N, K = 130, 72, 168  # tails in M, N (not multiples of 64) and K (168 = 5 * 32 + 8)
    kernel = _compile(gemm_program(M, N, K, **schedule), arch)
    source = kernel.get_kernel_source()
    assert GEMM_INSTRUCTION[arch] in source
    if arch == "mp_31":  # TME loads on a ring of async barriers, no LDLMS groups
        assert "tl::tma_load<" in source and "tl::barrier_wait(" in source and "tl::cp_async_" not in source
    else:
        assert "tl::cp_async_gs" in source and "tl::cp_async_commit();" in source
        assert f"tl::cp_async_wait<{wait}>();" in source
    a, b = rand((M, K), torch.float16, 3), rand((K, N), torch.float16, 4)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=3e-2)


def test_on_mp31_a_load_breaking_a_tme_rule_is_ldlms_beside_the_tme_ones(checked):
    """A's rows are 170 halves = 340 bytes, not a multiple of 16: no TME descriptor, so A is loaded by LDLMS in
    commit groups while B (144-byte rows) comes by TME on the barrier ring."""
    M, N, K = 96, 72, 170
    kernel = _compile(gemm_program(M, N, K, num_stages=3), "mp_31")
    source = kernel.get_kernel_source()
    assert "tl::tma_load<" in source and "tl::cp_async_gs" in source and "tl::cp_async_wait<2>();" in source
    a, b = rand((M, K), torch.float16, 5), rand((K, N), torch.float16, 6)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=3e-2)


def test_tl_disable_tma_lower_makes_the_mp31_loads_ldlms(checked):
    kernel = _compile(gemm_program(128, 64, 128, num_stages=2), "mp_31", TL_DISABLE_TMA_LOWER=True)
    source = kernel.get_kernel_source()
    assert "tma_load" not in source and "tl::cp_async_wait<1>();" in source
    a, b = rand((128, 128), torch.float16, 1), rand((128, 64), torch.float16, 2)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_dynamic_trip_count_shorter_than_the_pipeline_is_guarded(arch, checked):
    K = T.dynamic("K")

    @T.prim_func
    def main(A: T.Tensor((64, K), "float16"), B: T.Tensor((K, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    for k in (24, 40, 200):  # one, two and seven iterations (the pipeline is two iterations deep)
        a, b, c = rand((64, k), torch.float16, k), rand((k, 64), torch.float16, k + 1), poison((64, 64), torch.float32)
        kernel(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("num_stages", [1, 2, 3])
def test_upstream_block_sparse_gemm_with_a_conditional_body(arch, num_stages, checked):
    """Upstream's test_blocksparse_matmul: the loads sit under `if block_mask[0]`, so nothing is a load stage and
    the loop stays in order (as upstream)."""
    M = N = K = 128
    bm, bn, bk = 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             BlockMask: T.Tensor((M // bm, N // bn, K // bk), "bool"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            block_mask = T.alloc_local((1,), "bool")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=num_stages):
                block_mask[0] = BlockMask[by, bx, k]
                if block_mask[0]:
                    T.copy(A[by * bm, k * bk], A_shared)
                    T.copy(B[k * bk, bx * bn], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])

    kernel = tilelang.compile(main, out_idx=[-1], target=f"musa -arch={arch}")
    a, b = rand((M, K), torch.float16, 7), rand((K, N), torch.float16, 8)
    mask = torch.rand((M // bm, N // bn, K // bk), generator=torch.Generator().manual_seed(9)) > 0.5
    ref = torch.zeros(M, N)
    for i in range(M // bm):
        for j in range(N // bn):
            for kk in range(K // bk):
                if mask[i, j, kk]:
                    ref[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (
                        a[i * bm:(i + 1) * bm, kk * bk:(kk + 1) * bk].float() @ b[kk * bk:(kk + 1) * bk,
                                                                                  j * bn:(j + 1) * bn].float())
    torch.testing.assert_close(kernel(a, b, mask).float(), ref, rtol=1e-2, atol=2e-2)


def test_group_makes_several_statements_one_scheduled_unit():
    """group=[[0, 1], [2]]: the two loads are one unit (one stage and order entry), the gemm the other; the
    pipeline is the one that stage=[0, 0, 1] / order=[0, 1, 2] gives the three statements."""
    grouped = gemm_program(64, 64, 128, group=[[0, 1], [2]], stage=[0, 1], order=[0, 1])
    plain = gemm_program(64, 64, 128, stage=[0, 0, 1], order=[0, 1, 2])
    injected = [inject_software_pipeline(pipeline_planning(with_target(f, "mp_22")), {}) for f in (grouped, plain)]
    tvm.ir.assert_structural_equal(_flat(injected[0]), _flat(injected[1]))
    with pytest.raises(CompileError, match=r"group=\[\[0\], \[2\]\] must list each of the loop body's 3 statements"):
        planned(gemm_program(64, 64, 128, group=[[0], [2]], stage=[0, 1], order=[0, 1]))


@pytest.mark.parametrize("arch", ARCHS)
def test_flash_attention_with_two_stages_and_a_causal_tail_matches_torch(arch, checked):
    """The classic FlashAttention forward with num_stages=2 (sequence 200: a partial last key block, a run-time trip
    count under the causal mask): warp-specialized TME on mp_31, a two-deep LDLMS pipeline on mp_22."""
    import test_flash_attention as fa

    program = fa.example.flash_attention.func(batch=1, heads=2, seq_len=200, dim=32, is_causal=True, num_stages=2)
    kernel = tilelang.compile(program, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if arch == "mp_31":
        assert "__launch_bounds__(256" in source and source.count("tl::tma_load<") == 2
    else:
        assert source.count("tl::cp_async_gs") == 6 and "tl::cp_async_wait<3>();" in source
    q, k, v = (rand((1, 200, 2, 32), torch.float16, s) for s in (21, 22, 23))
    out = poison((1, 200, 2, 32), torch.float16)
    kernel(q, k, v, out)
    torch.testing.assert_close(out.float(), fa.example.ref_program(q, k, v, True, 1, "bshd").float(),
                               rtol=1e-2, atol=1e-2)


def persistent_gemm(M, N, K, tiles_per_block, bm=32, bn=32, bk=32, num_stages=2, use_while=False):
    """Each block computes `tiles_per_block` output tiles one after another (a persistent or stream-K GEMM): the
    pipelined loop runs once per tile, in a serial loop or in a `while` whose bound is read at run time."""
    grid_n = N // bn

    @T.macro
    def one_tile(A, B, C, A_s, B_s, acc, tile):
        T.clear(acc)
        for k in T.Pipelined(K // bk, num_stages=num_stages):
            T.copy(A[tile // grid_n * bm, k * bk], A_s)
            T.copy(B[k * bk, tile % grid_n * bn], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, C[tile // grid_n * bm, tile % grid_n * bn])

    @T.prim_func
    def persistent(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
                   counts: T.Tensor((1,), "int32")):
        with T.Kernel(M * N // (bm * bn) // tiles_per_block, threads=128) as b:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            t = T.alloc_var("int32")
            t = 0
            if use_while:
                while t < counts[0]:
                    one_tile(A, B, C, A_s, B_s, acc, b * tiles_per_block + t)
                    t = t + 1
            else:
                for s in T.serial(tiles_per_block):
                    one_tile(A, B, C, A_s, B_s, acc, b * tiles_per_block + s)

    return persistent


# A `while` around barriers on mp_22 is still ThreadSync's "condition may differ between threads" error.
@pytest.mark.parametrize("arch, use_while", [("mp_22", False), ("mp_31", False), ("mp_31", True)])
@pytest.mark.parametrize("num_stages", [1, 2])
def test_a_pipelined_loop_run_again_by_an_outer_loop_continues_the_barrier_phases(arch, use_while, num_stages):
    """Three iterations a run, so a ring's slots have completed an odd number of phases when the next run starts:
    its parities must follow every run's iterations (restarting them at zero left the waits on a phase nobody
    would complete: a deadlock)."""
    M, N, K, tiles = 64, 64, 96, 2
    kernel = tilelang.compile(persistent_gemm(M, N, K, tiles, num_stages=num_stages, use_while=use_while),
                              target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if arch == "mp_31":
        assert "pipeline_iterations_done[0] = 0;" in source, source
        assert "pipeline_iterations_done[0] = pipeline_iterations_done[0] + 3;" in source, source
        assert re.search(r"tl::barrier_wait\([^;]*pipeline_iterations_done\[0\]", source), source
    else:
        assert "pipeline_iterations_done" not in source and "tl::barrier_wait" not in source
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    c = poison((M, N), torch.float32)
    kernel(a, b, c, torch.tensor([tiles], dtype=torch.int32))
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=2e-2)


def _barriers_after_a_loop(func) -> int:
    """How many block barriers directly follow a loop in a statement sequence of `func`."""
    found = []

    def on_seq(node, mutator):
        for a, b in zip(node.seq[:-1], node.seq[1:]):
            if isinstance(a, tirx.For) and isinstance(b, tirx.Evaluate) and isinstance(b.value, tvm.ir.Call) \
                    and b.value.op.name == "tirx.tvm_storage_sync":
                found.append(b)
        return mutator.default_mutate(node)

    tvm_ffi.structural_mutate(_flat(func), [(tirx.SeqStmt, on_seq)])
    return len(found)


def test_a_steady_loop_that_may_run_no_iteration_is_followed_by_a_barrier():
    """K = T.dynamic, 2 stages: the steady loop runs max(ceildiv(K, 32) - 1, 0) times, possibly none, and TVM's
    ThreadSync takes its inner barrier as separating the prologue's writes from the epilogue's reads: the pass puts
    a barrier between the loop and the epilogue (fuzz finding: pipeline, seed 42001 program 208, a data race).
    A trip count known at compile time gets none."""
    K = T.dynamic("K")
    dynamic = inject_software_pipeline(pipeline_planning(with_target(gemm_program(64, 64, K, num_stages=2),
                                                                     "mp_22")), {})
    static = inject_software_pipeline(pipeline_planning(with_target(gemm_program(64, 64, 128, num_stages=2),
                                                                    "mp_22")), {})
    assert _barriers_after_a_loop(dynamic) == _barriers_after_a_loop(static) + 1
