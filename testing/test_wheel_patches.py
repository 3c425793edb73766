"""Every change the package makes to the stock TVM wheel is listed in tilelang_musa/_wheel_patches.py (what, why, what
upstream wheel change would remove it) and made there: the list and what is applied agree, and no other module
assigns to the wheel's modules or classes."""

import ast
from pathlib import Path

import tvm
import tvm_ffi
from tvm import tirx

import tilelang  # noqa: F401  (applies the import-time patches)
import tilelang.language as T
from tilelang_musa import _wheel_patches
from tilelang_musa.tools.trace import pass_diff_hook

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "tilelang_musa"
PATCH_MODULE = "_wheel_patches.py"
ON_DEMAND = {"tvm.ir.transform.Pass.__call__"}  # while TILELANG_PASS_DIFF records passes

# The list, spelled out here too: adding or removing a patch means updating this test, knowingly.
EXPECTED = {
    "tvm.tirx.PrimExpr", "tvm.ir.PrimExpr", "tvm.tirx.Call", "tvm.tirx.StringImm",
    "tvm.tirx.PrimFunc.__init__", "tvm.tirx.stmt_functor", "tvm.ir.Expr.dtype", "tvm.ir.Var.dtype",
    "tvm.tirx.PrimFunc.buffer_map",
    *(f"tvm.ir._overload_prim_expr.{op}" for op in ("__and__", "__rand__", "__or__", "__ror__", "__xor__",
                                                    "__rxor__")),
    "tvm.ir.transform.Pass.__call__", "tvm.arith", "tvm.ir.structural_equal",
    "tvm_ffi.structural._callback_accepts_inplace_mode", "tvm_ffi.structural._callback_type_to_type_index",
    "tvm_ffi.structural._normalize_callbacks", "tvm_ffi.container.Array.__iter__",
    *(f"{module}.is_prim_expr" for module in ("tvm.ir", "tvm.ir.expr", "tvm.ir._overload_prim_expr")),
    *(f"tvm.ir.transform.PassContext.{name}" for name in ("__init__", "__enter__", "__exit__")),
}


def test_the_list_is_the_expected_one_and_says_why_for_each():
    targets = [patch.target for patch in _wheel_patches.PATCHES]
    assert len(targets) == len(set(targets)) and set(targets) == EXPECTED
    for patch in _wheel_patches.PATCHES:
        assert patch.kind in ("adds", "replaces") and patch.why and patch.removed_by, patch


def test_importing_tilelang_applies_every_import_time_patch_and_nothing_else():
    assert set(_wheel_patches.applied()) == EXPECTED - ON_DEMAND
    assert tirx.PrimExpr is tirx.Expr
    x = tirx.Var("x", "uint32")
    assert str(x.dtype) == "uint32" and str((x + 1).dtype) == "uint32"
    assert str((x & 0xFFFFFFFF).b.ty.dtype) == "uint32"  # the int took the expression's type

    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    assert list(f.buffer_map.values())[0].shape == (4,)


def test_pass_diff_replaces_pass_call_only_while_installed(monkeypatch):
    wheel_call = tvm.ir.transform.Pass.__call__
    monkeypatch.setenv("TILELANG_PASS_DIFF", "terminal")
    pass_diff_hook.install_pass_diff_hook()
    try:
        assert set(_wheel_patches.applied()) == EXPECTED
        assert tvm.ir.transform.Pass.__call__ is not wheel_call
        assert _wheel_patches.applied()["tvm.ir.transform.Pass.__call__"] is wheel_call
    finally:
        pass_diff_hook.uninstall_pass_diff_hook()
    assert tvm.ir.transform.Pass.__call__ is wheel_call
    assert set(_wheel_patches.applied()) == EXPECTED - ON_DEMAND


