"""The kernel frontend: rewrites a kernel function's Python AST so that running it builds TIR.

A TileLang kernel is ordinary Python whose loops, branches and assignments mean IR. We keep Python's
semantics for everything static (meta-programming over ints, lists, helper calls) and route the
constructs that may carry IR values through the runtime helpers in `runtime.py`, bound as `__tl__`:

    for i, j in ITER:      ->  for i, j in __tl__.iterate(ITER, ("i", "j")):
    if C: A else: B        ->  __tl_if = __tl__.if_(C, AT); if __tl_if.then(): A; __tl_if.end_then() / same for
                               .orelse(): B; then __tl_if.end()   (flat: Python's `if` opens no block)
    while C: A             ->  for _ in __tl__.while_(lambda: C): A
    break / continue       ->  if __tl__.loop_exit("break", AT): break   (TIR's Break in an IR loop, Python's in a
                               Python iteration; an `if` around one is rewritten both ways, see _exiting_if)
    x = V                  ->  x = __tl__.assign("x", lambda: V, __tl__.lookup(lambda: x))
    A[i] = V / A[i] += V   ->  __tl__.store(A, i, V) / __tl__.aug_store(A, i, "+", V)
    A: T.Tensor[...]       ->  A = __tl__.annotate("A", ANN, __tl__.lookup(lambda: A))
    with F(...) as (a, b)  ->  with __tl__.named(F(...), ("a", "b"), True) as (a, b)   (IR names for T.Kernel)
    a and b, not a         ->  __tl__.and_(a, lambda: b), __tl__.not_(a)
    x if c else y          ->  __tl__.select(c, lambda: x, lambda: y)
    f(...)  (a statement)  ->  __tl__.expr_statement(f(...))   (an IR call is evaluated, as in TVMScript)
    range(...) in a for    ->  __tl__.range_(...)        (a serial TIR loop, as in TVMScript)

and every statement runs inside the scope of `__tl__.at(file, line, col)`, so that errors raised while building
or lowering it point at the user's line, and every TIR statement it builds carries that line as its `span` (the
line directives of `tl.emit_line_directives` and the simulator's reports read it). Line numbers are the
original file's. A simple statement is wrapped in `with __tl__.at(...)`; a compound one takes the scope into the
block it opens anyway (`__tl__.at_iter` around a loop's iterator, `__tl__.at_with` around a `with`'s first item,
the flat `if` above), because CPython allows only 20 statically nested blocks (`for`, `while`, `with`, `try`) in
a function: the rewritten kernel nests no deeper than the user's own code, plus one for the innermost statement.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import CompileError, EndlessLoopError, SourceLoc
from . import runtime  # the helpers the rewritten code calls (bound as `__tl__`)

HELPER = runtime.HELPER


@dataclass(frozen=True)
class ParsedKernel:
    """A kernel function whose body has been rewritten into IR-building Python."""

    fn: Callable[..., Any]  # the rewritten function (same signature as the original)
    source_fn: Callable[..., Any]  # the user's function
    tree: ast.FunctionDef  # the user's (unrewritten) function definition, with file line numbers
    filename: str

    @property
    def name(self) -> str:
        return self.source_fn.__name__


def _name(id_: str, ctx=None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _helper(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name(HELPER), attr=attr, ctx=ast.Load())


def _as_list(stmts: Any) -> list:
    return stmts if isinstance(stmts, list) else [stmts]


def _has_step(index: ast.expr) -> bool:
    """Whether a subscript's index holds a slice with a step (`x[a:b:s]`)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(isinstance(part, ast.Slice) and part.step is not None for part in parts)


def _call(func: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[])


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=expr,
    )


def _target_names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]
    return None


