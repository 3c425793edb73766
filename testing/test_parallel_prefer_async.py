"""T.Parallel(..., prefer_async=True, annotations={...}): upstream's cp.async hint and loop annotations (its
minference example prefetches K and V so, then commits and waits itself). The nest's element copies from global
memory into a shared tile become LDLMS copies (`tl::cp_async_gs<4/8/16>`, `_conditional` where bounds or the
user's zero fill guard them), committed and waited for after the nest, or by the user under
`parallel_async_without_async_commit_wait` (transform/prefer_async_copies.py). The MUSA C on mp_22 and mp_31, the
simulator against torch, the passes before/after, and bad values as errors at the line."""

import re

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa.launcher import KernelLaunchError
from tilelang_musa.target import determine_target
from tilelang_musa.transform.prefer_async_copies import lower_prefer_async_copies, mark_prefer_async_loops

NO_COMMIT_WAIT = "parallel_async_without_async_commit_wait"
ARCHS = ["mp_22", "mp_31"]


def prefetch_rows(user_waits: bool = True):
    """Rows idx[k] of K (zero past `count`) into a two-stage tile, stage by stage, as minference's Prefetch does."""

    @T.prim_func
    def gather(K: T.Tensor((128, 64), "float16"), idx: T.Tensor((64,), "int32"), count: T.int32,
               O: T.Tensor((2, 32, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((2, 32, 64), "float16")
            for stage in T.serial(2):
                for i, j in T.Parallel(32, 64, prefer_async=True, annotations={NO_COMMIT_WAIT: True}):
                    tile[stage, i, j] = T.if_then_else(stage * 32 + i < count, K[idx[stage * 32 + i], j], 0)
                T.ptx_commit_group()
            if user_waits:
                T.ptx_wait_group(0)
            T.sync_threads()
            for s, i, j in T.Parallel(2, 32, 64):
                O[s, i, j] = tile[s, i, j]

    return gather


def _gather_inputs():
    k = rand((128, 64), torch.float16, 21)
    idx = torch.randperm(128, dtype=torch.int32)[:64].contiguous()
    return k, idx


def test_the_hint_and_the_annotations_are_kept_on_the_outermost_loop():
    loops = []
    tvm_func = prefetch_rows()
    tilelang.tvm.tirx.stmt_functor.post_order_visit(
        tvm_func.body, lambda n: loops.append(n) if isinstance(n, tilelang.tvm.tirx.For) else None)
    outer = [loop for loop in loops if "parallel_prefer_async" in loop.annotations]
    assert len(outer) == 1 and bool(outer[0].annotations[NO_COMMIT_WAIT])
    assert outer[0].extent.value == 32  # the nest's outermost loop (i), not j


@pytest.mark.parametrize("arch", ARCHS)
def test_the_prefetched_rows_are_16_byte_ldlms_copies_the_user_waits_for(arch):
    kernel = tilelang.compile(prefetch_rows(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # one 8-half piece per thread and row, zero-filled past `count` (and past K's rows: the bounds guard)
    assert "tl::cp_async_gs_conditional<16>(&tile[" in src
    assert not re.search(r"^ *\*reinterpret_cast<tl::vec<half_t, 8>\*>\(tile", src, re.M)  # no synchronous store
    assert src.count("tl::cp_async_wait<0>()") == 1  # the user's only: the annotation leaves it to them
    k, idx = _gather_inputs()
    out = poison((2, 32, 64), torch.float16)
    kernel(k, idx, 50, out)
    expected = k[idx.long()].clone()
    expected[50:] = 0
    torch.testing.assert_close(out, expected.view(2, 32, 64), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_reading_the_tile_without_the_users_wait_is_the_simulators_late_data_error(arch, monkeypatch):
    kernel = tilelang.compile(prefetch_rows(user_waits=False), target=f"musa -arch={arch}")
    assert "tl::cp_async_wait" not in kernel.get_kernel_source()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    k, idx = _gather_inputs()
    with pytest.raises(KernelLaunchError, match=r"read of shared memory .* while an asynchronous copy "
                                                r"\(__musa_memcpy_g2s\) issued at .* has not completed"):
        kernel(k, idx, 50, poison((2, 32, 64), torch.float16))


def reversed_rows(M: int, N: int, block: int, dtype: str):
    """Each block's rows of A through a shared tile (prefer_async), written back in reverse order: other threads'
    copies are read, so the wait and a barrier must come between."""

    @T.prim_func
    def reverse(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            S = T.alloc_shared((block, N), dtype)
            for i, j in T.Parallel(block, N, prefer_async=True):
                S[i, j] = A[bx * block + i, j]
            for i, j in T.Parallel(block, N):
                B[bx * block + i, j] = S[block - 1 - i, j]

    return reverse


def _reversed_reference(a: torch.Tensor, block: int) -> torch.Tensor:
    M, N = a.shape
    padded = torch.zeros((-(-M // block) * block, N), dtype=a.dtype)
    padded[:M] = a
    return padded.view(-1, block, N).flip(1).reshape(-1, N)[:M]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,piece", [("float16", 16), ("float32", 16), ("int8", 16)])
def test_the_compiler_commits_and_waits_after_the_nest_and_rows_past_the_tensor_are_zeros(arch, dtype, piece):
    kernel = tilelang.compile(reversed_rows(100, 64, 32, dtype), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    copy, commit, wait, barrier = (src.index(s) for s in (f"tl::cp_async_gs_conditional<{piece}>(&S[",
                                                          "tl::cp_async_commit();", "tl::cp_async_wait<0>();",
                                                          "__syncthreads();"))
    assert copy < commit < wait < barrier < src.index("(B + ")  # the tile is whole before any thread reads it
    torch_dtype = getattr(torch, dtype)
    if dtype == "int8":
        a = torch.randint(-128, 128, (100, 64), generator=torch.Generator().manual_seed(31), dtype=torch.int8)
        out = torch.full((100, 64), 0x5A, dtype=torch.int8)
    else:
        a, out = rand((100, 64), torch_dtype, 31), poison((100, 64), torch_dtype)
    kernel(a, out)
    torch.testing.assert_close(out, _reversed_reference(a, 32), rtol=0, atol=0)


def transposed(dtype: str):
    @T.prim_func
    def transpose(A: T.Tensor((64, 32), dtype), B: T.Tensor((32, 64), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), dtype)
            for i, j in T.Parallel(64, 32, prefer_async=True):
                S[j, i] = A[i, j]
            for j, i in T.Parallel(32, 64):
                B[j, i] = S[j, i]

    return transpose


@pytest.mark.parametrize("arch", ARCHS)
def test_a_strided_float32_copy_is_one_4_byte_copy_an_element(arch):
    kernel = tilelang.compile(transposed("float32"), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::cp_async_gs<4>(&S[" in src and "tl::cp_async_gs_conditional" not in src  # in bounds: unguarded
    a = rand((64, 32), torch.float32, 41)
    out = poison((32, 64), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, a.T, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_strided_float16_copy_has_no_ldlms_size_and_stays_synchronous(arch):
    kernel = tilelang.compile(transposed("float16"), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::cp_async" not in src  # 2-byte pieces: no copy made asynchronous, so nothing to commit or wait for
    a = rand((64, 32), torch.float16, 42)
    out = poison((32, 64), torch.float16)
    kernel(a, out)
    torch.testing.assert_close(out, a.T, rtol=0, atol=0)


def two_tiles():
    @T.prim_func
    def kv(K: T.Tensor((32, 64), "bfloat16"), V: T.Tensor((32, 64), "bfloat16"), O: T.Tensor((32, 64), "bfloat16")):
        with T.Kernel(1, threads=64):
            K_s = T.alloc_shared((32, 64), "bfloat16")
            V_s = T.alloc_shared((32, 64), "bfloat16")
            for i, j in T.Parallel(32, 64, prefer_async=True):
                K_s[i, j] = K[i, j]
                V_s[i, j] = V[31 - i, j]
            for i, j in T.Parallel(32, 64):
                O[i, j] = K_s[31 - i, j] + V_s[i, j]

    return kv


@pytest.mark.parametrize("arch", ARCHS)
def test_two_tiles_copied_in_one_nest_are_both_asynchronous(arch):
    kernel = tilelang.compile(two_tiles(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::cp_async_gs<16>(&K_s[" in src and "tl::cp_async_gs<16>(&V_s[" in src
    assert src.count("tl::cp_async_wait<0>();") == 1
    k, v = rand((32, 64), torch.bfloat16, 43), rand((32, 64), torch.bfloat16, 44)
    out = poison((32, 64), torch.bfloat16)
    kernel(k, v, out)
    torch.testing.assert_close(out, k.flip(0) + v.flip(0), rtol=0, atol=0)


def gemm_operands():
    """The gemm's operand tiles filled by prefer_async nests: on mp_31 the tiles are swizzled for SQMMA, so each
    16-byte piece lands at `(row start + lane) ^ b`."""

    @T.prim_func
    def g(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.serial(2):
                for i, j in T.Parallel(64, 32, prefer_async=True):
                    A_s[i, j] = A[i, k * 32 + j]
                for i, j in T.Parallel(32, 64, prefer_async=True):
                    B_s[i, j] = B[k * 32 + i, j]
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C)

    return g


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_operand_tiles_in_their_swizzled_layouts_are_filled_by_ldlms_copies(arch):
    kernel = tilelang.compile(gemm_operands(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::cp_async_gs<16>(&A_s[" in src and "tl::cp_async_gs<16>(&B_s[" in src
    assert (" ^ " in src.split("tl::cp_async_gs<16>(&A_s[")[1].split(";")[0]) == (arch == "mp_31")
    a, b = rand((64, 64), torch.float16, 45), rand((64, 64), torch.float16, 46)
    out = poison((64, 64), torch.float32)
    kernel(a, b, out)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_an_arch_without_ldlms_keeps_the_copies_synchronous():
    # the source is the check: lowered, not built (the only mp_21 build here would precompile that arch's prelude)
    src = tilelang.lower(reversed_rows(100, 64, 32, "float16"), target="musa -arch=mp_21").kernel_source
    assert "tl::cp_async" not in src


def _region_values(func, arch: str, enable_async_copy: bool) -> list[int]:
    func = func.with_attr("target", determine_target(f"musa -arch={arch}"))
    marked = mark_prefer_async_loops(func, enable_async_copy)
    values = []
    tvm.tirx.stmt_functor.post_order_visit(marked.body, lambda n: values.append(int(n.value.value)) if isinstance(
        n, tvm.tirx.AttrStmt) and n.attr_key == "tl.prefer_async_copies" else None)
    return values


def hinted(prefer_async, annotations):
    @T.prim_func
    def copy(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64, prefer_async=prefer_async, annotations=annotations):
                S[i] = A[i]
            A[T.get_thread_binding()] = S[63 - T.get_thread_binding()]

    return copy


@pytest.mark.parametrize("prefer_async,annotations,enable,values", [
    (True, None, True, [1]),  # the compiler commits and waits
    (True, None, False, [1]),  # the hint wins over TL_ENABLE_ASYNC_COPY=False, as upstream's
    (True, {NO_COMMIT_WAIT: True}, True, [0]),  # the user does
    (None, {NO_COMMIT_WAIT: True}, True, [0]),  # upstream's rule: the annotation alone, while async copies are on
    (None, {NO_COMMIT_WAIT: True}, False, []),
    (False, None, True, []),
])
def test_which_nests_are_marked_and_who_waits(prefer_async, annotations, enable, values):
    assert _region_values(hinted(prefer_async, annotations), "mp_31", enable) == values
    assert _region_values(hinted(prefer_async, annotations), "mp_21", enable) == []  # no LDLMS there


@T.prim_func
def region_before(A: T.Tensor((64, 64), "float16"), n: T.int32):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        with T.attr(0, "tl.prefer_async_copies", 1):
            for v in T.vectorized(8):
                S[tx // 8, tx % 8 * 8 + v] = T.if_then_else(tx // 8 < n, A[tx // 8, tx % 8 * 8 + v], T.float16(0))


@T.prim_func
def region_expected(A: T.Tensor((64, 64), "float16"), n: T.int32):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        in_bounds = T.bool()
        T.let(in_bounds, tx // 8 < n)
        T.call_extern("int32", "tl::cp_async_gs_conditional<16>", T.access_ptr(S[tx // 8, tx % 8 * 8], "w"),
                      T.address_of(A[T.Select(in_bounds, tx // 8, 0), T.Select(in_bounds, tx % 8 * 8, 0)]), in_bounds)
        T.call_extern("int32", "tl::cp_async_commit")
        T.call_extern("int32", "tl::cp_async_wait<0>")


def test_a_vectorized_zero_filled_copy_becomes_one_predicated_16_byte_copy_then_commit_and_wait():
    after = without_locations(lower_prefer_async_copies(region_before))
    tvm.ir.assert_structural_equal(after, without_locations(region_expected).with_attr(
        "global_symbol", region_before.attrs["global_symbol"]))


@T.prim_func
def overlap_before(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64,), "float16"), C: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        with T.attr(0, "tl.prefer_async_copies", 1):
            for v in T.vectorized(8):
                S[tx // 8, tx % 8 * 8 + v] = A[tx // 8, tx % 8 * 8 + v]
        B[tx] = A[63, tx] * T.float16(2)
        T.sync_threads()
        C[tx] = S[tx // 8, 63 - tx % 8]


@T.prim_func
def overlap_expected(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64,), "float16"), C: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        T.call_extern("int32", "tl::cp_async_gs<16>", T.access_ptr(S[tx // 8, tx % 8 * 8], "w"),
                      T.address_of(A[tx // 8, tx % 8 * 8]))
        T.call_extern("int32", "tl::cp_async_commit")
        B[tx] = A[63, tx] * T.float16(2)
        T.call_extern("int32", "tl::cp_async_wait<0>")
        T.sync_threads()
        C[tx] = S[tx // 8, 63 - tx % 8]


def test_the_wait_comes_after_the_statements_that_do_not_need_the_tile_and_before_a_barrier():
    after = without_locations(lower_prefer_async_copies(overlap_before))
    tvm.ir.assert_structural_equal(after, without_locations(overlap_expected).with_attr(
        "global_symbol", overlap_before.attrs["global_symbol"]))


def overlapped():
    @T.prim_func
    def k(A: T.Tensor((32, 64), "float32"), X: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "float32"),
          C: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), "float32")
            for i, j in T.Parallel(32, 64, prefer_async=True):
                S[i, j] = A[i, j]
            for i, j in T.Parallel(32, 64):
                B[i, j] = X[i, j] * 2.0
            for i, j in T.Parallel(32, 64):
                C[i, j] = S[31 - i, j]

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_an_independent_nest_runs_while_the_copies_are_in_flight(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # a read of a byte whose copy has not landed would be an error
    kernel = tilelang.compile(overlapped(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    commit, other, wait, barrier, read = (src.index(t) for t in (
        "tl::cp_async_commit();", "(B + ", "tl::cp_async_wait<0>();", "__syncthreads();", "(C + "))
    assert commit < other < wait < barrier < read
    a, x = rand((32, 64), torch.float32, 47), rand((32, 64), torch.float32, 48)
    b, c = poison((32, 64), torch.float32), poison((32, 64), torch.float32)
    kernel(a, x, b, c)
    torch.testing.assert_close(c, a.flip(0), rtol=0, atol=0)
    torch.testing.assert_close(b, x * 2, rtol=0, atol=0)


@T.prim_func
def lane_guarded(A: T.Tensor((64, 64), "float16"), n: T.int32):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        with T.attr(0, "tl.prefer_async_copies", 1):
            for v in T.vectorized(8):
                S[tx // 8, tx % 8 * 8 + v] = T.if_then_else(tx % 8 * 8 + v < n, A[tx // 8, tx % 8 * 8 + v],
                                                            T.float16(0))


def test_a_run_whose_lanes_are_guarded_one_by_one_stays_a_synchronous_vector_store():
    after = lower_prefer_async_copies(lane_guarded)
    assert "cp_async" not in after.script() and "T.vectorized(8)" in after.script()


@pytest.mark.parametrize("kwargs,message", [
    ({"prefer_async": "yes"}, "T.Parallel: prefer_async='yes' must be True, False or None"),
    ({"annotations": [("a", 1)]}, "T.Parallel: annotations=[('a', 1)] must be a dict of str keys"),
])
def test_bad_values_are_errors_at_the_line(kwargs, message):
    with pytest.raises(tilelang.CompileError, match="T.Parallel") as info:
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64, **kwargs):
                    A[i] = 0.0
    assert message in str(info.value) and "for i in T.Parallel(64, **kwargs):" in str(info.value)


@T.prim_func
def after_prefetch_before(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=64):
        P = T.alloc_shared((8, 64), "float16")
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        T.call_extern("int32", "tl::cp_async_gs<16>", T.access_ptr(P[tx // 8, tx % 8 * 8], "w"),
                      T.address_of(B[tx // 8, tx % 8 * 8]))  # a pipeline's prefetch of the next stage
        T.call_extern("int32", "tl::cp_async_commit")
        with T.attr(0, "tl.prefer_async_copies", 1):
            for v in T.vectorized(8):
                S[tx // 8, tx % 8 * 8 + v] = A[tx // 8, tx % 8 * 8 + v]
        T.sync_threads()


@T.prim_func
def after_prefetch_expected(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=64):
        P = T.alloc_shared((8, 64), "float16")
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        T.call_extern("int32", "tl::cp_async_gs<16>", T.access_ptr(S[tx // 8, tx % 8 * 8], "w"),
                      T.address_of(A[tx // 8, tx % 8 * 8]))
        T.call_extern("int32", "tl::cp_async_commit")
        T.call_extern("int32", "tl::cp_async_gs<16>", T.access_ptr(P[tx // 8, tx % 8 * 8], "w"),
                      T.address_of(B[tx // 8, tx % 8 * 8]))
        T.call_extern("int32", "tl::cp_async_commit")
        T.call_extern("int32", "tl::cp_async_wait<1>")  # the nest's group; the prefetch's stays in flight
        T.sync_threads()


def test_a_nest_after_a_prefetch_commits_first_and_waits_for_its_own_group_only():
    after = without_locations(lower_prefer_async_copies(after_prefetch_before))
    tvm.ir.assert_structural_equal(after, without_locations(after_prefetch_expected).with_attr(
        "global_symbol", after_prefetch_before.attrs["global_symbol"]))


PM, PN, PK, PBK = 64, 64, 256, 32


def pipelined_nest():
    """C = A @ B: A's tiles by the T.Pipelined loop's own copies (LDLMS prefetch of the next stage), B's by a
    prefer_async nest in the loop body."""
    @T.prim_func
    def main(A: T.Tensor((PM, PK), "float16"), B: T.Tensor((PK, PN), "float16"), C: T.Tensor((PM, PN), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((PM, PBK), "float16")
            B_s = T.alloc_shared((PBK, PN), "float16")
            C_l = T.alloc_fragment((PM, PN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(PK // PBK, num_stages=2):
                T.copy(A[0, ko * PBK], A_s, disable_tma=True)
                for i, j in T.Parallel(PBK, PN, prefer_async=True):
                    B_s[i, j] = B[ko * PBK + i, j]
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return main


def _steady_loop(source):
    """The text of the pipeline's steady-state loop."""
    start = source.index("for (int ko = 0;")
    return source[start:source.index("\n  }\n", start)]


@pytest.mark.parametrize("arch", ARCHS)
def test_inside_a_pipeline_only_the_nests_group_is_awaited(arch):
    kernel = tilelang.compile(pipelined_nest(), target=f"musa -arch={arch}")
    loop = _steady_loop(kernel.get_kernel_source())
    # the nest's copies and commit, then the prefetch's, then one wait that leaves the prefetch in flight
    order = [loop.index(s) for s in ("(&B_s[", "tl::cp_async_commit();", "(&A_s[", "tl::cp_async_wait<1>();")]
    assert order == sorted(order), loop
    assert loop.count("tl::cp_async_commit();") == 2 and "tl::cp_async_wait<0>" not in loop, loop
    a, b = rand((PM, PK), torch.float16, 91), rand((PK, PN), torch.float16, 92)
    c = poison((PM, PN), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_a_wait_for_one_group_too_few_inside_the_pipeline_is_the_simulators_late_data_error(tmp_path, monkeypatch):
    """The wait is tight: the same source with `wait<2>` in the loop (the nest's group left in flight too) is
    late data to the simulator."""
    source = tilelang.compile(pipelined_nest(), target="musa -arch=mp_22").get_kernel_source(kernel_only=False)
    loop = _steady_loop(source)
    loose = source.replace(loop, loop.replace("tl::cp_async_wait<1>();", "tl::cp_async_wait<2>();"))
    assert loose != source
    replaced = tmp_path / "loose.mu"
    replaced.write_text(loose)
    monkeypatch.setenv("TILELANG_REPLACE_MUSAC", str(replaced))
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(pipelined_nest(), target="musa -arch=mp_22")
    # (the seeded schedule meets the nest's copy still in flight at the next iteration's copy into the same bytes)
    with pytest.raises(KernelLaunchError, match=r"__musa_memcpy_g2s issued at .* (has not completed|is still in "
                                                r"flight there \(missing __musa_memcpy_g2s_wait\?\))"):
        kernel(rand((PM, PK), torch.float16, 93), rand((PK, PN), torch.float16, 94), poison((PM, PN), torch.float32))
