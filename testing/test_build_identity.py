"""The package identity in the kernel cache key (jit/build_identity.py): an installed package is named by its wheel's
RECORD; a checkout by its sources' content, memoized by their stat, so that an edit is never served a stale kernel."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from tilelang_musa.jit import build_identity as bi


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_memo_serves_unchanged_files_and_an_edit_misses_it(tmp_path):
    header = _write(tmp_path / "src" / "gemm.h", "int a;\n")
    files = [(str(header), "tl_templates/./gemm.h")]
    memo = tmp_path / "cache"
    first = bi._tree_digest(files, memo)
    assert first == bi._tree_digest(files, None)  # the memo holds the content digest, nothing else
    [written] = (memo / bi.MEMO_DIR).iterdir()
    written.write_text("f" * 64)
    assert bi._tree_digest(files, memo) == "f" * 64  # unchanged stat: the memo answers, nothing is read
    stat = header.stat()
    time.sleep(0.05)
    header.write_text("int b;\n")  # same size; its mtime is set back below: the ctime still moves
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = bi._tree_digest(files, memo)
    assert edited not in (first, "f" * 64)
    assert edited == bi._tree_digest(files, None)


def test_a_read_only_memo_directory_only_costs_the_hashing(tmp_path):
    header = _write(tmp_path / "gemm.h", "int a;\n")
    blocked = _write(tmp_path / "cache", "a file where the memo directory would go")
    assert bi._tree_digest([(str(header), "h")], blocked) == bi._tree_digest([(str(header), "h")], None)


def _fake_installation(root, record_lines):
    """site-packages with the package (templates and native library inside) and its wheel's RECORD."""
    package = root / "tilelang_musa"
    _write(package / "_version.py", "__version__ = 'x'\n")
    _write(package / "tl_templates" / "musa" / "common.h", "// common\n")
    _write(package / "lib" / "libtilelang_musa.so", "ELF")
    record = _write(root / "tilelang_musa-0.1.0.dist-info" / "RECORD", "\n".join(record_lines) + "\n")
    return package, record


@pytest.fixture
def installed(tmp_path, monkeypatch):
    package, record = _fake_installation(tmp_path / "site", ["tilelang_musa/_version.py,sha256=AAA,20",
                                                             "tilelang_musa/lib/libtilelang_musa.so,sha256=BBB,3"])
    monkeypatch.setattr(bi, "PACKAGE_DIR", package)
    monkeypatch.setattr(bi, "include_root", lambda: package)
    monkeypatch.setattr(bi, "native_library", lambda: package / "lib" / "libtilelang_musa.so")
    return package, record


def test_an_installed_package_is_named_by_its_record(installed, tmp_path):
    package, record = installed
    assert bi.installed_record() == record
    before = bi.package_identity(tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing hashed, nothing memoized
    record.write_text(record.read_text().replace("AAA", "CCC"))  # another wheel installed in its place
    assert bi.package_identity(tmp_path / "cache") != before


def test_a_templates_override_adds_that_trees_content(installed, tmp_path, monkeypatch):
    other = tmp_path / "other"
    header = _write(other / "tl_templates" / "musa" / "common.h", "// one\n")
    plain = bi.package_identity(None)
    monkeypatch.setattr(bi, "include_root", lambda: other)
    overridden = bi.package_identity(None)
    header.write_text("// two\n")
    assert len({plain, overridden, bi.package_identity(None)}) == 3


def test_a_checkout_or_an_unclear_record_is_hashed_by_content(installed):
    package, record = installed
    _write(package.parent / "pyproject.toml", "[project]\n")  # sources beside pyproject.toml: a checkout
    assert bi.installed_record() is None
    (package.parent / "pyproject.toml").unlink()
    shutil.copytree(record.parent, package.parent / "tilelang_musa-0.0.9.dist-info")  # a stale second record
    assert bi.installed_record() is None
    shutil.rmtree(package.parent / "tilelang_musa-0.0.9.dist-info")
    record.write_text("__editable__.tilelang_musa.pth,sha256=DDD,10\n")  # an editable install's record
    assert bi.installed_record() is None


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