def _escapes(body: list[ast.stmt], with_continue: bool = True) -> bool:
    """True if `body` leaves its block with break/continue/return (outside nested loops and functions);
    such a block keeps plain Python control flow (it can only be static). Without `with_continue`: whether it can
    leave the loop it is the body of (break/return)."""

    class Finder(ast.NodeVisitor):
        found = False

        def visit_Break(self, node):  # noqa: N802
            self.found = True

        def visit_Continue(self, node):  # noqa: N802
            self.found = self.found or with_continue

        visit_Return = visit_Break

        def visit_For(self, node):  # noqa: N802 - break/continue inside bind to that loop
            for stmt in node.body + node.orelse:
                if isinstance(stmt, ast.Return) or any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                    self.found = True

        visit_While = visit_For

        def visit_FunctionDef(self, node):  # noqa: N802
            pass

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_Lambda = visit_FunctionDef

    finder = Finder()
    for stmt in body:
        finder.visit(stmt)
    return finder.found


def _returns(body: list[ast.stmt]) -> bool:
    """True if `body` holds a `return` (outside nested functions): such an `if` keeps plain Python control flow."""

    class Finder(ast.NodeVisitor):
        found = False

        def visit_Return(self, node):  # noqa: N802
            self.found = True

        def visit_FunctionDef(self, node):  # noqa: N802
            pass

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_Lambda = visit_FunctionDef

    finder = Finder()
    for stmt in body:
        finder.visit(stmt)
    return finder.found


def _is_ref_annotation(annotation: ast.expr | None) -> bool:
    """`T.Ref` (or a bare `Ref`) as a parameter's annotation."""
    if isinstance(annotation, ast.Subscript):  # T.Ref[T.int32]
        annotation = annotation.value
    return (isinstance(annotation, ast.Attribute) and annotation.attr == "Ref") or \
        (isinstance(annotation, ast.Name) and annotation.id == "Ref")


def _ref_params(args: ast.arguments) -> frozenset:
    return frozenset(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if _is_ref_annotation(a.annotation))


