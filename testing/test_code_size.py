"""Every class and function in tilelang_musa/ fits in a reader's mind: no class over 400 lines, no function over 80
(nested functions count in the function that holds them). Exceptions are listed below, each with its reason; an
exception that no longer needs to be one must leave the list."""

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "tilelang_musa"
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80

ALLOWED = {
    # A declarative table: the pipeline's phases and passes in order, one comment per pass saying why it is there.
    ("transform/pipeline.py", "lowering_phases"): "the pipeline table",
}


def _oversized() -> dict:
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        where = path.relative_to(PACKAGE_DIR).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else \
                MAX_FUNCTION_LINES if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                found[(where, node.name)] = node.end_lineno - node.lineno + 1
    return found


def test_no_class_over_400_lines_and_no_function_over_80():
    oversized = {key: lines for key, lines in _oversized().items() if key not in ALLOWED}
    assert not oversized, "split these (file, name): lines: " + ", ".join(
        f"{where} {name}: {lines}" for (where, name), lines in sorted(oversized.items()))


def test_every_exception_is_still_needed():
    assert set(ALLOWED) <= set(_oversized()), "no longer oversized, drop from ALLOWED: " + \
        ", ".join(f"{where} {name}" for where, name in sorted(set(ALLOWED) - set(_oversized())))
