"""`kernel.get_profiler().trace()`: the cycle model's timeline of sampled blocks as a Chrome / Perfetto trace
(tilelang_musa/profiler/trace.py, src/tl_templates/sim/sim/timeline.h). A pipelined GEMM on mp_31 (SQMMA, TME
loads) and on mp_22 (warp MMA, 128-thread warps)."""

import json
from collections import defaultdict

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.profiler.counters import read_counters
from tilelang_musa.profiler.trace import chrome_trace

WARP = {"mp_22": 128, "mp_31": 32}
M, N, K, BLOCK_M, BLOCK_N, BLOCK_K = 256, 256, 128, 128, 128, 64
THREADS = 256
BLOCKS = (M // BLOCK_M) * (N // BLOCK_N)
WARP_KINDS = {"arithmetic", "memory", "global load wait", "barrier wait", "async barrier wait", "copy wait",
              "collective wait", "sqmma issue", "sqmma wait", "mma issue", "mma wait"}


def pipelined_gemm():
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // BLOCK_N, M // BLOCK_M, threads=THREADS) as (bx, by):
            A_s = T.alloc_shared((BLOCK_M, BLOCK_K), "float16")
            B_s = T.alloc_shared((BLOCK_K, BLOCK_N), "float16")
            C_l = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // BLOCK_K, num_stages=2):
                T.copy(A[by * BLOCK_M, k * BLOCK_K], A_s)
                T.copy(B[k * BLOCK_K, bx * BLOCK_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * BLOCK_M, bx * BLOCK_N])

    return main


@pytest.fixture(scope="module", params=["mp_31", "mp_22"])
def gemm(request):
    return request.param, tilelang.compile(pipelined_gemm(), target=f"musa -arch={request.param}")


def inputs():
    return [rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2), poison((M, N), torch.float16)]


def test_the_trace_is_one_track_per_warp_of_the_sampled_blocks(gemm, tmp_path):
    arch, kernel = gemm
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "gemm.json", sample_blocks=2).read_text())
    events = trace["traceEvents"]
    assert trace["otherData"]["time_unit"].startswith("cycle") and trace["otherData"]["capped"] is False
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(processes) == [1, BLOCKS // 2 + 1]  # two blocks, evenly spaced; pid = block + 1
    assert processes[1] == "block 0 (0, 0, 0)" and processes[BLOCKS // 2 + 1].startswith(f"block {BLOCKS // 2} (")
    threads = read_counters(kernel.library_path).threads_per_block  # mp_31 adds a producer squad: 384
    assert threads >= THREADS and threads % WARP[arch] == 0
    warps = threads // WARP[arch]
    for pid in processes:
        names = {e["tid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
        # tid = track + 1: the warps, then the tensor pipe and the transfers
        assert names == {**{w + 1: f"warp {w}" for w in range(warps)}, warps + 1: "tensor pipe",
                         warps + 2: "async transfers"}
        slices = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
        assert {e["tid"] for e in slices if e["name"] in WARP_KINDS} == set(range(1, warps + 1))  # every warp's
        assert {e["tid"] for e in slices if e["name"] not in WARP_KINDS} <= {warps + 1, warps + 2}


def test_the_slices_are_the_kernel_s_instructions_waits_and_transfers(gemm, tmp_path):
    arch, kernel = gemm
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "gemm.json").read_text())
    kinds = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"arithmetic", "memory", "barrier wait"} <= kinds
    if arch == "mp_31":
        assert {"sqmma issue", "sqmma wait", "sqmma", "tme load", "async barrier wait"} <= kinds
        assert not kinds & {"mma issue", "mma wait", "mma"}
    else:
        assert {"mma issue", "mma wait", "mma"} <= kinds
        assert not kinds & {"sqmma issue", "sqmma wait", "sqmma", "tme load"}
    counters = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"}
    assert "tensor pipe busy" in counters


def test_slices_have_non_negative_times_and_do_not_overlap_on_a_track(gemm, tmp_path):
    _, kernel = gemm
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "gemm.json").read_text())
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] >= 0, e
            tracks[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for track, spans in tracks.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, (track, end, start)


def test_merged_arithmetic_counts_every_instruction_of_lane_0(gemm, tmp_path):
    """Merging consecutive arithmetic into one slice keeps the count: the slices' instructions of all the warps
    are the counters' arithmetic_instructions (counted per warp at lane 0), for the same blocks."""
    _, kernel = gemm
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "gemm.json", sample_blocks=2).read_text())
    counted = read_counters(kernel.library_path)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "arithmetic"]
    assert sum(e["args"]["instructions"] for e in slices) == counted.arithmetic_instructions > 0
    assert all(e["dur"] == e["args"]["instructions"] for e in slices)  # one cycle each


def test_tracing_changes_neither_the_counters_nor_the_output(gemm, tmp_path):
    _, kernel = gemm
    profiler = kernel.get_profiler()
    a, b, c = inputs()
    counted = profiler.counters([a, b, c])
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    a, b, c = inputs()
    profiler.trace(tmp_path / "gemm.json", sample_blocks=None, input_tensors=[a, b, c])
    assert read_counters(kernel.library_path) == counted
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    trace = json.loads((tmp_path / "gemm.json").read_text())
    assert len({e["pid"] for e in trace["traceEvents"] if e["ph"] == "M"}) == BLOCKS


def test_the_block_s_critical_path_ends_the_timeline(gemm, tmp_path):
    """The model's block cycles are its last clock: no slice ends after the longest block's cycles, and some
    track reaches them."""
    _, kernel = gemm
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "gemm.json", sample_blocks=2).read_text())
    counted = read_counters(kernel.library_path)
    last = max(e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert last == pytest.approx(counted.block_cycles_max, abs=1)


def test_a_capped_timeline_says_so_in_the_trace():
    """timeline.h keeps at most max_slices slices a launch and counts the rest; the trace names the loss."""
    timeline = {"kernel": "k", "threads_per_block": 64, "warp_size": 32, "max_slices": 1, "dropped_slices": 3,
                "blocks": [[5, 1, 0, 0]], "slices": [[5, 0, "arithmetic", 0.0, 4.0, 4, 0.0]]}
    trace = json.loads(json.dumps(chrome_trace(timeline)))
    assert trace["otherData"]["capped"] is True and trace["otherData"]["dropped_slices"] == 3
    [note] = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert note["name"] == "trace capped at 1 slices: 3 dropped" and note["pid"] == 6
    [slice_] = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert (slice_["pid"], slice_["tid"], slice_["ts"], slice_["dur"]) == (6, 1, 0.0, 4.0)
    assert slice_["args"] == {"instructions": 4}


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_kernel_of_a_long_name_gives_a_valid_trace(arch, tmp_path):
    """The runtime's trace header holds the kernel's name whatever its length (a 256-byte buffer once cut it, and
    the JSON with it)."""
    name = "scale_rows_" + "x" * 300

    @T.prim_func
    def scale(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=64) as bx:
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = A[bx * 32 + i, j] * 2.0

    kernel = tilelang.compile(scale.with_attr("global_symbol", name), target=f"musa -arch={arch}")
    a = rand((64, 64), torch.float32, 3)
    trace = json.loads(kernel.get_profiler().trace(tmp_path / "scale.json", input_tensors=[a, poison((64, 64),
                                                                                              torch.float32)])
                       .read_text())
    assert name in json.dumps(trace) and any(e["ph"] == "X" for e in trace["traceEvents"])
