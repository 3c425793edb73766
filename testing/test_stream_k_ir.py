"""StreamK (transform/stream_k.py) on the IR: a data-parallel GEMM program before, the stream-K program expected
after (compared structurally, through TVMScript, without the source locations)."""

import re

import tvm

import tilelang  # noqa: F401
import tilelang.language as T
from tilelang_musa.ir.options import CompileOptions
from tilelang_musa.transform.stream_k import stream_k


@T.prim_func
def before(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.clear(acc)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, C[by * 64, bx * 64])


# 4 tiles x 2 K-steps on 3 blocks: block p takes pairs [8p // 3, 8(p + 1) // 3): its head piece first, then its
# whole tiles, then its tail
EXPECTED = """
@T.prim_func
def before(A: T.Buffer((128, 64), "float16"), B: T.Buffer((64, 128), "float16"), C: T.Buffer((128, 128), "float32"), stream_k_partials: T.Buffer((3, 64, 64), "float32"), stream_k_flags: T.Buffer((3, 128), "int32")):
    T.func_attr({"tl.workspaces": ["stream_k_partials", "stream_k_flags"], "tl.zeroed_workspaces": ["stream_k_flags"]})
    pid = T.launch_thread("blockIdx.x", 3)
    thread_x = T.launch_thread("threadIdx.x", 128)
    A_s = T.alloc_buffer((64, 32), "float16", scope="shared.dyn")
    B_s = T.alloc_buffer((32, 64), "float16", scope="shared.dyn")
    acc = T.alloc_buffer((64, 64), scope="local.fragment")
    last_tile: T.let[T.int32] = ((pid + 1) * 8 // 3 - 1) // 2
    head_start: T.let[T.int32] = T.max(pid * 8 // 3, last_tile * 2)
    tail_end: T.let[T.int32] = T.min((pid * 8 // 3 + 1) // 2 * 2, head_start)
    for j in T.serial((pid + 1) * 8 // 3 - pid * 8 // 3, annotations={"tl.pipeline.num_stages": 2}):
        pair: T.let[T.int32] = T.Select(j < (pid + 1) * 8 // 3 - head_start, head_start + j, T.Select(j < (pid + 1) * 8 // 3 - head_start + (head_start - tail_end), tail_end + j - ((pid + 1) * 8 // 3 - head_start), pid * 8 // 3 + j - ((pid + 1) * 8 // 3 - head_start) - (head_start - tail_end)))
        tile: T.let[T.int32] = pair // 2
        k_step: T.let[T.int32] = pair % 2
        bx: T.let[T.int32] = tile % 2
        by: T.let[T.int32] = tile % 4 // 2
        T.assume(bx >= 0 and bx < 2)
        T.assume(by >= 0 and by < 2)
        if k_step == 0 or pair == pid * 8 // 3:
            if k_step > 0:
                T.assume(pid >= 1)
                T.call_extern("void", "tl::grid_flag_wait", T.address_of(stream_k_flags[pid - 1, thread_x]), 1)
                T.Call("tl.tileop.copy", [stream_k_partials[pid - 1, 0:64, 0:64], acc[0:64, 0:64]], ret_ty="int32")
            else:
                T.Call("tl.tileop.fill", [acc[0:64, 0:64], T.float32(0.0)], ret_ty="int32")
        T.Call("tl.tileop.copy", [A[by * 64:by * 64 + 64, k_step * 32:k_step * 32 + 32], A_s[0:64, 0:32]], ret_ty="int32")
        T.Call("tl.tileop.copy", [B[k_step * 32:k_step * 32 + 32, bx * 64:bx * 64 + 64], B_s[0:32, 0:64]], ret_ty="int32")
        T.Call("tl.tileop.gemm", [A_s[0:64, 0:32], B_s[0:32, 0:64], acc[0:64, 0:64]], attrs={"clear_accum": False, "k_pack": 1, "policy": 0, "trans_A": False, "trans_B": False, "wg_wait": 0}, ret_ty="int32")
        if k_step == 1:
            T.Call("tl.tileop.copy", [acc[0:64, 0:64], C[by * 64:by * 64 + 64, bx * 64:bx * 64 + 64]], ret_ty="int32")
        else:
            if pair == (pid + 1) * 8 // 3 - 1:
                T.Call("tl.tileop.copy", [acc[0:64, 0:64], stream_k_partials[pid, 0:64, 0:64]], ret_ty="int32")
                T.call_extern("void", "tl::grid_flag_arrive", T.address_of(stream_k_flags[pid, thread_x]))
"""


def _parsed(text):
    text = re.sub(r'"tl[.]loc": "[^"]*"(, )?', "", text).replace("attrs={}, ", "")
    return tvm.script.from_source(text, extra_vars={"T": tvm.script.tirx})


def test_a_data_parallel_gemm_becomes_the_stream_k_program():
    after = stream_k(before, CompileOptions.of({"tl.stream_k": 3}), "mp_31")
    tvm.ir.assert_structural_equal(_parsed(after.script()), _parsed(EXPECTED))


def test_without_the_setting_the_program_is_unchanged():
    assert stream_k(before, CompileOptions.of({}), "mp_31").same_as(before)
    assert stream_k(before, CompileOptions.of({"tl.stream_k": False}), "mp_31").same_as(before)
