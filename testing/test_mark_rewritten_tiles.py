"""MarkRewrittenTiles: a user's shared tile whose uses all sit in one serial loop, each iteration of which writes it
whole (a T.Parallel nest reaching every element, under at most an `if` on its variables) before anything reads it,
is marked with that loop's name; every other tile keeps no mark (PlanDynamicSharedMemory counts it in use over the
whole loop)."""

import tvm_ffi
from tvm import tirx

import tilelang.language as T
from tilelang_musa.ir.attrs import REWRITTEN_ANNOTATION
from tilelang_musa.transform.mark_rewritten_tiles import mark_rewritten_tiles


def _marks(func) -> dict:
    found = {}

    def on_alloc(node):
        found[node.buffer.name] = (node.annotations or {}).get(REWRITTEN_ANNOTATION)

    tvm_ffi.structural_walk(mark_rewritten_tiles(func).body, [(tirx.AllocBuffer, on_alloc)])
    return {name: None if mark is None else str(mark) for name, mark in found.items()}


@T.prim_func
def gathered(A: T.Buffer((4, 16, 8), "float32"), B: T.Buffer((4, 16, 8), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        S = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
        Half = T.alloc_buffer((8, 8), "float32", scope="shared.dyn")
        Part = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
        Acc = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
        Outside = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
        for r, d in T.Parallel(16, 8):
            Outside[r, d] = A[0, r, d]
        for i in T.serial(4):
            for r, d in T.Parallel(16, 8):
                S[r, d] = A[i, r, d]
            for r, d in T.Parallel(16, 8):
                B[i, r, d] = S[15 - r, d]
            for s in T.serial(2):
                for r, d in T.Parallel(16, 8):
                    if r < 8:
                        Half[r, d] = A[i, r + s * 8, d]
                for r, d in T.Parallel(8, 8):
                    B[i, r + s * 8, d] = Half[7 - r, d]
            for r, d in T.Parallel(16, 8):
                if r < 8:
                    Part[r, d] = A[i, r, d]
            for r, d in T.Parallel(16, 8):
                B[i, r, d] = Part[r, d]
            for r, d in T.Parallel(16, 8):
                Acc[r, d] = Acc[r, d] + A[i, r, d]
            for r, d in T.Parallel(16, 8):
                Outside[r, d] = Outside[r, d] + A[i, r, d]


def test_tiles_written_whole_first_in_each_iteration_are_marked_with_their_loop():
    marks = _marks(gathered)
    assert marks["S"] == "i"  # written whole, then read: nothing carried to the next iteration
    assert marks["Half"] == "s"  # `if r < 8` over 16 rows reaches all 8 of its rows
    assert marks["Part"] is None  # rows 8..15 keep what they held before the loop
    assert marks["Acc"] is None  # read (accumulated into) before it is written
    assert marks["Outside"] is None  # used before the loop too


@T.prim_func
def declared_in_the_loop(A: T.Buffer((4, 16, 8), "float32"), B: T.Buffer((4, 16, 8), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        for i in T.serial(4):
            Inner = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
            for r, d in T.Parallel(16, 8):
                Inner[r, d] = A[i, r, d]
            for r, d in T.Parallel(16, 8):
                B[i, r, d] = Inner[15 - r, d]
            Read = T.alloc_buffer((16, 8), "float32", scope="shared.dyn")
            for r, d in T.Parallel(16, 8):
                B[i, r, d] = Read[r, d]
            for r, d in T.Parallel(16, 8):
                Read[r, d] = A[i, r, d]


def test_a_tile_declared_inside_the_loop_is_marked_when_its_first_use_writes_it_whole():
    """`T.alloc_shared` in a loop's body (Moore Threads' mp22 flash decoding: `temp_shared` in the T.Pipelined
    loop): its allocation statement is no use of it, the T.Parallel store after it is the first."""
    marks = _marks(declared_in_the_loop)
    assert marks["Inner"] == "i"
    assert marks["Read"] is None  # read before this iteration writes it
