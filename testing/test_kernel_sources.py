"""JITKernel.print_source_code (upstream's older name, which TileLang's puzzles call) and export_sources: the
kernel source printed or written to a file, the host wrapper beside it."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


def halve(arch: str):
    @T.prim_func
    def main(X: T.Tensor((512,), "float32"), Y: T.Tensor((512,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 0.5

    return tilelang.compile(main, out_idx=[1], target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_print_source_code_and_export_sources(arch, tmp_path, capsys):
    kernel = halve(arch)
    kernel.print_source_code()
    printed = capsys.readouterr().out
    assert "__global__" in printed and printed.strip() == kernel.get_kernel_source().strip()
    kernel.print_source_code(file=tmp_path / "k.mu")
    assert (tmp_path / "k.mu").read_text() == kernel.get_kernel_source()
    kernel.export_sources(kernel_path=tmp_path / "a" / "k.mu", host_path=tmp_path / "b" / "host.cc")
    assert (tmp_path / "a" / "k.mu").read_text() == kernel.get_kernel_source()
    assert (tmp_path / "b" / "host.cc").read_text() == kernel.get_host_source()
    with pytest.raises(ValueError, match="give kernel_path, host_path or both"):
        kernel.export_sources()
    x = rand((512,), torch.float32, 3)
    torch.testing.assert_close(kernel(x), x * 0.5)
