"""The IR diff of each pass in a chain: which pass changed the program, and how.

    from tilelang.utils.pass_diff import pass_diff
    steps = pass_diff(func, [("Simplify", tvm.tirx.transform.Simplify()), tilelang.transform.ThreadSync("shared")])

Each pass runs on the module the previous one returned; a step records the TVMScript before and after, the unified
diff and its line counts. `mode` prints the steps ("terminal"), writes a self-contained HTML report ("html": one
side-by-side table per hunk, the unchanged lines between hunks folded behind "Show N lines" and a light/dark
toggle), or both. `DiffReport` does either as the steps come. TILELANG_PASS_DIFF applies the same to every pass a
script calls (pass_diff_hook.py), TL_LOWER_TRACE to every pass of a compile and its MUSA source (lower_trace.py).
"""

from __future__ import annotations

import difflib
import html
import re
import sys
from typing import Any, Sequence

import tvm

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _compute_diff(before: Sequence[str], after: Sequence[str], context: int = 3) -> list[str]:
    """The unified diff (without line terminators) from `before` to `after`; [] when they are equal."""
    return list(difflib.unified_diff(list(before), list(after), "before", "after", lineterm="", n=context))


def _count_changes(diff: Sequence[str]) -> tuple[int, int]:
    """(inserted lines, deleted lines) of a unified diff; its `---`/`+++` file headers are not changes."""
    inserted = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    deleted = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    return inserted, deleted


def _diff_rows(diff: Sequence[str]) -> list[dict]:
    """The diff as display rows, each {type: hunk|context|del|add, left, right, left_num, right_num}, numbered
    from the hunk headers (1-based line numbers of the before and after scripts)."""
    rows, left, right = [], 0, 0
    for line in diff:
        header = _HUNK.match(line)
        if header:
            left, right = int(header.group(1)), int(header.group(3))
            rows.append({"type": "hunk", "left": line, "right": "", "left_num": None, "right_num": None})
        elif line.startswith(("---", "+++")) and not rows:
            continue  # the file headers
        elif line.startswith("-"):
            rows.append({"type": "del", "left": line[1:], "right": "", "left_num": left, "right_num": None})
            left += 1
        elif line.startswith("+"):
            rows.append({"type": "add", "left": "", "right": line[1:], "left_num": None, "right_num": right})
            right += 1
        else:
            text = line[1:] if line.startswith(" ") else line
            rows.append({"type": "context", "left": text, "right": text, "left_num": left, "right_num": right})
            left, right = left + 1, right + 1
    return rows


def _split_rows_by_hunk(rows: Sequence[dict]) -> list[list[dict]]:
    """The rows cut before every hunk header: one list per hunk, each starting with its `@@` row."""
    hunks: list[list[dict]] = []
    for row in rows:
        if row["type"] == "hunk" or not hunks:
            hunks.append([])
        hunks[-1].append(row)
    return hunks


def _hidden_sections(hunks: list[list[dict]], before: Sequence[str], after: Sequence[str]) -> list[dict]:
    """The unchanged lines the diff leaves out: above each hunk (since the previous one) and below the last."""
    sections, left_seen, right_seen = [], 0, 0  # lines of each script already shown
    for index, hunk in enumerate(hunks):
        header = _HUNK.match(hunk[0]["left"]) if hunk[0]["type"] == "hunk" else None
        if header is None:
            continue
        left_start, right_start = int(header.group(1)), int(header.group(3))
        count = left_start - 1 - left_seen
        if count > 0:
            sections.append(_section(index, "before", "up", before, after, left_seen, right_seen, count))
        left_seen = max([r["left_num"] for r in hunk if r["left_num"]] or [left_start - 1])
        right_seen = max([r["right_num"] for r in hunk if r["right_num"]] or [right_start - 1])
    if hunks and len(before) > left_seen:
        sections.append(_section(len(hunks) - 1, "after", "down", before, after, left_seen, right_seen,
                                 len(before) - left_seen))
    return sections


def _section(hunk: int, position: str, direction: str, before, after, left0: int, right0: int, count: int) -> dict:
    lines = [{"left": before[left0 + k], "right": after[right0 + k] if right0 + k < len(after) else "",
              "left_num": left0 + k + 1, "right_num": right0 + k + 1} for k in range(count)]
    return {"hunk_idx": hunk, "position": position, "direction": direction, "count": count, "lines": lines}


