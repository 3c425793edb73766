"""The numeric layout checks lowering runs on every fragment (kept fast: open grids, one evaluation per fragment,
linear-time distinctness) give the answers of the plain definitions."""

import numpy as np
import pytest

import tilelang.language as T
from tilelang_musa.layout._expr import all_distinct, evaluate, grid, make_vars, open_grid


@pytest.mark.parametrize("keys, expected", [
    ([3, 1, 2, 0], True), ([3, 1, 3], False), ([], True), ([7], True),
    ([-5, 4, 10**12], True), ([-5, 4, -5], False),  # outside the table's range: sorted instead
])
def test_all_distinct(keys, expected):
    assert all_distinct(np.array(keys, dtype=np.int64)) == expected
    assert expected == (len(set(keys)) == len(keys))


def test_open_grid_evaluates_as_the_full_grid():
    i, j, k = make_vars(3)
    expr = (i * 7 + j // 3) % 5 + k * (j ^ 2)
    shape = [4, 6, 3]
    full = evaluate(expr, dict(zip((i, j, k), grid(shape))))
    opened = np.broadcast_to(evaluate(expr, dict(zip((i, j, k), open_grid(shape)))), shape)
    assert np.array_equal(opened.reshape(-1), full)


def _by_definition(fragment):
    """(thread, slot) of every element and replica, one point at a time."""
    shape = list(fragment.input_shape) + [fragment.replicate_size]
    thread, slot = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    for point in np.ndindex(*shape):
        t, s = fragment.evaluate(*point[:-1], rep=point[-1])
        thread[point], slot[point] = int(t), int(s)
    return thread, slot


@pytest.mark.parametrize("make, injective, bijective", [
    (lambda: T.Fragment([8, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8), True, True),
    (lambda: T.Fragment([8, 16], forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j // 2),
     False, False),  # two columns on one slot
    (lambda: T.Fragment([4, 8], forward_thread_fn=lambda i, j, r: i + 4 * r, replicate=2), True, True),
    (lambda: T.Fragment([4, 8], forward_thread_fn=lambda i, j: i * 2, forward_index_fn=lambda i, j: j), True,
     False),  # odd threads hold nothing
])
def test_fragment_checks_match_their_definitions(make, injective, bijective):
    fragment = make()
    thread, slot = fragment.evaluate_all()
    expected_thread, expected_slot = _by_definition(fragment)
    assert np.array_equal(thread, expected_thread) and np.array_equal(slot, expected_slot)
    assert fragment.evaluate_all()[0] is thread  # evaluated once, then shared
    with pytest.raises(ValueError):
        thread[(0,) * thread.ndim] = 99  # shared arrays are read-only
    keys = (expected_thread * int(fragment.local_size) + expected_slot).reshape(-1)
    assert fragment.is_injective() == injective == (np.unique(keys).size == keys.size)
    assert fragment.is_bijective() == bijective


def test_the_evaluations_kept_are_bounded():
    from tilelang_musa.layout import fragment as module

    count = module._EVALUATED_KEEP + 3
    fragments = [T.Fragment([4, 4 * (n + 1)], forward_thread_fn=lambda i, j: i) for n in range(count)]
    for f in fragments:
        f.evaluate_all()
    assert len(module._EVALUATED) == module._EVALUATED_KEEP
    assert module._EVALUATED.get(fragments[-1]) is not None and module._EVALUATED.get(fragments[0]) is None


def test_a_fresh_fragment_of_the_same_structure_reuses_the_evaluation(monkeypatch):
    """Every compile builds its layouts afresh (new objects, new Vars): equal up to renaming, they share one
    evaluation and one injectivity answer; a fragment differing in one constant does not."""
    from tilelang_musa.layout import fragment as module

    make = lambda scale: T.Fragment([8, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8 * scale,  # noqa: E731
                                    forward_index_fn=lambda i, j: j % 8)
    first, again, other = make(1), make(1), make(16)
    assert not first.same_as(again) and not first.forward_vars[0].same_as(again.forward_vars[0])
    thread, slot = first.evaluate_all()
    assert first.is_injective()
    monkeypatch.setattr(module, "all_distinct", lambda keys: pytest.fail("injectivity decided again"))
    assert again.evaluate_all()[0] is thread and again.evaluate_all()[1] is slot
    assert again.is_injective()
    other_thread, _ = other.evaluate_all()
    assert other_thread is not thread and not np.array_equal(other_thread, thread)
    expected_thread, _ = _by_definition(other)
    assert np.array_equal(other_thread, expected_thread)


def test_injectivity_is_decided_once_per_fragment(monkeypatch):
    from tilelang_musa.layout import fragment as module

    fragments = [T.Fragment([8, 8], forward_thread_fn=lambda i, j: i),
                 T.Fragment([8, 8], forward_fn=lambda i, j: (0, 0))]  # every element in one slot
    answers = [f.is_injective() for f in fragments]
    assert answers == [True, False]
    monkeypatch.setattr(module, "all_distinct", lambda keys: pytest.fail("injectivity decided again"))
    assert [f.is_injective() for f in fragments] == answers
    assert len(module._INJECTIVE) <= module._EVALUATED_KEEP
