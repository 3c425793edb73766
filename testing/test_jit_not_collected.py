"""A @tilelang.jit kernel factory named test_* is not collected by pytest as a test (upstream's JIT object is not)."""

import subprocess
import sys
import textwrap


def test_pytest_does_not_collect_a_jit_function_named_test(tmp_path):
    (tmp_path / "test_kernels.py").write_text(textwrap.dedent('''
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[1])
        def test_add_one(n: int = 16):
            @T.prim_func
            def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
                with T.Kernel(1, threads=n):
                    for i in T.Parallel(n):
                        B[i] = A[i] + 1.0
            return main

        def test_plain():
            assert callable(test_add_one)
    '''))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_kernels.py")], capture_output=True, text=True, cwd=tmp_path)
    assert "test_kernels.py::test_plain" in proc.stdout, proc.stdout + proc.stderr
    assert "test_add_one" not in proc.stdout, proc.stdout