class _Rewriter(ast.NodeTransformer):
    def __init__(self, col_offset: int):
        self.col_offset = col_offset
        self.counter = 0

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"__tl_{prefix}_{self.counter}"

    def _location(self, node: ast.stmt) -> list[ast.expr]:
        return [ast.Constant(self.filename), ast.Constant(node.lineno), ast.Constant(node.col_offset + self.col_offset)]

    def _at(self, node: ast.stmt, body: list[ast.stmt]) -> ast.stmt:
        """`with __tl__.at(file, line, col): body`: the statement's IR and errors name the user's line."""
        at = _call(_helper("at"), *self._location(node))
        return ast.copy_location(ast.With(items=[ast.withitem(at, None)], body=body or [ast.Pass()]), node)

    def _scoped(self, stmt: ast.stmt, nodes: list[ast.stmt]) -> list[ast.stmt]:
        """The statement's nodes inside the scope of its line, opening no block where the statement opens one:
        a loop takes the scope into its iterator, a `with` into its first item (both end it however the block
        is left); anything else is wrapped in `with __tl__.at(...)`."""
        if len(nodes) == 1 and not any(isinstance(n, ast.NamedExpr) for n in ast.walk(nodes[0])):
            node = nodes[0]
            if isinstance(node, ast.For) and not node.orelse:
                node.iter = _call(_helper("at_iter"), *self._location(stmt), _thunk(node.iter))
                return [node]
            if isinstance(node, ast.With):
                first = node.items[0]
                first.context_expr = _call(_helper("at_with"), *self._location(stmt), _thunk(first.context_expr))
                return [node]
        return [self._at(stmt, nodes)]

    def _body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            new = self.visit(stmt)
            # rewritten code reports the user's line
            nodes = [ast.copy_location(node, stmt) for node in (new if isinstance(new, list) else
                                                                [new] if new is not None else [])]
            if isinstance(stmt, ast.If) and isinstance(new, list):
                out.extend(nodes)  # the flat `if`: scoped by its own statements (visit_If)
            else:
                out.extend(self._scoped(stmt, nodes))
        return out or [ast.Pass()]

    # -- definitions: only the kernel's own body is rewritten; nested defs get their bodies rewritten too
    # (they are macros or helpers called while building), but their decorators are kept.
    def visit_FunctionDef(self, node: ast.FunctionDef):
        # A parameter annotated T.Ref (a @T.macro's `x: T.Ref`) is the caller's element: assigning it stores there.
        outer = getattr(self, "ref_params", frozenset())
        self.ref_params = _ref_params(node.args)
        try:
            node.body = self._body(node.body)
        finally:
            self.ref_params = outer
        return node

    # -- statements
    def visit_For(self, node: ast.For):
        names = _target_names(node.target)
        node.iter = self.visit(node.iter)
        if isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range":
            node.iter.func = _helper("range_")
        names_arg = ast.Tuple([ast.Constant(n) for n in names], ast.Load()) if names else ast.Constant(None)
        node.iter = _call(_helper("iterate"), node.iter, names_arg)
        node.body = self._loop_body(node.body)
        node.orelse = self._body(node.orelse) if node.orelse else []
        return node

    def _loop_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """A loop's body: a `break` / `continue` in it leaves this loop, under none of the enclosing `if`s."""
        outer, self.conditional_exit = getattr(self, "conditional_exit", False), False
        try:
            return self._body(body)
        finally:
            self.conditional_exit = outer

    def visit_If(self, node: ast.If):
        if (_escapes(node.body) or _escapes(node.orelse)) and not (_returns(node.body) or _returns(node.orelse)):
            return self._exiting_if(node)
        test = self.visit(node.test)
        if _escapes(node.body) or _escapes(node.orelse):
            node.test = _call(_helper("static_condition"), test)
            node.body = self._body(node.body)
            node.orelse = self._body(node.orelse) if node.orelse else []
            return node
        # Flat, opening no block (an `elif` chain is a nest of `if`s): neither branch can leave early (checked
        # above), so each branch's end call runs; an exception abandons the whole trace.
        var = self._fresh("if")

        def method(name: str) -> ast.Expr:
            return ast.Expr(_call(ast.Attribute(_name(var), name, ast.Load())))

        out: list[ast.stmt] = [
            ast.Assign(targets=[_name(var, ast.Store())], value=_call(_helper("if_"), *self._location(node), (
                test if any(isinstance(n, ast.NamedExpr) for n in ast.walk(test)) else _thunk(test)))),
            ast.If(test=_call(ast.Attribute(_name(var), "then", ast.Load())),
                   body=self._body(node.body) + [method("end_then")], orelse=[]),
        ]
        if node.orelse:
            out.append(ast.If(test=_call(ast.Attribute(_name(var), "orelse", ast.Load())),
                              body=self._body(node.orelse) + [method("end_orelse")], orelse=[]))
        out.append(method("end"))
        return out

    def _exiting_if(self, node: ast.If) -> list[ast.stmt]:
        """An `if` whose branches `break` or `continue` the loop around it. A static condition runs the branch
        as Python does (a Python loop is left at trace time; an IR loop's body gets TIR's Break / Continue there);
        a run-time one builds IfThenElse like any `if`, its `break` adding TIR's Break inside the branch. The
        branches are rewritten once for each (tracing runs one)."""
        var = self._fresh("if")
        test = self.visit(node.test)

        def attr(name: str) -> ast.Attribute:
            return ast.Attribute(_name(var), name, ast.Load())

        def method(name: str) -> ast.Expr:
            return ast.Expr(_call(attr(name)))

        def branches(conditional: bool) -> tuple[list[ast.stmt], list[ast.stmt]]:
            outer, self.conditional_exit = getattr(self, "conditional_exit", False), conditional
            try:
                body = self._body(copy.deepcopy(node.body))
                orelse = self._body(copy.deepcopy(node.orelse)) if node.orelse else []
            finally:
                self.conditional_exit = outer
            return body, orelse

        static_body, static_orelse = branches(getattr(self, "conditional_exit", False))
        run_body, run_orelse = branches(True)
        static = [method("end"), ast.If(test=attr("static"), body=static_body, orelse=static_orelse)]
        run_time = [ast.If(test=_call(attr("then")), body=run_body + [method("end_then")], orelse=[])]
        if node.orelse:
            run_time.append(ast.If(test=_call(attr("orelse")), body=run_orelse + [method("end_orelse")], orelse=[]))
        run_time.append(method("end"))
        is_static = ast.Compare(left=attr("static"), ops=[ast.IsNot()], comparators=[ast.Constant(None)])
        return [
            ast.Assign(targets=[_name(var, ast.Store())], value=_call(_helper("if_"), *self._location(node), (
                test if any(isinstance(n, ast.NamedExpr) for n in ast.walk(test)) else _thunk(test)))),
            ast.If(test=is_static, body=static, orelse=run_time),
        ]

    def visit_Break(self, node: ast.Break | ast.Continue):
        """`break` / `continue`: left to Python for a Python iteration, TIR's Break / Continue in an IR loop
        (runtime.loop_exit decides while tracing)."""
        kind = "break" if isinstance(node, ast.Break) else "continue"
        exit_ = _call(_helper("loop_exit"), ast.Constant(kind), *self._location(node),
                      ast.Constant(getattr(self, "conditional_exit", False)))
        return ast.If(test=exit_, body=[node], orelse=[])

    visit_Continue = visit_Break

    def visit_While(self, node: ast.While):
        if node.orelse:
            raise self._error(node, "`while ... else` is not supported in a kernel")
        if isinstance(node.test, ast.Constant) and node.test.value and not _escapes(node.body, with_continue=False):
            raise self._error(node, EndlessLoopError, f"`while {ast.unparse(node.test)}:` never ends: its condition is always true and "
                                    "its body has no `break` (it is unrolled while the kernel is built, so only a static "
                                    "`break` ends it); give it a condition the body changes (a T.alloc_var or a buffer "
                                    "element), as T.While")
        test = self.visit(node.test)
        return ast.For(
            target=_name("_", ast.Store()),
            iter=_call(_helper("while_"), _thunk(test)),
            body=self._loop_body(node.body),
            orelse=[],
        )

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) > 1:  # `A[i] = B[i] = v`: v is evaluated once, then stored to each target in order
            temp = f"_tl_chained_value_{node.lineno}_{node.col_offset}"
            assigns = [ast.Assign(targets=[_name(temp, ast.Store())], value=node.value)]
            assigns += [ast.Assign(targets=[target], value=_name(temp)) for target in node.targets]
            return [self.visit_Assign(ast.fix_missing_locations(ast.copy_location(a, node))) for a in assigns]
        value = self._operand(node.value)
        if len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in getattr(self, "ref_params", ()):
                return ast.Assign(targets=[target], value=_call(_helper("assign_ref"), ast.Constant(target.id),
                                                                _name(target.id), _thunk(value)))
            if isinstance(target, ast.Name):
                return ast.Assign(
                    targets=[target],
                    value=_call(
                        _helper("assign"),
                        ast.Constant(target.id),
                        _thunk(value),
                        _call(_helper("lookup"), _thunk(_name(target.id))),
                    ),
                )
            if isinstance(target, ast.Subscript):
                index = self._index(target.slice)
                if _has_step(index):
                    index = _call(_helper("unit_step_index"), self.visit(target.value), index)
                return ast.Expr(_call(_helper("store"), self.visit(target.value), index, value))
            if isinstance(target, (ast.Tuple, ast.List)) and target.elts and \
                    all(isinstance(e, (ast.Name, ast.Subscript)) for e in target.elts):
                return self._unpacking_assign(node, target, value)
        node.value = value
        return node

    def _unpacking_assign(self, node: ast.Assign, target: ast.Tuple | ast.List, value: ast.expr) -> list[ast.stmt]:
        """`a, b = b, a + b` / `A[0], A[1] = A[1], A[0]`: where a target stores (an element, or a T.alloc_var
        scalar) every value is read first, then each target assigned in turn (upstream's two-phase binding), so a
        swap swaps and, in an IR loop, happens in every iteration. Otherwise plain Python unpacking, as before."""
        tag = f"_tl_unpacked_{node.lineno}_{node.col_offset}"
        targets = ast.List(elts=[_call(_helper("lookup"), _thunk(_name(e.id))) if isinstance(e, ast.Name)
                                 else ast.Constant(True) for e in target.elts], ctx=ast.Load())
        names = ast.List(elts=[ast.Constant(e.id if isinstance(e, ast.Name) else "value") for e in target.elts],
                         ctx=ast.Load())
        setup = ast.Assign(targets=[_name(tag, ast.Store())],
                           value=_call(_helper("unpack_for_store"), value, targets, names))
        item = lambda k: ast.Subscript(value=ast.Subscript(value=_name(tag), slice=ast.Constant(1), ctx=ast.Load()),  # noqa: E731
                                       slice=ast.Constant(k), ctx=ast.Load())
        stores = []
        for k, elt in enumerate(target.elts):
            single = ast.fix_missing_locations(ast.copy_location(ast.Assign(targets=[elt], value=item(k)), node))
            stores.extend(_as_list(self.visit_Assign(single)))
        plain = ast.Assign(targets=[target], value=ast.Subscript(value=_name(tag), slice=ast.Constant(1),
                                                                 ctx=ast.Load()))
        check = ast.Subscript(value=_name(tag), slice=ast.Constant(0), ctx=ast.Load())
        out = [setup, ast.If(test=check, body=stores, orelse=[plain])]
        return [ast.fix_missing_locations(ast.copy_location(stmt, node)) for stmt in out]

    def visit_AugAssign(self, node: ast.AugAssign):
        value = self._operand(node.value)
        op = ast.Constant(type(node.op).__name__)
        if isinstance(node.target, ast.Subscript):
            return ast.Expr(
                _call(_helper("aug_store"), self.visit(node.target.value), self._index(node.target.slice), op, value)
            )
        if isinstance(node.target, ast.Name) and node.target.id in getattr(self, "ref_params", ()):
            name = node.target.id
            combined = ast.BinOp(_call(_helper("value"), _name(name)), node.op, value)  # a T.alloc_var's value
            return ast.Assign(targets=[_name(name, ast.Store())],
                              value=_call(_helper("assign_ref"), ast.Constant(name), _name(name), _thunk(combined)))
        if isinstance(node.target, ast.Name):
            name = node.target.id
            return ast.Assign(
                targets=[_name(name, ast.Store())],
                value=_call(_helper("aug_assign"), ast.Constant(name), _name(name), op, value),
            )
        node.value = value
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            raise self._error(node, "only a plain name can be annotated in a kernel")
        name = node.target.id
        annotation = self.visit(node.annotation)
        if node.value is None:
            value = _call(
                _helper("annotate"), ast.Constant(name), annotation, _call(_helper("lookup"), _thunk(_name(name)))
            )
        else:
            value = _call(_helper("declare"), ast.Constant(name), annotation, _thunk(self.visit(node.value)))
        return ast.Assign(targets=[_name(name, ast.Store())], value=value)

    def visit_Expr(self, node: ast.Expr):
        """A bare expression statement: an IR call it yields is evaluated (TVMScript's rule), so that
        `T.call_extern("void", "f")` and upstream's `T.mbarrier_arrive(b)` are statements of the kernel."""
        return ast.Expr(_call(_helper("expr_statement"), self.visit(node.value)))

    def visit_With(self, node: ast.With):
        for item in node.items:
            item.context_expr = self.visit(item.context_expr)
            names = _target_names(item.optional_vars) if item.optional_vars is not None else None
            if names:
                names_arg = ast.Tuple([ast.Constant(n) for n in names], ast.Load())
                unpacks = ast.Constant(isinstance(item.optional_vars, (ast.Tuple, ast.List)))
                item.context_expr = _call(_helper("named"), item.context_expr, names_arg, unpacks)
        node.body = self._body(node.body)
        return node

    # -- expressions
    def _operand(self, node: ast.expr) -> ast.expr:
        """An operand of an operator: a name is read through `value`, so a `T.alloc_var` scalar reads as its
        value (`x + 1`), while a name passed to a call stays the variable itself (a macro may assign it)."""
        node = self.visit(node)
        return _call(_helper("value"), node) if isinstance(node, ast.Name) else node

    def visit_BinOp(self, node: ast.BinOp):
        node.left, node.right = self._operand(node.left), self._operand(node.right)
        return node

    def _index(self, index: ast.expr) -> ast.expr:
        if isinstance(index, ast.Tuple):
            index.elts = [self._index(e) for e in index.elts]
            return index
        if isinstance(index, ast.Slice):  # `x[a:b]` with `T.alloc_var` bounds reads their values
            for field in ("lower", "upper", "step"):
                bound = getattr(index, field)
                if bound is not None:
                    setattr(index, field, self._operand(bound))
            return index
        return self._operand(index)

    def visit_Subscript(self, node: ast.Subscript):
        node.value = self.visit(node.value)
        node.slice = self._index(node.slice)
        if _has_step(node.slice) and isinstance(node.ctx, ast.Load):  # `A[0:10:2]`: checked before TVM sees it
            return ast.copy_location(
                ast.Subscript(value=node.value, slice=_call(_helper("unit_step_index"), node.value, node.slice),
                              ctx=node.ctx), node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp):
        values = [self._operand(v) for v in node.values]
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        expr = values[0]
        for v in values[1:]:
            expr = _call(_helper(fn), expr, _thunk(v))
        return expr

    def visit_UnaryOp(self, node: ast.UnaryOp):
        node.operand = self._operand(node.operand)
        if isinstance(node.op, ast.Not):
            return _call(_helper("not_"), node.operand)
        return node

    def visit_Compare(self, node: ast.Compare):
        node.left = self._operand(node.left)
        node.comparators = [self._operand(c) for c in node.comparators]
        if len(node.ops) == 1:
            return node
        # a < b < c  ->  (a < b) and (b < c), keeping Python's short-circuit for static values
        operands = [node.left, *node.comparators]
        parts = [ast.Compare(left=operands[i], ops=[op], comparators=[operands[i + 1]]) for i, op in enumerate(node.ops)]
        expr: ast.expr = parts[0]
        for part in parts[1:]:
            expr = _call(_helper("and_"), expr, _thunk(part))
        return expr

    def visit_Call(self, node: ast.Call):
        """A call handing a name over (`align(n, 16)`): the callee decides at run time whether a `T.alloc_var`
        argument goes as its value (runtime.call_target)."""
        self.generic_visit(node)
        builtin = isinstance(node.func, ast.Name) and hasattr(builtins, node.func.id)  # range(...) stays for visit_For
        if not builtin and (any(isinstance(a, ast.Name) for a in node.args) or
                            any(isinstance(k.value, ast.Name) for k in node.keywords)):
            node.func = _call(_helper("call_target"), node.func)
        return node

    def visit_IfExp(self, node: ast.IfExp):
        return _call(
            _helper("select"), self._operand(node.test), _thunk(self._operand(node.body)),
            _thunk(self._operand(node.orelse))
        )

    def _error(self, node: ast.AST, *args: Any) -> CompileError:
        """`_error(node, message)`, or `_error(node, ErrorClass, message)` for a CompileError subclass."""
        error_class, message = args if len(args) == 2 else (CompileError, args[0])
        return error_class(message, SourceLoc(self.filename, node.lineno, node.col_offset + self.col_offset))

    filename = "<kernel>"


