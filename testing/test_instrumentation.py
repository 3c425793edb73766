"""`tilelang.instrumentation`: upstream's compiler-instrumentation layer (pass events, compile sessions, tools) on
MUSA's pipeline. tilelang.compile opens a session per compile: each kernel's PassContext gets the tools' fresh
instruments under the phase `pipeline_musa`, and the MUSA source printer runs through their codegen hooks."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang.instrumentation import (CodegenEvent, IncompletePass, PassEvent, PassEventObserver,
                                      PassInstrumentationTool, StackedPassInstrument,
                                      active_stacked_pass_instruments, compile_pass_instrumentation,
                                      create_pass_instruments, current_compile_pass_instrumentation,
                                      current_pass_instrument_context, current_pass_phase,
                                      instrument_current_pass_context, pass_phase, pass_pipeline,
                                      register_pass_instrumentation_tool, run_codegen_with_instrumentation,
                                      unregister_pass_instrumentation_tool)
from tilelang.tools.pass_timing import PassTimingTool, create_pass_timing_tool

ARCHS = ["mp_22", "mp_31"]


def add_one(n=256):
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] + 1.0

    return add


class Recorder(PassEventObserver):
    def __init__(self):
        self.started, self.finished, self.incomplete, self.contexts = [], [], [], 0

    def enter_pass_context(self):
        self.contexts += 1

    def pass_started(self, mod, event):
        self.started.append(event)
        return event.name

    def pass_finished(self, mod, event, state):
        assert state == event.name
        self.finished.append(event)

    def passes_incomplete(self, passes, error):
        self.incomplete.append((tuple(passes), error))


class RecordingTool(PassInstrumentationTool):
    def __init__(self):
        self.observers, self.codegens, self.scopes, self.contexts, self.finished = [], [], [], [], []

    def create_pass_instrument(self):
        self.contexts.append(current_pass_instrument_context())
        self.observers.append(Recorder())
        return StackedPassInstrument(self.observers[-1])

    def pipeline_scope(self, base_phase):
        self.scopes.append(base_phase)
        return super().pipeline_scope(base_phase)

    def run_codegen(self, event, next_call):
        result = next_call()
        self.codegens.append((event, result))
        return result

    def finish(self, error):
        self.finished.append(error)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_registered_tool_watches_every_pass_and_the_printer_of_a_compile(arch):
    tools = []
    register_pass_instrumentation_tool("recorder", lambda: tools.append(RecordingTool()) or tools[-1])
    try:
        kernel = tilelang.compile(add_one(), target=f"musa -arch={arch}")
        again = tilelang.compile(add_one(), target=f"musa -arch={arch}")  # a tool watches: lowered again
    finally:
        unregister_pass_instrumentation_tool("recorder")
    assert len(tools) == 2 and all(t.finished == [None] for t in tools)
    tool = tools[0]
    assert tool.scopes == ["pipeline_musa"]
    assert tool.contexts == ["stage=lower, kernel=add"]
    (recorder,) = tool.observers
    names = [e.name for e in recorder.started]
    assert recorder.contexts == 1 and len(recorder.finished) == len(recorder.started) and not recorder.incomplete
    assert any(n.startswith("tl.") for n in names) and any(n.startswith(("tirx.", "s_tir.")) for n in names)
    assert all(e.phase == "pipeline_musa" for e in recorder.started)
    assert [e.sequence for e in recorder.started] == list(range(len(names)))
    top = [e for e in recorder.started if e.depth == 0]
    assert all(e.parent_sequence is None for e in top)
    assert all(e.parent_sequence is not None for e in recorder.started if e.depth > 0)
    (event, source), = tool.codegens
    assert isinstance(event, CodegenEvent) and event.name == "target.build.tilelang_musa"
    assert str(event.target.attrs["arch"]) == arch and "add_kernel" in [g.name_hint for g in event.mod.functions]
    assert "__global__" in source.text and "__global__" in kernel.get_kernel_source()
    assert [e.name for e in tools[1].observers[0].started] == names
    a = rand((256,), torch.float32)
    b = torch.full((256,), float("nan"))
    again(a, b)
    torch.testing.assert_close(b, a + 1.0)


def test_without_tools_a_compile_opens_an_empty_session_and_keeps_the_cache(monkeypatch):
    import sys

    from tilelang_musa.jit import cache

    tilelang.compile(add_one(512), target="musa -arch=mp_31")
    lowered = []
    monkeypatch.setattr(sys.modules["tilelang_musa.jit.compile"], "_lower_kernels", lambda *a: lowered.append(a))
    if cache.is_cache_enabled():
        tilelang.compile(add_one(512), target="musa -arch=mp_31")  # a hit: no lowering
        assert lowered == []
    assert current_compile_pass_instrumentation() is None


@pytest.mark.parametrize("arch", ARCHS)
def test_pass_timing_as_a_session_tool_times_each_kernel_of_tilelang_lower(arch, capsys):
    timing = PassTimingTool()
    with compile_pass_instrumentation(name="timed", tools=[timing], include_default_tools=False) as session:
        artifact = tilelang.lower(add_one(), target=f"musa -arch={arch}")
        assert session.find_tool(PassTimingTool) is timing
    assert "__global__" in artifact.kernel_source
    assert timing.contexts == ("stage=lower, kernel=add",)
    assert any(r.name.startswith("tl.") for r in timing.records)
    assert all(0 <= r.self_duration_s <= r.duration_s for r in timing.records)
    assert "Context" in timing.report() or "stage=lower, kernel=add" in timing.report()
    assert "stage=lower, kernel=add" in capsys.readouterr().err  # printed once, when the session finished
    assert create_pass_timing_tool({}) is None
    assert create_pass_timing_tool({"tl.pass_profile": True, "tl.pass_profile_threshold_ms": 2.0}).threshold_ms == 2.0


def test_sessions_nest_by_reuse_and_order_instruments_by_priority():
    class Marked(PassInstrumentationTool):
        def __init__(self, priority, mark):
            self.pass_instrument_priority, self.mark = priority, mark

        def create_pass_instrument(self):
            return self.mark

        def run_codegen(self, event, next_call):
            return f"{self.mark}({next_call()})"

    assert create_pass_instruments() == []
    assert run_codegen_with_instrumentation("x", None, None, lambda: "plain") == "plain"
    with compile_pass_instrumentation(name="outer", tools=[Marked(0, "a"), Marked(-1, "b"), Marked(0, "c")],
                                      include_default_tools=False) as outer:
        with compile_pass_instrumentation(name="inner") as inner:
            assert inner is outer is current_compile_pass_instrumentation()
        with pytest.raises(ValueError, match="a session is open"):
            with compile_pass_instrumentation(tools=[Marked(0, "d")]):
                pass
        with compile_pass_instrumentation(include_default_tools=False, reuse_existing=False) as fresh:
            assert fresh is not outer and fresh.tools == () and create_pass_instruments() == []
        assert create_pass_instruments() == ["b", "a", "c"]
        assert run_codegen_with_instrumentation("target.build.x", None, None, lambda: "src") == "a(b(c(src)))"
    assert current_compile_pass_instrumentation() is None


def test_finish_sees_the_compile_error_and_a_tool_failure_never_hides_it():
    class Failing(PassInstrumentationTool):
        def __init__(self):
            self.seen = []

        def finish(self, error):
            self.seen.append(error)
            raise KeyError("tool")

    tool = Failing()
    with pytest.raises(RuntimeError, match="compile failed"):
        with compile_pass_instrumentation(tools=[tool], include_default_tools=False):
            raise RuntimeError("compile failed")
    assert isinstance(tool.seen[0], RuntimeError)
    with pytest.raises(KeyError):
        with compile_pass_instrumentation(tools=[Failing()], include_default_tools=False):
            pass


def _module():
    @T.prim_func
    def program(A: T.Tensor((16,), "float32")):
        A[0] = A[0] + 1.0

    return tvm.IRModule({"main": program})


def test_events_nest_filter_and_drain_a_failing_pass():
    recorder = Recorder()
    instrument = StackedPassInstrument(recorder, capture_predicate=lambda name, depth: "Fail" in name or depth == 0)

    @tvm.transform.module_pass(opt_level=0, name="FailingPass")
    def failing(mod, ctx):
        raise RuntimeError("expected failure")

    with pass_phase("mine"):
        assert current_pass_phase() == "mine"
        with tvm.transform.PassContext(instruments=[instrument]):
            assert active_stacked_pass_instruments() == (instrument,)
            tvm.transform.Sequential([tvm.tirx.transform.RemoveNoOp()])(_module())
            with pytest.raises(Exception, match="expected failure"):
                failing(_module())
    assert active_stacked_pass_instruments() == ()
    assert current_pass_phase() is None
    names = [e.name for e in recorder.started]
    assert names[0] == "sequential" and "FailingPass" in names and all(e.phase == "mine" for e in recorder.started)
    assert all(e.depth == 0 or "Fail" in e.name for e in recorder.started)  # the predicate left nested ones out
    ((passes, _),) = recorder.incomplete
    assert isinstance(passes[0], IncompletePass) and passes[-1].name == "FailingPass"
    assert isinstance(passes[-1].event, PassEvent)


def test_instrument_current_pass_context_adds_the_session_instruments_for_the_body():
    tool = RecordingTool()
    with tvm.transform.PassContext() as context:
        with compile_pass_instrumentation(tools=[tool], include_default_tools=False):
            with instrument_current_pass_context():
                assert len(context.instruments) == 1
                tvm.tirx.transform.RemoveNoOp()(_module())
        assert list(context.instruments) == []
    assert [e.name for e in tool.observers[0].finished] == ["tirx.RemoveNoOp"]
    with pass_pipeline("x"):
        assert current_pass_phase() == "pipeline_x"


def test_upstream_0_1_13s_pass_timing_path_and_helpers(capsys):
    from tilelang.utils.pass_timing import (TileLangPassTimingInstrument as Timing, build_pass_instruments,
                                            report_pass_timing_on_exit)

    marker = object()
    instruments, timing = build_pass_instruments([marker], 0.0)
    assert isinstance(timing, Timing) and instruments == [timing.instrument, marker]
    assert build_pass_instruments([marker], None) == ([marker], None)
    with pytest.raises(RuntimeError):
        with report_pass_timing_on_exit(timing, "ctx=failing"):
            with tvm.transform.PassContext(instruments=[timing.instrument]):
                tvm.tirx.transform.RemoveNoOp()(_module())
            raise RuntimeError("after the passes")
    assert [r.name for r in timing.records] == ["tirx.RemoveNoOp"]
    assert "ctx=failing" in capsys.readouterr().err
