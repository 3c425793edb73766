"""Where the package's native pieces live, for an installed wheel and for a development checkout.

An installed wheel carries `lib/libtilelang_musa.so` and `tl_templates/` inside the package. A checkout installed
in editable mode keeps the built library in site-packages (scikit-build-core's redirect) and the templates in
`src/`; the source templates win there so that editing a header needs no reinstall.
"""

from __future__ import annotations

import os
import sysconfig
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
NATIVE_LIB_NAME = "libtilelang_musa.so"


def package_dirs() -> list[Path]:
    dirs = [PACKAGE_DIR]
    for key in ("platlib", "purelib"):
        candidate = Path(sysconfig.get_paths()[key]) / "tilelang_musa"
        if candidate not in dirs:
            dirs.append(candidate)
    return dirs


@cache
def native_library() -> Path:
    """The C++ library (target kind + device printer). `TILELANG_MUSA_NATIVE_LIB` overrides it for development."""
    override = os.environ.get("TILELANG_MUSA_NATIVE_LIB")
    if override:
        return Path(override)
    for d in package_dirs():
        candidate = d / "lib" / NATIVE_LIB_NAME
        if candidate.is_file():
            return candidate
    raise ImportError(
        f"tilelang_musa: {NATIVE_LIB_NAME} was not found in {[str(d / 'lib') for d in package_dirs()]}; "
        "install the package with `pip install .` so that its C++ library is built"
    )


@cache
def include_root() -> Path:
    """The directory that holds `tl_templates/` (generated sources `#include "tl_templates/musa/common.h"`).
    `TILELANG_TEMPLATES` overrides it for development (another revision's headers: benchmark/bench_simulator.py)."""
    override = os.environ.get("TILELANG_TEMPLATES")
    if override:
        if not (Path(override) / "tl_templates" / "musa").is_dir():
            raise ImportError(f"TILELANG_TEMPLATES={override} holds no tl_templates/musa")
        return Path(override)
    checkout = PACKAGE_DIR.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "tl_templates" / "musa").is_dir():
        return checkout / "src"
    for d in package_dirs():
        if (d / "tl_templates" / "musa").is_dir():
            return d
    raise ImportError("tilelang_musa: the tl_templates headers are missing from the installation")


def musa_templates() -> Path:
    return include_root() / "tl_templates" / "musa"


def simulator_headers() -> Path:
    return include_root() / "tl_templates" / "sim"