_PARSED: dict[Any, ParsedKernel] = {}


def _closure_vars(func: Callable) -> dict[str, Any]:
    names = func.__code__.co_freevars
    cells = func.__closure__ or ()
    out = {}
    for name, cell in zip(names, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: the name is assigned later in the enclosing scope
            pass
    return out


def _drop_signature_expressions(args: ast.arguments) -> None:
    """Defaults and annotations were evaluated when the original `def` ran, in its enclosing scope (a factory's
    locals, which are not the function's closure): re-evaluating them here would raise NameError. The rewritten
    function takes the original's evaluated defaults instead, and its signature is read from the original."""
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    args.defaults = [ast.Constant(None) for _ in args.defaults]
    args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]


def parse_kernel(func: Callable, extra_globals: dict[str, Any] | None = None) -> ParsedKernel:
    """Rewrite `func` (a kernel written in Python) into a function that builds IR when called.

    The rewritten function sees the same globals and closure variables as `func` (closure values as of
    now: the lazy jit style re-parses for every specialization). Cached per function object when it
    has no closure."""
    cacheable = not func.__closure__ and not extra_globals
    if cacheable and func in _PARSED:
        return _PARSED[func]
    try:
        lines, first_line = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func) or func.__code__.co_filename
    except (OSError, TypeError) as err:
        raise CompileError(
            f"cannot read the source of kernel `{func.__name__}` ({err}); kernels must be defined in a file"
        ) from None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    col_offset = len(lines[0]) - len(lines[0].lstrip())
    module = ast.parse(dedented)
    ast.increment_lineno(module, first_line - 1)
    fdef = module.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CompileError(f"`{func.__name__}` is not a plain function definition")
    original = ast.parse(dedented).body[0]
    ast.increment_lineno(original, first_line - 1)

    rewriter = _Rewriter(col_offset)
    rewriter.filename = filename
    fdef.decorator_list = []
    rewriter.ref_params = _ref_params(fdef.args)
    _drop_signature_expressions(fdef.args)
    fdef.body = rewriter._body(fdef.body)
    ast.fix_missing_locations(module)

    namespace = dict(func.__globals__)
    namespace.update(_closure_vars(func))
    if extra_globals:
        namespace.update(extra_globals)
    namespace[HELPER] = runtime
    try:
        code = compile(module, filename, "exec")
    except SyntaxError as err:  # what the rewrite adds is bounded (see the module docstring); the rest is the user's
        raise CompileError(f"kernel `{func.__name__}` cannot be built: {err.msg} (CPython allows 20 nested `for`, "
                           "`while`, `with` and `try` blocks in a function; move an inner part into a @T.macro)",
                           SourceLoc(filename, err.lineno or first_line, 0)) from None
    exec(code, namespace)  # defines the rewritten function in `namespace`
    rewritten = namespace[fdef.name]
    rewritten.__defaults__, rewritten.__kwdefaults__ = func.__defaults__, func.__kwdefaults__
    parsed = ParsedKernel(rewritten, func, original, filename)
    if cacheable:
        _PARSED[func] = parsed
    return parsed


