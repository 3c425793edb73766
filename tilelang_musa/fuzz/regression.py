"""Writes a shrunk failing description as a plain pytest file that rebuilds it and asserts it passes."""

import hashlib
import re
import textwrap
from pathlib import Path
from typing import Any

TEMPLATE = '''"""Fuzzer regression ({family}).

{summary}

Found by `{command}`, then shrunk.
The test asserts the fixed behaviour: the program compiles and its outputs match the torch reference on
{archs_text}."""

import pytest

from {module} import {cls}
from tilelang_musa.fuzz.runner import check

DESC = {desc}


{marker}@pytest.mark.parametrize("arch", {archs!r})
def test_{name}(arch):
    outcome = check(DESC, arch)
    assert outcome.status == "pass", outcome.detail
'''


def regression_source(desc: Any, archs: list[str], summary: str, command: str, xfail: str = "") -> str:
    """The pytest file for `desc`; `xfail` (a reason) marks a failure reported but not fixed yet (strict, so the
    marker must go when the fix lands)."""
    cls = type(desc)
    marker = f"@pytest.mark.xfail(strict=True, reason={xfail!r})\n" if xfail else ""
    summary = textwrap.fill(summary, 110, break_long_words=False, break_on_hyphens=False)
    module = "tilelang_musa.fuzz" + cls.__module__[len(__package__):]  # also from a snapshot under another name
    return TEMPLATE.format(family=desc.family, summary=summary, command=command, archs=list(archs),
                           archs_text=" and ".join(archs), module=module, cls=cls.__name__,
                           desc=_wrap(repr(desc)), marker=marker, name=test_name(desc))


def test_name(desc: Any) -> str:
    digest = hashlib.sha1(repr(desc).encode()).hexdigest()[:8]
    return f"{desc.family}_{digest}"


def write_regression(desc: Any, archs: list[str], summary: str, command: str, directory: Path,
                     xfail: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"test_{test_name(desc)}.py"
    path.write_text(regression_source(desc, archs, summary, command, xfail))
    return path


def _wrap(text: str, width: int = 110) -> str:
    """repr(desc) broken before keyword arguments so that lines stay under `width`."""
    parts = re.split(r"(?<=, )(?=\w+=)", text)
    lines, line = [], ""
    for part in parts:
        if line.strip() and len(line) + len(part) > width:
            lines.append(line.rstrip())
            line = "    "
        line += part
    lines.append(line)
    return "\n".join(lines)
