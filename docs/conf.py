"""Sphinx configuration of the TileLang-MUSA documentation (MyST Markdown pages, the Furo theme).

Build: `sphinx-build -W --keep-going -b html docs docs/_build/html` with the package installed (`pip install ".[docs]"`).
The tutorials execute in the CPU simulator while the pages are read (docs/_ext/tl_docs.py).
"""

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

# The tutorials run on the simulator, whatever the machine has, unless the caller chose otherwise.
os.environ.setdefault("TILELANG_EXECUTION_BACKEND", "sim")

import tilelang  # noqa: E402

project = "TileLang-MUSA"
author = "TileLang-MUSA developers"
copyright = "TileLang-MUSA developers"
release = tilelang.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "tl_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/*.py", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# Pages written for reading in the repository (docs/*.md, also those other branches add) link to source files, may
# skip heading levels and may name a code block's language in a way Pygments does not know; none of that is an error
# of the site (the block is shown unhighlighted).
suppress_warnings = ["myst.header", "myst.xref_missing", "misc.highlighting_failure"]

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = f"TileLang-MUSA {release}"
html_static_path = []
