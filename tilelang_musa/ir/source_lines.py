"""The user's source line of a TIR statement, and of a line of generated MUSA C.

The frontend gives every statement it builds the `span` of the user's statement (`language/runtime.py`'s `at`);
a statement nested in a compound statement or a macro call carries a `SequentialSpan` whose last element is its
own line. Passes keep a statement's span where they replace it by another (`keep_span`, applied to every
structural_mutate callback on statements: `_wheel_patches.keep_statement_spans`). With the pass config
`tl.emit_line_directives` the printer writes `#line N "file.py"` before the code of each statement, and
`user_lines` reads them back: the one mapping from a generated line to the user's (file, line) that the kernel
object, the simulator's reports and tests use.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import re
from typing import Any

from tvm import ir, tirx

_DIRECTIVE = re.compile(r'^#line (\d+) "((?:[^"\\]|\\.)*)"$')


def user_line(span: Any) -> tuple[str, int] | None:
    """(file, line) of a span: a Span's own, a SequentialSpan's innermost (last); None without one."""
    if span is None:
        return None
    if isinstance(span, ir.SequentialSpan):
        spans = list(span.spans)
        if not spans:
            return None
        span = spans[-1]
    if span.source_name is None:
        return None
    return str(span.source_name.name), int(span.line)


_PARAMS: dict[type, tuple[str, ...] | None] = {}


def _constructor_fields(cls: type) -> tuple[str, ...] | None:
    """The fields a statement type's constructor takes before `span`; None if it takes no span."""
    if cls not in _PARAMS:
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        _PARAMS[cls] = tuple(params[:-1]) if params and params[-1] == "span" else None
    return _PARAMS[cls]


# AllocBuffer's Python constructor takes its fields as *args and refuses a SequentialSpan (the span of a statement
# nested in a compound statement or a macro); its FFI constructor takes (buffer, annotations, span) as they are.
_FFI_CONSTRUCTED: dict[type, tuple[tuple[str, ...], Any]] = {
    tirx.AllocBuffer: (("buffer", "annotations"), tirx._ffi_api.AllocBuffer)}

_IS_STATEMENT: dict[type, bool] = {}  # isinstance(x, tirx.Stmt) by x's class: Stmt is an ABC, each check ~1 us


def keep_span(old: Any, new: Any) -> Any:
    """`new` (what a pass made of statement `old`) with `old`'s span, if `new` is a statement without one."""
    if new is old:
        return new
    kind = type(new)
    is_statement = _IS_STATEMENT.get(kind)
    if is_statement is None:
        is_statement = _IS_STATEMENT[kind] = isinstance(new, tirx.Stmt)
    if not is_statement or new.span is not None:
        return new
    span = getattr(old, "span", None)
    if span is None:
        return new
    made_by_ffi = _FFI_CONSTRUCTED.get(kind)
    if made_by_ffi is not None:
        fields, make = made_by_ffi
        return make(*(getattr(new, f) for f in fields), span)
    fields = _constructor_fields(type(new))
    if fields is None:
        return new
    try:
        return type(new)(*(getattr(new, f) for f in fields), span=span)
    except (AttributeError, TypeError):  # a statement type whose constructor does not mirror its fields
        _PARAMS[type(new)] = None
        return new


STATEMENT_LINES_SHOWN = 6  # a longer statement is quoted by its first lines and " ..."


def statement_source(filename: str, line: int) -> str:
    """The Python statement that starts at `line` of `filename` as written, its lines stripped and joined by a
    space (a statement over several lines, `s[0] = (s[0] +` / `x)`, is quoted whole, up to STATEMENT_LINES_SHOWN
    lines); the line alone where the file does not parse or no simple statement starts there; "" without a
    source."""
    lines = linecache.getlines(filename)
    if not 0 < line <= len(lines):
        return ""
    last = _statement_ends(filename, "".join(lines)).get(line, line)
    shown = [text.strip() for text in lines[line - 1:min(last, line + STATEMENT_LINES_SHOWN - 1)]]
    return " ".join(shown) + (" ..." if last - line + 1 > STATEMENT_LINES_SHOWN else "")


@functools.lru_cache(maxsize=32)
def _statement_ends(filename: str, text: str) -> dict[int, int]:
    """First line -> last line of each simple (not compound) statement of a source text."""
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return {}
    compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.If,
                ast.With, ast.AsyncWith, ast.Try, getattr(ast, "TryStar", ast.Try), ast.Match)
    return {node.lineno: node.end_lineno for node in ast.walk(tree)
            if isinstance(node, ast.stmt) and not isinstance(node, compound) and node.end_lineno is not None}


