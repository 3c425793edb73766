"""T.print and T.device_assert, as the user's guide uses them (debug_print_buffer, a triggered device assert)."""

import os
import subprocess
import sys
import textwrap

import pytest

import tilelang
import tilelang.language as T


def test_print_buffer_from_the_users_guide(tmp_path):
    script = tmp_path / "debug_print.py"
    script.write_text(textwrap.dedent('''
        import tilelang
        import tilelang.language as T

        def debug_print_buffer(M=16, N=16, dtype='float16'):

            @T.prim_func
            def program(Q: T.Tensor((M, N), dtype)):
                with T.Kernel(4, 4, 2, threads=128 * 2) as (bx, by, bz):
                    shared_buf = T.alloc_shared([M, N], dtype)
                    T.fill(shared_buf, 1.5)
                    T.print(shared_buf)
                    T.print(bx + by * 4, msg="block id")

            jit_kernel = tilelang.compile(program, target='musa')
            profiler = jit_kernel.get_profiler()
            profiler.run_once()

        debug_print_buffer()
    '''))
    # kernels print from the device (C stdio): run the user's script in a child process and read its output
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    element_lines = [l for l in lines if l.startswith("shared_buf[")]
    assert len(element_lines) == 16 * 16 * 32  # every element, once per block
    assert "shared_buf[255] = 1.5 [block (3, 3, 1), thread (0, 0, 0)]" in lines
    assert sum(l.startswith("block id: ") for l in lines) == 32 * 256
    assert "block id: 15 [block (3, 3, 1), thread (255, 0, 0)]" in lines


def test_device_assert_fails_the_launch_with_the_message():
    @T.prim_func
    def program(X: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128):
            tid = T.get_thread_binding()
            X[tid] = tid
            T.device_assert(tid > 0, 'Assertion Trigger !')

    kernel = tilelang.compile(program)
    assert "tl::device_assert_fail(\"Assertion Trigger !\")" in kernel.get_device_source()
    import torch

    with pytest.raises(RuntimeError, match="program_kernel"):
        kernel(torch.zeros(256, dtype=torch.int32))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_print_of_a_message_alone_prints_it_from_each_thread_that_runs_it(tmp_path, arch):
    """Upstream's `T.print(msg="hello world")`: no value, the message with the block and thread."""
    script = tmp_path / "print_message.py"
    script.write_text(textwrap.dedent(f'''
        import tilelang
        import tilelang.language as T

        @T.prim_func
        def program(A: T.Tensor((4,), "float32")):
            with T.Kernel(2, threads=64) as bx:
                tx = T.get_thread_binding()
                if tx == 3:
                    T.print(msg="hello world")

        kernel = tilelang.compile(program, target="musa -arch={arch}")
        assert 'tl::print_message("hello world");' in kernel.get_kernel_source()
        kernel.get_profiler().run_once()
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("hello world")]
    assert sorted(lines) == ["hello world [block (0, 0, 0), thread (3, 0, 0)]",
                             "hello world [block (1, 0, 0), thread (3, 0, 0)]"]  # blocks may run in either order
