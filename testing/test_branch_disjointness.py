"""Upstream issue 1026: `if tx % 2 == 0: a = s[tx]; s[tx ^ 1] = a` needs no barrier inside the branch, since under
its condition no shared element is reached by two threads (branch_disjointness.py decides it by enumeration). Where
TVM's analysis would want a barrier inside such a divergent branch, ThreadSync places the barriers around it instead
of failing; a branch whose threads do share an element stays a named error."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from tilelang.errors import CompileError
from conftest import poison, rand
from tilelang_musa.transform.thread_sync import ThreadSync

ARCHES = ["mp_31", "mp_22"]


def run(func):
    return ThreadSync("shared")(tvm.IRModule({"main": func}))["main"]


def test_a_disjoint_branch_gets_its_barriers_around_it():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        if tx % 2 == 0:
            a: S.let[S.float32] = Sh[tx]
            Sh[S.bitwise_xor(tx, 1)] = a
        Ag[tx] = Sh[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        if tx % 2 == 0:
            a: S.let[S.float32] = Sh[tx]
            Sh[S.bitwise_xor(tx, 1)] = a
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        Ag[tx] = Sh[tx]

    tvm.ir.assert_structural_equal(run(before), expected, map_free_vars=True)


def test_a_branch_whose_threads_share_an_element_is_still_an_error():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        if tx % 2 == 0:
            a: S.let[S.float32] = Sh[tx]
            Sh[(tx + 2) % 32] = a  # thread 0 writes s[2], which thread 2 reads
        Ag[tx] = Sh[tx]

    with pytest.raises((CompileError, RuntimeError), match="needs a barrier between them inside the branch"):
        run(before)


def test_a_loop_inside_the_branch_counts_every_iteration():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((64,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((64,), "float32", scope="shared")
        if tx < 16 or tx >= 24:  # not a contiguous range of threads
            for i in range(2):
                a: S.let[S.float32] = Sh[tx * 2 + i]
                Sh[tx * 2 + 1 - i] = a  # each thread swaps its own pair
        Ag[tx] = Sh[tx]

    script = run(before).script()
    assert script.count("tvm_storage_sync") == 1  # after the branch, for the read of every thread's element
    assert script.index("tvm_storage_sync") > script.index("Sh[tx * 2 + 1 - i] = a")

    @S.prim_func(private=True)
    def overlapping(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((64,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((64,), "float32", scope="shared")
        if tx < 16 or tx >= 24:
            for i in range(3):  # the third iteration reaches the next thread's pair
                a: S.let[S.float32] = Sh[tx * 2 + i]
                Sh[tx * 2 + 1 - i % 2] = a
        Ag[tx] = Sh[tx]

    with pytest.raises((CompileError, RuntimeError), match="inside the branch"):
        run(overlapping)


def upstream_1026():
    @T.prim_func
    def shared_kernel():
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            shared_mem = T.alloc_shared((32), dtype="float32", scope="shared")
            if tx % 2 == 0:
                a = shared_mem[tx]
                shared_mem[tx ^ 1] = a

    return shared_kernel


def pair_copy():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((32,), "float32")
            s[tx] = A[bx * 32 + tx]
            if tx % 2 == 0:
                a = s[tx]
                s[tx ^ 1] = a * 2.0
            B[bx * 32 + tx] = s[tx]

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_upstreams_program_compiles_without_a_barrier_and_a_variant_matches_torch(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # the race detector checks the barriers placed
    target = f"musa -arch={arch}"
    assert "__syncthreads" not in tilelang.compile(upstream_1026(), target=target).get_kernel_source()
    kernel = tilelang.compile(pair_copy(), target=target)
    source = kernel.get_kernel_source()
    assert source.count("__syncthreads()") == 2  # before the branch and after it, none inside
    assert "    s[((int)threadIdx.x) ^ 1] = a * 2.000000e+00f;\n  }\n  __syncthreads();" in source
    a, b = rand((64,), torch.float32, 11), poison((64,), torch.float32)
    kernel(a, b)
    want = a.clone()
    want[1::2] = a[0::2] * 2
    torch.testing.assert_close(b, want)


def test_a_branch_reaching_a_tile_through_a_view_is_not_analysed():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        View = S.decl_buffer((32,), "float32", data=Sh.data, scope="shared")
        if tx % 2 == 0:
            a: S.let[S.float32] = Sh[tx]
            View[S.bitwise_xor(tx, 1)] = a
        Ag[tx] = Sh[tx]

    with pytest.raises((CompileError, RuntimeError), match="needs a barrier for shared memory inside it"):
        run(before)


def test_int64_indices_too():
    kernel = tilelang.compile(pair_copy(), target="musa -arch=mp_31", pass_configs={"tl.config_index_bitwidth": 64})
    assert kernel.get_kernel_source().count("__syncthreads()") == 2
    a, b = rand((64,), torch.float32, 12), poison((64,), torch.float32)
    kernel(a, b)
    want = a.clone()
    want[1::2] = a[0::2] * 2
    torch.testing.assert_close(b, want)


def test_vector_accesses_of_a_thread_range_get_no_barrier_among_its_threads():
    """`if tx < 2:` with 4-lane accesses `s[Ramp(tx * 4, 1, 4)]` (a T.Parallel(8) vectorized onto two threads):
    each thread reads and writes its own lanes. TVM's analysis takes two vector accesses to conflict whatever their
    lanes and put a barrier inside, a barrier over 2 threads that mp_31 cannot build (a named barrier counts whole
    warps) and mp_22 has none of; the branch is disjoint lane by lane, so it gets none."""
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        if tx < 2:
            m: S.let[S.float32x4] = S.max(Sh[S.Ramp(tx * 4, 1, 4)], Sh[S.Ramp(tx * 4 + 8, 1, 4)])
            Sh[S.Ramp(tx * 4 + 8, 1, 4)] = Sh[S.Ramp(tx * 4, 1, 4)] - m
            Sh[S.Ramp(tx * 4, 1, 4)] = m
        Ag[tx] = Sh[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        if tx < 2:
            m: S.let[S.float32x4] = S.max(Sh[S.Ramp(tx * 4, 1, 4)], Sh[S.Ramp(tx * 4 + 8, 1, 4)])
            Sh[S.Ramp(tx * 4 + 8, 1, 4)] = Sh[S.Ramp(tx * 4, 1, 4)] - m
            Sh[S.Ramp(tx * 4, 1, 4)] = m
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        Ag[tx] = Sh[tx]

    tvm.ir.assert_structural_equal(run(before), expected, map_free_vars=True)


def online_softmax_state(n):
    """The running max / scale update of a flash-attention row state, `n` rows over 128 threads (vectorized onto
    n / 4 threads), inside a loop whose steps a loaded count bounds (the QSA prefill kernel of vllm-musa)."""

    @T.prim_func
    def main(A: T.Tensor((4, n), "float32"), B: T.Tensor((n,), "float32"), Steps: T.Tensor((1,), "int32"),
             C: T.Tensor((3, n), "float32")):
        with T.Kernel(1, threads=128):
            s_max = T.alloc_shared((n,), "float32")
            s_row = T.alloc_shared((n,), "float32")
            s_alpha = T.alloc_shared((n,), "float32")
            s_sum = T.alloc_shared((n,), "float32")
            steps = Steps[0]
            for m in T.Parallel(n):
                s_max[m] = B[m]
                s_sum[m] = 1.0
            for step in T.serial(4):
                if step < steps:
                    for m in T.Parallel(n):
                        s_row[m] = A[step, m]
                    for m in T.Parallel(n):
                        new_max = T.max(s_max[m], s_row[m])
                        s_alpha[m] = T.exp2(s_max[m] - new_max)
                        s_max[m] = new_max
                        s_sum[m] = s_sum[m] * s_alpha[m]
            for m in T.Parallel(n):
                C[0, m] = s_max[m]
                C[1, m] = s_sum[m]
                C[2, m] = s_alpha[m]

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_a_vectorized_row_state_update_in_a_thread_range_compiles_and_matches_torch(arch):
    n = 8
    kernel = tilelang.compile(online_softmax_state(n), target=f"musa -arch={arch}")
    a, b = rand((4, n), torch.float32, 31), rand((n,), torch.float32, 32)
    c = poison((3, n), torch.float32)
    kernel(a, b, torch.tensor([3], dtype=torch.int32), c)
    peak, total, alpha = b.clone(), torch.ones(n), None
    for step in range(3):
        new = torch.maximum(peak, a[step])
        alpha = torch.exp2(peak - new)
        peak, total = new, total * alpha
    torch.testing.assert_close(c, torch.stack([peak, total, alpha]))