def _wheel_names(tree: ast.AST) -> set:
    """The names a module binds to the wheel's modules and classes (`import tvm`, `from tvm import tirx`, ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in (
                "tvm", "tvm_ffi"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("tvm", "tvm_ffi"):
            names.update(a.asname or a.name for a in node.names)
    return names


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_no_other_module_changes_the_wheel():
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name == PATCH_MODULE and path.parent == PACKAGE_DIR:
            continue
        tree = ast.parse(path.read_text(), str(path))
        wheel = _wheel_names(tree)
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and _root(target) in wheel:
                    found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr",
                                                                                                    "delattr"):
                if node.args and _root(node.args[0]) in wheel:
                    found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}")
    assert not found, f"changes to the wheel outside {PATCH_MODULE} (move them there and list them): {found}"


def test_memoized_structural_callbacks_answer_as_the_wheel_does():
    import functools

    import tvm_ffi.structural as structural

    accepts = structural._callback_accepts_inplace_mode
    wheel_accepts = _wheel_patches.applied()["tvm_ffi.structural._callback_accepts_inplace_mode"]

    def make(arity):
        return [lambda v, m: v, lambda v, m, mode: v][arity - 2]  # fresh closures, shared code objects

    for _ in range(2):  # the second round is answered from the memo
        assert accepts(make(2)) is False and accepts(make(3)) is True
    with_default = lambda v, m, mode=0: v  # noqa: E731
    assert accepts(with_default) is wheel_accepts(with_default) is True
    with_default.__defaults__ = None  # same code, one default fewer: a different key, the same answer here
    assert accepts(with_default) is wheel_accepts(with_default)
    partial = functools.partial(lambda v, m, mode: v, 1)  # not a plain function: asked afresh
    assert accepts(partial) is wheel_accepts(partial)

    x = tirx.Var("x", "int32")
    seen = []
    out = tvm_ffi.structural_mutate(x + 1, [(tirx.Var, lambda v, m, mode: seen.append(mode) or v)])
    assert out.same_as(x + 1) or str(out) == str(x + 1)
    assert seen and all(mode in (0, 1) for mode in seen)
    index = structural._callback_type_to_type_index
    wheel_index = _wheel_patches.applied()["tvm_ffi.structural._callback_type_to_type_index"]
    assert index(tirx.Var, api_name="structural_mutate") == wheel_index(tirx.Var, api_name="structural_mutate") >= 0


def test_arrays_iterate_their_elements_in_order():
    wheel_iter = _wheel_patches.applied()["tvm_ffi.container.Array.__iter__"]
    for values in ([], [tirx.const(3, "int32")], [tirx.Var("x", "int32"), tirx.const(1, "int64"), "s", 7]):
        array = tvm_ffi.Array(values)
        mine, wheel = list(array), list(wheel_iter(array))
        assert len(mine) == len(wheel) == len(values)
        assert all(type(a) is type(b) and (a == b if isinstance(a, (str, int)) else a.same_as(b))
                   for a, b in zip(mine, wheel))


def test_normalized_callbacks_are_the_wheels_for_every_form():
    import typing

    import tvm_ffi.structural as structural

    wheel = _wheel_patches.applied()["tvm_ffi.structural._normalize_callbacks"]
    f, g = (lambda v: v), (lambda v: None)
    forms = [(), [], [(tirx.Var, f)], [(tirx.Var, f), (tirx.Add, g)], [((tirx.Var, tirx.Add), f)],
             [(tirx.Var, f), ((tirx.Add, tirx.Sub), g)], (tirx.Var, f), ((tirx.Var, tirx.Add), g), f,
             [(typing.Any, f)], ((tirx.Var, f), (tirx.Add, g))]
    for form in forms:
        assert structural._normalize_callbacks(form, api_name="structural_walk") == wheel(form,
                                                                                          api_name="structural_walk")
    for bad in ([(tirx.Var, f, 1)], [(tirx.Var, 3)], "callbacks", 3):
        for normalize in (structural._normalize_callbacks, wheel):
            try:
                normalize(bad, api_name="structural_walk")
            except TypeError as err:
                message = str(err)
            else:
                message = None
            assert message is not None and "structural_walk callbacks" in message, (bad, message)


def test_upstream_tests_analyzer_and_structural_equal_names():
    x = tirx.Var("x", "int32")
    assert tvm.arith.Analyzer().can_prove_equal(x * 4 + x, x * 5)
    from tvm.arith import Analyzer  # noqa: F401 - the import form upstream's tests use

    assert tvm.ir.structural_equal(x + 1, x + 1) and not tvm.ir.structural_equal(x + 1, x + 2)
    from tilelang.layout import cute

    assert tvm.ir.structural_equal(cute.make_layout((2, 3)), cute.make_layout((2, 3), (1, 2)))
    assert not tvm.ir.structural_equal(cute.make_layout((2, 3)), cute.make_layout((2, 3), (3, 1)))


def test_is_prim_expr_answers_as_the_wheels():
    """The memoized is_prim_expr gives the wheel's answer on scalar, buffer and pointer Vars, constants, calls,
    strings and plain Python values, asked twice each (the second from the memo)."""
    wheel = _wheel_patches.applied()["tvm.ir.expr.is_prim_expr"]
    buffer = tirx.decl_buffer((4,), "float32")
    x = tirx.Var("x", "int32")
    values = [x, x + 1, tirx.const(2.0, "float32"), buffer, buffer[0], tirx.Var("p", tvm.ir.PointerType(
        tvm.ir.PrimType("float32"), "shared")), tvm.ir.StringImm("s"), tirx.call_extern("int32", "f", x),
              1, 2.5, "s", None]
    for value in values * 2:
        assert tvm.ir.expr.is_prim_expr(value) == wheel(value), value
        assert tvm.ir.is_prim_expr is tvm.ir.expr.is_prim_expr is tvm.ir._overload_prim_expr.is_prim_expr
