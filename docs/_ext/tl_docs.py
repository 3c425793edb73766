"""Sphinx directives of the TileLang-MUSA docs.

- ``tl-run``: a Python block that runs while the page is read (the tutorials). The blocks of one page share a
  namespace, like a notebook's cells; the page shows the code, what it printed, and the pictures it saved through
  ``docs_image("name.png")``. An exception fails the build, naming the page and the block.
- ``tl-pass-configs``: the table of every ``tilelang.PassConfigKey`` from the registry (ir/pass_config.py), with
  the ``CompileOptions`` field that reads it (ir/options.py: its name, default and doc).
- ``tl-env-vars``: the table of every environment variable declared in ``tilelang_musa/env.py``.
"""

from __future__ import annotations

import contextlib
import io
import time
import traceback
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

GENERATED = "_generated"  # under docs/, git-ignored: the blocks' source files and the pictures they save


class RunPython(SphinxDirective):
    """Run the block in the page's namespace; show it, its printed output and its pictures."""

    has_content = True
    option_spec = {"hide-code": directives.flag, "hide-output": directives.flag}

    def run(self):
        env = self.env
        code = "\n".join(self.content) + "\n"
        out_dir = Path(env.srcdir) / GENERATED
        out_dir.mkdir(exist_ok=True)
        stem = env.docname.replace("/", "__")
        index = env.temp_data["tl_run_count"] = env.temp_data.get("tl_run_count", 0) + 1
        # A real file, so that inspect.getsource (which @tilelang.jit and @T.prim_func parse) finds the source.
        source = out_dir / f"{stem}_{index}.py"
        source.write_text(code)
        images: list[Path] = []

        def docs_image(name: str) -> str:
            path = out_dir / stem / name
            path.parent.mkdir(exist_ok=True)
            images.append(path)
            return str(path)

        # REPO_ROOT: the checkout the docs are built from (a tutorial may use its benchmark/ or examples/ scripts).
        namespace = env.temp_data.setdefault("tl_run_namespace",
                                             {"__name__": "__docs__", "REPO_ROOT": Path(env.srcdir).parent})
        namespace["docs_image"] = docs_image
        printed = io.StringIO()
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, str(source), "exec", dont_inherit=True), namespace)  # not this file's __future__ flags
        except BaseException as err:  # a failing tutorial fails the build
            raise ExtensionError(f"{env.docname}: tl-run block {index} (line {self.lineno}) raised:\n"
                                 f"{traceback.format_exc()}") from err
        elapsed = time.perf_counter() - start
        _timings.append((env.docname, index, elapsed))

        result: list[nodes.Node] = []
        if "hide-code" not in self.options:
            block = nodes.literal_block(code, code, language="python")
            result.append(block)
        text = printed.getvalue()
        if text and "hide-output" not in self.options:
            out = nodes.literal_block(text, text, language="text", classes=["tl-run-output"])
            result.append(nodes.rubric(text="Output"))
            result.append(out)
        for path in images:
            if not path.is_file():
                raise ExtensionError(f"{env.docname}: tl-run block {index} asked for {path.name} but did not "
                                     "write it")
            uri = "/" + str(path.relative_to(env.srcdir))  # absolute within the source tree
            result.append(nodes.image(uri=uri, alt=path.name, candidates={"*": uri}))
        return result


_timings: list[tuple[str, int, float]] = []


def _report_timings(app, exception):
    if exception is None and _timings:
        total = sum(t for *_, t in _timings)
        slowest = sorted(_timings, key=lambda item: -item[2])[:5]
        print(f"tl-run: {len(_timings)} blocks executed in {total:.1f} s; slowest: "
              + ", ".join(f"{doc}#{i} {t:.1f} s" for doc, i, t in slowest))


def _table(header: list[str], rows: list[list[str]]) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    body = nodes.tbody()
    group += body
    for cells, section, literal_first in ((header, head, False), *((row, body, True) for row in rows)):
        row_node = nodes.row()
        for i, cell in enumerate(cells):
            entry = nodes.entry()
            para = nodes.paragraph()
            para += nodes.literal(cell, cell) if (literal_first and i < 2 and cell) else nodes.Text(cell)
            entry += para
            row_node += entry
        section += row_node
    return table


class PassConfigTable(SphinxDirective):
    """Every PassConfigKey: its name(s), its string, and the option that reads it (or why nothing does)."""

    def run(self):
        from tilelang_musa.ir import options
        from tilelang_musa.ir import pass_config as pc

        aliases: dict = {}
        for name, member in pc.PassConfigKey.__members__.items():
            aliases.setdefault(member, []).append(name)
        rows = []
        for key, names in aliases.items():
            if key in pc.WITHOUT_EFFECT:
                kind = "warns: " + pc.WITHOUT_EFFECT[key]
            elif key in pc.SAME_EFFECT_AS:
                kind = f"effect: the same as {pc.SAME_EFFECT_AS[key].name}"
            else:
                f = options.field_of(key)
                kind = f"effect: CompileOptions.{f.name} (default {f.default!r}): {f.metadata['doc']}"
            rows.append([" / ".join(names), key.value, kind])
        return [_table(["Name", "String", "On MUSA"], rows)]


class EnvVarTable(SphinxDirective):
    """Every environment variable declared in tilelang_musa/env.py, with its meaning and default."""

    def run(self):
        from tilelang_musa import env as tl_env

        rows = []
        for var in tl_env.ALL:
            default = var.default
            if callable(default):
                default = "(derived)"
            elif default:
                default = default.replace(str(Path.home()), "~")  # the reader's home, not the builder's
            rows.append([var.name, default or "", var.doc])
        return [_table(["Variable", "Default", "Meaning"], rows)]


def _docstring_as_written(app, what, name, obj, options, lines):
    """Show each docstring as the source has it (a literal block).

    The docstrings are written for reading in the code, by many hands and in several styles; read as
    reStructuredText, a `|x|` or an indented example is an error that would fail the -W build.
    """
    text = [line.rstrip() for line in lines]
    while text and not text[-1]:
        text.pop()
    if not text:
        return
    lines[:] = ["::", ""] + ["   " + line if line else "" for line in text] + [""]


def setup(app):
    app.connect("autodoc-process-docstring", _docstring_as_written)
    app.add_directive("tl-run", RunPython)
    app.add_directive("tl-pass-configs", PassConfigTable)
    app.add_directive("tl-env-vars", EnvVarTable)
    app.connect("build-finished", _report_timings)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
