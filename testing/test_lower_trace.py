"""tilelang.tools.lower_trace, upstream's successor of TILELANG_PASS_DIFF and built on it: `lower_trace()` diffs a
chain of passes; TL_LOWER_TRACE (or `enable()`) traces every pass of a compile, then its MUSA source as the last
step, printed and/or as an HTML report in TL_LOWER_TRACE_DIR."""

import os

import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.env import env
from tilelang.tools import lower_trace as lt


@pytest.fixture(autouse=True)
def _trace_off(monkeypatch):
    monkeypatch.delenv("TL_LOWER_TRACE", raising=False)
    monkeypatch.delenv("TL_LOWER_TRACE_DIR", raising=False)
    lt.reset()
    yield
    lt.reset()


def last_element_program():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[-1] + A[i]

    return main


@pytest.mark.parametrize("value,mode", [("", None), ("0", None), ("off", None), ("1", "html"), ("true", "html"),
                                        ("terminal", "terminal"), ("html", "html"), ("Both", "both")])
def test_mode_from_environment(monkeypatch, value, mode):
    monkeypatch.setenv("TL_LOWER_TRACE", value)
    assert env.get_lower_trace_mode() == mode and lt.current_mode() == mode


def test_a_chain_of_passes_records_each_step(capsys, tmp_path):
    passes = [("Legalize", tilelang.transform.LegalizeNegativeIndex()), tirx.transform.RemoveAssume()]
    steps = lt.lower_trace(last_element_program(), passes, mode="both", html_path=str(tmp_path / "chain.html"))
    assert [s["name"] for s in steps] == ["Legalize", "tirx.RemoveAssume"]
    assert [s["changed"] for s in steps] == [True, False]  # A[-1] became A[127]; nothing to remove
    assert any(line.startswith("+") and "A[127]" in line for line in steps[0]["diff_lines"])
    assert steps[1]["before_script"] == steps[0]["after_script"]
    out = capsys.readouterr().out
    assert "=== Pass 1: Legalize (+" in out and "=== Pass 2: tirx.RemoveAssume (no changes)" in out
    report = (tmp_path / "chain.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and "Pass 1: Legalize" in report and "A[127]" in report


def test_environment_variable_traces_a_compile_and_its_source(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TL_LOWER_TRACE", "1")  # html, as upstream
    monkeypatch.setenv("TL_LOWER_TRACE_DIR", str(tmp_path / "traces"))
    kernel = tilelang.compile(last_element_program(), target="musa -arch=mp_31")
    session = lt.get_last_session()
    steps = session.steps
    names = [s["name"] for s in steps]
    assert names[:8] == ["tl.RemoveEmptyTiles", "tl.CheckNestedLoops", "tl.CheckParallelLocalIndex",
                         "tl.CheckGridBarrierConditions", "tl.VerifyBufferInit", "tl.WarnEveryThreadUpdate",
                         "tl.SerializeDynamicParallelLevels", "tl.LegalizeNegativeIndex"]
    assert "tl.LayoutInference" in names and names[-1] == lt.CODEGEN_STEP
    assert steps[7]["changed"] and all(s["before_script"] == p["after_script"] for p, s in zip(steps, steps[1:-1]))
    codegen = steps[-1]
    assert codegen["codegen"] and "def main_kernel(" in codegen["before_script"]  # the lowered device functions
    assert kernel.get_kernel_source() in codegen["after_script"] and "__global__" in codegen["after_script"]
    (report,) = os.listdir(tmp_path / "traces")
    assert os.path.join(str(tmp_path / "traces"), report) == session.html_path and report.startswith("main_")
    content = (tmp_path / "traces" / report).read_text()
    assert "tl.LayoutInference" in content and f"{lt.CODEGEN_STEP} (+" in content and "__global__" in content
    assert f"report in {session.html_path}" in capsys.readouterr().err


def test_enable_and_disable_over_the_environment(monkeypatch, capsys):
    lt.enable(mode="terminal")
    artifact = tilelang.lower(last_element_program(), target="musa -arch=mp_22")
    out = capsys.readouterr().out
    assert "=== Pass 8: tl.LegalizeNegativeIndex (+" in out and f": {lt.CODEGEN_STEP} (+" in out
    steps = lt.get_last_session().steps
    assert steps[-1]["after_script"] == artifact.kernel_source + artifact.host_source
    assert lt.get_last_session().html_path is None  # terminal only
    monkeypatch.setenv("TL_LOWER_TRACE", "terminal")
    lt.disable()  # over the variable
    tilelang.lower(last_element_program(), target="musa -arch=mp_22")
    assert "=== Pass" not in capsys.readouterr().out
