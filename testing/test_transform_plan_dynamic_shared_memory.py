"""PlanDynamicSharedMemory: every `shared.dyn` tile gets a byte offset in the kernel's one dynamic shared-memory arena
(`tl.dyn_smem_offset`, 1 KiB aligned; tiles in order of first use, the larger first), and the function the arena's
size (`tl.dynamic_smem_bytes`). Tiles whose uses (statements of the block allocating them) do not overlap share
bytes, with a block barrier before the later tile's first use where none stands between. An arena past the target's
limit is an error listing the tiles."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from tilelang_musa.errors import CompileError
from tilelang_musa.ir.attrs import OFFSET_ANNOTATION, SIZE_ATTR
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
