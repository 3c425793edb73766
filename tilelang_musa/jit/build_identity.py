"""What the package's own code is, for the kernel cache key: one digest per process, cheap to get.

A kernel depends on the package's Python modules, its `tl_templates/` headers and its native library (target kind,
device printer); a change to any of them must miss every cached kernel. Two cases:

* An installed package (site-packages, no `pyproject.toml` beside it) is identified by its `.dist-info/RECORD`,
  written when the wheel was built with the sha256 of every file the wheel installs (those three included) and
  checked by pip at install time: the install-time build identity, one small file to hash.
* A development checkout (the package beside `pyproject.toml`, or an installation without a RECORD) is identified
  by the content of its sources, which an edit changes at any moment. Hashing them costs ~10 ms a process, so the
  content digest is memoized on disk (`<cache>/source_digests/`) under a key made of every file's path, size,
  mtime, ctime and inode: an edit changes its file's stat, misses the memo and the contents are hashed again.

A templates tree or native library chosen by TILELANG_TEMPLATES / TILELANG_MUSA_NATIVE_LIB (another revision's,
for benchmarks) is not what the RECORD describes: its content is hashed (memoized the same way) and added.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .._paths import PACKAGE_DIR, include_root, native_library

MEMO_DIR = "source_digests"  # in the kernel cache directory, beside the kernels' entries
# Folders of the package that no compile reads: editing the fuzzer must not turn every cached kernel into a miss.
_NOT_COMPILER = ("__pycache__", "fuzz")
_PACKAGE_NAME = "tilelang_musa"


def package_identity(memo_root: Path | None) -> str:
    """sha256 naming the package's code as installed (see the module docstring); `memo_root` is where the content
    digests of a development checkout are memoized (None: hash every time)."""
    record = installed_record()
    if record is None:
        return "sources:" + _tree_digest(_source_files(), memo_root)
    parts = ["record:" + hashlib.sha256(record.read_bytes()).hexdigest()]
    templates = include_root()
    if templates.resolve() != PACKAGE_DIR:  # TILELANG_TEMPLATES: headers the RECORD does not describe
        parts.append("templates:" + _tree_digest(_template_files(templates), memo_root))
    library = native_library()
    if library.resolve().parent != PACKAGE_DIR / "lib":  # TILELANG_MUSA_NATIVE_LIB
        parts.append("native:" + _tree_digest([(str(library), "native")], memo_root))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def installed_record() -> Path | None:
    """The RECORD of the wheel this package was installed from, when the package is an installed one."""
    site = PACKAGE_DIR.parent
    if (site / "pyproject.toml").is_file():
        return None  # a source checkout, even one that some other installation's RECORD sits beside
    try:
        found = [site / name / "RECORD" for name in os.listdir(site)
                 if name.startswith(_PACKAGE_NAME + "-") and name.endswith(".dist-info")]
    except OSError:
        return None
    if len(found) != 1 or not found[0].is_file():
        return None  # none, or several installations' records: which one is ours is unclear
    if f"\n{_PACKAGE_NAME}/_version.py," not in "\n" + found[0].read_text():
        return None  # not the wheel of this package's files (an editable install's RECORD lists no sources)
    return found[0]


def _source_files() -> list[tuple[str, str]]:
    """(path, label) of what a compile reads from a checkout: Python modules, templates, the native library."""
    return (_files(str(PACKAGE_DIR), (".py", ".pyx"), _PACKAGE_NAME) + _template_files(include_root())
            + [(str(native_library()), "native")])


def _template_files(root: Path) -> list[tuple[str, str]]:
    return _files(str(root / "tl_templates"), ("",), "tl_templates")


def _files(root: str, suffixes: tuple[str, ...], label: str) -> list[tuple[str, str]]:
    """(path, label/relative path) of the files under `root` ending in one of `suffixes` (symbolic links to folders
    are not followed, as os.walk does not). Plain strings and os.scandir: this runs in the first compile of every
    process, and pathlib, os.walk and os.path.relpath would double its cost."""
    found = []
    pending = [(root, f"{label}/.")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                if entry.name not in _NOT_COMPILER and not entry.is_symlink():
                    pending.append((entry.path, f"{label}/{entry.path[len(root) + 1:]}"))
            elif entry.name.endswith(suffixes):
                found.append((entry.path, f"{prefix}/{entry.name}"))
    return found


def _tree_digest(files: list[tuple[str, str]], memo_root: Path | None) -> str:
    """sha256 of the files' labels and contents, read from the memo when no file's stat changed since it was
    written there."""
    files = sorted(files, key=lambda item: item[1])
    signature = hashlib.sha256()
    for path, label in files:
        st = os.stat(path)
        signature.update(f"{label}\0{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode())
    memo = memo_root / MEMO_DIR / signature.hexdigest()[:32] if memo_root is not None else None
    if memo is not None:
        try:
            known = memo.read_text()
            if len(known) == 64:
                return known
        except OSError:
            pass
    content = hashlib.sha256()
    for path, label in files:
        with open(path, "rb") as f:
            content.update(label.encode() + b"\0" + f.read())
    digest = content.hexdigest()
    if memo is not None:
        _write_memo(memo, digest)
    return digest


def _write_memo(memo: Path, digest: str) -> None:
    """Written whole under a temporary name and renamed: a reader sees the full digest or no file."""
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".", dir=memo.parent)
        with os.fdopen(fd, "w") as f:
            f.write(digest)
        os.replace(temporary, memo)
    except OSError:
        pass  # a read-only cache directory: the next process hashes again
