"""Warp-synchronous code in the simulator: lanes of one warp exchanging data through memory with no `__syncwarp`.

DeepSeek's TileKernels `get_fused_mapping`: after `__match_any_sync`, every lane of a group reads its expert's
counter in shared memory and the group's last lane writes the updated counter back, with nothing between the reads
and the write. On NVIDIA it works because the warp is converged after the match (formally a race since independent
thread scheduling); the simulator runs the lanes one after another, so a lane that writes first is seen by later
lanes' reads and the positions collide. Checked mode (TILELANG_SIM_CHECK=1) reports it as a data race between two
lanes of one warp, naming both lanes, the buffer and the kernel's lines, with the hint to put `T.sync_warp()`
between; with it (or a block barrier) the kernel is race-free, as is one whose lanes hand the value over through a
shuffle. docs/SIMULATOR.md, "Warp-synchronous code"."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_31", "mp_22"]
WARP = {"mp_31": 32, "mp_22": 128}
NO_SYNC = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
LOCKSTEP_HINT = ("the code relies on a warp's lanes running in lockstep, which neither the device guarantees (a race "
                 "by CUDA's memory model since independent thread scheduling) nor the simulator does (it runs the "
                 "lanes one after another); put T.sync_warp() (__syncwarp()) or a block barrier between the two "
                 "accesses")


def expert_positions(warps, rounds, experts, between):
    """TileKernels' get_fused_mapping core on 32-lane warps: per round each lane takes an expert, the lanes of one
    expert find each other with `__match_any_sync`, read the expert's counter (the end of its free range), and the
    group's highest lane writes the counter moved down by the group's size; each lane's position is the counter
    less its rank in the group. `between`: "sync_warp" or "barrier" between the reads and the write, or None."""
    threads = warps * 32

    @T.prim_func
    def positions(E: T.Tensor((rounds, threads), "int32"), P: T.Tensor((rounds, threads), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            tid = T.get_thread_binding()
            lane = tid % 32
            warp = tid // 32
            C = T.alloc_shared((warps, experts), "int32")
            for i in T.serial(lane, experts, 32):
                C[warp, i] = 1000
            T.sync_threads()
            lane_mask = T.uint32(1 << lane) + T.uint32(1 << lane) - 1
            for r in T.serial(rounds):
                e = E[r, tid]
                mask = T.match_any_sync(e)
                count = T.popcount(mask & lane_mask)
                prefix = C[warp, e]  # the group's reads
                if between == "sync_warp":
                    T.sync_warp()
                elif between == "barrier":
                    T.sync_threads()
                pos = prefix - count
                if mask & ~lane_mask == 0:
                    C[warp, e] = pos  # the group's last lane writes the counter back
                P[r, tid] = pos
                T.sync_warp()

    return positions


def expected_positions(E, experts):
    P = torch.empty_like(E)
    counters = {}
    for r in range(E.shape[0]):
        for t in range(E.shape[1]):
            w, lane = divmod(t, 32)
            group = [j for j in range(32) if E[r, w * 32 + j] == E[r, t]]
            key = (w, int(E[r, t]))
            P[r, t] = counters.get(key, 1000) - sum(1 for j in group if j <= lane)
        for t in range(E.shape[1]):
            w, lane = divmod(t, 32)
            group = [j for j in range(32) if E[r, w * 32 + j] == E[r, t]]
            if lane == max(group):
                counters[(w, int(E[r, t]))] = int(P[r, t])
    return P


def random_experts(rounds, threads, experts, seed):
    return torch.randint(0, experts, (rounds, threads), generator=torch.Generator().manual_seed(seed),
                         dtype=torch.int32)


def assert_lockstep_race(message, arch, buffer, python_lines):
    """`message` is a race report between two lanes of one warp on `buffer`, at two of the kernel's `python_lines`."""
    lines = "|".join(str(n) for n in python_lines)
    found = re.search(rf"thread \((\d+),0,0\): data race on byte \d+ of shared `{buffer}`: this thread "
                      rf"(loads|stores) it at line \d+ \([^)]*test_sim_warp_lockstep_race.py:({lines})\) while thread "
                      rf"\((\d+),0,0\) (loaded|stored) it at line \d+ \([^)]*test_sim_warp_lockstep_race.py:({lines})"
                      rf"\), with no __syncwarp or barrier between them \(line numbers of the kernel source\)\. Both "
                      rf"are lanes of warp (\d+) \(lanes (\d+) and (\d+) of {WARP[arch]}\): ", message)
    assert found, message
    me, other, warp, my_lane, other_lane = (int(found.group(i)) for i in (1, 4, 7, 8, 9))
    assert me != other and me // WARP[arch] == other // WARP[arch] == warp, message
    assert (my_lane, other_lane) == (me % WARP[arch], other % WARP[arch]), message
    assert "stores" in (found.group(2) + found.group(5)).replace("stored", "stores"), message  # one of them writes
    assert LOCKSTEP_HINT in message, message


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_lanes_reading_a_counter_one_of_them_writes_back_race_in_checked_mode(seed, monkeypatch):
    warps, rounds, experts = 2, 3, 5
    kernel = tilelang.compile(expert_positions(warps, rounds, experts, None), target="musa -arch=mp_31",
                              pass_configs=NO_SYNC)
    source = kernel.get_kernel_source()
    assert "__match_any_sync" in source and source.count("__syncthreads") == 1 and "__syncwarp" in source
    E = random_experts(rounds, warps * 32, experts, 0)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", seed)
    with pytest.raises(KernelLaunchError) as info:
        kernel(E, torch.full_like(E, -7))
    builder = expert_positions
    assert_lockstep_race(str(info.value), "mp_31", "C",
                         [line_of(builder, "prefix = C[warp, e]"), line_of(builder, "C[warp, e] = pos")])


