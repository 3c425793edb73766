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
