"""Upstream 0.1.13's expression built-ins as its tests use them: built outside a kernel for inspection (`T.__exp(x)`,
`T.any_sync(p)`, `T.assume(c)`), operand dtypes rejected with a TypeError in upstream's words, and the names its
language tests call (`T.extract_lane`, `T.float16x2(a, b)`, `T.lds*/sts*`, a TVMScript-style eager `@tilelang.jit`),
compiled for both arches and run in the simulator against torch."""

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_31", "mp_22"]
FAST = [T.__exp, T.__exp10, T.__log, T.__log2, T.__log10, T.__tan, T.__cos, T.__sin]


@pytest.mark.parametrize("fn", FAST, ids=lambda f: f.__name__)
def test_fast_math_builds_calls_outside_a_kernel(fn):
    for dtype in ("float32", "float64"):
        call = fn(tirx.Var("x", dtype))
        assert isinstance(call, tirx.Call) and call.dtype == dtype
    assert fn(tirx.Var("x", "float64")).op.name == "tirx.call_extern"  # the exact double function (no fast one)
    assert fn(tirx.Var("h", "float16")).dtype == "float16"  # through float32, cast back
    for dtype in ("int32", "bool", "float8_e4m3fn"):
        with pytest.raises(TypeError, match=rf"T\.{fn.__name__} only supports floating-point inputs, but got {dtype}"):
            fn(tirx.Var("x", dtype))


@pytest.mark.parametrize("fn", [T.any_sync, T.all_sync, T.syncthreads_count, T.syncthreads_and, T.syncthreads_or])
def test_predicate_votes_outside_a_kernel(fn):
    for predicate in (1, True, tirx.Var("p", "bool"), tirx.Var("i", "int32")):
        assert isinstance(fn(predicate), tirx.Call)
    with pytest.raises(TypeError, match="requires an integer or boolean predicate; got float32"):
        fn(tirx.FloatImm("float32", 0.5))
    with pytest.raises(TypeError, match="requires an integer or boolean predicate"):
        fn(0.5)


def test_assume_and_shuffles_outside_a_kernel():
    n = tirx.Var("n", "int32")
    fact = T.assume(n % 4 == 0)
    assert isinstance(fact, tirx.Call) and fact.op.name == "tirx.assume"
    assert isinstance(T.shfl_xor(tirx.Var("v", "float32"), 1), tirx.Call)
    assert isinstance(T.get_lane_idx(), tirx.Call)