@pytest.mark.parametrize("between", ["sync_warp", "barrier"])
def test_a_sync_warp_or_barrier_between_the_reads_and_the_write_is_race_free(between, monkeypatch):
    warps, rounds, experts = 2, 3, 5
    kernel = tilelang.compile(expert_positions(warps, rounds, experts, between), target="musa -arch=mp_31",
                              pass_configs=NO_SYNC)
    assert "__syncwarp" in kernel.get_kernel_source()
    E = random_experts(rounds, warps * 32, experts, 1)
    expected = expected_positions(E, experts)
    for check, seed in (("0", "1"), ("1", "1"), ("1", "2"), ("1", "3")):
        monkeypatch.setenv("TILELANG_SIM_CHECK", check)
        monkeypatch.setenv("TILELANG_SIM_SEED", seed)
        P = torch.full_like(E, -7)
        kernel(E, P)
        assert torch.equal(P, expected), (check, seed)


def lane_read_then_write(arch, between):
    """No collective at all: every lane reads one of four words of its warp's row, then the last lane of each word
    (the highest four lanes) writes it back incremented: the lanes' reads and the writes meet with nothing between
    unless `between` is "sync_warp"."""
    warp = WARP[arch]
    threads = 2 * warp

    @T.prim_func
    def read_then_write(A: T.Tensor((2, 4), "int32"), P: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            tid = T.get_thread_binding()
            lane = tid % warp
            w = tid // warp
            S = T.alloc_shared((2, 4), "int32")
            if lane < 4:
                S[w, lane] = A[w, lane]
            T.sync_threads()
            v = S[w, lane % 4]  # every lane reads
            if between == "sync_warp":
                T.sync_warp()
            if lane >= warp - 4:
                S[w, lane % 4] = v + 1  # the highest lanes write
            P[tid] = v

    return read_then_write


@pytest.mark.parametrize("arch", ARCHS)
def test_warp_synchronous_code_without_a_collective_is_a_lane_race_on_both_archs(arch, monkeypatch):
    racy = tilelang.compile(lane_read_then_write(arch, None), target=f"musa -arch={arch}", pass_configs=NO_SYNC)
    safe = tilelang.compile(lane_read_then_write(arch, "sync_warp"), target=f"musa -arch={arch}",
                            pass_configs=NO_SYNC)
    A = torch.randint(-1000, 1000, (2, 4), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    threads = 2 * WARP[arch]
    expected = A[torch.arange(threads) // WARP[arch], torch.arange(threads) % 4]
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    for seed in ("1", "2"):
        monkeypatch.setenv("TILELANG_SIM_SEED", seed)
        with pytest.raises(KernelLaunchError) as info:
            racy(A, torch.full((threads,), -7, dtype=torch.int32))
        builder = lane_read_then_write
        assert_lockstep_race(str(info.value), arch, "S",
                             [line_of(builder, "v = S[w, lane % 4]"), line_of(builder, "S[w, lane % 4] = v + 1")])
        P = torch.full((threads,), -7, dtype=torch.int32)
        safe(A, P)
        assert torch.equal(P, expected)


def counter_through_a_shuffle(arch, rounds):
    """The race-free way: per round one leader lane (chosen by lane 0 and handed round by a shuffle) reads and
    writes its warp's counter, and the other lanes get the value it read through a shuffle; a leader's write and
    the next round's leader's read are ordered by the next round's first shuffle."""
    warp = WARP[arch]
    threads = 2 * warp

    @T.prim_func
    def through_shuffle(A: T.Tensor((2,), "int32"), L: T.Tensor((rounds, threads), "int32"),
                        P: T.Tensor((rounds, threads), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            tid = T.get_thread_binding()
            lane = tid % warp
            w = tid // warp
            S = T.alloc_shared((2,), "int32")
            if lane == 0:
                S[w] = A[w]
            T.sync_threads()
            old = T.alloc_var("int32")
            for r in T.serial(rounds):
                leader = T.shfl_sync(L[r, tid] % 32, 0)
                old = 0
                if lane == leader:
                    old = S[w]
                    S[w] = old + leader + 1
                P[r, tid] = T.shfl_sync(old, leader)

    return through_shuffle


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_handing_the_value_over_through_a_shuffle_stay_clean(arch, monkeypatch):
    rounds = 4
    threads = 2 * WARP[arch]
    kernel = tilelang.compile(counter_through_a_shuffle(arch, rounds), target=f"musa -arch={arch}",
                              pass_configs=NO_SYNC)
    assert "__shfl_sync" in kernel.get_kernel_source()
    gen = torch.Generator().manual_seed(3)
    A = torch.randint(-1000, 1000, (2,), generator=gen, dtype=torch.int32)
    L = torch.randint(0, 1 << 20, (rounds, threads), generator=gen, dtype=torch.int32)
    expected = torch.empty(rounds, threads, dtype=torch.int32)
    counter = A.clone()
    for r in range(rounds):
        for w in range(2):
            leader = int(L[r, w * WARP[arch]]) % 32
            expected[r, w * WARP[arch]:(w + 1) * WARP[arch]] = counter[w]
            counter[w] += leader + 1
    for check, seed in (("0", "1"), ("1", "1"), ("1", "2")):
        monkeypatch.setenv("TILELANG_SIM_CHECK", check)
        monkeypatch.setenv("TILELANG_SIM_SEED", seed)
        P = torch.full((rounds, threads), -7, dtype=torch.int32)
        kernel(A, L, P)
        assert torch.equal(P, expected), (arch, check, seed)


def reader_then_reader_and_writer(arch):
    """Lane 5 reads the word, then after a `__syncwarp` lanes 1 and 2 read it and lane 2 writes it: the detector
    must still hold lane 1's read when lane 2 writes, although lane 5's earlier (ordered) read came first."""
    warp = WARP[arch]

    @T.prim_func
    def readers(A: T.Tensor((1,), "int32"), P: T.Tensor((2 * warp,), "int32")):
        with T.Kernel(1, threads=2 * warp) as bx:
            tid = T.get_thread_binding()
            S = T.alloc_shared((1,), "int32")
            v = T.alloc_var("int32")
            if tid == 0:
                S[0] = A[0]
            T.sync_threads()
            v = 0
            if tid == 5:
                v = S[0]  # the earlier reader
            T.sync_warp()
            if tid == 1 or tid == 2:
                v = S[0]  # two lanes read
            if tid == 2:
                S[0] = v + 1  # and one of them writes
            P[tid] = v

    return readers


@pytest.mark.parametrize("arch", ARCHS)
def test_an_earlier_ordered_read_does_not_hide_a_later_lanes_read_from_the_detector(arch, monkeypatch):
    """Before, the shadow cell kept the block's first reader in its first load slot until a store: lane 5's read
    there left one slot for lanes 1 and 2, lane 2's own read took it, and its store was compared with lane 5's
    (ordered by the __syncwarp) only: the race with lane 1 went unreported whenever lane 1 read first."""
    kernel = tilelang.compile(reader_then_reader_and_writer(arch), target=f"musa -arch={arch}", pass_configs=NO_SYNC)
    A = torch.tensor([41], dtype=torch.int32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    for seed in range(1, 9):
        monkeypatch.setenv("TILELANG_SIM_SEED", str(seed))
        with pytest.raises(KernelLaunchError) as info:
            kernel(A, torch.full((2 * WARP[arch],), -7, dtype=torch.int32))
        builder = reader_then_reader_and_writer
        assert_lockstep_race(str(info.value), arch, "S",
                             [line_of(builder, "v = S[0]  # two lanes"), line_of(builder, "S[0] = v + 1")])


def lanes_incrementing_one_word(arch):
    warp = WARP[arch]

    @T.prim_func
    def increment(A: T.Tensor((1,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=2 * warp) as bx:
            tid = T.get_thread_binding()
            S = T.alloc_shared((1,), "int32")
            if tid == 0:
                S[0] = A[0]
            T.sync_threads()
            if tid < 4:
                S[0] = S[0] + 1  # a read-modify-write by four lanes: lockstep would lose updates too
            T.sync_threads()
            if tid == 0:
                B[0] = S[0]

    return increment


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_of_one_warp_at_one_statement_get_the_plain_race_report(arch, monkeypatch):
    """Lockstep does not order lanes at one statement (their read-modify-writes of one word lose updates on the
    device too): the report is the plain one, without the hint to add a T.sync_warp()."""
    kernel = tilelang.compile(lanes_incrementing_one_word(arch), target=f"musa -arch={arch}", pass_configs=NO_SYNC)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(torch.tensor([17], dtype=torch.int32), torch.tensor([-7], dtype=torch.int32))
    message = str(info.value)
    line = line_of(lanes_incrementing_one_word, "S[0] = S[0] + 1")
    assert re.search(rf"data race on byte [0-3] of shared `S`: this thread (loads|stores) it at line \d+ "
                     rf"\([^)]*:{line}\) while thread \([0-3],0,0\) (loaded|stored) it at line \d+ \([^)]*:{line}\), "
                     rf"with no barrier between them \(line numbers of the kernel source\)", message), message
    assert "T.sync_warp" not in message and "Both are lanes" not in message, message