def _table(rows: Sequence[dict]) -> str:
    cells = []
    for row in rows:
        kind = row.get("type", "context")
        if kind == "hunk":
            cells.append(f'<tr class="hunk"><td colspan="4">{html.escape(row["left"])}</td></tr>')
            continue
        num = [("" if row[k] is None else str(row[k])) for k in ("left_num", "right_num")]
        cells.append(f'<tr class="{kind}"><td class="num">{num[0]}</td><td class="code left">'
                     f'{html.escape(row["left"])}</td><td class="num">{num[1]}</td><td class="code right">'
                     f'{html.escape(row["right"])}</td></tr>')
    return '<table class="diff-table">' + "".join(cells) + "</table>"


def _render_expand_details(sections: Sequence[dict]) -> dict[int, tuple[str, str]]:
    """For each hunk index, the HTML of its folded unchanged lines (above it, below it): "" where there are none."""
    rendered: dict[int, list[str]] = {}
    for section in sections:
        slot = rendered.setdefault(section["hunk_idx"], ["", ""])
        where = "above" if section["position"] == "before" else "below"
        slot[0 if section["position"] == "before" else 1] = (
            f'<details class="expand-details"><summary>Show {section["count"]} lines {where}</summary>'
            f'{_table(section["lines"])}</details>')
    return {index: (pair[0], pair[1]) for index, pair in rendered.items()}


_STYLE = """
body { font-family: sans-serif; margin: 0; background: #fff; color: #222; }
body.dark { background: #1e1e1e; color: #ddd; }
.toolbar { position: sticky; top: 0; padding: 8px; background: #eee; display: flex; gap: 8px; align-items: center; }
body.dark .toolbar { background: #333; }
.pass-section { margin: 8px; border: 1px solid #bbb; }
.pass-section > summary { padding: 4px; cursor: pointer; font-weight: bold; }
.diff-table { border-collapse: collapse; width: 100%; font-family: monospace; font-size: 12px; }
.diff-table td { padding: 0 4px; white-space: pre; vertical-align: top; }
.diff-table .num { color: #888; text-align: right; width: 3em; }
tr.add .right { background: #dfd; } tr.del .left { background: #fdd; } tr.hunk td { background: #eef; color: #557; }
body.dark tr.add .right { background: #244024; } body.dark tr.del .left { background: #4a2424; }
body.dark tr.hunk td { background: #2a2a44; color: #aac; }
.expand-details > summary { color: #558; cursor: pointer; font-size: 12px; padding: 2px 8px; }
"""

_SCRIPT = """
function setAll(open) { document.querySelectorAll('details').forEach(d => d.open = open); }
function toggleTheme(btn) { const dark = document.body.classList.toggle('dark'); btn.textContent = dark ? 'Light' : 'Dark'; }
"""


def _generate_html(steps: Sequence[dict], path: str) -> None:
    """Write `steps` (as pass_diff returns them) as one self-contained HTML report at `path`."""
    changed = sum(1 for s in steps if s["changed"])
    inserted, deleted = sum(s["insertions"] for s in steps), sum(s["deletions"] for s in steps)
    parts = [f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Pass Diff Report</title>'
             f'<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>',
             f'<div class="toolbar"><b>Pass Diff Report</b><span>{len(steps)} passes, {changed} changed, '
             f'+{inserted} -{deleted}</span><button onclick="setAll(true)">Expand All</button>'
             '<button onclick="setAll(false)">Collapse All</button>'
             '<button class="theme-btn" onclick="toggleTheme(this)">Light</button></div>']
    for number, step in enumerate(steps, 1):
        title = html.escape(f"Pass {number}: {step['name']}")
        if not step["changed"]:
            parts.append(f'<details class="pass-section"><summary>{title} (no changes)</summary></details>')
            continue
        before, after = step["before_script"].splitlines(), step["after_script"].splitlines()
        hunks = _split_rows_by_hunk(_diff_rows(step["diff_lines"]))
        folded = _render_expand_details(_hidden_sections(hunks, before, after))
        body = []
        for index, hunk in enumerate(hunks):
            above, below = folded.get(index, ("", ""))
            body += [above, _table(hunk), below]
        parts.append(f'<details class="pass-section" open><summary>{title} (+{step["insertions"]} '
                     f'-{step["deletions"]})</summary>{"".join(body)}</details>')
    parts.append("</body></html>")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(parts))


