"""`T.copy(..., prefer_instruction=...)` and upstream's `annotations={...}` dict form: "tma" sends a global ->
shared copy through the TME (mp_31; mp_22 has none and copies plainly), "cp_async" through LDLMS asynchronous
copies, "sync" through plain loads and stores; every form copies the same values."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

KINDS = {
    "tma": dict(prefer_instruction="tma"),
    "tma-annotation": dict(annotations={"prefer_instruction": "tma"}),
    "cp_async": dict(prefer_instruction="cp_async"),
    "sync": dict(annotations={"prefer_instruction": "sync", "coalesced_width": 4}),
}


def doubled(**copy_args):
    @T.prim_func
    def f(x: T.Tensor((128, 32), T.float32), y: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128, 32), T.float32)
            T.copy(x, s, **copy_args)
            for i, j in T.Parallel(128, 32):
                y[i, j] = s[i, j] * 2.0

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_preferred_instruction_moves_the_tile(arch, kind):
    src = (kernel := tilelang.compile(doubled(**KINDS[kind]), target=f"musa -arch={arch}")).get_kernel_source()
    tme = "tl::tma_load<" in src
    lma = "tl::cp_async_gs" in src
    assert tme == (kind.startswith("tma") and arch == "mp_31"), src
    assert lma == (kind == "cp_async"), src
    x, y = rand((128, 32), torch.float32, 1), poison((128, 32), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2.0)


@pytest.mark.parametrize("args, message", [
    (dict(prefer_instruction="ldsm"), "prefer_instruction='ldsm'"),
    (dict(annotations={"prefer": "tma"}), r"unknown annotation\(s\) \['prefer'\]"),
    (dict(prefer_instruction="tma", disable_tma=True), "contradicts"),
])
def test_bad_preferences_are_errors_at_the_copy(args, message):
    with pytest.raises(tilelang.CompileError, match=message):
        tilelang.compile(doubled(**args), target="musa -arch=mp_31")


def two_producers():
    """Two threads of different warps each load their own tiles through the TME in a loop, at the same time (the
    single-thread producers of Moore Threads' GDN prefill kernel: `if tx == 768: T.copy(q[...], q_shared)`)."""
    rows, steps = 16, 4

    @T.prim_func
    def f(x: T.Tensor((rows * steps, 32), T.float32), z: T.Tensor((rows * steps, 32), T.float32),
          y: T.Tensor((2, rows * steps, 32), T.float32)):
        with T.Kernel(1, threads=64):
            a = T.alloc_shared((rows, 32), T.float32)
            b = T.alloc_shared((rows, 32), T.float32)
            tx = T.get_thread_binding()
            if tx == 0:
                for i in T.serial(steps):
                    T.copy(x[i * rows:(i + 1) * rows, :], a, prefer_instruction="tma")
                    for r, c in T.grid(rows, 32):
                        y[0, i * rows + r, c] = a[r, c] * 2.0
            if tx == 32:
                for i in T.serial(steps):
                    T.copy(z[i * rows:(i + 1) * rows, :], b, prefer_instruction="tma")
                    for r, c in T.grid(rows, 32):
                        y[1, i * rows + r, c] = b[r, c] + 1.0

    return f


def test_concurrent_single_thread_tme_loads_wait_on_barriers_of_their_own():
    # Each range of threads reaching a T.copy TME load gets its own compiler barrier: two producers sharing one
    # (before: one per thread count) completed each other's phases (a deadlock or a tile read before it landed).
    # As the GDN kernel: no compiler-inserted block syncs (each producer reads only what its own copy loaded, after
    # waiting for it; the inserted sync would be a 1-thread named barrier, which the arch cannot express).
    kernel = tilelang.compile(two_producers(), target="musa -arch=mp_31",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    src = kernel.get_kernel_source()
    assert src.count("tl::tma_load<") == 2, src
    syncs = sorted(set(line.strip() for line in src.splitlines() if "tl::barrier_sync(" in line))
    assert len(syncs) == 2, syncs  # two barriers, one per producer
    x, z = rand((64, 32), torch.float32, 3), rand((64, 32), torch.float32, 4)
    y = poison((2, 64, 32), torch.float32)
    kernel(x, z, y)
    torch.testing.assert_close(y[0], x * 2.0)
    torch.testing.assert_close(y[1], z + 1.0)
