"""TILELANG_PASS_DIFF: every pass a compile runs records the IR diff it made (printed, or an HTML report), and the
kernel it builds is the one built without it; `tilelang.utils.pass_diff.pass_diff` does the same for a chain of
passes a script runs itself."""

import os

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.env import env
from tilelang_musa.tools.trace import pass_diff_hook
from tilelang.utils.pass_diff import pass_diff


@pytest.fixture(autouse=True)
def _no_hook_left(monkeypatch):
    monkeypatch.delenv("TILELANG_PASS_DIFF", raising=False)
    yield
    pass_diff_hook.uninstall_pass_diff_hook()


def add_one_program(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            T.copy(A[bx * 128], S)
            for i in T.Parallel(128):
                B[bx * 128 + i] = S[127 - i] + 1.0

    return main


@pytest.mark.parametrize("value,mode", [("0", None), ("off", None), ("1", "terminal"), ("On", "terminal"),
                                        ("html", "html"), ("both", "both"), ("verbose", "terminal")])
def test_mode_from_environment(monkeypatch, value, mode):
    monkeypatch.setenv("TILELANG_PASS_DIFF", value)
    assert env.get_pass_diff_mode() == mode


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_compile_prints_each_pass_diff_and_builds_the_same_kernel(monkeypatch, capsys, arch):
    target = f"musa -arch={arch}"
    plain = tilelang.compile(add_one_program(256), target=target)
    monkeypatch.setenv("TILELANG_PASS_DIFF", "1")
    kernel = tilelang.compile(add_one_program(256), target=target)  # not served from the cache: it is observed
    out = capsys.readouterr().out
    assert "=== Pass 8: tl.LegalizeNegativeIndex (no changes)" in out
    # ThreadSync inserted the barrier between the copy into S and the reversed read of it.
    sync = [block for block in out.split("=== Pass ") if block and ": tl.ThreadSync." in block.splitlines()[0]]
    assert any(line.startswith("+") and "tvm_storage_sync" in line for b in sync for line in b.splitlines())
    assert kernel.get_kernel_source() == plain.get_kernel_source()
    assert "__syncthreads" in kernel.get_kernel_source()
    a, b = rand((256,), torch.float32), poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.view(2, 128).flip(1).reshape(256) + 1)


def test_html_report_lists_the_passes(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_PASS_DIFF", "html")
    monkeypatch.setenv("TILELANG_PASS_DIFF_OUTPUT", str(tmp_path / "reports"))
    tilelang.compile(add_one_program(128), target="musa -arch=mp_31")
    (report,) = os.listdir(tmp_path / "reports")
    content = (tmp_path / "reports" / report).read_text()
    assert content.startswith("<!DOCTYPE html>") and "tl.LayoutInference" in content
    assert "tvm_storage_sync" in content and 'class="diff-table"' in content


def test_pass_diff_of_a_chain_names_steps_and_counts_lines(capsys):
    func = add_one_program(128)
    steps = pass_diff(func, [("Simplify", tirx.transform.StmtSimplify()), tirx.transform.UnrollLoop()], context=0)
    assert [s["name"] for s in steps] == ["Simplify", "tirx.UnrollLoop"]
    assert all(set(s) >= {"before_script", "after_script", "diff_lines", "insertions", "deletions", "changed"}
               for s in steps)
    assert steps[1]["before_script"] == steps[0]["after_script"]
    for s in steps:
        assert s["changed"] == bool(s["insertions"] or s["deletions"])
    assert "=== Pass 1: Simplify" in capsys.readouterr().out


def test_pass_diff_html_folds_unchanged_lines_between_hunks(tmp_path):
    from tilelang.utils.pass_diff import _generate_html, diff_step

    before = [f"line_{i}" for i in range(40)]
    after = list(before)
    after[5], after[30] = "CHANGED_5", "CHANGED_30"
    step = diff_step("TwoHunks", "\n".join(before), "\n".join(after))
    assert (step["insertions"], step["deletions"]) == (2, 2)
    _generate_html([step], str(tmp_path / "r.html"))
    content = (tmp_path / "r.html").read_text()
    # lines 0-1 above the first hunk, 9-26 between the hunks, 34-39 below the last
    assert "Show 2 lines above" in content and "Show 18 lines above" in content and "Show 6 lines below" in content


def test_pass_diff_rejects_what_is_not_a_pass():
    with pytest.raises(TypeError, match="expected TVM passes"):
        pass_diff(add_one_program(128), ["Simplify"])
