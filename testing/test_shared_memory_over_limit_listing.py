"""The shared-memory-over-limit error lists each tile once, with its bytes. A loop the software pipeline copies
(its prologue and body) allocates a row reduction's cross-thread workspace once per copy, distinct buffers of one
name: upstream's flash_decoding on mp_22 listed `scores_max_red_buf` and `scores_sum_red_buf` twice each. They are
one entry now, `name (2 copies, B)`, the bytes their copies cover together."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.plan_dynamic_shared_memory import _listing


def _two_reductions_in_a_pipeline(pad_rows: int):
    @T.prim_func
    def main(Q: T.Tensor((128, 128), "float16"), K: T.Tensor((256, 128), "float16"), O: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((128, 128), "float16")
            K_s = T.alloc_shared((64, 128), "float16")
            pad = T.alloc_shared((pad_rows, 128), "float32")  # 32 KB at 64 rows: past mp_22's 72 KB
            acc = T.alloc_fragment((128, 64), "float32")
            mx = T.alloc_fragment((128,), "float32")
            sm = T.alloc_fragment((128,), "float32")
            tot = T.alloc_fragment((128,), "float32")
            T.copy(Q, Q_s)
            T.clear(tot)
            for i, j in T.Parallel(pad_rows, 128):
                pad[i, j] = 1.0
            for k in T.Pipelined(4, num_stages=2):
                T.copy(K[k * 64, 0], K_s)
                T.clear(acc)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
                T.reduce_max(acc, mx, dim=1)
                T.reduce_sum(acc, sm, dim=1)
                for i in T.Parallel(128):
                    tot[i] += mx[i] + sm[i] + pad[0, i]
            T.copy(tot, O)

    return main


def test_the_over_limit_error_names_each_reduction_workspace_once():
    with pytest.raises(CompileError) as err:
        tilelang.compile(_two_reductions_in_a_pipeline(64), target="musa -arch=mp_22")
    text = str(err.value)
    listing = text.split("per block: ", 1)[1]
    names = re.findall(r"(\w+) \(", listing)
    assert len(names) == len(set(names)), listing
    for name in ("Q_s", "K_s", "pad", "mx_red_buf", "sm_red_buf"):
        assert name in names, listing
    assert "Q_s (32768 B)" in listing and "pad (32768 B)" in listing, listing
    assert re.search(r"mx_red_buf \((\d+ copies, )?\d+ B\)", listing), listing


def test_copies_are_counted_by_the_bytes_they_cover_together():
    placed = [("a", 0, 1024), ("red", 1024, 512), ("b", 2048, 1024), ("red", 1024, 512), ("red", 4096, 512)]
    assert _listing(placed) == "a (1024 B), red (3 copies, 1024 B), b (1024 B)"
    assert _listing([("x", 0, 256)]) == "x (256 B)"
    assert _listing([("y", 0, 1024), ("y", 512, 1024)]) == "y (2 copies, 1536 B)"
