"""PlanDynamicSharedMemory: every `shared.dyn` tile gets a byte offset in the kernel's one dynamic shared-memory arena
(`tl.dyn_smem_offset`, 1 KiB aligned; tiles in order of first use, the larger first), and the function the arena's
size (`tl.dynamic_smem_bytes`). Tiles whose uses (statements of the block allocating them) do not overlap share
bytes, with a block barrier before the later tile's first use where none stands between. An arena past the target's
limit is an error listing the tiles. Past the limit, the compiler's temporaries (a staged gemm operand, a layout
exchange: written whole before each read) are counted statement by statement inside the loops and branches every
thread runs alike."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from conftest import marked_temporary
from tilelang_musa.errors import CompileError
from tilelang_musa.ir.attrs import OFFSET_ANNOTATION, REWRITTEN_ANNOTATION, SIZE_ATTR
from tilelang_musa.transform.plan_dynamic_shared_memory import plan_dynamic_shared_memory


def placed(func, offsets: dict, size: int):
    """`func` with its tiles at `offsets` (by name) and an arena of `size` bytes."""
    def on_alloc(node, mutator):
        if node.buffer.name not in offsets:
            return node
        return tirx.AllocBuffer(node.buffer, {**(node.annotations or {}), OFFSET_ANNOTATION: offsets[node.buffer.name]})

    func = tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])
    return func.with_attr(SIZE_ATTR, size)


def _assert_plans_to(before, expected, limit=None):
    tvm.ir.assert_structural_equal(plan_dynamic_shared_memory(before, limit),
                                   expected.with_attr("global_symbol", before.attrs["global_symbol"]))


@T.prim_func
def together(A: T.Buffer((256,), "float32"), B: T.Buffer((100,), "float16")):
    for tx in T.thread_binding(100, thread="threadIdx.x"):
        H = T.alloc_buffer((100,), "float16", scope="shared.dyn")
        S = T.alloc_buffer((32, 8), "float32", scope="shared.dyn")
        S[tx // 8, tx % 8] = A[tx]
        H[tx] = B[tx]
        B[tx] = H[99 - tx] + T.Cast("float16", S[tx % 32, tx // 32])


def test_tiles_in_use_together_are_placed_one_after_the_other_at_aligned_offsets():
    """S (1024 bytes) is first used first: at 0; H (200 bytes) at the next 1 KiB boundary."""
    _assert_plans_to(together, placed(together, {"S": 0, "H": 1024}, 1224))


@T.prim_func
def one_after_the_other(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S[tx] = A[tx]
        A[tx] = S[255 - tx]
        R[tx] = B[tx]
        B[tx] = R[255 - tx]


@T.prim_func
def one_after_the_other_expected(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S[tx] = A[tx]
        A[tx] = S[255 - tx]
        T.tvm_storage_sync("shared")  # every thread is done reading S before R overwrites its bytes
        R[tx] = B[tx]
        B[tx] = R[255 - tx]


def test_tiles_used_one_after_the_other_share_bytes_behind_a_barrier():
    _assert_plans_to(one_after_the_other, placed(one_after_the_other_expected, {"S": 0, "R": 0}, 1024))


@T.prim_func
def separated(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S[tx] = A[tx]
        A[tx] = S[255 - tx]
        T.tvm_storage_sync("shared")
        R[tx] = B[tx]
        B[tx] = R[255 - tx]


def test_a_barrier_already_between_the_uses_is_enough_and_no_tile_leaves_only_the_size():
    _assert_plans_to(separated, placed(separated, {"S": 0, "R": 0}, 1024))

    @T.prim_func
    def no_tiles(A: T.Buffer((256,), "float32")):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            A[tx] = A[tx] + 1.0

    _assert_plans_to(no_tiles, no_tiles.with_attr(SIZE_ATTR, 0))


def test_an_arena_past_the_limit_is_an_error_listing_the_tiles():
    with pytest.raises(CompileError, match=r"needs 1224 bytes of shared memory but the target allows 1200 per block: "
                                           r"S \(1024 B\), H \(200 B\)"):
        plan_dynamic_shared_memory(together, 1200)


@T.prim_func
def in_a_uniform_branch(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32"), n: T.int32):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            if bx < n:
                S[tx] = A[tx]
                A[tx] = S[255 - tx]
                R[tx] = B[tx]
                B[tx] = R[255 - tx]


@T.prim_func
def in_a_uniform_branch_expected(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32"), n: T.int32):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            if bx < n:
                S[tx] = A[tx]
                A[tx] = S[255 - tx]
                T.tvm_storage_sync("shared")  # inside the branch: every thread of the block takes it
                R[tx] = B[tx]
                B[tx] = R[255 - tx]


def test_tiles_used_in_turn_inside_a_block_uniform_branch_share_bytes_only_when_they_would_not_fit():
    """Every use sits in `if bx < n:` (one statement of the block): the tiles are in use together, which fits 2048
    bytes; past a limit of 1024 the branch's statements are counted and R takes S's bytes behind a barrier."""
    _assert_plans_to(in_a_uniform_branch, placed(in_a_uniform_branch, {"S": 0, "R": 1024}, 2048), limit=2048)
    _assert_plans_to(in_a_uniform_branch, placed(in_a_uniform_branch_expected, {"S": 0, "R": 0}, 1024), limit=1024)


def test_a_branch_on_the_thread_index_keeps_its_tiles_apart():
    """`if tx < 128:`: not every thread takes it, so no barrier may go inside; the arena stays past the limit."""
    @T.prim_func
    def divergent(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            if tx < 128:
                S[tx] = A[tx]
                A[tx] = S[255 - tx]
                R[tx] = B[tx]
                B[tx] = R[255 - tx]

    with pytest.raises(CompileError, match="needs 2048 bytes"):
        plan_dynamic_shared_memory(divergent, 1024)


# -- the compiler's temporaries, statement by statement (only past the limit)


@T.prim_func
def temporaries_in_a_loop(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        for k in range(n):
            S[tx] = A[k, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[k, tx] = S[255 - tx]
            R[tx] = B[k, tx] * T.float32(2)
            T.tvm_storage_sync("shared")
            B[k, tx] = R[255 - tx]


@T.prim_func
def temporaries_in_a_loop_expected(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        for k in range(n):
            T.tvm_storage_sync("shared")  # the iteration before read R: done before S takes its bytes again
            S[tx] = A[k, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[k, tx] = S[255 - tx]
            T.tvm_storage_sync("shared")  # the reads of S are done before R takes its bytes
            R[tx] = B[k, tx] * T.float32(2)
            T.tvm_storage_sync("shared")
            B[k, tx] = R[255 - tx]


def test_temporaries_used_in_turn_in_a_loop_share_bytes_behind_barriers_only_when_they_would_not_fit():
    """S and R are the compiler's temporaries, written whole before they are read in each iteration: past a limit
    of 2048 they share bytes, with a barrier between S's reads and R's write and one between R's reads and S's
    write in the next iteration. K, read in every iteration, keeps its bytes; within the limit nothing changes."""
    before = marked_temporary(temporaries_in_a_loop, "S", "R")
    expected = marked_temporary(temporaries_in_a_loop_expected, "S", "R")
    _assert_plans_to(before, placed(before, {"K": 0, "S": 1024, "R": 2048}, 3072), limit=3072)
    _assert_plans_to(before, placed(expected, {"K": 0, "S": 1024, "R": 1024}, 2048), limit=2048)


def _marked_rewritten(func, loop: str, *names):
    """`func` with the user's tiles `names` marked as MarkRewrittenTiles marks a tile each iteration of `loop`
    writes whole before reading it."""
    def on_alloc(node, mutator):
        if node.buffer.name not in names:
            return node
        return tirx.AllocBuffer(node.buffer, {**(node.annotations or {}), REWRITTEN_ANNOTATION: loop})

    return tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])


def test_user_tiles_rewritten_each_iteration_share_bytes_only_past_the_temporaries_plan():
    """S and R as the user's tiles each iteration of `k` writes whole before reading (MarkRewrittenTiles): past a
    limit of 2048 they get the plan the compiler's temporaries get, the same bytes and the same barriers; within
    the limit nothing changes. Marked for another loop than the one holding their uses, they keep the whole loop."""
    before = _marked_rewritten(temporaries_in_a_loop, "k", "S", "R")
    expected = _marked_rewritten(temporaries_in_a_loop_expected, "k", "S", "R")
    _assert_plans_to(before, placed(before, {"K": 0, "S": 1024, "R": 2048}, 3072), limit=3072)
    _assert_plans_to(before, placed(expected, {"K": 0, "S": 1024, "R": 1024}, 2048), limit=2048)
    with pytest.raises(CompileError, match="needs 3072 bytes"):
        plan_dynamic_shared_memory(_marked_rewritten(temporaries_in_a_loop, "j", "S", "R"), 2048)


def test_tiles_not_the_compilers_or_carried_across_iterations_keep_the_whole_loop():
    """The same loop with S and R the user's tiles, or with S read before it is written in the body (the value of
    the iteration before), or with a loop whose trip count differs between threads (no barrier may go inside): the
    tiles stay apart and the arena past the limit."""
    with pytest.raises(CompileError, match="needs 3072 bytes"):
        plan_dynamic_shared_memory(temporaries_in_a_loop, 2048)

    @T.prim_func
    def carried(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            K[tx] = A[0, tx]
            S[tx] = A[0, tx]
            for k in range(n):
                B[k, tx] = S[255 - tx] + K[tx]
                T.tvm_storage_sync("shared")
                S[tx] = B[k, tx]
                R[tx] = B[k, tx] * T.float32(2)
                T.tvm_storage_sync("shared")
                B[k, tx] = R[255 - tx]

    with pytest.raises(CompileError, match="needs 3072 bytes"):
        plan_dynamic_shared_memory(marked_temporary(carried, "S", "R"), 2048)

    @T.prim_func
    def divergent_trips(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32")):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            K[tx] = A[0, tx]
            for k in range(tx % 4):
                S[tx] = A[k, tx] + K[tx]
                B[k, tx] = S[255 - tx]
                R[tx] = B[k, tx] * T.float32(2)
                B[k, tx] = R[255 - tx]

    with pytest.raises(CompileError, match="needs 3072 bytes"):
        plan_dynamic_shared_memory(marked_temporary(divergent_trips, "S", "R"), 2048)


@T.prim_func
def temporaries_in_a_branch(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        if 0 < n:
            S[tx] = A[1, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[1, tx] = S[255 - tx]
            R[tx] = B[1, tx] * T.float32(2)
            T.tvm_storage_sync("shared")
            B[2, tx] = R[255 - tx]
        if 1 < n:
            T.tvm_storage_sync("shared")
            B[0, tx] = T.float32(0)
        S[tx] = A[3, tx]
        T.tvm_storage_sync("shared")
        B[3, tx] = S[255 - tx] + K[tx]


@T.prim_func
def temporaries_in_a_branch_expected(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"),
                                     n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        if 0 < n:
            S[tx] = A[1, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[1, tx] = S[255 - tx]
            T.tvm_storage_sync("shared")  # inside the branch: every thread takes it or none
            R[tx] = B[1, tx] * T.float32(2)
            T.tvm_storage_sync("shared")
            B[2, tx] = R[255 - tx]
        if 1 < n:
            T.tvm_storage_sync("shared")
            B[0, tx] = T.float32(0)
        T.tvm_storage_sync("shared")  # the barrier in the branch above may not run
        S[tx] = A[3, tx]
        T.tvm_storage_sync("shared")
        B[3, tx] = S[255 - tx] + K[tx]


def test_temporaries_in_a_block_uniform_branch_and_after_it_share_bytes_use_by_use():
    """The branch (its condition the same for every thread) is opened: R takes S's bytes between S's reads and
    R's write, S takes them back after the branch, a new value written whole; the barrier between R's reads and
    that write goes outside any branch (one inside a branch may not run)."""
    before = marked_temporary(temporaries_in_a_branch, "S", "R")
    expected = marked_temporary(temporaries_in_a_branch_expected, "S", "R")
    _assert_plans_to(before, placed(before, {"K": 0, "S": 1024, "R": 2048}, 3072), limit=3072)
    _assert_plans_to(before, placed(expected, {"K": 0, "S": 1024, "R": 1024}, 2048), limit=2048)


@T.prim_func
def scratch_in_a_loop(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        W = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        for k in range(n):
            B[k, tx] = T.call_extern("float32", "block_sum", A[k, tx], T.address_of(W[0]))
            S[tx] = B[k, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[k, tx] = S[255 - tx]


@T.prim_func
def scratch_in_a_loop_expected(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    for tx in T.thread_binding(256, thread="threadIdx.x"):
        K = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        W = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
        K[tx] = A[0, tx]
        for k in range(n):
            T.tvm_storage_sync("shared")
            B[k, tx] = T.call_extern("float32", "block_sum", A[k, tx], T.address_of(W[0]))
            T.tvm_storage_sync("shared")
            S[tx] = B[k, tx] + K[tx]
            T.tvm_storage_sync("shared")
            B[k, tx] = S[255 - tx]


def test_a_reductions_scratch_handed_to_one_call_is_in_use_during_that_call():
    """W, a reduction's scratch, is written and read by the one call it is handed to (`&W[0]`, no access mark):
    in each iteration it is in use during that statement only, and S takes its bytes after it."""
    before = marked_temporary(scratch_in_a_loop, "W", "S")
    expected = marked_temporary(scratch_in_a_loop_expected, "W", "S")
    _assert_plans_to(before, placed(expected, {"K": 0, "W": 1024, "S": 1024}, 2048), limit=2048)
