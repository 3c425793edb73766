"""Fragment stores to global memory in wide pieces (tileop/lane_exchange.py): where a fragment's layout puts
consecutive columns on consecutive lanes (matrix accumulators), the lanes trade elements through warp shuffles
(`tl::exchange_lane_bits`) and store vectors, so each warp instruction fills whole 32-byte sectors."""

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa.ir.attrs import LOOP_PLAN, PARALLEL
from tilelang_musa.layout import Fragment
from tilelang_musa.tileop.lane_exchange import plan_lane_exchange
from tilelang_musa.target import determine_target
from tilelang_musa.tileop.loop_plan import fragment_plan
from tilelang_musa.transform.lower_parallel_loop import lower_parallel_loop


def gemm_kernel(arch, out_dtype, M, N, K, block_M, block_N, block_K, threads):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return tilelang.compile(gemm, target=f"musa -arch={arch}")


def run_gemm(kernel, out_dtype, M, N, K):
    a, b = rand((M, K), torch.float16, seed=1), rand((K, N), torch.float16, seed=2)
    c = poison((M, N), out_dtype)
    kernel(a, b, c)
    ref = (a.float() @ b.float()).to(out_dtype)
    torch.testing.assert_close(c.float(), ref.float(), rtol=2e-2, atol=2e-2 if out_dtype != torch.float8_e4m3fn else 0.5)


# arch, output dtype, tile, threads, the trade it needs ("" when none), the vector the store writes
CASES = [
    ("mp_31", torch.float16, (128, 128, 32), 256, "tl::exchange_lane_bits<64, 0>", "reinterpret_cast<half2*>"),
    ("mp_31", torch.bfloat16, (128, 128, 32), 256, "tl::exchange_lane_bits<64, 0>", "reinterpret_cast<__mt_bfloat162*>"),
    ("mp_31", torch.float8_e4m3fn, (128, 128, 32), 256, "tl::exchange_lane_bits<64, 0, 1>", "tl::vec<fp8_e4_t, 4>"),
    ("mp_22", torch.float8_e4m3fn, (64, 64, 32), 128, "tl::exchange_lane_bits<32, 0>", "tl::vec<fp8_e4_t, 2>"),
]


@pytest.mark.parametrize("arch,out_dtype,tile,threads,trade,vector", CASES,
                         ids=[f"{c[0]}-{str(c[1]).split('.')[-1]}" for c in CASES])
def test_accumulator_store_trades_lanes_and_fills_sectors(arch, out_dtype, tile, threads, trade, vector):
    """SQMMA (mp_31) and MMA (mp_22) accumulators put 8 consecutive columns on 8 lanes: a 2-byte (1-byte) element
    per lane fills half (a quarter) of a sector per row. Traded, each lane stores 2 (4) consecutive elements."""
    M = N = 256
    kernel = gemm_kernel(arch, str(out_dtype).split(".")[-1], M, N, 64, *tile, threads)
    source = kernel.get_kernel_source()
    assert trade in source and vector in source
    run_gemm(kernel, out_dtype, M, N, 64)
    counters = kernel.get_profiler().counters()
    assert counters.global_store_efficiency == 1.0


@pytest.mark.parametrize("arch,out_dtype,tile,threads", [
    ("mp_31", "float32", (128, 128, 32), 256),  # 8 lanes x 4 bytes: a whole sector already
    ("mp_22", "float16", (64, 64, 32), 128),  # 128-lane warps put 16 consecutive columns on lanes: 32 bytes
])
def test_stores_that_fill_sectors_already_trade_nothing(arch, out_dtype, tile, threads):
    kernel = gemm_kernel(arch, out_dtype, 256, 256, 64, *tile, threads)
    assert "exchange_lane_bits" not in kernel.get_kernel_source()
    run_gemm(kernel, getattr(torch, out_dtype), 256, 256, 64)
    assert kernel.get_profiler().counters().global_store_efficiency == 1.0


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_partial_tiles_keep_their_guards_per_vector(arch):
    """M, N not multiples of the tile: the vectors at the edge are guarded as a whole (N even: a vector is inside
    or outside)."""
    M, N, K = 200, 136, 64
    tile, threads = ((128, 128, 32), 256) if arch == "mp_31" else ((64, 64, 32), 128)
    out = "float16" if arch == "mp_31" else "float8_e4m3fn"
    kernel = gemm_kernel(arch, out, M, N, K, *tile, threads)
    assert "tl::exchange_lane_bits<" in kernel.get_kernel_source()
    run_gemm(kernel, getattr(torch, out), M, N, K)


