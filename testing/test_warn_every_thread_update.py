"""WarnEveryThreadUpdate: a read-modify-write of one shared element in the kernel body, outside any T.Parallel and
any branch on the thread index, runs on every thread: a race (TileOPs' GDN backward,
`dg_c[block_C - 1] = dg_c[block_C - 1] + ...`). A TileLangWarning names the statement and its line; a plain store
that every thread makes (the same value) and guarded or per-thread updates stay silent."""

import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang_musa.diagnostics import TileLangWarning

N = 128


def compile_warnings(body_kind: str, threads: int = N) -> list[str]:
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads):
            s = T.alloc_shared((8,), "float32")
            tx = T.get_thread_binding()
            if tx < 8:
                s[tx] = 0.0
            T.sync_threads()
            if body_kind == "rmw":
                s[7] = s[7] + A[0]
            elif body_kind == "rmw_in_serial_loop":
                for k in T.serial(4):
                    s[k] = s[k] * 2.0 + A[k]
            elif body_kind == "plain_store":
                s[7] = A[0]
            elif body_kind == "parallel":
                for i in T.Parallel(8):
                    s[i] = s[i] + A[i]
            elif body_kind == "one_thread":
                if tx == 0:
                    s[7] = s[7] + A[0]
            elif body_kind == "per_thread_element":
                if tx < 8:
                    s[tx] = s[tx] + A[tx]
            elif body_kind == "idempotent_max":
                s[0] = T.max(s[0], A[0])
            elif body_kind == "idempotent_or_and":
                flags = T.alloc_shared((2,), "int32")
                flags[0] = T.bitwise_or(flags[0], T.cast(A[1], "int32"))
                flags[1] = flags[1] & 6
                s[2] = T.min(A[2], s[2])
                s[3] = T.cast(flags[0] + flags[1], "float32")
            elif body_kind == "max_of_per_thread_value":
                s[0] = T.max(s[0], A[tx])
            elif body_kind == "max_of_itself":
                s[0] = T.max(s[0], s[0] + A[0])
            elif body_kind == "uniform_branch":
                if A[0] > 0:
                    s[3] = s[3] - 1.0
            T.sync_threads()
            B[tx] = s[tx % 8]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilelang.compile(main, target="musa -arch=mp_31")
    return [str(w.message) for w in caught if issubclass(w.category, TileLangWarning)]


@pytest.mark.parametrize("body_kind,statement", [
    ("rmw", "s[7] = s[7] + A[0]"),
    ("rmw_in_serial_loop", "s[k] = s[k] * 2.0 + A[k]"),
    ("uniform_branch", "s[3] = s[3] - 1.0"),  # a branch every thread takes alike is every thread's
    ("max_of_per_thread_value", "s[0] = T.max(s[0], A[tx])"),  # each thread its own value: lost updates
    ("max_of_itself", "s[0] = T.max(s[0], s[0] + A[0])"),  # grows once per thread
])
def test_every_thread_read_modify_write_warns_with_its_line(body_kind, statement):
    messages = [m for m in compile_warnings(body_kind) if "every thread of the block" in m]
    assert len(messages) == 1, messages
    assert f"`{statement}`" in messages[0] and "test_warn_every_thread_update.py:" in messages[0]
    assert "shared `s`" in messages[0]


# idempotent updates by one value on every thread store the same value whatever the order, as a plain store does
@pytest.mark.parametrize("body_kind", ["plain_store", "parallel", "one_thread", "per_thread_element", "idempotent_max",
                                       "idempotent_or_and"])
def test_stores_that_are_not_every_thread_read_modify_writes_stay_silent(body_kind):
    assert not [m for m in compile_warnings(body_kind) if "every thread of the block" in m]


def test_a_block_of_one_thread_stays_silent():
    assert not [m for m in compile_warnings("rmw", threads=1) if "every thread of the block" in m]


def _warnings_of(kernel) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilelang.compile(kernel, target="musa -arch=mp_31")
    return [str(w.message) for w in caught if issubclass(w.category, TileLangWarning)]


def test_a_statement_over_several_lines_is_quoted_whole():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            s = T.alloc_shared((8,), "float32")
            tx = T.get_thread_binding()
            if tx < 8:
                s[tx] = 0.0
            T.sync_threads()
            s[7] = (s[7]
                    + A[0]
                    * 2.0)
            T.sync_threads()
            B[tx] = s[tx % 8]

    [message] = [m for m in _warnings_of(main) if "every thread of the block" in m]
    assert "`s[7] = (s[7] + A[0] * 2.0)`" in message, message


def test_a_long_statement_is_quoted_up_to_a_cap():
    from tilelang_musa.ir.source_lines import STATEMENT_LINES_SHOWN, statement_source

    lines = ["x = (1 +\n"] + ["     1 +\n"] * (STATEMENT_LINES_SHOWN + 2) + ["     1)\n", "y = 2\n"]
    import linecache
    linecache.cache["<long statement>"] = (0, None, lines, "<long statement>")
    try:
        text = statement_source("<long statement>", 1)
        assert text.startswith("x = (1 + 1 +") and text.endswith(" ...")
        assert text.count("1 +") == STATEMENT_LINES_SHOWN
        assert statement_source("<long statement>", len(lines)) == "y = 2"
    finally:
        del linecache.cache["<long statement>"]


def ws_warnings(body_kind: str, threads: int = 256) -> list[str]:
    @T.prim_func
    def main(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            s = T.alloc_shared((8,), "float32")
            tx = T.get_thread_binding()
            if tx < 8:
                s[tx] = 0.0
            T.sync_threads()
            if body_kind == "region":
                with T.ws(1):
                    s[3] = s[3] + A[0]
            elif body_kind == "two_runs":
                with T.ws(0, 2):
                    s[3] = s[3] + A[0]
            elif body_kind == "whole_block":
                with T.ws(0, 1):
                    s[3] = s[3] + A[0]
            elif body_kind == "one_thread_of_region":
                with T.ws(1):
                    if tx == 128:
                        s[3] = s[3] + A[0]
            elif body_kind == "parallel_in_region":
                with T.ws(1):
                    for i in T.Parallel(8):
                        s[i] = s[i] + A[i]
            T.sync_threads()
            B[tx] = s[tx % 8]

    return [m for m in _warnings_of(main) if "reads and writes one element of shared" in m]


def test_a_warp_specialized_region_updating_one_element_warns_naming_its_threads():
    [message] = ws_warnings("region")
    assert "`s[3] = s[3] + A[0]`" in message and "test_warn_every_thread_update.py:" in message
    assert "every thread of the region T.ws(1) at " in message and "(threads 128..255" in message, message
    assert "every thread of the block" not in message


def test_a_region_of_two_runs_of_squads_names_both():
    [message] = ws_warnings("two_runs", threads=384)
    assert "T.ws(0, 2)" in message and "(threads 0..127, 256..383" in message, message


def test_a_region_of_the_whole_block_is_the_block():
    [message] = ws_warnings("whole_block")
    assert "every thread of the block" in message


@pytest.mark.parametrize("body_kind", ["one_thread_of_region", "parallel_in_region"])
def test_one_thread_or_a_parallel_loop_of_a_region_stays_silent(body_kind):
    assert not ws_warnings(body_kind)
