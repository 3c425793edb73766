"""The package identity in the kernel cache key (jit/build_identity.py): an installed package is named by the digest
its wheel build wrote (tools/write_build_identity.py); a checkout by its sources' content, memoized by their stat, so
that an edit is never served a stale kernel."""

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tilelang_musa.jit import build_identity as bi
from tilelang_musa.jit.source_digest import source_files

TOOL = Path(__file__).resolve().parents[1] / "tools" / "write_build_identity.py"


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_memo_serves_unchanged_files_and_an_edit_misses_it(tmp_path):
    header = _write(tmp_path / "src" / "gemm.h", "int a;\n")
    files = [(str(header), "tl_templates/./gemm.h")]
    memo = tmp_path / "cache"
    first = bi.tree_digest(files, memo)
    assert first == bi.tree_digest(files, None)  # the memo holds the content digest, nothing else
    [written] = (memo / bi.MEMO_DIR).iterdir()
    written.write_text("f" * 64)
    assert bi.tree_digest(files, memo) == "f" * 64  # unchanged stat: the memo answers, nothing is read
    stat = header.stat()
    time.sleep(0.05)
    header.write_text("int b;\n")  # same size; its mtime is set back below: the ctime still moves
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = bi.tree_digest(files, memo)
    assert edited not in (first, "f" * 64)
    assert edited == bi.tree_digest(files, None)


def test_a_read_only_memo_directory_only_costs_the_hashing(tmp_path):
    header = _write(tmp_path / "gemm.h", "int a;\n")
    blocked = _write(tmp_path / "cache", "a file where the memo directory would go")
    assert bi.tree_digest([(str(header), "h")], blocked) == bi.tree_digest([(str(header), "h")], None)


def _fake_sources(root):
    """A package tree as the wheel build reads it: a pass, a header and a native library."""
    package = root / "tilelang_musa"
    _write(package / "_version.py", "__version__ = 'x'\n")
    _write(package / "transform" / "some_pass.py", "def some_pass(func):\n    return func\n")
    _write(root / "src" / "tl_templates" / "musa" / "common.h", "// common\n")
    _write(package / "lib" / "libtilelang_musa.so", "ELF")
    return package


def _build_identity_of(root):
    """What the wheel build writes for the tree at `root` (CMakeLists.txt runs this tool)."""
    out = root / "build_identity"
    subprocess.run([sys.executable, str(TOOL), "--package", str(root / "tilelang_musa"), "--templates",
                    str(root / "src"), "--native", str(root / "tilelang_musa" / "lib" / "libtilelang_musa.so"),
                    "--out", str(out)], check=True, capture_output=True, timeout=60)
    return out.read_text().strip()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """site-packages with the package (templates and native library inside) and the identity its build wrote."""
    package = _fake_sources(tmp_path / "site")
    shutil.copytree(tmp_path / "site" / "src" / "tl_templates", package / "tl_templates")
    identity = _write(package / bi.BUILD_IDENTITY_FILE, _build_identity_of(tmp_path / "site") + "\n")
    monkeypatch.setattr(bi, "PACKAGE_DIR", package)
    monkeypatch.setattr(bi, "include_root", lambda: package)
    monkeypatch.setattr(bi, "native_library", lambda: package / "lib" / "libtilelang_musa.so")
    return package, identity


def test_an_installed_package_is_named_by_its_build_identity_and_hashes_nothing(installed, tmp_path, monkeypatch):
    package, identity = installed
    assert bi.installed_build_identity() == identity.read_text().strip()
    hashed = []
    monkeypatch.setattr(bi, "tree_digest", lambda *args: hashed.append(args) or "0" * 64)
    before = bi.package_identity(tmp_path / "cache")
    assert not hashed and not (tmp_path / "cache").exists()  # nothing hashed, nothing memoized
    identity.write_text("c" * 64 + "\n")  # another build installed in its place
    assert bi.package_identity(tmp_path / "cache") != before


def test_the_build_identity_changes_with_a_template_a_pass_and_the_library(tmp_path):
    """Installed mode's key changes whenever the sources that decide a kernel do: the wheel build's digest after
    an edit of a header, of a pass and of the native library, each differs from all before it."""
    root = tmp_path / "tree"
    package = _fake_sources(root)
    seen = [_build_identity_of(root)]
    _write(root / "src" / "tl_templates" / "musa" / "common.h", "// common, edited\n")
    seen.append(_build_identity_of(root))
    _write(package / "transform" / "some_pass.py", "def some_pass(func):\n    return func.with_attr('x', 1)\n")
    seen.append(_build_identity_of(root))
    _write(package / "lib" / "libtilelang_musa.so", "ELF2")
    seen.append(_build_identity_of(root))
    (package / "fuzz").mkdir()
    _write(package / "fuzz" / "campaign.py", "# no compile reads the fuzzer\n")
    assert len(set(seen)) == 4 and _build_identity_of(root) == seen[-1]