def test_unaligned_rows_store_without_trading():
    """N = 129: every other row starts at an odd element, so no 2-element vector is aligned; the store stays
    scalar."""
    kernel = gemm_kernel("mp_31", "float16", 256, 129, 64, 128, 128, 32, 256)
    assert "exchange_lane_bits" not in kernel.get_kernel_source()
    run_gemm(kernel, torch.float16, 256, 129, 64)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_store_under_a_lane_dependent_branch_does_not_shuffle(arch):
    """A copy under a condition that may differ between the lanes of a warp (a thread-private flag) cannot call
    warp shuffles: it stores as the layout lies."""
    M = N = 128
    threads = 256 if arch == "mp_31" else 128

    @T.prim_func
    def gemm(A: T.Tensor((M, 64), "float16"), B: T.Tensor((64, N), "float16"), C: T.Tensor((M, N), "float16"),
             flags: T.Tensor((threads,), "int32")):
        with T.Kernel(1, 1, threads=threads) as (bx, by):
            A_s = T.alloc_shared((M, 64), "float16")
            B_s = T.alloc_shared((64, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            flag = T.alloc_var("int32")
            flag = flags[T.get_thread_binding()]
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            if flag > 0:
                T.copy(C_l, C)

    kernel = tilelang.compile(gemm, target=f"musa -arch={arch}")
    assert "exchange_lane_bits" not in kernel.get_kernel_source()
    a, b = rand((M, 64), torch.float16, seed=3), rand((64, N), torch.float16, seed=4)
    c = poison((M, N), torch.float16)
    kernel(a, b, c, torch.ones(threads, dtype=torch.int32))
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(), rtol=2e-2, atol=2e-2)


# --- the pass: before / expected -------------------------------------------------------------------------------------

# Row i on lanes 8i..8i+7, column j on lane j % 8 and slot j // 8: the SQMMA accumulator's pattern in small.
INTERLEAVED = Fragment([4, 16], forward_thread_fn=lambda i, j: i * 8 + j % 8, forward_index_fn=lambda i, j: j // 8)
MP31 = determine_target("musa -arch=mp_31")


@T.prim_func
def interleaved_store_before(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float16")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for i in T.serial(4, annotations={PARALLEL: 1, LOOP_PLAN: {"kind": "fragment", "fragment": INTERLEAVED,
                                                                   "threads": [0, 32]}}):
            for j in T.serial(16, annotations={PARALLEL: 1}):
                B[i, j] = T.Cast("float16", A[i, j])


@T.prim_func
def interleaved_store_expected(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float16")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        B_lanes = T.alloc_buffer((2,), "float16", scope="local")
        for it in range(2):
            B_lanes[it] = T.Cast("float16", A[tx // 8, it * 8 + tx % 8])
        T.call_extern("void", "tl::exchange_lane_bits<2, 0>", T.address_of(B_lanes[0]), tx % 32)
        for vec in T.vectorized(2):
            B[tx // 8, tx % 2 * 8 + tx % 8 // 2 * 2 + vec] = B_lanes[vec]


def test_the_pass_trades_lane_bit_zero_against_the_slot_and_stores_pairs():
    """Lane L holds columns L % 8 and L % 8 + 8 of row L // 8; after trading lane bit 0 against slot bit 0 it holds
    the two consecutive columns (L % 8 // 2) * 2 + 8 * (L % 2) + {0, 1}."""
    after = without_locations(lower_parallel_loop(interleaved_store_before))
    expected = without_locations(interleaved_store_expected).with_attr(
        "global_symbol", interleaved_store_before.attrs["global_symbol"])
    tvm.ir.assert_structural_equal(after, expected)


def test_the_plan_reports_the_sector_efficiency_it_reaches():
    loop_vars = [tirx.Var("i", "int32"), tirx.Var("j", "int32")]
    B = tirx.decl_buffer((4, 16), "float16", "B")
    store = tirx.BufferStore(B, tirx.const(1.0, "float16"), loop_vars)
    exchange = plan_lane_exchange(loop_vars, store, fragment_plan(INTERLEAVED, [4, 16]), [4, 16], 32, 32,
                                  tvm.sym.Analyzer())
    assert (exchange.slot_bits, exchange.lane_bits) == ((0,), (0,))
    assert (exchange.efficiency_before, exchange.efficiency) == (0.5, 1.0)


def test_a_fresh_equal_fragment_reuses_the_planners_searches(monkeypatch):
    """Every compile builds the accumulator's fragment afresh: the element table and its searches are kept by the
    fragment's structure, so the second plan searches nothing and finds the same trades; another fragment searches."""
    from tilelang_musa.tileop import lane_exchange as module

    def make():
        return Fragment([4, 16], forward_thread_fn=lambda i, j: i * 8 + j % 8, forward_index_fn=lambda i, j: j // 8)

    def plan(fragment):
        loop_vars = [tirx.Var("i", "int32"), tirx.Var("j", "int32")]
        store = tirx.BufferStore(tirx.decl_buffer((4, 16), "float16", "B"), tirx.const(1.0, "float16"), loop_vars)
        return plan_lane_exchange(loop_vars, store, fragment_plan(fragment, [4, 16]), [4, 16], 32, 32,
                                  tvm.sym.Analyzer())

    module._TABLES.clear()
    first = plan(make())
    for search in ("_sector_efficiency", "_column_weight", "_first_element"):
        monkeypatch.setattr(module._Elements, search, lambda *a, _name=search: pytest.fail(f"{_name} searched again"))
    assert plan(make()) == first and first.trades
    transposed = Fragment([4, 16], forward_thread_fn=lambda i, j: j * 2 + i % 2, forward_index_fn=lambda i, j: i // 2)
    with pytest.raises(BaseException, match="searched again"):
        plan(transposed)