def _print_terminal(steps: Sequence[dict], first_number: int = 1, stream: Any = None) -> None:
    stream = stream or sys.stdout
    color = getattr(stream, "isatty", lambda: False)()
    paint = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    for number, step in enumerate(steps, first_number):
        if not step["changed"]:
            print(f"=== Pass {number}: {step['name']} (no changes)", file=stream)
            continue
        print(f"=== Pass {number}: {step['name']} (+{step['insertions']} -{step['deletions']})", file=stream)
        for line in step["diff_lines"]:
            code = paint.get(line[:1]) if color else None
            print(f"{code}{line}\033[0m" if code else line, file=stream)


def _script(mod: Any) -> str:
    return mod.script() if hasattr(mod, "script") else str(mod)


def _as_module(program: Any) -> tvm.IRModule:
    if isinstance(program, tvm.IRModule):
        return program
    if isinstance(program, tvm.tirx.PrimFunc):
        name = program.attrs["global_symbol"] if program.attrs and "global_symbol" in program.attrs else "main"
        return tvm.IRModule({str(name): program})
    raise TypeError(f"pass_diff: expected a PrimFunc or an IRModule, got {type(program).__name__}")


def _named(passes: Any) -> list[tuple[str, Any]]:
    if isinstance(passes, tvm.ir.transform.Pass):
        passes = [passes]
    named = []
    for entry in passes:
        name, p = entry if isinstance(entry, tuple) else (None, entry)
        if not isinstance(p, tvm.ir.transform.Pass):
            raise TypeError(f"pass_diff: expected TVM passes (or (name, pass) pairs), got {type(p).__name__}")
        named.append((name or p.info.name or type(p).__name__, p))
    return named


def diff_step(name: str, before: str, after: str, context: int = 3) -> dict:
    """One step's record, from the scripts before and after the pass."""
    diff = _compute_diff(before.splitlines(), after.splitlines(), context)
    inserted, deleted = _count_changes(diff)
    return {"name": name, "before_script": before, "after_script": after, "diff_lines": diff,
            "insertions": inserted, "deletions": deleted, "changed": bool(diff)}


class DiffReport:
    """Steps as passes produce them: each printed as it comes ("terminal", "both": to `stream`, default stdout) and
    the HTML report at `html_path` rewritten after each ("html", "both"), so that a compile which fails halfway still
    leaves the steps before it."""

    def __init__(self, mode: str, html_path: str | None = None, stream: Any = None) -> None:
        if mode not in ("terminal", "html", "both"):
            raise ValueError(f"pass diff: mode must be 'terminal', 'html' or 'both'; got {mode!r}")
        self.mode, self.html_path, self.stream = mode, html_path, stream
        self.steps: list[dict] = []

    def add(self, step: dict) -> None:
        self.steps.append(step)
        if self.mode in ("terminal", "both"):
            _print_terminal([step], first_number=len(self.steps), stream=self.stream)
        if self.mode in ("html", "both") and self.html_path is not None:
            _generate_html(self.steps, self.html_path)


def pass_diff(program: Any, passes: Any, mode: str = "terminal", html_path: str | None = None,
              context: int = 3) -> list[dict]:
    """Run `passes` (a Pass, or a list of passes or (name, pass) pairs) in order on `program` (a PrimFunc or an
    IRModule) and return one step per pass: {name, before_script, after_script, diff_lines, insertions,
    deletions, changed}. `mode`: "terminal" prints the diffs, "html" writes the report to `html_path`
    (default ./pass_diff.html), "both" does both; `context` is the number of unchanged lines around each change."""
    if mode not in ("terminal", "html", "both"):
        raise ValueError(f"pass_diff: mode must be 'terminal', 'html' or 'both'; got {mode!r}")
    mod, report = _as_module(program), DiffReport(mode, html_path or "pass_diff.html")
    for name, p in _named(passes):
        before = _script(mod)
        mod = p(mod)
        report.add(diff_step(name, before, _script(mod), context))
    return report.steps