def test_the_build_identity_is_the_digest_a_checkout_computes(tmp_path):
    """The wheel build and a checkout name the same files the same way: the tool's digest of this checkout equals
    the content digest its kernel cache key uses (the same sources, templates and native library)."""
    from tilelang_musa._paths import PACKAGE_DIR, include_root, native_library

    if (PACKAGE_DIR.parent / "pyproject.toml").is_file():
        root = PACKAGE_DIR.parent
    else:
        pytest.skip("an installed package: its sources are not here to run the build's tool on")
    subprocess.run([sys.executable, str(TOOL), "--package", str(PACKAGE_DIR), "--templates", str(include_root()),
                    "--native", str(native_library()), "--out", str(tmp_path / "identity")], check=True, timeout=120)
    assert bi.package_identity(None) == "sources:" + (tmp_path / "identity").read_text().strip()
    assert root / "tools" / "write_build_identity.py" == TOOL


def test_a_templates_override_adds_that_trees_content(installed, tmp_path, monkeypatch):
    other = tmp_path / "other"
    header = _write(other / "tl_templates" / "musa" / "common.h", "// one\n")
    plain = bi.package_identity(None)
    monkeypatch.setattr(bi, "include_root", lambda: other)
    overridden = bi.package_identity(None)
    header.write_text("// two\n")
    assert len({plain, overridden, bi.package_identity(None)}) == 3


def test_a_checkout_or_a_missing_identity_is_hashed_by_content(installed):
    package, identity = installed
    _write(package.parent / "pyproject.toml", "[project]\n")  # sources beside pyproject.toml: a checkout
    assert bi.installed_build_identity() is None
    assert bi.package_identity(None).startswith("sources:")
    (package.parent / "pyproject.toml").unlink()
    identity.write_text("not a digest\n")
    assert bi.installed_build_identity() is None
    identity.unlink()
    assert bi.installed_build_identity() is None and bi.package_identity(None).startswith("sources:")


def test_a_pass_edit_in_a_checkout_misses_the_memo(tmp_path):
    """Checkout mode: an edited pass changes the (memoized) content digest."""
    root = tmp_path / "tree"
    package = _fake_sources(root)
    files = source_files(str(package), str(root / "src"), str(package / "lib" / "libtilelang_musa.so"))
    memo = tmp_path / "cache"
    before = bi.tree_digest(files, memo)
    assert bi.tree_digest(files, memo) == before
    time.sleep(0.05)
    _write(package / "transform" / "some_pass.py", "def some_pass(func):\n    return None\n")
    assert bi.tree_digest(files, memo) != before


def test_a_header_edit_changes_the_key_in_the_next_process(tmp_path):
    """The stale-kernel guard end to end, in fresh processes as a user's runs are: the key of one program before
    and after a template header is edited (the tree chosen by TILELANG_TEMPLATES, as in a checkout), and again
    with no edit (the memoized digest gives the same key)."""
    from tilelang_musa._paths import include_root

    shutil.copytree(include_root() / "tl_templates", tmp_path / "tl_templates")
    script = _write(tmp_path / "key.py", textwrap.dedent("""
        import tilelang.language as T
        from tilelang_musa.jit import cache
        from tilelang_musa.jit.backend import backend_named
        from tilelang_musa.target import determine_target
        from tilelang_musa.transform import normalize_pass_configs

        @T.prim_func
        def f(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    A[i] = A[i] + 1

        print(cache.kernel_key(f, "f", determine_target("musa"), backend_named("sim"), normalize_pass_configs({}),
                               (), None))
    """))
    env = dict(os.environ, TILELANG_TEMPLATES=str(tmp_path), TILELANG_CACHE_DIR=str(tmp_path / "cache"))

    def key():
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()[-1]

    before = key()
    assert (tmp_path / "cache" / bi.MEMO_DIR).is_dir()
    header = tmp_path / "tl_templates" / "musa" / "common.h"
    header.write_text(header.read_text() + "\n// edited\n")
    after = key()
    assert after != before and key() == after
