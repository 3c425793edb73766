"""`tilelang.layout.cute`: CuTe's layout algebra (upstream 0.1.13's module) over plain Python values, checked
against brute force and CuTe's documented results, and its bridge to TileLang-MUSA layouts: a CuTe layout as the
layout of a shared tile (`to_tilelang`) in a kernel on both arches, and the CuTe form of an affine layout
(`from_tilelang`). Upstream's FFI node classes and its NVIDIA descriptor recovery are named errors."""

import itertools

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang.layout import cute
from tilelang.layout import make_swizzled_layout
from tilelang_musa.errors import UnsupportedError
from tilelang_musa.layout import LayoutError

L = cute.make_layout
ARCHS = ["mp_22", "mp_31"]
INJECTIVE = [L(8, 1), L((4, 2), (2, 1)), L((2, 4), (4, 1)), L((4, 2, 3), (2, 1, 8)), L(((2, 2), 3), ((1, 6), 2)),
             L((3, 4), (4, 1)), L((2, 2, 2), (4, 1, 2))]


def test_evaluation_sizes_and_makers():
    layout = L((4, (2, 3)), (1, (4, 8)))
    assert cute.rank(layout) == 2 and cute.size(layout) == 24 and cute.size(layout[1]) == 6
    assert layout(5) == 1 + 4 and layout((3, (1, 2))) == 3 + 4 + 16 and layout((3, 5)) == 3 + 4 + 16
    assert str(cute.flatten(layout)) == "(4,2,3):(1,4,8)"
    assert str(L((2, (2, 2)))) == "(2,(2,2)):(1,(2,4))"
    assert str(cute.make_row_major_layout((2, (2, 2)))) == "(2,(2,2)):(4,(2,1))"
    assert str(cute.make_column_major_layout((2, 1, 3))) == "(2,1,3):(1,0,2)"
    assert cute.Layout.parse("(2,(3,4)):(1,(2,6))") == L((2, (3, 4)), (1, (2, 6)))
    assert cute.product((2, (3, 4))) == 24 and cute.flatten_to_tuple((1, (2, (3,)))) == (1, 2, 3)
    assert cute.congruent((1, (2, 3)), (4, (5, 6))) and not cute.congruent((1, 2), (1, (2, 3)))
    assert cute.compatible(6, (2, 3)) and not cute.compatible((2, 3), 6) and cute.compatible((2, 6), (2, (3, 2)))
    assert cute.cosize(L((4, 2), (2, 1))) == 8
    concat = L([L(4, 1), L(2, 8)])
    assert concat == L((4, 2), (1, 8))


def test_identity_layout_maps_a_coordinate_to_itself():
    identity = cute.make_identity_layout((4, (2, 3)))
    assert str(identity) == "(4,(2,3)):(1@0,(1@0@1,1@1@1))"
    for i, j, k in itertools.product(range(4), range(2), range(3)):
        assert identity((i, (j, k))) == (i, (j, k))
    assert identity(5) == (1, (1, 0))
    assert cute.coshape(cute.make_identity_layout((4, 8))) == (4, 8)
    assert cute.E(1) * 3 == cute.ScaledBasis(3, 1) and repr(cute.ScaledBasis(2, (1, 0))) == "2@0@1"


@pytest.mark.parametrize("layout", INJECTIVE, ids=str)
def test_coalesce_filter_and_inverses_keep_the_function(layout):
    n = cute.size(layout)
    assert [cute.coalesce(layout)(i) for i in range(n)] == [layout(i) for i in range(n)]
    right = cute.right_inverse(layout)
    assert all(layout(right(i)) == i for i in range(cute.size(right)))
    left = cute.left_inverse(layout)
    assert all(left(layout(i)) == i for i in range(n))
    rest = cute.complement(layout, 4 * cute.cosize(layout))
    together = L([layout, rest])
    assert sorted(together(i) for i in range(cute.size(together))) == list(range(4 * cute.cosize(layout)))


@pytest.mark.parametrize("a,b", [(L((6, 2), (8, 2)), L((4, 3), (3, 1))), (L(20, 2), L((5, 4), (4, 1))),
                                 (L((4, 6, 8), (1, 4, 7)), L(6, 1)), (L((10, 2), (16, 4)), L((5, 4), (1, 5)))],
                         ids=str)