EAGER_MARKERS = ("const", "dynamic", "empty", "match_buffer")  # T.const("M"), T.empty(...), ...


def contains_kernel_scope(tree: ast.FunctionDef) -> bool:
    """Whether the function is written in the eager jit style, whose function *is* the kernel (the lazy style
    returns a @T.prim_func, usually a nested one): its own body (not nested definitions) opens
    `with T.Kernel(...)`, or, defining no @T.prim_func of its own, it declares sizes, outputs or tensor
    annotations the eager way (`M = T.const("M")`, `C = T.empty(...)`, `A: T.Tensor[...]`) and leaves the kernel
    to a @T.macro it calls."""
    found = {"kernel": False, "marker": False, "prim_func": False}

    def attr_name(node) -> str | None:
        return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)

    def walk(stmts):
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found["prim_func"] |= any(attr_name(d.func if isinstance(d, ast.Call) else d) == "prim_func"
                                          for d in stmt.decorator_list)
                continue
            if isinstance(stmt, ast.ClassDef):
                continue
            if isinstance(stmt, ast.With):
                found["kernel"] |= any(isinstance(item.context_expr, ast.Call)
                                       and attr_name(item.context_expr.func) in ("Kernel", "launch_thread")
                                       for item in stmt.items)
            if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call):  # a TVMScript-style kernel
                found["kernel"] |= attr_name(stmt.iter.func) == "thread_binding"
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
                found["marker"] = True  # `A: T.Tensor[[M, K], T.float16]` in the body
            value = getattr(stmt, "value", None)
            if isinstance(value, ast.Call) and attr_name(value.func) in EAGER_MARKERS:
                found["marker"] = True
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(stmt, field, []) or [])

    walk(tree.body)
    # `def copy(A: T.Tensor[[128, 128], T.float32], ...)` whose body only calls a @T.macro: tensor parameters
    found["marker"] |= any(_is_tensor_annotation(arg.annotation)
                           for arg in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs)
    return found["kernel"] or (found["marker"] and not found["prim_func"])


_TENSOR_TYPES = ("Tensor", "StridedTensor", "Buffer")


def _is_tensor_annotation(node: ast.expr | None) -> bool:
    """`T.Tensor[...]`, `T.Tensor(...)`, `T.StridedTensor[...]`, `T.Buffer(...)` as a parameter's annotation."""
    head = node.value if isinstance(node, ast.Subscript) else node.func if isinstance(node, ast.Call) else None
    return isinstance(head, ast.Attribute) and head.attr in _TENSOR_TYPES
