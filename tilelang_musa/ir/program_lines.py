"""The user's lines of a program's statements, and a line table moved from one program to a structurally equal one.

The kernel cache's key leaves spans out (the structural hash ignores them; only the first statement's place is in
it: cache.py), so a kernel cached for one program serves a structurally equal one whose statements are on other
lines (an edit inside the kernel, a macro moved). The entry's table of generated lines -> user lines (the
simulator's reports) names the building program's lines; `program_lines` of both programs, statement by statement
in the same order, say where each of those lines went, and `moved_table` rewrites the table with them. A line that
went to two places (the new program split what was one line) is left out: a report then names only the generated
line, never a wrong one of the user's.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .source_lines import user_line


def program_lines(func: tirx.PrimFunc) -> list[tuple[str, int] | None]:
    """(file, line) of the function's `def` and of each statement of its body, in walk order (None: no span);
    ~0.5 ms for a flash-attention program."""
    found = [user_line(getattr(func, "span", None))]
    tvm_ffi.structural_walk(func.body, [(tirx.Stmt, lambda stmt: found.append(user_line(stmt.span)))])
    return found


def lines_from_json(data: list) -> list[tuple[str, int] | None]:
    return [None if at is None else (str(at[0]), int(at[1])) for at in data]


def moved_table(table: dict[int, tuple[str, int]], built: list, own: list) -> dict[int, tuple[str, int]]:
    """`table` (generated line -> the building program's user line) with each user line moved to where the same
    statement of the other program is (`built`, `own`: program_lines of the two). Programs of another shape: empty."""
    if built == own:
        return table
    if len(built) != len(own):
        return {}
    moves: dict[tuple[str, int], set] = {}
    for old, new in zip(built, own):
        if old is not None:
            moves.setdefault(old, set()).add(new)
    moved = {}
    for line, at in table.items():
        targets = moves.get(at, set())
        if len(targets) == 1 and None not in targets:
            moved[line] = next(iter(targets))
    return moved
