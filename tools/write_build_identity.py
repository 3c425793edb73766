"""Writes the build identity of the package being built (tilelang_musa/_build_identity in the wheel): the content
digest of its Python modules, its tl_templates headers and the native library just built, as a checkout's kernel
cache key computes it (tilelang_musa/jit/source_digest.py, loaded by path: the package cannot be imported while it
is being built). CMakeLists.txt runs it after the native library is linked.

    python tools/write_build_identity.py --package tilelang_musa --templates src --native build/libtilelang_musa.so \
        --out build/build_identity
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _source_digest():
    spec = importlib.util.spec_from_file_location("_tilelang_musa_source_digest",
                                                  ROOT / "tilelang_musa" / "jit" / "source_digest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", required=True, help="the tilelang_musa package directory")
    parser.add_argument("--templates", required=True, help="the directory holding tl_templates/")
    parser.add_argument("--native", required=True, help="the built libtilelang_musa.so")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    digests = _source_digest()
    digest = digests.tree_digest(digests.source_files(os.path.abspath(args.package), os.path.abspath(args.templates),
                                                      os.path.abspath(args.native)), None)
    out = Path(args.out)
    temporary = out.with_name(out.name + ".tmp")
    temporary.write_text(digest + "\n")
    os.replace(temporary, out)


if __name__ == "__main__":
    main()
