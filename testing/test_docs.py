"""The documentation's promises: every T.* name has a row in the language guide, the API reference documents
tilelang.compile, the README's example prints what the README says, and CI runs the README's commands.

The site itself (tutorials executed) is built by .ci/run with the README's `Docs:` command."""

import contextlib
import io
import re
from pathlib import Path

import pytest

import tilelang.language as T

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def documented_language_names() -> set[str]:
    """Names in the first cell of the language guide's table rows: | `T.a`, `T.b` | what they do |."""
    names = set()
    for line in (DOCS / "guide" / "language.md").read_text().splitlines():
        if line.startswith("| `T."):
            names |= set(re.findall(r"`T\.(\w+)`", line.split("|")[1]))
    return names


def test_every_language_name_has_a_row_in_the_language_guide():
    missing = [name for name in T.__all__ if name not in documented_language_names()]
    assert not missing, (f"T.* names without a row in docs/guide/language.md (add one: | `T.name` | what it does |,"
                         f" in the group where a user would look): {missing}")


def test_the_language_guide_documents_no_name_that_does_not_exist():
    stale = sorted(documented_language_names() - set(T.__all__))
    assert not stale, f"docs/guide/language.md documents names that are not in tilelang.language.__all__: {stale}"


def test_the_api_reference_has_a_page_for_tilelang_compile():
    page = (DOCS / "reference" / "api" / "tilelang.md").read_text()
    assert ".. autofunction:: tilelang.compile" in page
    assert "tilelang" in (DOCS / "reference" / "api" / "index.md").read_text()
    for module in ("jit", "language", "autotuner", "profiler"):
        assert f".. automodule:: tilelang.{module}" in (DOCS / "reference" / "api" / f"{module}.md").read_text()


def test_the_site_includes_every_top_level_page_by_a_glob():
    """Pages other branches add as docs/<topic>.md appear in the site without an edit of the index."""
    index = (DOCS / "index.md").read_text()
    assert re.search(r"```\{toctree\}\n(:[^\n]*\n)*:glob:\n(:[^\n]*\n)*\n\*\n```", index), index


def _readme_example() -> tuple[str, str]:
    text = README.read_text()
    section = text[text.index("## Example"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    output = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, output


def test_readme_example_prints_what_the_readme_shows(tmp_path, monkeypatch):
    code, expected = _readme_example()
    assert len(code.splitlines()) <= 25
    # A real file: @tilelang.jit reads the kernel's source.
    script = tmp_path / "readme_example.py"
    script.write_text(code)
    printed = io.StringIO()
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "sim")
    with contextlib.redirect_stdout(printed):
        exec(compile(script.read_text(), str(script), "exec", dont_inherit=True), {"__name__": "__readme__"})
    assert printed.getvalue() == expected


def _readme_command(label: str) -> str:
    for line in README.read_text().splitlines()[:6]:
        if line.startswith(label):
            return re.search(r"`([^`]*)`", line).group(1)
    raise AssertionError(f"README.md: no line starting with {label!r} among its first lines")


@pytest.mark.parametrize("label", ["Tests (fresh machine):", "Docs:"])
def test_ci_runs_the_readme_commands(label):
    command = _readme_command(label)
    ci = (ROOT / ".ci" / "run").read_text()
    if label.startswith("Tests"):  # .ci/run installs clang itself, only where it is missing
        command = command.split("&& ", 2)[2]
    else:  # the package is installed by then: .ci/run installs the docs extra's pins alone, then builds
        assert '["optional-dependencies"]["docs"]' in ci
        command = command.split("&& ")[-1]
    assert command in ci, f".ci/run must run the README's command: {command}"


def test_readme_is_short_and_starts_with_the_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150
    assert lines[0].startswith("Quick-start (fresh machine): `") and lines[2].startswith("Tests (fresh machine): `")
