"""Barriers placed by analysis: a template that reads or writes a shared tile through a pointer marks it
(`tl.access_ptr(&S[i], rw)`, tileop/access_ptr.py), ThreadSync sees the access, and the block barriers go where a
writer and a reader of the tile meet instead of around every gemm (issue 11)."""

import re

import pytest
import torch
import tvm
from tvm import tirx
from tvm.script import tirx as S
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_software_pipeline import gemm_program  # the classic upstream GEMM
from tilelang_musa import diagnostics
from tilelang_musa.tileop.access_ptr import ACCESS_PTR_OP, READ, WRITE, access_ptr
from tilelang_musa.transform.sync_write_after_write import sync_write_after_write
from tilelang_musa.transform.thread_sync import ThreadSync

ARCHS = ["mp_22", "mp_31"]
BACK_TO_BACK = re.compile(r"(__syncthreads\(\);|tl::barrier_sync\(\d+\);)\s*\n\s*(__syncthreads\(\);|"
                          r"tl::barrier_sync\(\d+\);)")


# -- the pass: ThreadSync reads the markers


def test_thread_sync_orders_a_marked_read_after_the_writes_and_before_the_next_writes():
    """Two gemm-like calls read S through marked pointers: one barrier after the stores before them, none between
    the two reads, one before S is stored again. The markers come back unchanged."""
    @S.prim_func(private=True)
    def before(A: S.handle("float16", "global")):
        Ag = S.decl_buffer((128,), "float16", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float16", scope="shared")
        Sh[tx] = Ag[tx]
        S.evaluate(S.call_extern("int32", "gemm", S.call_intrin("handle", ACCESS_PTR_OP, S.address_of(Sh[0]), READ)))
        S.evaluate(S.call_extern("int32", "gemm", S.call_intrin("handle", ACCESS_PTR_OP, S.address_of(Sh[0]), READ)))
        Sh[tx] = Ag[tx] + Ag[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float16", "global")):
        Ag = S.decl_buffer((128,), "float16", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float16", scope="shared")
        Sh[tx] = Ag[tx]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        S.evaluate(S.call_extern("int32", "gemm", S.call_intrin("handle", ACCESS_PTR_OP, S.address_of(Sh[0]), READ)))
        S.evaluate(S.call_extern("int32", "gemm", S.call_intrin("handle", ACCESS_PTR_OP, S.address_of(Sh[0]), READ)))
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        Sh[tx] = Ag[tx] + Ag[tx]

    got = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(got, expected)


def test_a_marked_write_clashes_with_plain_writes_but_not_with_another_marked_write():
    """`T.clear(S)` then an LDLMS copy into S (threads mapped differently): a barrier between them; two LDLMS
    copies: none (their completion order is the wait's business, no barrier between the issues would fix it)."""
    s, tx = Tb.buffer([64], "float16", scope="shared"), tvm.ir.expr.Var("tx", "int32")
    clear = tirx.BufferStore(s, tirx.const(0, "float16"), [tx])
    copy = tirx.Evaluate(tirx.call_extern("int32", "tl::cp_async_gs<16>", access_ptr(s[tx * 8], WRITE)))
    sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))

    def run(body):
        return sync_write_after_write(tirx.PrimFunc([], body)).body

    tvm.ir.assert_structural_equal(run(tirx.SeqStmt([clear, copy])), tirx.SeqStmt([clear, sync, copy]))
    tvm.ir.assert_structural_equal(run(tirx.SeqStmt([copy, copy])), tirx.SeqStmt([copy, copy]))


# -- what kernels get


def check_gemm(kernel, M, N, K, seed):
    a, b = rand((M, K), torch.float16, seed), rand((K, N), torch.float16, seed + 1)
    c = poison((M, N), torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "3")


def test_a_three_stage_ldlms_gemm_has_two_barriers_an_iteration_and_none_in_its_prologue(checked):
    """mp_22: the steady state has the barrier before the loads (the version they overwrite was read by the last
    iteration's gemm) and the one after the wait (other threads' pieces); the prologue writes versions nobody read
    yet, so it has none. Tails in M, N and K."""
    M, N, K = 130, 72, 168
    kernel = tilelang.compile(gemm_program(M, N, K, num_stages=3), target="musa -arch=mp_22")
    source = kernel.get_kernel_source()
    prologue, rest = source.split("for (int k = 0;", 1)
    steady = rest.split("\n  }\n", 1)[0]
    assert "__syncthreads" not in prologue.split("C_l[it] = 0", 1)[1], source
    assert steady.count("__syncthreads();") == 2, source
    assert re.search(r"tl::cp_async_wait<2>\(\);\n\s+__syncthreads\(\);\n\s+tl::gemm_ss_mp22_mma", steady), source
    assert not BACK_TO_BACK.search(source), source
    check_gemm(kernel, M, N, K, seed=21)


def test_the_warp_specialized_consumer_waits_on_its_ring_and_nothing_else(checked):
    """mp_31: the TME ring's full/empty barriers order the producer's loads and the consumers' gemms; the gemm's
    operand reads need no block barrier (they were two range barriers around every gemm before)."""
    kernel = tilelang.compile(gemm_program(128, 128, 256, num_stages=3), target="musa -arch=mp_31")
    source = kernel.get_kernel_source()
    consumer = source.split("if (((int)threadIdx.x) < 128) {", 1)[1]
    loop = consumer.split("for (int k_1 = 0;", 1)[1].split("\n    }\n", 1)[0]
    assert "barrier_sync" not in loop and "__syncthreads" not in loop, source
    assert re.search(r"tl::barrier_wait\([^;]*\);\n\s+tl::gemm_ss_mp31_sqmma\w*<[^>]*>\([^;]*\);\n\s+"
                     r"tl::barrier_arrive\(", loop), source
    check_gemm(kernel, 128, 128, 256, seed=23)


@pytest.mark.parametrize("arch", ARCHS)
def test_an_unpipelined_gemm_loop_has_one_barrier_each_side_of_the_copies(arch, checked):
    """num_stages=0: copy, gemm, copy again next iteration: one barrier before the copies (the last gemm read the
    tiles) and one after them (the gemm reads what other threads stored); never two in a row."""
    kernel = tilelang.compile(gemm_program(64, 64, 128, num_stages=0), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    loop = source.split("for (int k = 0;", 1)[1].split("\n  }\n", 1)[0]
    assert loop.count("__syncthreads();") == 2, source
    assert not BACK_TO_BACK.search(source), source
    check_gemm(kernel, 64, 64, 128, seed=25)


def test_disabling_thread_storage_sync_leaves_the_gemm_without_barriers():
    """TL_DISABLE_THREAD_STORAGE_SYNC: the user places the barriers; the gemm adds none of its own any more (two
    128-lane warps on mp_22)."""
    configs = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    kernel = tilelang.compile(gemm_program(64, 64, 128, threads=256, num_stages=0), target="musa -arch=mp_22",
                              pass_configs=configs)
    assert "__syncthreads" not in kernel.get_kernel_source(), kernel.get_kernel_source()


@pytest.mark.parametrize("arch,threads", [("mp_22", 128), ("mp_31", 32)])
def test_a_one_warp_block_keeps_its_barriers_under_disabled_storage_sync(arch, threads, monkeypatch, checked):
    """One warp runs in lockstep on the hardware (Moore Threads' one-warp mp_22 kernels write shared tiles and read
    them in a T.gemm with no barrier); the simulator does not, so the compiler's barriers stay, with a warning."""
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    configs = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    with pytest.warns(Warning, match=rf"TL_DISABLE_THREAD_STORAGE_SYNC is ignored for a block of {threads} threads, "
                                     rf"one warp of {arch}"):
        kernel = tilelang.compile(gemm_program(64, 64, 128, bm=32, bn=32, threads=threads, num_stages=0),
                                  target=f"musa -arch={arch}", pass_configs=configs)
    assert "__syncthreads" in kernel.get_kernel_source()
    check_gemm(kernel, 64, 64, 128, seed=26)


@pytest.mark.parametrize("arch", ARCHS)
def test_flash_attention_has_no_back_to_back_barriers(arch):
    """The classic FlashAttention forward with two stages (P staged through shared memory on mp_31)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "examples" / "flash_attention" / "flash_attention.py"
    spec = importlib.util.spec_from_file_location("flash_attention_example_barriers", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    program = example.flash_attention.func(batch=1, heads=2, seq_len=128, dim=64, is_causal=True, num_stages=2)
    source = tilelang.compile(program, target=f"musa -arch={arch}").get_kernel_source()
    assert not BACK_TO_BACK.search(source), source


@pytest.mark.parametrize("arch", ARCHS)
def test_a_user_barrier_under_a_run_time_condition_stays_a_block_barrier(arch, monkeypatch):
    """T.sync_threads() under `if warp < n` (n read at run time: no thread range known at compile time) is the block
    barrier it is written as, with a warning: right when every thread gets there, a simulator error when not."""
    @T.prim_func
    def main(M: T.Tensor((1,), "int32"), A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):  # more than one warp: the barrier passes stay off (one warp keeps them)
            tid = T.get_thread_binding()
            s = T.alloc_shared((256,), "float32")
            n = M[0]
            if tid // 32 < n:
                s[tid] = A[tid] * 2.0
                T.sync_threads()
                B[tid] = s[255 - tid]

    monkeypatch.setattr(diagnostics, "_WARNED", set())  # once per process; each arch checks it
    with pytest.warns(Warning, match=r"T.sync_threads\(\) under `if .*`, which is no range .* stays a block barrier"):
        kernel = tilelang.compile(main, target=f"musa -arch={arch}",
                                  pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    assert re.search(r"\* 2\.000000e\+00f;\n\s+__syncthreads\(\);\n\s+B\[", kernel.get_kernel_source())
    a, b = rand((256,), torch.float32, 15), poison((256,), torch.float32)
    kernel(torch.tensor([8], dtype=torch.int32), a, b)
    torch.testing.assert_close(b, (a * 2.0).flip(0))
    with pytest.raises(Exception, match="divergent __syncthreads"):
        kernel(torch.tensor([2], dtype=torch.int32), a, b)


def test_a_compiler_barrier_under_a_run_time_condition_is_still_an_error():
    """The barrier passes' own barrier there (a shared-memory exchange under `if warp < n`) has no range to cover."""
    @T.prim_func
    def main(M: T.Tensor((1,), "int32"), A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            n = M[0]
            if tid // 32 < n:
                s[tid] = A[tid] * 2.0
                B[tid] = s[127 - tid]

    with pytest.raises(tilelang.CompileError, match="condition may differ between the block's threads"):
        tilelang.compile(main, target="musa -arch=mp_31")
