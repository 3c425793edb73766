"""Exported kernels: one shared-library file that a fresh process loads back as a JITKernel without lowering.

`kernel.export_library("k.so")` writes the kernel's library (what its backend built: the mcc library of a MUSA
device, or the simulator's) followed by a payload: the kernel's stage files (metadata.json, the MUSA source, the
host stage, the TVMScript) as JSON, its length, and a magic trailer. The file stays a valid shared library: the
dynamic loader maps the segments its headers name and never reads bytes past them, so `dlopen("k.so")` works
as it would on the library alone (the AOT C wrapper, tools/aot, loads the same bytes). `load_library("k.so")` reads
the payload back, unpacks the entry into a fresh directory (as a compile with the cache off does) and returns
`JITKernel.from_database` of it (kernel.py).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

from .. import env
from ..errors import TileLangError
from .stages import METADATA

MAGIC = b"TILELANG-MUSA-KERNEL-1\0\0"  # 24 bytes: the last ones of an exported file
_LENGTH = struct.Struct("<Q")  # the payload's length, just before the magic
_TRAILER = _LENGTH.size + len(MAGIC)
FORMAT = 1  # of the payload


def write_export(directory: Path, stage_files: list[str], library: str, path: str | os.PathLike) -> Path:
    """Write the library `directory/library` with metadata.json and the `stage_files` of `directory` appended to
    `path` (directories created as needed)."""
    files = {METADATA: (directory / METADATA).read_text()}
    for name in stage_files:
        if name != library and (directory / name).is_file():
            files[name] = (directory / name).read_text()
    payload = json.dumps({"format": FORMAT, "library": library, "files": files}).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes((directory / library).read_bytes() + payload + _LENGTH.pack(len(payload)) + MAGIC)
    os.replace(partial, path)  # a reader never sees half a file
    return path


def read_export(path: str | os.PathLike) -> tuple[bytes, dict]:
    """(the library's bytes, the payload) of an exported file; TileLangError naming the file if it is none."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TileLangError(f"load_library: cannot read {path}: {err.strerror}") from None
    if len(data) < _TRAILER or not data.endswith(MAGIC):
        raise TileLangError(f"load_library: {path} is not a kernel exported by JITKernel.export_library "
                            "(no tilelang_musa payload at its end)")
    (length,) = _LENGTH.unpack_from(data, len(data) - _TRAILER)
    start = len(data) - _TRAILER - length
    if start < 0:
        raise TileLangError(f"load_library: {path} is truncated (its payload claims {length} bytes)")
    payload = json.loads(data[start:len(data) - _TRAILER])
    if payload.get("format") != FORMAT:
        raise TileLangError(f"load_library: {path} has export format {payload.get('format')!r}; this tilelang_musa "
                            f"reads {FORMAT}")
    return data[:start], payload


def unpack_export(path: str | os.PathLike) -> Path:
    """A fresh directory (in TILELANG_TMP_DIR, as a compile with the cache off makes) holding the kernel entry
    exported to `path`: its library, metadata.json and stage files."""
    library, payload = read_export(path)
    root = env.TMP_DIR.path()
    root.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="tilelang_loaded_", dir=root))
    for name, text in payload["files"].items():
        if Path(name).name != name:  # file names only: a payload never writes outside its directory
            raise TileLangError(f"load_library: {path} holds a file named {name!r}, which is not a plain name")
        (directory / name).write_text(text)
    (directory / payload["library"]).write_bytes(library)
    return directory
