"""StructuralMemo: values kept by an IR object's structure, for the layouts every compile builds afresh."""

from tvm import tirx

import tilelang.language as T
from tilelang_musa.ir.structural_memo import StructuralMemo


THREAD_MAPS = {1: lambda i, j: i * 2 + j // 8, 2: lambda i, j: i + j // 8 * 8, 4: lambda i, j: (i * 2 + j // 8) ^ 1}


def _layout(kind):
    """One of three fragments of an 8x16 tile on 16 threads (slot j % 8)."""
    return T.Fragment([8, 16], forward_thread_fn=THREAD_MAPS[kind], forward_index_fn=lambda i, j: j % 8)


def test_a_value_is_found_for_an_equal_structure_with_other_bound_vars():
    memo = StructuralMemo(4)
    memo.put(_layout(1), "one", extra=(1,))
    assert memo.get(_layout(1), (1,)) == "one"  # fresh object, fresh bound Vars
    assert memo.get(_layout(1), (2,)) is None  # another extra key
    assert memo.get(_layout(2), (1,)) is None  # another structure
    assert memo.get(_layout(4), (1,), default="none") == "none"


def test_free_vars_are_compared_by_identity():
    n, m = tirx.Var("n", "int32"), tirx.Var("n", "int32")
    memo = StructuralMemo(4)
    memo.put(n * 2 + 1, "with n")
    assert memo.get(n * 2 + 1) == "with n"  # a fresh expression over the same Var
    assert memo.get(m * 2 + 1) is None  # same name, another Var: another value


def test_the_oldest_entries_go_first():
    memo = StructuralMemo(2)
    for step in (1, 2, 4):
        memo.put(_layout(step), step)
    assert len(memo) == 2
    assert memo.get(_layout(1)) is None and memo.get(_layout(2)) == 2 and memo.get(_layout(4)) == 4
    memo.clear()
    assert len(memo) == 0 and memo.get(_layout(4)) is None
