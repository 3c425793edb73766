"""Pass timing (tilelang.tools.pass_timing): TILELANG_PASS_TIMING=1, upstream's TILELANG_PASS_PROFILE=1 or the pass
config tl.pass_profile prints, once per compile, a table of every lowering pass (ours and TVM's) and the codegen and
build stages with their times; off, nothing is printed."""

import re

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang import PassConfigKey
from tilelang.tools.pass_timing import PassTimingRecord, TileLangPassTimingInstrument

TITLE = "TileLang pass timing"
ROW = re.compile(r"^\s*(\d+)\s+(\S+(?: \(\S+\))?)\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+)%\s+([\d.]+)%$", re.M)


@pytest.fixture(autouse=True)
def _timing_off(monkeypatch):
    for name in ("TILELANG_PASS_TIMING", "TILELANG_PASS_PROFILE", "TILELANG_PASS_TIMING_THRESHOLD_MS",
                 "TILELANG_PASS_PROFILE_THRESHOLD_MS"):
        monkeypatch.delenv(name, raising=False)


def add_one(N=256):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            T.copy(A[bx * 128], S)
            for i in T.Parallel(128):
                B[bx * 128 + i] = S[127 - i] + 1.0

    return main


def two_kernels():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            T.copy(A, B)
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = B[i] + 1.0

    return main


def rows(text):
    """{pass name: (inclusive ms, self ms)} of the table's rows (the last row of a name that repeats)."""
    return {m.group(2): (float(m.group(3)), float(m.group(4))) for m in ROW.finditer(text)}


def test_environment_variable_prints_a_table_for_every_compile(monkeypatch, capsys):
    plain = tilelang.compile(add_one(), target="musa -arch=mp_31")
    assert TITLE not in capsys.readouterr().err  # off: nothing
    monkeypatch.setenv("TILELANG_PASS_TIMING", "1")
    kernel = tilelang.compile(add_one(), target="musa -arch=mp_31")  # cached, but observed: lowered and built again
    err = capsys.readouterr().err
    assert err.count(TITLE) == 1 and f"{TITLE}: kernel `main` (mp_31)" in err
    table = rows(err)
    for name in ("tl.LegalizeNegativeIndex", "tl.LowerTileOp", "tl.LayoutInference", "tl.PartitionParallelLoop",
                 "tirx.FlattenBuffer", "tirx.VectorizeLoop", "tl.ThreadSync.shared", "s_tir.ThreadSync",
                 "tl.PlanDynamicSharedMemory", "codegen.MUSASource", "build.sim"):
        assert name in table, name
    assert all(0 <= own <= incl for incl, own in table.values())
    assert table["build.sim"][0] > 0 and "Slowest 10 by inclusive time:" in err
    # TVM's ThreadSync runs inside our pass of that name: nested under it, its time inside the parent's (the
    # shared.dyn one: the kernel's tile is dynamic shared memory, and a scope no buffer has is skipped)
    assert re.search(r"tl\.ThreadSync\.shared\.dyn .*\n\s*\d+\s{4}s_tir\.ThreadSync ", err)
    assert kernel.get_kernel_source() == plain.get_kernel_source()
    a, b = rand((256,), torch.float32), poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.view(2, 128).flip(1).reshape(256) + 1)


@pytest.mark.parametrize("configs", [{"tl.pass_profile": True}, {PassConfigKey.TL_PASS_PROFILE: 1},
                                     {"TL_PASS_PROFILE": "on"}])
def test_upstreams_pass_config_turns_it_on(configs, capsys, recwarn):
    tilelang.lower(add_one(), target="musa -arch=mp_22", pass_configs=configs)
    err = capsys.readouterr().err
    assert f"{TITLE}: kernel `main` (mp_22)" in err and "tl.LowerTileOp" in rows(err)
    assert not [w for w in recwarn if "pass_profile" in str(w.message)]  # it has an effect: no "no effect" warning


def test_upstreams_environment_variable_and_the_threshold(monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_PASS_PROFILE", "1")
    monkeypatch.setenv("TILELANG_PASS_PROFILE_THRESHOLD_MS", "1000000")
    tilelang.lower(add_one(), target="musa -arch=mp_31")
    err = capsys.readouterr().err
    assert "(shown: inclusive time >= 1e+06 ms)" in err and not rows(err) and "not shown" in err
    # the pass config's threshold wins over the variable's
    tilelang.lower(add_one(), target="musa -arch=mp_31", pass_configs={"tl.pass_profile_threshold_ms": 0})
    assert "tl.LayoutInference" in rows(capsys.readouterr().err)
    with pytest.raises(ValueError, match="TL_PASS_PROFILE_THRESHOLD_MS must be a finite number"):
        tilelang.lower(add_one(), target="musa -arch=mp_31", pass_configs={"tl.pass_profile_threshold_ms": -1})


def test_off_prints_nothing(capsys):
    tilelang.lower(add_one(), target="musa -arch=mp_31", pass_configs={"tl.pass_profile": False})
    assert TITLE not in capsys.readouterr().err


def test_each_kernel_of_a_program_is_named(monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_PASS_TIMING", "1")
    tilelang.lower(two_kernels(), target="musa -arch=mp_31")
    table = rows(capsys.readouterr().err)
    assert "tl.LayoutInference (main_kernel)" in table and "tl.LayoutInference (main_kernel_1)" in table


def test_the_instrument_in_a_pass_context_of_ones_own():
    timing = TileLangPassTimingInstrument()
    mod = tvm.IRModule({"main": add_one()})
    with tvm.transform.PassContext(instruments=[timing.instrument]):
        tvm.tirx.transform.RemoveAssume()(mod)  # runs two passes inside it
    with timing.stage("my.stage"):
        pass
    records = timing.records
    assert [(r.name, r.depth) for r in records] == [("tirx.RemoveAssume", 0), ("tirx.RemoveAssumeInternal", 1),
                                                    ("tirx.RemoveNoOp", 1), ("my.stage", 0)]
    assert all(isinstance(r, PassTimingRecord) and 0 <= r.self_duration_s <= r.duration_s for r in records)
    parent = records[0]
    assert parent.self_duration_s == pytest.approx(parent.duration_s - records[1].duration_s - records[2].duration_s)
    assert timing.total_duration_s == pytest.approx(parent.duration_s + records[3].duration_s)
    assert "tirx.RemoveNoOp" in timing.report("by hand")
    timing.reset()
    assert timing.records == [] and "no passes ran" in timing.report()
