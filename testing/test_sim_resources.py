"""The simulator's fiber stacks stay bounded: stacks kept per kernel library (two memory mappings per guarded stack)
once exhausted the process's mapping limit in a long test run ("cannot protect the guard page of fiber stack 90").
A block that runs as a loop needs one stack; the runtime shared by the kernel libraries of an arch keeps released
fiber stacks for the next launches, within one bound for the process (docs/SIMULATOR.md)."""

import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def mapping_count() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def test_a_launch_leaves_no_fiber_stacks_mapped():
    @T.prim_func
    def wide(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "float32")):
        with T.Kernel(4, threads=1024) as bx:
            tx = T.get_thread_binding()
            B[bx * 1024 + tx] = A[bx * 1024 + tx] * 2.0

    kernel = tilelang.compile(wide)
    a, b = rand((4096,), torch.float32, 81), poison((4096,), torch.float32)
    before = mapping_count()
    for _ in range(3):
        kernel(a, b)
    # 1024 guarded stacks per worker would be 2048 mappings each; allow a little for the allocator
    assert mapping_count() - before < 64
    torch.testing.assert_close(b, a * 2.0)


def reverse_through_shared():
    """1024 threads reversing a tile through shared memory: a barrier, so the kernel runs on fibers."""

    @T.prim_func
    def reverse(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "float32")):
        with T.Kernel(4, threads=1024) as bx:
            S = T.alloc_shared((1024,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[bx * 1024 + tx]
            B[bx * 1024 + tx] = S[1023 - tx]

    return reverse


def test_fiber_stacks_are_reused_by_the_next_launches_within_a_bound():
    """A kernel with a barrier runs on fibers, one guarded stack per thread: the runtime keeps the sets a launch
    released for the next launch (one pool per arch and process), so repeated launches map nothing new."""

    reverse = reverse_through_shared()
    kernel = tilelang.compile(reverse)
    assert "__syncthreads" in kernel.get_kernel_source()
    a = rand((4096,), torch.float32, 82)
    before = mapping_count()
    b = poison((4096,), torch.float32)
    kernel(a, b)
    after_first = mapping_count()
    for _ in range(3):
        kernel(a, b)
    assert mapping_count() - after_first < 64  # the stacks of the first launch were reused
    # The pool's bound (4096 idle stacks, 128 MiB): at most two mappings per kept stack.
    assert mapping_count() - before < 2 * 4096 + 64
    torch.testing.assert_close(b, a.reshape(4, 1024).flip(1).reshape(-1))


UNLOAD_CYCLES = """
import gc, sys
import torch
from tilelang_musa.jit.kernel import JITKernel

counts = []
for _ in range(4):
    for directory in sys.argv[1:]:  # one kernel per arch, each loaded, run and dropped in turn
        kernel = JITKernel.from_database(directory)
        a, b = torch.randn(4096), torch.full((4096,), float("nan"))
        kernel(a, b)
        assert torch.equal(b, a.reshape(4, 1024).flip(1).reshape(-1))
        del kernel  # its library, then the arch's runtime it alone kept loaded, are unloaded
        gc.collect()
    with open("/proc/self/maps") as maps:
        counts.append(sum(1 for _ in maps))
print(counts)
"""


def test_an_unloaded_runtime_unmaps_the_fiber_stacks_it_kept(tmp_path):
    """Kernels compiled with the cache off and dropped (as the fuzzer's joint builds are) unload their library and
    the arch's runtime with it: the runtime's pool unmaps its idle stacks then. Before, each unload and reload kept
    a launch's guarded stacks mapped, and a fuzz child hit vm.max_map_count after ~250 programs."""
    import subprocess
    import sys

    reverse = reverse_through_shared()
    directories = [str(tilelang.compile(reverse, target=f"musa -arch={arch}").directory)
                   for arch in ("mp_31", "mp_22")]
    # outside the checkout: `python -c` puts the working directory first on sys.path, and a clean clone's root
    # holds the package's sources without its built launcher
    proc = subprocess.run([sys.executable, "-c", UNLOAD_CYCLES, *directories], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = [int(c) for c in proc.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    # one launch's 1024 guarded stacks are 2048 mappings: none may stay behind per cycle
    assert counts[-1] - counts[0] < 256, counts