def test_a_float_predicate_in_a_kernel_names_the_line():
    with pytest.raises(tilelang.CompileError, match=r"(?s)T\.any_sync\(A\[tx\]\).*T.any_sync requires an integer"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                B[tx] = T.any_sync(A[tx])


def test_extract_lane_checks():
    v = tirx.Var("v", "bfloat16x2")
    lane = T.extract_lane(v, tirx.IntImm("int32", 1))
    assert isinstance(lane, tirx.Shuffle) and lane.dtype == "bfloat16" and lane.indices[0].value == 1
    with pytest.raises(TypeError, match="expects a PrimExpr"):
        T.extract_lane(1, 0)
    with pytest.raises(ValueError, match="expects a vector expression"):
        T.extract_lane(tirx.Var("s", "bfloat16"), 0)
    with pytest.raises(TypeError, match="compile-time integer"):
        T.extract_lane(v, tirx.Var("k", "int32"))
    with pytest.raises(IndexError, match="out of bounds"):
        T.extract_lane(v, 2)
    with pytest.raises(TypeError, match=r"one value per lane \(2\); got 3"):
        T.float16x2(1.0, 2.0, 3.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_of_values_and_extract_lane_run(arch):
    @T.prim_func
    def main(A: T.Tensor((2,), "float16"), B: T.Tensor((2,), "float16"), E: T.Tensor((2,), "float64")):
        with T.Kernel(1, threads=1):
            packed = T.alloc_var(T.float16x2)
            packed = T.float16x2(A[1], A[0])
            B[0] = T.extract_lane(packed, 0)
            B[1] = T.extract_lane(packed, 1) * T.float16(2)
            E[0] = T.__exp(T.Cast("float64", A[0]))
            E[1] = T.__log(T.Cast("float64", A[1]) * T.Cast("float64", A[1]) + T.float64(1))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::make_vec<half_t>(A[1], A[0])" in source and "packed[0]" in source and "packed[1]" in source
    assert "exp(tl::cast<double>(A[0]))" in source and " log(" in source
    a = rand((2,), torch.float16, 3)
    b = torch.full((2,), float("nan"), dtype=torch.float16)
    e = torch.full((2,), float("nan"), dtype=torch.float64)
    kernel(a, b, e)
    torch.testing.assert_close(b, torch.stack([a[1], a[0] * 2]))
    torch.testing.assert_close(e, torch.stack([torch.exp(a[0].double()), (a[1].double() ** 2 + 1).log()]))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("bits", [32, 64, 128])
def test_shared_word_loads_and_stores(arch, bits):
    words = bits // 32
    word = "uint32" if words == 1 else f"uint32x{words}"
    lds, sts = getattr(T, f"lds{bits}"), getattr(T, f"sts{bits}")

    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128 // words) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            sts(S[(31 * tx + 5) % (128 // words) * words:(31 * tx + 5) % (128 // words) * words + words],
                T.ldg32(X[tx]) if words == 1 else T.ldg64(X[tx * 2:tx * 2 + 2]) if words == 2
                else T.ldg128(X[tx * 4:tx * 4 + 4]))
            T.sync_threads()
            T.stg32(Y[tx], lds(S[tx])) if words == 1 else (
                T.stg64(Y[tx * 2:tx * 2 + 2], lds(S[tx * 2:tx * 2 + 2])) if words == 2
                else T.stg128(Y[tx * 4:tx * 4 + 4], lds(S[tx * 4:tx * 4 + 4])))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert f"tl::store_shared_{bits}(" in source and f"tl::load_shared_{bits}(" in source
    x = rand((128,), torch.float32, bits)
    y = torch.full((128,), float("nan"))
    kernel(x, y)
    groups = 128 // words
    slot = [(31 * t + 5) % groups for t in range(groups)]  # thread t's words land in slot[t]
    expected = torch.empty(128)
    for t in range(groups):
        expected[slot[t] * words:(slot[t] + 1) * words] = x[t * words:(t + 1) * words]
    torch.testing.assert_close(y, expected)
    assert word in ("uint32", "uint32x2", "uint32x4")


def test_shared_word_access_rejects_a_global_buffer():
    with pytest.raises(tilelang.CompileError, match=r"T.sts32: dst .* must be a shared buffer"):
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                T.sts32(X[tx], T.reinterpret(X[tx], T.uint32))


@tilelang.jit
def test_tvmscript_style(A: T.Tensor((16, 16), dtype=T.float32)):  # noqa: PT028 - a kernel, not a test
    for _blockIdx in T.thread_binding(1, thread="blockIdx.x"):
        for _threadIdx in T.thread_binding(128, thread="threadIdx.x"):
            b = A[0, 0:4]
            A[0, 4:8] = b


def test_tvmscript_style_eager_kernel_without_arguments():
    """A @tilelang.jit function whose body is the kernel's thread bindings (no T.Kernel) is the eager style: its
    source needs no arguments, as upstream's `get_kernel_source()`."""
    source = test_tvmscript_style.get_kernel_source()
    assert "float4 b" in source
    a = rand((16, 16), torch.float32, 9)
    expected = a.clone()
    expected[0, 4:8] = a[0, 0:4]
    test_tvmscript_style(a)
    torch.testing.assert_close(a, expected)


def _fns_reference(mask: int, base: int, offset: int) -> int:
    if offset == 0:
        return base if (mask >> base) & 1 else 0xFFFFFFFF
    count, pos, step = abs(offset) - 1, base, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if (mask >> pos) & 1:
            if count == 0:
                return pos
            count -= 1
        pos += step
    return 0xFFFFFFFF


@pytest.mark.parametrize("arch", ARCHS)
def test_fns_finds_the_nth_set_bit(arch):
    @T.prim_func
    def main(Mask: T.Tensor((64,), "int32"), Base: T.Tensor((64,), "int32"), Offset: T.Tensor((64,), "int32"),
             Out: T.Tensor((64,), "int64")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            Out[tx] = T.Cast("int64", T.__fns(T.reinterpret(Mask[tx], T.uint32), Base[tx], Offset[tx]))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::fns(" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(5)
    mask = torch.randint(-2**31, 2**31 - 1, (64,), dtype=torch.int32, generator=g)
    mask[:4] = torch.tensor([0, -1, 0x55555555, -0x55555556], dtype=torch.int32)  # 0xAAAAAAAA
    base = torch.randint(0, 32, (64,), dtype=torch.int32, generator=g)
    offset = torch.randint(-6, 7, (64,), dtype=torch.int32, generator=g)
    out = torch.full((64,), -7, dtype=torch.int64)
    kernel(mask, base, offset, out)
    expected = [_fns_reference(int(m) & 0xFFFFFFFF, int(b), int(o)) for m, b, o in zip(mask, base, offset)]
    assert out.tolist() == expected
    assert _fns_reference(0xAAAAAAAA, 2, -1) == 1 and _fns_reference(0xAAAAAAAA, 3, 1) == 3  # PTX's examples
    with pytest.raises(TypeError, match="T.__fns: offset must be an integer"):
        T.__fns(1, 0, 0.5)


def test_stmt_functor_walks_statements_and_expressions():
    """`tvm.tirx.stmt_functor.post_order_visit` as upstream's TVM fork has it: every statement and expression,
    children before their parent (`pre_order_visit`: parents first)."""
    from tvm.tirx.stmt_functor import post_order_visit, pre_order_visit

    @T.prim_func
    def main(A: T.Tensor((2,), "float64")):
        with T.Kernel(1):
            value = T.alloc_var(T.float64, init=1e300)
            A[1] = value + T.float64(2.5)

    post, pre = [], []
    post_order_visit(main.body, post.append)
    pre_order_visit(main.body, pre.append)
    floats = [n.value for n in post if isinstance(n, tirx.FloatImm)]
    assert 1e300 in floats and 2.5 in floats
    assert all(isinstance(n, (tirx.PrimExpr, tirx.Stmt)) for n in post) and len(pre) == len(post)
    store = next(k for k, n in enumerate(post) if isinstance(n, tirx.BufferStore) and n.buffer.name == "A")
    added = next(k for k, n in enumerate(post) if isinstance(n, tirx.FloatImm) and n.value == 2.5)
    assert added < store  # a child before its parent
    def position(nodes, node):
        return next(k for k, n in enumerate(nodes) if n.same_as(node))

    assert position(pre, post[store]) < position(pre, post[added])


def test_stmt_functor_substitute_replaces_variables():
    """`tvm.tirx.stmt_functor.substitute(node, {var: value})` (or a function of the Var), as upstream's cute tests
    use it to evaluate a symbolic cosize: other variables and the node's structure stay."""
    import tvm
    from tvm.tirx.stmt_functor import substitute

    s, t = tirx.Var("s", "int32"), tirx.Var("t", "int32")
    expr = s * 3 + t
    replaced = substitute(expr, {s: tirx.const(5, "int32")})
    assert int(tvm.arith.Analyzer().simplify(substitute(replaced, {t: 8}))) == 23
    assert replaced.b.same_as(t)
    by_function = substitute(expr, lambda v: tirx.const(-1, "int32") if v.same_as(t) else None)
    assert int(tvm.arith.Analyzer().simplify(substitute(by_function, {s: 2}))) == 5


def _doubling_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            lane = T.get_thread_binding()
            B[lane] = A[lane] * T.float32(2.0)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_stmt_functor_ir_transform_rewrites_a_kernel(arch):
    """`tvm.tirx.stmt_functor.ir_transform(node, preorder, postorder, only_enable)` as upstream's TVM fork has it
    (TileOPs' trace pass rewrites kernel bodies with it): postorder's value replaces a node rebuilt from its children,
    the program compiles and computes the rewritten expression."""
    from tvm.tirx.stmt_functor import ir_transform

    main = _doubling_kernel()

    def tripled(node):
        if isinstance(node, tirx.FloatImm) and node.value == 2.0:
            return tirx.FloatImm("float32", 3.0)
        return None

    body = ir_transform(main.body, None, tripled)
    kernel = tilelang.compile(main.with_body(body), target=f"musa -arch={arch}")
    assert "3.000000e+00f" in kernel.get_kernel_source()
    a, b = rand((64,), torch.float32), torch.empty(64)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)


def test_stmt_functor_ir_transform_preorder_and_only_enable():
    """A value preorder returns replaces the node and its children go unvisited; `only_enable` (upstream's type
    keys, "tir.BufferStore") limits both callbacks to those classes; None everywhere leaves the node itself."""
    from tvm.tirx.stmt_functor import ir_transform, post_order_visit

    main = _doubling_kernel()
    seen = []
    ir_transform(main.body, None, seen.append, ["tir.BufferStore"])
    assert len(seen) == 1 and isinstance(seen[0], tirx.BufferStore) and seen[0].buffer.name == "B"
    assert ir_transform(main.body, None, lambda n: None).same_as(main.body)

    visited = []

    def stop_at_store(node):
        visited.append(node)
        return tirx.Evaluate(tirx.const(0, "int32")) if isinstance(node, tirx.BufferStore) else None

    def after(node):
        visited.append(node)

    body = ir_transform(main.body, stop_at_store, after)
    assert not any(isinstance(n, tirx.FloatImm) for n in visited)  # the store's operands were never visited
    found = []
    post_order_visit(body, found.append)
    assert not any(isinstance(n, tirx.BufferStore) for n in found)


def test_ir_prim_expr_names_the_expression_class():
    """`from tvm.ir import PrimExpr` (TileOPs' trace records annotate with it) is the wheel's expression class."""
    from tvm.ir import PrimExpr

    assert isinstance(tirx.Var("x", "int32") + 1, PrimExpr) and PrimExpr is tirx.PrimExpr
