"""Programs built together (jit/batch_build.py, the fuzzer's `--batch`): one host-compiler run for many simulator
programs of one arch. Each program still gets its own library, runs alone and matches torch. A program whose build
fails is found by splitting the batch, with the error its own build gives, and the others still run. Checked mode
names the program's own source line. The fuzzer's batched outcomes equal its one-by-one outcomes."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import BuildError
from tilelang_musa.jit import batch_build
from tilelang_musa.jit.batch_build import build_together, joint_source
from tilelang_musa.jit.compile import compile_deferred
from tilelang_musa.jit.toolchains import SimToolchain
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_31", "mp_22"]
N = 256


def scaled(factor: float, imported: str = ""):
    """B = A * factor, 2 blocks of 128 threads; `imported` is put into the translation unit (T.import_source)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * factor

    @T.prim_func
    def main_importing(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            T.import_source(imported)
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * factor

    return main_importing.with_attr("global_symbol", "main") if imported else main


def dynamic_add():
    """C = A + B over a T.dynamic length: its host wrapper defines the tl_host_* helpers (a run-time grid)."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]

    return main


def shared_never_written():
    """Each block fills the first half of S and reads the second half (test_uninit_reads.py's planted read)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[bx * 128 + tx]
            T.sync_threads()
            B[bx * 128 + tx] = S[tx + 128]

    return main


def poisoned(shape):
    return torch.full(shape, float("nan"))


@pytest.fixture
def host_compiler_runs(monkeypatch):
    """The sources each host-compiler run of SimToolchain built (the forwarding libraries are not counted)."""
    built = []
    original = SimToolchain._run

    def counting(self, cmd, req):
        built.append(req.source.name)
        return original(self, cmd, req)

    monkeypatch.setattr(SimToolchain, "_run", counting)
    return built


def test_the_joint_source_renames_each_programs_names_and_keeps_its_line_numbers():
    kernels = [compile_deferred(scaled(f), target="musa -arch=mp_31") for f in (2.0, 3.0)]
    text = joint_source(kernels, ["tl_batch0_", "tl_batch1_"])
    own = kernels[0].build.source.read_text().splitlines()
    includes = [line for line in own if line.startswith("#include")]
    assert text.startswith("\n".join(includes) + "\n")
    assert all(text.count(line + "\n") == 1 for line in includes)  # hoisted once, before every rename
    for tag in ("tl_batch0_", "tl_batch1_"):
        for name in ("main_kernel", "call_packed", "call", "get_last_error", "tl_error_buf"):
            assert f"#define {name} {tag}{name}\n" in text
            assert f"#undef {name}\n" in text
    # each program's text resumes at its own first line after the includes
    lines = re.findall(r'#line (\d+) "([^"]+)"\n', text)
    assert [int(n) for n, _ in lines] == [len(includes) + 1] * 2
    assert [p for _, p in lines] == [str(k.build.source) for k in kernels]
    for kernel in kernels:
        build_together([kernel])  # leaves no checked source behind


@pytest.mark.parametrize("arch", ARCHS)
def test_programs_built_by_one_host_compiler_run_each_run_on_their_own(arch, host_compiler_runs):
    programs = [scaled(2.0), dynamic_add(), scaled(-0.5)]
    deferred = [compile_deferred(p, target=f"musa -arch={arch}") for p in programs]
    assert all(k.request.name == "main" for k in deferred)  # the same names: the joint build renames them
    assert build_together(deferred) == [None, None, None]
    assert host_compiler_runs == ["batch.mu"]
    kernels = [k.finish() for k in deferred]
    assert len({k.library_path for k in kernels}) == 3
    a = rand((N,), torch.float32)
    for kernel, factor in ((kernels[0], 2.0), (kernels[2], -0.5)):
        b = poisoned((N,))
        kernel(a, b)
        torch.testing.assert_close(b, a * factor)
    x, y, z = rand((200,), torch.float32), rand((200,), torch.float32), poisoned((200,))
    kernels[1](x, y, z)
    torch.testing.assert_close(z, x + y)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_program_that_fails_to_build_is_found_and_the_others_still_run(arch, host_compiler_runs):
    broken = "this is not C++;"
    programs = [scaled(2.0), scaled(3.0, broken), scaled(4.0), scaled(5.0)]
    deferred = [compile_deferred(p, target=f"musa -arch={arch}") for p in programs]
    errors = build_together(deferred)
    assert [e is None for e in errors] == [True, False, True, True]
    assert isinstance(errors[1], BuildError)
    # joint 4 fails -> halves: joint [0, 1] fails -> 0 and 1 alone; joint [2, 3] builds
    assert host_compiler_runs == ["batch.mu", "batch.mu", "main.checked.mu", "main.checked.mu", "batch.mu"]
    # the failing program's error is its own build's, as tilelang.compile gives it
    with pytest.raises(BuildError) as alone:
        tilelang.compile(scaled(3.0, broken), target=f"musa -arch={arch}")
    first_error = [line for line in str(alone.value).splitlines() if "error:" in line][0]
    assert first_error.split("error:", 1)[1] in str(errors[1])
    a = rand((N,), torch.float32)
    for index in (0, 2, 3):
        b = poisoned((N,))
        deferred[index].finish()(a, b)
        torch.testing.assert_close(b, a * (index + 2.0))


@pytest.mark.parametrize("arch", ARCHS)
def test_checked_mode_names_the_programs_own_source_line_in_a_joint_build(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    deferred = [compile_deferred(p, target=f"musa -arch={arch}") for p in (scaled(2.0), shared_never_written())]
    assert build_together(deferred) == [None, None]
    joint = deferred[1].finish()
    alone = tilelang.compile(shared_never_written(), target=f"musa -arch={arch}")
    messages = []
    for kernel in (joint, alone):
        with pytest.raises(KernelLaunchError) as info:
            kernel(rand((N,), torch.float32), poisoned((N,)))
        messages.append(str(info.value))
    line = next(n for n, text in enumerate(alone.get_kernel_source().splitlines(), 1) if "= S[" in text)
    for message in messages:
        assert "uninitialised read: shared load of `S`" in message, message
        assert f"(line {line} of the kernel source" in message, message


def test_the_fuzzers_batched_outcomes_equal_its_one_by_one_outcomes():
    from tilelang_musa.fuzz import FAMILIES, check
    from tilelang_musa.fuzz.__main__ import generate
    from tilelang_musa.fuzz.runner import check_batch

    items = [(generate(5, i, list(FAMILIES)), arch) for i in range(3) for arch in ARCHS]
    batched = check_batch(items)
    for (desc, arch), outcome in zip(items, batched):
        alone = check(desc, arch)
        assert (outcome.status, outcome.arch, outcome.detail, outcome.path) == \
            (alone.status, alone.arch, alone.detail, alone.path), desc
        assert outcome.status == "pass", f"{desc!r}: {outcome.detail}"


def test_the_names_renamed_are_those_the_host_printer_defines():
    """Each name renamed around a program is one the host printer (codegen/host.py) defines at file scope."""
    import inspect

    from tilelang_musa.codegen import host

    text = inspect.getsource(host)
    for name in batch_build._HOST_NAMES:
        assert re.search(rf"\b{name}\(|\b{name}\[", text), name


def test_an_executor_task_takes_a_batch_and_a_failed_batch_runs_again_one_program_per_task():
    """run_jobs_on(batch=B): one CheckBatchTask per B jobs; a task that died has its jobs run again as single
    CheckTasks (no compile here: the fake executor answers without running the tasks)."""
    from tilelang_musa.fuzz.runner import DIED, CheckBatchTask, CheckTask, Job, Outcome, run_jobs_on

    calls = []

    class FakeExecutor:
        def run_tasks(self, n_tasks, task, timeout, on_done, stop=None):
            calls.append((type(task).__name__, n_tasks, timeout))
            for i in range(n_tasks):
                if isinstance(task, CheckBatchTask):
                    group = task.groups[i]
                    if i == 1:
                        on_done(i, None, (DIED, "signal 11"))
                    else:
                        on_done(i, [Outcome("pass", arch, f"batched {desc}") for desc, arch in group], None)
                else:
                    assert isinstance(task, CheckTask)
                    desc, arch = task.jobs[i]
                    on_done(i, Outcome("pass", arch, f"alone {desc}"), None)

    jobs = [Job(k, f"p{k}", "mp_31") for k in range(5)]
    seen = []
    run_jobs_on(FakeExecutor(), jobs, timeout=10, batch=2, on_result=lambda job: seen.append(job.id))
    assert calls == [("CheckBatchTask", 3, 20), ("CheckTask", 2, 10)]
    assert [job.result.detail for job in jobs] == ["batched p0", "batched p1", "alone p2", "alone p3", "batched p4"]
    assert sorted(seen) == [0, 1, 2, 3, 4]
