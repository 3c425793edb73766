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