def test_composition_is_function_composition(a, b):
    result = cute.composition(a, b)
    assert [result(i) for i in range(cute.size(b))] == [a(b(i)) for i in range(cute.size(b))]


def test_the_algebra_gives_cutes_documented_results():
    assert str(cute.coalesce(L((2, (1, 6)), (1, (6, 2))))) == "12:1"
    assert str(cute.composition(L((6, 2), (8, 2)), L((4, 3), (3, 1)))) == "((2,2),3):((24,2),8)"
    assert str(cute.complement(L(4, 2), 24)) == "(2,3):(1,8)"
    assert str(cute.complement(L((2, 4), (1, 6)), 24)) == "3:2"
    assert str(cute.filter(L((2, 3, 1, 4), (1, 0, 7, 2)))) == "8:1"
    assert str(cute.logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(cute.logical_product(L((2, 2), (4, 1)), L(6, 1))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(cute.blocked_product(L((2, 2), (1, 2)), L((3, 4), (1, 3)))) == "((2,3),(2,4)):((1,4),(2,12))"
    assert str(cute.tiled_product(L((2, 2), (1, 2)), L((3, 4), (1, 3)))) == "((2,2),3,4):((1,2),4,12)"
    assert L((4, 8)).with_shape((8, 4)) == L((8, 4), (1, 8))
    swizzle = cute.Swizzle.parse("Sw<3,3,3>")
    assert swizzle(0x1FF) == 0x1C7 and swizzle.is_swizzled and swizzle.recast(16, 8) == cute.Swizzle(3, 4, 3)
    assert swizzle.recast(8, 32) == cute.Swizzle(3, 1, 3) and cute.Swizzle(2, 0, 3).recast(8, 32) == \
        cute.Swizzle(0, 0, 3)
    composed = cute.ComposedLayout(swizzle, 0, L((8, 64), (64, 1)))
    assert sorted(composed((i, j)) for i in range(8) for j in range(64)) == list(range(512))


def test_bad_input_is_a_named_error():
    with pytest.raises(LayoutError, match="not congruent"):
        cute.Layout((2, 3), 1)
    with pytest.raises(LayoutError, match="does not divide"):
        cute.composition(L((4, 3), (1, 8)), L(2, 3))
    with pytest.raises(LayoutError, match="static"):
        cute.complement(L(T.dynamic("n"), 1), 64)
    for name, call in [("ComposedLayout.from_tilelang", lambda: cute.ComposedLayout.from_tilelang(None)),
                       ("restrict", lambda: cute.restrict(L(4, 1), [])),
                       ("Layout.from_tilelang_hierarchical", lambda: cute.Layout.from_tilelang_hierarchical(None)),
                       ("IntTupleConst", lambda: cute.IntTupleConst(3))]:
        with pytest.raises(UnsupportedError, match=f"cute.{name}"):
            call()


def test_from_tilelang_recovers_affine_layouts_only():
    assert cute.Layout.from_tilelang(T.Layout((4, 8), lambda i, j: j * 4 + i)) == L((4, 8), (1, 4))
    assert cute.Layout.from_tilelang(T.Layout((4, 8), lambda i, j: [i, j])) == L((4, 8), (8, 1))
    assert cute.Layout.from_tilelang(T.Layout((8, 64), lambda i, j: i * 64 + (j ^ i))) is None


def test_dynamic_extents_evaluate():
    n = T.dynamic("n")
    layout = L((4, n), (n, 1))
    assert str(layout((1, 2))) == "n + 2"
    assert str(cute.size(layout)) == "4 * n" or str(cute.size(layout)) == "n * 4"


def test_filter_and_coalesce_keep_run_time_strides():
    """Upstream's symbolic filter: a run-time stride stays a mode of its own; a constant 0 stride is dropped; modes
    merge only where the strides provably continue each other."""
    import tvm

    s = T.dynamic("s")
    filtered = cute.filter(L((4, 1, 8), (s, 0, 1)))
    assert tvm.ir.structural_equal(filtered, L((4, 8), (s, 1)))
    merged = cute.coalesce(L((4, 8), (s, 4 * s)))
    assert merged.shape == 32 and merged.stride.same_as(s)
    for c in range(32):  # the same function
        assert tvm.sym.Analyzer().can_prove_equal(merged(c), L((4, 8), (s, 4 * s))(c))
    with pytest.raises(LayoutError, match="static"):
        cute.filter(L((T.dynamic("n"), 8), (1, 4)))  # extents stay static
    # cosize is 1 + sum((extent - 1) * |stride|): a run-time stride of either sign
    cosize = cute.cosize(L((4, 8), (s, 1)))
    for value in (5, -5):
        assert int(tvm.sym.Analyzer().simplify(tvm.tirx.stmt_functor.substitute(cosize, {s: value}))) == 3 * 5 + 8


def test_int_tuples_add_as_cutes_and_parse_back():
    """from_python's tuples add component-wise (the shorter zero-padded), bases as their arithmetic tuples; the text
    of a layout or IntTuple with basis strides parses back to it."""
    a = cute.from_python([2, (3, 4)])
    assert cute.to_python(a + cute.from_python([10, (1, 1), 7])) == (12, (4, 5), 7)
    assert cute.to_python(a + 0) == (2, (3, 4)) and type(cute.to_python(a)) is tuple
    assert cute.to_python(cute.E(0) + 2 * cute.E(0)) == (3,)
    assert cute.to_python(cute.E(1) + cute.E((0, 1))) == ((0, 1), 1)  # 1@1 + 1@1@0: axis 1 of axis 0, and axis 1
    with pytest.raises(LayoutError, match="cannot add"):
        a + 3
    assert cute.make_layout(a).shape == (2, (3, 4))  # a layout keeps plain tuples (its algebra concatenates them)
    for text in ("(((2,2,8),4),2):(((8@0,1@1,1@0),32@0),16@0)", "(128,64):(1@0,1@1)", "8:1", "(2,(3,4)):(1,(2,-6))"):
        assert str(cute.Layout.parse(text)) == text
    basis = cute.ScaledBasis(2, (1, 0))
    assert cute.IntTuple.parse(str(basis)) == basis
    with pytest.raises(LayoutError, match="not an int or a basis"):
        cute.Layout.parse("(2,x):(1,2)")


def tile_through(layout_fn):
    @T.prim_func
    def through(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((32, 64), "float32")
            T.annotate_layout({tile: layout_fn()})
            T.copy(A, tile)
            for i, j in T.Parallel(32, 64):
                B[i, j] = tile[i, j] * 2.0

    return through


@pytest.mark.parametrize("arch", ARCHS)
def test_a_cute_layout_as_the_layout_of_a_shared_tile(arch):
    # Row i of the tile split in two halves of 32, the halves stored 32 rows apart: a CuTe blocked layout.
    cute_layout = L((32, (32, 2)), (32, (1, 1024)))
    assert sorted(cute_layout(i) for i in range(2048)) == list(range(2048))
    kernel = tilelang.compile(tile_through(lambda: cute_layout.to_tilelang()), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "1024" in source  # the second half's offset
    a = rand((32, 64), torch.float32)
    b = torch.full((32, 64), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a * 2.0)


# ---- issue 39: the cases upstream's test_tilelang_cute.py pins against CuTe's compiled results

def test_composition_routes_a_basis_stride_to_its_axis_and_keeps_run_time_strides():
    """A k@i stride of the right-hand side walks axis i of the left: an identity layout selects a sub-block, E(1),
    E(0) swaps the axes; run-time strides of the left pass through (the same Var, not `1 * s`)."""
    swapped = cute.composition(L((8, 4), (10, 100)), L((4, 8), (cute.E(1), cute.E(0))))
    assert swapped == L((4, 8), (100, 10))
    assert cute.composition(L((16, 16), (1, 16)), cute.make_identity_layout((4, 4))) == L((4, 4), (1, 16))
    s_m, s_n = tvm.tirx.Var("s_m", "int32"), tvm.tirx.Var("s_n", "int32")
    block = cute.composition(L((16, 16), (s_m, s_n)), cute.make_identity_layout((4, 4)))
    assert block.shape == (4, 4) and block.stride[0].same_as(s_m) and block.stride[1].same_as(s_n)
    # a left-hand side of basis strides (a coordinate map): its modes coalesce only along one axis
    restride = L((128, 16384), (cute.E(0), cute.E(1)))
    inner = L(((16, 4), 32), ((1, 32), 128))
    frag = cute.composition(restride, inner)
    assert str(frag) == "((16,4),32):((1@0,32@0),1@1)"
    assert all(frag((i, j)) == restride(inner((i, j))) for i, j in itertools.product(range(64), range(32)))
    s = tvm.tirx.Var("s", "int32")
    divided = cute.logical_divide(L(8, s), L(2, 1))  # (2, 4):(s, 2s)
    analyzer = tvm.sym.Analyzer()
    for i in range(8):
        assert analyzer.can_prove_equal(divided(i), i * s)


def test_complement_with_a_run_time_stride_is_for_rank_1_layouts():
    s = tvm.tirx.Var("s", "int32")
    rest = cute.complement(L(4, s), 1024)  # (s, ceil(1024 / 4s)):(1, 4s)
    assert rest.shape[0].same_as(s) and rest.stride[0] == 1
    assert tvm.sym.Analyzer().can_prove_equal(rest.stride[1], 4 * s)
    with pytest.raises(LayoutError, match="a run-time stride needs a rank-1 layout"):
        cute.complement(L((4, 8), (s, 1)), 1024)


def test_complement_and_products_divide_as_cute_does():
    """CuTe's complement divides strides without asking for divisibility (((4,6)):((1,6)) leaves offsets 4, 5 of each
    6 out); a tiled product unpacks a rest of several modes, and keeps a rest of one."""
    assert cute.complement(L(((4, 6),), ((1, 6),)), 72) == L(2, 36)
    block = L(((4, 6),), ((1, 6),))
    product = cute.logical_product(block, L(3))
    assert cute.rank(product) == 2 and product[0] == block and cute.compatible(3, product[1].shape)
    logical = cute.logical_product(L(3, 32), L(128))
    assert logical == L((3, (32, 4)), (32, (1, 96)))
    tiled = cute.tiled_product(L(3, 32), L(128))
    assert tiled == L((3, 32, 4), (32, 1, 96))
    assert all(tiled((x, y0, y1)) == logical((x, (y0, y1)))
               for x, y0, y1 in itertools.product(range(3), range(32), range(4)))
    wrapped = cute.Layout.parse("(128):(1)")
    assert str(cute.tiled_product(L(3, 32), wrapped)) == "(3,((32,4))):(32,((1,96)))"
    atom, outer = L((128, 16)), L((2, 4))
    assert cute.tiled_product(atom, outer) == L(((128, 16), 2, 4), ((1, 128), 2048, 4096))


@pytest.mark.parametrize("layout,inverse", [
    (L((4, 8)), L(32, 1)), (L((4, 8), (8, 1)), L((8, 4), (4, 1))), (L(8, 2), L((2, 8), (0, 1))),
    (L((3, 8192), (16384, 1)), L((16384, 3), (3, 1))), (L((2, 3, 4), (12, 1, 3)), L((12, 2), (2, 1)))], ids=str)
def test_left_inverse_is_cutes(layout, inverse):
    """Each mode by increasing stride takes the offsets up to the next stride; offsets below the smallest stride
    get a stride-0 mode (8:2 -> (2,8):(0,1))."""
    result = cute.left_inverse(layout)
    assert result == inverse
    assert all(result(layout(i)) == i for i in range(cute.size(layout)))


def test_a_composed_layout_recasts_to_other_element_sizes():
    """Sw<3,3,3> over halves is Sw<3,4,3> over bytes: the same bytes, element by element."""
    halves = cute.ComposedLayout(cute.Swizzle(3, 3, 3), 0, L((8, 64), (64, 1)))
    as_bytes = halves.recast(16, 8)
    assert as_bytes.swizzle == cute.Swizzle(3, 4, 3) and as_bytes.layout == L((8, 128), (128, 1))
    assert all(as_bytes((i, 2 * j + b)) == 2 * halves((i, j)) + b
               for i, j, b in itertools.product(range(8), range(64), range(2)))
    as_words = as_bytes.recast(8, 32)
    assert as_words.swizzle == cute.Swizzle(3, 2, 3) and as_words.layout == L((8, 32), (32, 1))
    assert cute.ComposedLayout(cute.Swizzle(0, 0, 0), 0, L((16, 128), (128, 1))).recast(32, 8).layout == \
        L((16, 512), (512, 1))
    with pytest.raises(LayoutError, match="not a whole number"):
        cute.ComposedLayout(cute.Swizzle(0, 0, 0), 0, L((4, 6), (6, 1))).recast(8, 32)
