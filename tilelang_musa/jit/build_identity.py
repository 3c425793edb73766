"""What the package's own code is, for the kernel cache key: one digest per process, cheap to get.

A kernel depends on the package's Python modules, its `tl_templates/` headers and its native library (target kind,
device printer); a change to any of them must miss every cached kernel. Two cases:

* An installed package (site-packages, no `pyproject.toml` beside it) carries its build identity in
  `tilelang_musa/_build_identity`: the content digest of those three (source_digest.py), computed once by the wheel
  build (CMakeLists.txt runs tools/write_build_identity.py after the native library is built). A process reads that
  one line and hashes nothing.
* A development checkout (the package beside `pyproject.toml`, an editable install, or an installation without the
  file) is identified by the content of its sources, which an edit changes at any moment: the same digest, computed
  in the process and memoized on disk by the files' stat (source_digest.py).

A templates tree or native library chosen by TILELANG_TEMPLATES / TILELANG_MUSA_NATIVE_LIB (another revision's,
for benchmarks) is not what the build identity describes: its content is hashed (memoized the same way) and added.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .._paths import PACKAGE_DIR, include_root, native_library
from .source_digest import MEMO_DIR, source_files, template_files, tree_digest

__all__ = ["BUILD_IDENTITY_FILE", "MEMO_DIR", "installed_build_identity", "package_identity"]

BUILD_IDENTITY_FILE = "_build_identity"  # in the installed package, written by the wheel build


def package_identity(memo_root: Path | None) -> str:
    """sha256 naming the package's code as installed (see the module docstring); `memo_root` is where the content
    digests of a development checkout are memoized (None: hash every time)."""
    built = installed_build_identity()
    if built is None:
        return "sources:" + tree_digest(source_files(str(PACKAGE_DIR), str(include_root()), str(native_library())),
                                        memo_root)
    parts = ["build:" + built]
    templates = include_root()
    if templates.resolve() != PACKAGE_DIR:  # TILELANG_TEMPLATES: headers the build identity does not describe
        parts.append("templates:" + tree_digest(template_files(str(templates)), memo_root))
    library = native_library()
    if library.resolve().parent != PACKAGE_DIR / "lib":  # TILELANG_MUSA_NATIVE_LIB
        parts.append("native:" + tree_digest([(str(library), "native")], memo_root))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def installed_build_identity() -> str | None:
    """The digest the wheel build wrote into an installed package; None for a checkout (its files change at any
    moment) or an installation without one."""
    if (PACKAGE_DIR.parent / "pyproject.toml").is_file():
        return None  # a source checkout, even one that an installed package's identity file was copied into
    try:
        digest = (PACKAGE_DIR / BUILD_IDENTITY_FILE).read_text().strip()
    except OSError:
        return None
    return digest if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) else None