def user_lines(text: str) -> dict[int, tuple[str, int]]:
    """Generated line (1-based, of `text`) -> the user's (file, line), from the `#line` directives in `text`: every
    line after a directive, as the C compiler numbers it, up to a directive naming a file that is not a Python
    source (the translation unit's own numbering again)."""
    out: dict[int, tuple[str, int]] = {}
    current: tuple[str, int] | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        match = _DIRECTIVE.match(line)
        if match is not None:
            filename = match.group(2).encode().decode("unicode_escape")
            current = (filename, int(match.group(1))) if filename.endswith(".py") else None
            continue
        if current is not None:
            out[number] = current
            current = (current[0], current[1] + 1)
    return out


def user_lines_of_plain(lined: str) -> dict[int, tuple[str, int]]:
    """`user_lines` numbered as the lines of `lined` with its `#line` directives removed: the side table of a source
    printed without directives (the same text, directive lines left out), from its print with them."""
    out: dict[int, tuple[str, int]] = {}
    mapping, plain = user_lines(lined), 0
    for number, line in enumerate(lined.split("\n"), start=1):
        if _DIRECTIVE.match(line):
            continue
        plain += 1
        if number in mapping:
            out[plain] = mapping[number]
    return out


def strip_line_directives(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not _DIRECTIVE.match(line))


def table_to_json(lines: dict[int, tuple[str, int]]) -> dict:
    """The side table as JSON: the files once, then [generated line, file index, user line] rows."""
    files = sorted({f for f, _ in lines.values()})
    index = {f: k for k, f in enumerate(files)}
    return {"files": files, "lines": [[g, index[f], u] for g, (f, u) in sorted(lines.items())]}


def table_from_json(data: dict) -> dict[int, tuple[str, int]]:
    files = data["files"]
    return {int(g): (files[k], int(u)) for g, k, u in data["lines"]}


def blank_line_directives(text: str) -> str:
    """`text` with each `#line` directive replaced by an empty line: the same line numbers, so that `__LINE__` (the
    simulator's reports) names the line of the generated source a user reads, not the user's."""
    return "\n".join("" if _DIRECTIVE.match(line) else line for line in text.split("\n"))


_NAMED_LINE = re.compile(r"line (\d+) of the (?:kernel|generated) source")  # bounds, uninitialised reads, watchdog
_RACE_LINE = re.compile(r"at line (\d+)")  # a race report: "... at line N ... (line numbers of the kernel source)"


def name_user_lines(message: str, lines: dict[int, tuple[str, int]]) -> str:
    """A simulator report that names lines of the generated source, with the user's line added to each: `line N of
    the kernel source` (bounds, uninitialised reads), `... of the generated source` (the watchdog), and a race
    report's `at line N` (it ends "(line numbers of the kernel source)")."""
    def add(match: re.Match) -> str:
        where = lines.get(int(match.group(1)))
        return match.group(0) if where is None else f"{match.group(0)}; {where[0]}:{where[1]} in the user's source"

    def add_to_race(match: re.Match) -> str:
        where = lines.get(int(match.group(1)))
        return match.group(0) if where is None else f"{match.group(0)} ({where[0]}:{where[1]})"

    message = _NAMED_LINE.sub(add, message)
    if "(line numbers of the kernel source)" in message:
        message = _RACE_LINE.sub(add_to_race, message)
    return message


def name_user_lines_of_build(message: str, built_name: str, lines: dict[int, tuple[str, int]]) -> str:
    """A compiler's message about the translation unit `built_name` (a file the simulator builds has the `#line`
    directives blanked, for its reports' sake), with each diagnostic at a line of a kernel located at the user's
    line, as the directives would have made the compiler print it: `k.checked.mu:57:5: error: ...` becomes
    `/home/me/k.py:31:5: error: ... (line 57 of the kernel source)`."""
    location = re.compile(rf"^(\S*{re.escape(built_name)}):(\d+):(?:(\d+):)?(.*)$", re.M)

    def relocate(match: re.Match) -> str:
        where = lines.get(int(match.group(2)))
        if where is None:
            return match.group(0)
        column = f"{match.group(3)}:" if match.group(3) else ""
        return f"{where[0]}:{where[1]}:{column}{match.group(4)} (line {match.group(2)} of the kernel source)"

    return location.sub(relocate, message)

