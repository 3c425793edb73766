"""The content digest of the package's compiler sources: the Python modules, the `tl_templates/` headers and the
native library, as (label, content) pairs. Standard library only: the wheel build runs this file by its path
(tools/write_build_identity.py, from CMakeLists.txt) before the package can be imported, and a checkout's
kernel cache key runs it through build_identity.py, so both name the same files the same way.

The digest of a checkout is memoized on disk (`<memo_root>/source_digests/`) under a key made of every file's path,
size, mtime, ctime and inode: an edit changes its file's stat, misses the memo and the contents are hashed again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

MEMO_DIR = "source_digests"  # in the kernel cache directory, beside the kernels' entries
# Folders of the package that no compile reads: editing the fuzzer must not turn every cached kernel into a miss.
_NOT_COMPILER = ("__pycache__", "fuzz")
PACKAGE_NAME = "tilelang_musa"


def source_files(package_dir: str, templates_root: str, native: str) -> list[tuple[str, str]]:
    """(path, label) of what a compile reads: the package's Python modules (and the launcher's .pyx), the headers
    under `templates_root/tl_templates`, the native library."""
    return (files(package_dir, (".py", ".pyx"), PACKAGE_NAME) + template_files(templates_root)
            + [(native, "native")])


def template_files(root: str) -> list[tuple[str, str]]:
    return files(os.path.join(root, "tl_templates"), ("",), "tl_templates")


def files(root: str, suffixes: tuple[str, ...], label: str) -> list[tuple[str, str]]:
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


def tree_digest(found: list[tuple[str, str]], memo_root: Path | None) -> str:
    """sha256 of the files' labels and contents, read from the memo when no file's stat changed since it was
    written there (`memo_root` None: hashed every time)."""
    found = sorted(found, key=lambda item: item[1])
    memo = None
    if memo_root is not None:
        signature = hashlib.sha256()
        for path, label in found:
            st = os.stat(path)
            signature.update(f"{label}\0{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n"
                             .encode())
        memo = Path(memo_root) / MEMO_DIR / signature.hexdigest()[:32]
        try:
            known = memo.read_text()
            if len(known) == 64:
                return known
        except OSError:
            pass
    content = hashlib.sha256()
    for path, label in found:
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
