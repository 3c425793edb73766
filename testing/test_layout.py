"""Layout, Fragment, fragment reduction and shared-memory swizzles, checked on every element with numpy.

The MUSA-specific formulas (swizzle bytes) are re-derived here from MUSA_LAYOUTS.md, independently of the
package's code. MMA instruction layouts and the gemm composition are in test_mma_layouts.py.
"""

import itertools

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

from tilelang_musa.errors import TileLangError
from tilelang_musa.layout import (Fragment, Layout, LayoutError, make_fully_replicated_fragment, make_linear_layout,
                                  make_one_per_thread_fragment, make_padded_layout, make_sqmma_swizzled_layout,
                                  make_xor_swizzle_layout, reduce_fragment, reduce_threads, swizzle_alignment,
                                  swizzle_bytes)
from tilelang_musa.layout._expr import evaluate
from tilelang_musa.layout.swizzle import sqmma_descriptor_swizzle_code


def grid(shape):
    return [c.reshape(-1) for c in np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")]


def flat_outputs(layout):
    """Every logical element's physical coordinates, flattened row-major over the output shape."""
    outs = layout.evaluate(*grid(layout.input_shape))
    flat = np.zeros(outs[0].shape, dtype=np.int64)
    for value, extent in zip(outs, layout.output_shape):
        assert value.min() >= 0 and value.max() < extent
        flat = flat * extent + value
    return flat


def assert_bijection(layout):
    flat = flat_outputs(layout)
    assert np.array_equal(np.sort(flat), np.arange(int(np.prod(layout.output_shape))))


def assert_inverse_round_trips(layout):
    inv = layout.inverse()
    assert inv.input_shape == layout.output_shape and inv.output_shape == layout.input_shape
    coords = grid(layout.input_shape)
    back = inv.evaluate(*layout.evaluate(*coords))
    for c, b in zip(coords, back):
        assert np.array_equal(c, b)


# ---- Layout ----------------------------------------------------------------------------------------------------------


def test_layout_maps_indices_by_substitution():
    L = Layout((64, 32), lambda i, j: [i * 32 + (j ^ (i % 8))])
    assert L.input_shape == [64, 32] and L.output_shape == [2048]
    assert [int(x) for x in L.map([3, 5])] == [3 * 32 + (5 ^ 3)]
    assert [int(x) for x in L(3, 5)] == [3 * 32 + 6]
    x = tirx.Var("x", "int32")
    mapped = L.map([x, 0])[0]  # symbolic indices give an expression of them
    assert all(evaluate(mapped, {x: v}) == v * 32 + v % 8 for v in range(64))
    assert [int(v) for v in Layout((4,), lambda i: i * 2).map([3])] == [6]


def test_layout_output_shape_is_bounded_for_affine_and_bitwise_maps():
    assert Layout((8, 6), lambda i, j: [j, i]).output_shape == [6, 8]
    assert Layout((16, 16), lambda i, j: [(i % 4) * 16 + j]).output_shape == [64]
    assert Layout((8, 8), lambda i, j: [(i ^ j) * 8]).output_shape == [57]  # (i ^ j) < 8
    assert Layout((32,), lambda t: [(t >> 3) & 3, t & 7]).output_shape == [4, 8]


def test_layout_with_negative_outputs_is_rejected():
    with pytest.raises(LayoutError, match="negative"):
        Layout((4,), lambda i: [i - 2])


@pytest.mark.parametrize("shape, fn", [
    ((16, 32), lambda i, j: [i * 2 + j // 16, j % 16]),      # affine, mixed digits
    ((12, 10), lambda i, j: [j * 12 + i]),                   # non power of two: the affine inverter
    ((16, 32), lambda i, j: [(i * 32 + j) // 4, j % 4]),     # fused split: the GF(2) inverter
    ((64, 32), lambda i, j: [i * 32 + (j ^ (i % 8))]),       # xor swizzle
    ((128, 4), lambda t, v: [((t >> 3) & 3) + 4 * (t >> 6) + 8 * (v >> 1),   # shifts and masks
                             (t & 7) + 8 * ((t >> 5) & 1) + 16 * (v & 1)]),
])
def test_layout_inverse_round_trips_on_every_element(shape, fn):
    L = Layout(shape, fn)
    assert L.is_bijective()
    assert_bijection(L)
    assert_inverse_round_trips(L)


def test_layout_inverse_is_reused_for_the_same_map_under_other_vars():
    """A map inverted before (up to renaming its Vars) gives the checked inverse again, over fresh output Vars;
    another map, or the same expressions with the inputs in another order, is inverted on its own."""
    from tilelang_musa.layout import _inverse

    fn = lambda i, j: [i * 32 + (j ^ (i % 8))]  # noqa: E731
    first, second = Layout((64, 32), fn), Layout((64, 32), fn)
    assert not first.forward_vars[0].same_as(second.forward_vars[0])
    a, b = first.inverse(), second.inverse()
    assert tvm_ffi.structural_equal(a.forward_index, b.forward_index, map_free_vars=True)
    assert not a.forward_vars[0].same_as(b.forward_vars[0])  # the hit's expressions are over its own Vars
    assert_inverse_round_trips(second)
    assert_inverse_round_trips(Layout((32, 32), lambda i, j: [i * 32 + (j ^ (i % 8))]))
    assert_inverse_round_trips(Layout((32, 32), lambda j, i: [i * 32 + (j ^ (i % 8))]))  # the inputs swapped
    held = sum(len(v) for v in _inverse._INVERTED.values())
    Layout((64, 32), fn).inverse()
    assert sum(len(v) for v in _inverse._INVERTED.values()) == held  # a hit adds nothing


def _only_vars(exprs, allowed):
    """Whether the expressions use no Var but `allowed` (by identity)."""
    handles, found = {v.__chandle__() for v in allowed}, []
    tvm_ffi.structural_walk(list(exprs), [(tirx.Var, lambda v: found.append(v.__chandle__() in handles))])
    return all(found)


def test_layout_fields_are_reused_for_the_same_maps_under_other_vars(monkeypatch):
    """Every compile builds its layouts afresh: a layout (or fragment) whose maps equal, up to renaming its Vars, those
    of one built before gets that one's simplified maps and extents over its own Vars, without simplifying again;
    maps over another Var (a symbolic extent) are built each time, and a refusal is raised each time."""
    from tilelang_musa.layout import fragment as fragment_module
    from tilelang_musa.layout import layout as layout_module

    swizzle = lambda i, j: [i * 32 + (j ^ (i % 8)) + 0 * j]  # noqa: E731  (the 0 * j is simplified away)
    threads = lambda i, j: i * 2 + j // 8 + 0 * i  # noqa: E731
    first, first_fragment = Layout((64, 32), swizzle), Fragment([8, 16], forward_thread_fn=threads)
    monkeypatch.setattr(layout_module, "simplify", lambda *a: pytest.fail("simplified again"))
    monkeypatch.setattr(fragment_module, "simplify", lambda *a: pytest.fail("simplified again"))
    second, second_fragment = Layout((64, 32), swizzle), Fragment([8, 16], forward_thread_fn=threads)
    for a, b in ((first, second), (first_fragment, second_fragment)):
        assert not a.forward_vars[0].same_as(b.forward_vars[0]) and a.is_equal(b)
        assert tvm_ffi.structural_equal(a, b) and str(a) == str(b)
    assert _only_vars(second.forward_index, second.forward_vars)
    assert _only_vars([second_fragment.forward_thread, *second_fragment.forward_index],
                      [*second_fragment.forward_vars, second_fragment.replicate_var])
    assert str(second.forward_index[0]) == "i0 * 32 + (i1 ^ i0 % 8)"  # simplified: the 0 * j is gone
    n = tirx.Var("n", "int32")
    with pytest.raises(BaseException, match="simplified again"):
        Layout((64, 32), lambda i, j: [i * 32 + j + n])
    monkeypatch.undo()
    for _ in range(2):
        with pytest.raises(LayoutError, match="negative"):
            Layout((4, 4), lambda i, j: [i - j])


def test_builders_of_plain_values_give_fresh_copies_of_the_layout_built_before():
    """A swizzle or accumulator layout is a function of plain values: built once, then copied over new Vars (no
    Var shared between two compiles' layouts), equal to a fresh build; other values build another; a refusal is
    raised every time."""
    from tilelang_musa.layout import _reuse
    from tilelang_musa.layout.mma_layouts import make_gemm_accumulator_fragment
    from tilelang_musa.layout.swizzle import make_xor_swizzle_layout

    for make in (lambda: make_xor_swizzle_layout([2, 64, 64], "float16", 32),
                 lambda: make_gemm_accumulator_fragment("mp_22.mma.m32n32k8", 128, 64, 2, 1)):
        first, second = make(), make()
        assert not first.same_as(second) and tvm_ffi.structural_equal(first, second) and str(first) == str(second)
        bound = lambda f: [*f.forward_vars, *([f.replicate_var] if isinstance(f, Fragment) else [])]  # noqa: E731
        assert not any(a.same_as(b) for a in bound(first) for b in bound(second))
        assert _only_vars(list(second.forward_index) + ([second.forward_thread] if isinstance(second, Fragment)
                                                          else []), bound(second))
        assert [v.name for v in bound(first)] == [v.name for v in bound(second)]
    built = len(_reuse._BUILT)
    other = make_xor_swizzle_layout([2, 64, 64], "float16", 64)
    assert len(_reuse._BUILT) == built + 1 and not tvm_ffi.structural_equal(other, make_xor_swizzle_layout(
        [2, 64, 64], "float16", 32))
    for _ in range(2):
        with pytest.raises(LayoutError, match="continuity"):
            make_xor_swizzle_layout([64, 64], "float16", 32, continuity=48)


def test_layout_inverse_names_two_colliding_inputs():
    with pytest.raises(LayoutError, match=r"inputs \(0, 1\) and \(1, 0\) map to the same output"):
        Layout((4, 4), lambda i, j: [i + j]).inverse()


def test_layout_inverse_rejects_a_non_surjective_map():
    with pytest.raises(LayoutError, match="cannot cover"):
        Layout((4, 4), lambda i, j: [i * 5 + j]).inverse()


def test_fragment_inverse_pads_a_fragment_that_leaves_slots_unused_only_when_asked():
    # 40 rows on 32 threads x 2 slots (a cumsum's fragment; fuzz program 6950): 24 (thread, slot) pairs hold nothing
    frag = Fragment([40, 1], forward_thread_fn=lambda i, j: i % 32, forward_index_fn=lambda i, j: [i // 32])
    with pytest.raises(LayoutError, match="cannot cover"):
        frag.inverse(tirx.Var("t", "int32"), tirx.Var("s", "int32"))
    for t in range(32):
        for s in range(2):
            i, j = (int(x) for x in frag.inverse(tirx.const(t, "int32"), tirx.const(s, "int32"), padded=True))
            assert (i, j) == (s * 32 + t, 0)  # out of range (i >= 40) exactly for the unused pairs
            if i < 40:
                assert int(frag.thread([i, j])) == t and int(frag.index([i, j])) == s
    not_a_bijection = Fragment([40], forward_thread_fn=lambda i: i % 16, forward_index_fn=lambda i: [i // 32])
    with pytest.raises(LayoutError, match="cannot invert"):
        not_a_bijection.inverse(tirx.const(0, "int32"), tirx.const(0, "int32"), padded=True)


@pytest.mark.parametrize("groups,box_threads", [(2, 256), (3, 384)])
def test_fragment_inverse_padded_past_gaps_between_thread_ranges(groups, box_threads):
    """Row i on threads [128 i, 128 i + 64): the threads between the ranges hold nothing. The padded inverse runs
    over a box whose thread count is a multiple of the ranges' stride (256 for two ranges, the next power of two;
    384 for three); the slots of a thread in a gap map to a column past the row's end."""
    frag = Fragment([groups, 512], forward_fn=lambda i, j: (i * 128 + j // 8, j % 8))
    assert int(frag.num_threads) == 128 * groups - 64
    with pytest.raises(LayoutError, match="cannot invert"):
        frag.inverse(tirx.Var("t", "int32"), tirx.Var("s", "int32"))
    for t in range(box_threads):
        for s in (0, 7):
            i, j = (int(x) for x in frag.inverse(tirx.const(t, "int32"), tirx.const(s, "int32"), padded=True))
            assert (i, j) == (t // 128, t % 128 * 8 + s)
            if j < 512:
                assert int(frag.thread([i, j])) == t and int(frag.index([i, j])) == s
            else:
                assert t % 128 >= 64


def test_layout_is_equal_compares_the_maps_not_the_expressions():
    a = Layout((8, 8), lambda i, j: [i * 8 + j])
    b = Layout((8, 8), lambda x, y: [(x * 64 + y * 8) // 8 + y - y // 8 * 8 - y])  # same map, other form
    assert a.is_equal(b) and b.is_equal(a)
    assert not a.is_equal(Layout((8, 8), lambda i, j: [j * 8 + i]))
    assert not a.is_equal(Layout((8, 4), lambda i, j: [i * 8 + j]))


def test_layout_is_a_tvm_ffi_object_equal_up_to_var_renaming():
    a = Layout((8, 8), lambda i, j: [i * 8 + j])
    b = Layout((8, 8), lambda p, q: [p * 8 + q])
    assert tvm_ffi.structural_equal(a, b)
    assert tvm_ffi.structural_hash(a) == tvm_ffi.structural_hash(b)
    assert not tvm_ffi.structural_equal(a, Layout((8, 8), lambda i, j: [j * 8 + i]))
    carried = tvm_ffi.Map({"layout": a})["layout"]  # travels inside IR annotations
    assert isinstance(carried, Layout) and carried.same_as(a)


def test_layout_repeat_and_expand():
    base = Layout((4, 8), lambda i, j: [j * 4 + i])
    rep = base.repeat(0, 3)
    assert rep.input_shape == [12, 8] and rep.output_shape == [3, 32]
    for i, j in itertools.product(range(12), range(8)):
        assert [int(x) for x in rep.map([i, j])] == [i // 4, j * 4 + i % 4]
    exp = base.expand([2])
    assert exp.input_shape == [2, 4, 8]
    assert [int(x) for x in exp.map([1, 3, 5])] == [1, 5 * 4 + 3]


def test_layout_with_a_symbolic_extent_maps_and_bounds_symbolically():
    n = tirx.Var("n", "int32")
    L = Layout((n, 4), lambda i, j: [i * 4 + j])
    ana = tvm.sym.Analyzer()
    assert ana.can_prove_equal(L.output_shape[0], n * 4)
    assert ana.can_prove_equal(L.map([2, 3])[0], 11)
    inv = L.inverse()
    o = inv.forward_vars[0]
    assert ana.can_prove_equal(inv.forward_index[1], o % 4)


def test_layout_errors_name_the_construct():
    with pytest.raises(LayoutError, match="extent 0"):
        Layout((0, 4), lambda i, j: [i])
    with pytest.raises(LayoutError, match="2 indices for the 1-d shape"):
        Layout((4,), lambda i: [i]).map([1, 2])
    assert issubclass(LayoutError, TileLangError) and issubclass(LayoutError, ValueError)


# ---- Fragment --------------------------------------------------------------------------------------------------------


def assert_injective(frag):
    thread, slot = frag.evaluate_all()
    keys = thread * frag.local_size + slot
    assert np.unique(keys).size == keys.size
    assert thread.min() >= 0 and thread.max() < frag.num_threads
    assert slot.min() >= 0 and slot.max() < frag.local_size


def test_fragment_thread_index_and_sizes():
    F = Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8, forward_index_fn=lambda i, j: j % 8)
    assert (F.num_threads, F.local_size, F.replicate_size) == (32, 8, 1)
    assert int(F.thread([3, 9])) == 7 and int(F.index([3, 9])) == 1
    assert [int(x) for x in F.inverse(7, 1)] == [3, 9]
    assert_injective(F)


def test_fragment_forward_fn_and_inferred_index_agree_with_explicit_index():
    explicit = Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8,
                        forward_index_fn=lambda i, j: j % 8)
    inferred = Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8)
    both = Fragment([16, 16], forward_fn=lambda i, j: (i * 2 + j // 8, j % 8))
    assert explicit.is_equal(inferred) and explicit.is_equal(both)


def test_fragment_inferred_index_is_row_major_over_unused_digits():
    # thread uses i % 4 and j // 4 % 2: the slot enumerates (i // 4, j // 8, j % 4) row-major
    F = Fragment([8, 16], forward_thread_fn=lambda i, j: (i % 4) * 2 + j // 4 % 2)
    assert F.local_size == 2 * 2 * 4
    for i, j in itertools.product(range(8), range(16)):
        assert int(F.index([i, j])) == ((i // 4) * 2 + j // 8) * 4 + j % 4
    assert_injective(F)


def test_fragment_with_xor_thread_map_infers_index_by_bits():
    F = Fragment([2, 16, 4], forward_thread_fn=lambda a, j, b: (j ^ (j // 4)) * 2 + b // 2)
    assert (F.num_threads, F.local_size) == (32, 4)
    for a, j, b in itertools.product(range(2), range(16), range(4)):
        assert int(F.index([a, j, b])) == a * 2 + b % 2
    assert_injective(F)
    assert_fragment_inverse_round_trips(F)  # through the GF(2) inverter


def assert_fragment_inverse_round_trips(F):
    inv = F.inverse()
    assert inv.input_shape == [F.local_size, F.num_threads]
    local, thread = grid([F.local_size, F.num_threads])
    *logical, rep = inv.evaluate(local, thread)
    t2, s2 = F.evaluate(*logical, rep=rep)
    assert np.array_equal(t2, thread) and np.array_equal(s2, local)


def test_fragment_inverse_round_trips_every_thread_and_slot():
    F = Fragment([32, 8], forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2, forward_index_fn=lambda i, j:
                 (i // 8) * 2 + j % 2)
    assert_fragment_inverse_round_trips(F)


def test_replicated_fragment_inverse_returns_the_replica():
    F = Fragment([8, 8], forward_fn=lambda i, j, rep: (i * 4 + j // 2 + rep * 32, j % 2), replicate=2)
    assert (F.num_threads, F.local_size, F.replicate_size) == (64, 2, 2)
    assert [int(x) for x in F.inverse(33, 1, return_rep=True)] == [0, 3, 1]
    assert [int(x) for x in F.inverse(33, 1)] == [0, 3]
    assert F.is_bijective()


def test_fragment_inverse_of_a_thread_range_subtracts_its_first_thread():
    F = make_one_per_thread_fragment([4, 8], thread_begin=64)
    assert F.num_threads == 96 and F.local_size == 1
    assert [int(x) for x in F.inverse(64 + 13, 0)] == [1, 5]
    tx = tirx.Var("tx", "int32")
    i, j = F.inverse(tx, 0)
    assert (evaluate(i, {tx: 77}), evaluate(j, {tx: 77})) == (1, 5)


def test_fragment_replicate_and_repeat_follow_upstream():
    F = Fragment([4, 4], forward_thread_fn=lambda i, j: i * 2 + j // 2, forward_index_fn=lambda i, j: j % 2)
    R = F.replicate(3)
    assert (R.num_threads, R.replicate_size) == (24, 3)
    for i, j, r in itertools.product(range(4), range(4), range(3)):
        assert int(R.thread([i, j], r)) == int(F.thread([i, j])) + 8 * r
    on_thread = F.repeat([2, 1], repeat_on_thread=True)
    on_index = F.repeat([1, 2])
    for i, j in itertools.product(range(8), range(4)):
        assert int(on_thread.thread([i, j])) == int(F.thread([i % 4, j])) + 8 * (i // 4)
        assert int(on_thread.index([i, j])) == int(F.index([i % 4, j]))
    for i, j in itertools.product(range(4), range(8)):
        assert int(on_index.index([i, j])) == int(F.index([i, j % 4])) + 2 * (j // 4)
    both = F.repeat([2, 2], lower_dim_first=False)
    for i, j in itertools.product(range(8), range(8)):
        assert int(both.index([i, j])) == int(F.index([i % 4, j % 4])) + 2 * (i // 4 + 2 * (j // 4))
    for frag in (R, on_thread, on_index, both):
        assert_injective(frag)


def test_fully_replicated_and_one_per_thread_fragments():
    full = make_fully_replicated_fragment([4, 6], 64)
    thread, slot = full.evaluate_all()
    assert (full.num_threads, full.local_size, full.replicate_size) == (64, 24, 64)
    assert all(sorted(thread[i, j]) == list(range(64)) for i, j in itertools.product(range(4), range(6)))
    assert np.array_equal(slot[..., 0], np.arange(24).reshape(4, 6))
    one = make_one_per_thread_fragment([8, 16])
    t, s = one.evaluate_all()
    assert np.array_equal(t[..., 0], np.arange(128).reshape(8, 16)) and not s.any()


def test_fragment_is_equal_ignores_replica_order():
    a = Fragment([4], forward_fn=lambda i, rep: (i + 4 * rep, 0), replicate=2)
    b = Fragment([4], forward_fn=lambda i, rep: (i + 4 * (1 - rep), 0), replicate=2)
    assert a.is_equal(b)
    assert not a.is_equal(Fragment([4], forward_fn=lambda i, rep: (i + 8 * rep, 0), replicate=2))
    assert tvm_ffi.structural_equal(a, Fragment([4], forward_fn=lambda x, r: (x + 4 * r, 0), replicate=2))


def test_fragment_errors_name_the_construct():
    with pytest.raises(LayoutError, match="depends on the replica"):
        Fragment([4], forward_fn=lambda i, rep: (i, rep), replicate=2)
    with pytest.raises(LayoutError, match="same slot"):
        Fragment([8], forward_thread_fn=lambda i: i // 3)
    with pytest.raises(LayoutError, match="same slot"):  # the thread map mixes i and j: no digit is free
        Fragment([8, 8], forward_thread_fn=lambda i, j: (i ^ j) % 4 + (i // 4) * 4)
    with pytest.raises(LayoutError, match="forward_fn or forward_thread_fn"):
        Fragment([8])
    with pytest.raises(LayoutError, match="not injective"):
        Fragment([4, 4], forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: 0).inverse()


# ---- reduction -------------------------------------------------------------------------------------------------------


def simulate_butterfly_sum(src, dim, values):
    """Each thread sums the elements of each row it holds, then the xor butterfly of reduce_threads runs over all
    threads at once; returns {(row, thread): value} for the threads the reduced fragment says hold the row."""
    red = reduce_fragment(src, dim)
    plan = reduce_threads(src, dim)
    thread, _ = src.evaluate_all()
    rows_shape = [n for d, n in enumerate(src.input_shape) if d != dim] or [1]
    partial = np.zeros((int(np.prod(rows_shape)), src.num_threads))
    moved_threads = np.moveaxis(thread, dim, -2)  # [..rows.., dim, rep]
    moved_values = np.moveaxis(values, dim, -1)
    for row, (th, vals) in enumerate(zip(moved_threads.reshape(-1, *moved_threads.shape[-2:]),
                                         moved_values.reshape(-1, values.shape[dim]))):
        for j in range(values.shape[dim]):
            partial[row, th[j, 0]] += vals[j]  # replica 0's holders; other replicas hold copies
    for off in plan.xor_offsets():
        partner = np.arange(src.num_threads) ^ off
        partner = np.where(partner < src.num_threads, partner, np.arange(src.num_threads))
        partial = partial + partial[:, partner]
    red_threads, _ = red.evaluate_all()
    return partial, red_threads.reshape(-1, red.replicate_size), moved_values.reshape(-1, values.shape[dim])


@pytest.mark.parametrize("frag, dim", [
    (Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8), 1),
    (Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8), 0),
    (Fragment([8, 32], forward_thread_fn=lambda i, j: (j % 4) * 8 + i), 1),
    (Fragment([4, 8, 8], forward_thread_fn=lambda a, i, j: (i % 4) * 8 + j), 2),
])
def test_reduce_result_lives_on_exactly_the_threads_that_held_the_row(frag, dim):
    red = reduce_fragment(frag, dim)
    assert_injective(red)
    src_threads, _ = frag.evaluate_all()
    red_threads, _ = red.evaluate_all()
    moved = np.moveaxis(src_threads, dim, -2)
    holders = [set(t.reshape(-1).tolist()) for t in moved.reshape(-1, *moved.shape[-2:])]
    keepers = [set(t.tolist()) for t in red_threads.reshape(-1, red.replicate_size)]
    assert holders == keepers


@pytest.mark.parametrize("frag, dim", [
    (Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8), 1),
    (Fragment([8, 32], forward_thread_fn=lambda i, j: (j % 4) * 8 + i), 1),
    (Fragment([8, 16], forward_thread_fn=lambda i, j: (j % 2) + 2 * i + 16 * (j // 8 % 2)), 1),
])
def test_xor_butterfly_of_reduce_threads_computes_every_row_sum(frag, dim):
    values = np.random.default_rng(0).integers(-50, 50, size=frag.input_shape)
    partial, keepers, rows = simulate_butterfly_sum(frag, dim, values)
    for row, threads in enumerate(keepers):
        for t in threads:
            assert partial[row, t] == rows[row].sum()


def test_reduce_threads_reports_count_and_scale():
    plan = reduce_threads(Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8), 1)
    assert [(s.count, s.scale) for s in plan.splits] == [(2, 1)] and plan.butterfly
    assert plan.groups[0] == (0, 1) and len(plan.groups) == 16 and plan.xor_offsets() == [1]
    two = reduce_threads(Fragment([8, 16], forward_thread_fn=lambda i, j: (j % 2) + 2 * i + 16 * (j // 8 % 2)), 1)
    assert [(s.count, s.scale) for s in two.splits] == [(2, 1), (2, 16)] and two.xor_offsets() == [16, 1]


def test_reduce_of_a_replicated_fragment_keeps_the_replicas_apart():
    F = Fragment([8, 8], forward_fn=lambda i, j, rep: (i * 4 + j // 2 + rep * 32, j % 2), replicate=2)
    red = reduce_fragment(F, 1)
    assert red.replicate_size == 8 and red.num_threads == 64
    assert_injective(red)
    plan = reduce_threads(F, 1)
    assert [(s.count, s.scale) for s in plan.splits] == [(4, 1)]


def test_reduce_to_a_scalar_and_irregular_groups():
    red = reduce_fragment(Fragment([32], forward_thread_fn=lambda i: i), 0)
    assert red.input_shape == [1] and red.replicate_size == 32 and red.num_threads == 32
    irregular = Fragment([4, 2], forward_thread_fn=lambda i, j: i * 4 + j * (1 + i % 2))  # rows {0,1}, {4,6}, ..
    with pytest.raises(LayoutError, match="thread groups of different shapes"):
        reduce_threads(irregular, 1)


# ---- swizzles --------------------------------------------------------------------------------------------------------


def doc_swizzle(a, sg):
    """MUSA_LAYOUTS section 3: phys = a ^ (((a >> 8) & (256/SG - 1)) << log2(SG))."""
    if sg == 0:
        return a
    return a ^ (((a >> 8) & (256 // sg - 1)) << int(np.log2(sg)))


@pytest.mark.parametrize("sg", [16, 32, 64])
def test_swizzle_bytes_matches_the_documented_formulas(sg):
    a = np.arange(1 << 14)
    expected = {16: a ^ (((a >> 8) & 15) << 4), 32: a ^ (((a >> 8) & 7) << 5), 64: a ^ (((a >> 8) & 3) << 6)}[sg]
    assert np.array_equal(swizzle_bytes(a, sg), expected)
    assert np.array_equal(np.sort(swizzle_bytes(a, sg)), a)  # a bijection on whole lines
    assert swizzle_alignment(sg) == {16: 4096, 32: 2048, 64: 1024}[sg]
    assert sqmma_descriptor_swizzle_code(sg) == {16: 1, 32: 2, 64: 3}[sg]


def test_tme_swizzle_with_a_smaller_stride_matches_section_4():
    a = np.arange(1 << 12)
    got = swizzle_bytes(a, 16, stride=64, line=128)
    assert np.array_equal(got, a ^ (((a >> 7) & 3) << 4))
    L = make_xor_swizzle_layout((16, 64), "float16", 16, stride=64, line=128)
    r, c = grid([16, 64])
    (offset,) = L.evaluate(r, c)
    dense = (r * 64 + c) * 2
    assert np.array_equal(offset * 2, dense ^ (((dense >> 7) & 3) << 4))
    assert_bijection(L)
    with pytest.raises(LayoutError, match="granularity < stride <= line"):
        swizzle_bytes(a, 64, stride=64, line=128)


@pytest.mark.parametrize("shape, dtype, sg, continuity", [
    ((64, 128), "float16", 16, None),
    ((64, 32), "float16", 16, None),
    ((32, 64), "float16", 32, None),
    ((64, 64), "float32", 64, None),
    ((16, 256), "int8", 16, None),
    ((64, 256), "float16", 16, 128),
    ((2, 32, 64), "bfloat16", 32, 32),
    ((128,), "float32", 64, None),
])
def test_swizzled_layouts_are_bijections_that_agree_with_the_byte_formula(shape, dtype, sg, continuity):
    L = make_xor_swizzle_layout(shape, dtype, sg, continuity=continuity)
    assert_bijection(L)
    elem = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1}[dtype]
    *lead, rows, cols = (1,) + tuple(shape) if len(shape) == 1 else shape
    cont = continuity or cols
    coords = grid(shape)
    tile = np.zeros_like(coords[0])
    for c, n in zip(coords[:len(lead)], lead):
        tile = tile * n + c
    r, c = (coords[-2], coords[-1]) if len(shape) > 1 else (0, coords[-1])
    dense = tile * rows * cols + (c // cont) * rows * cont + r * cont + c % cont
    (offset,) = L.evaluate(*coords)
    assert np.array_equal(offset * elem, doc_swizzle(dense * elem, sg))
    assert_inverse_round_trips(L)


@pytest.mark.parametrize("dtype, k_major, sg", [
    ("float16", True, 16), ("int8", True, 16), ("float32", True, 16),
    ("int8", False, 16), ("bfloat16", False, 32), ("float32", False, 64),
])
def test_sqmma_swizzled_layout_uses_the_canonical_granularity(dtype, k_major, sg):
    elem = {"float16": 2, "bfloat16": 2, "int8": 1, "float32": 4}[dtype]
    cols = 64 // elem * 2  # 128-byte rows
    L = make_sqmma_swizzled_layout(((64, cols), dtype), k_major=k_major)
    assert L.is_equal(make_xor_swizzle_layout((64, cols), dtype, sg))
    assert_bijection(L)


def test_sqmma_swizzled_layout_splits_rows_wider_than_256_bytes_into_blocks():
    L = make_sqmma_swizzled_layout(((64, 256), "float16"))  # 512-byte rows -> two 128-column blocks
    assert L.is_equal(make_xor_swizzle_layout((64, 256), "float16", 16, continuity=128))
    assert L.is_equal(make_sqmma_swizzled_layout(((64, 256), "float16"), continuity=128))


def test_sqmma_swizzled_layout_accepts_a_buffer():
    buf = tirx.decl_buffer((3, 64, 64), "float16", scope="shared.dyn")
    L = make_sqmma_swizzled_layout(buf, k_major=False)
    assert L.input_shape == [3, 64, 64]
    assert L.is_equal(make_xor_swizzle_layout((3, 64, 64), "float16", 32))


def test_swizzle_errors_name_the_numbers():
    with pytest.raises(LayoutError, match="granularity must be one of"):
        make_xor_swizzle_layout((64, 64), "float16", 8)
    with pytest.raises(LayoutError, match="not a whole number of 256-byte swizzle lines"):
        make_xor_swizzle_layout((3, 40), "float16", 16)
    with pytest.raises(LayoutError, match="continuity 64 must divide the last dim 96"):
        make_sqmma_swizzled_layout(((64, 96), "float16"), continuity=64)
    with pytest.raises(LayoutError, match="power of two from 8 to 256 bytes"):
        make_sqmma_swizzled_layout(((64, 24), "float16"))
    with pytest.raises(LayoutError, match="8-, 16- or 32-bit"):
        make_sqmma_swizzled_layout(((64, 64), "float64"))
    with pytest.raises(TypeError, match="expected a buffer"):
        make_sqmma_swizzled_layout(42)


def test_linear_and_padded_layouts():
    lin = make_linear_layout([4, 5, 6])
    assert lin.output_shape == [120]
    assert_bijection(lin)
    pad = make_padded_layout(((2, 8, 64), "float16"))  # 16 bytes = 8 halves of padding per row
    (offset,) = pad.evaluate(*grid([2, 8, 64]))
    a, r, c = grid([2, 8, 64])
    assert np.array_equal(offset, (a * 8 + r) * 72 + c)
    assert np.unique(offset).size == offset.size
