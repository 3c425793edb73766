"""TILELANG_PASS_DIFF: the IR diff of every pass a program goes through, without changing the program.

`install_pass_diff_hook()` (called by tilelang.compile while the variable is set, or by hand) wraps
`tvm.ir.transform.Pass.__call__`, so every pass that is called — each of the lowering pipeline's passes, or
one a script runs itself — records its step (pass_diff.py); _wheel_patches.py makes the replacement. Only the
outermost call is diffed: a pass that runs other passes inside it is one step. Terminal mode prints each step as
it happens; html mode rewrites one report, TILELANG_PASS_DIFF_OUTPUT/pass_diff_<time>_<pid>.html, after each step. `uninstall_pass_diff_hook()` restores TVM.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ... import _wheel_patches, env
from .pass_diff import DiffReport, _script, diff_step

_report: DiffReport | None = None
_depth = 0


def _diffed_call(original: Any, self: Any, mod: Any) -> Any:
    global _depth
    if _depth:
        return original(self, mod)
    _depth += 1
    try:
        before = _script(mod)
        result = original(self, mod)
        step = diff_step(self.info.name or type(self).__name__, before, _script(result))
    finally:
        _depth -= 1
    if _report is not None:
        _report.add(step)
    return result


def install_pass_diff_hook() -> None:
    """Start diffing every pass call, if TILELANG_PASS_DIFF asks for it; a no-op when it does not, or when the
    hook is already installed."""
    global _report
    mode = env.get_pass_diff_mode()
    if mode is None or "tvm.ir.transform.Pass.__call__" in _wheel_patches.applied():
        return
    html_path = None
    if mode in ("html", "both"):
        directory = os.fspath(env.PASS_DIFF_OUTPUT.path())
        os.makedirs(directory, exist_ok=True)
        html_path = os.path.join(directory, f"pass_diff_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}.html")
    _report = DiffReport(mode, html_path)
    _wheel_patches.replace_pass_call(_diffed_call)


def uninstall_pass_diff_hook() -> None:
    """Stop diffing: TVM's Pass.__call__ again. Safe to call when nothing is installed."""
    global _report
    _wheel_patches.restore_pass_call()
    _report = None
