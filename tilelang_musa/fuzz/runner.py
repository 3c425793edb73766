"""Compile, run and compare one (description, arch); run many in child processes.

`check(desc, arch)` classifies one program on one arch:
- pass: every output matches the torch reference within the family's tolerance (or, for a program the family
  says the arch must refuse, the compile error names what it must);
- mismatch: the kernel ran and an output differs (or still holds the NaN / sentinel poison);
- compile_error: building the program or compiling it raised (the detail names the exception type);
- launch_error: the compiled kernel raised when called (the simulator's checked mode reports out-of-bounds
  accesses and similar faults this way);
- crash: the process running it died (a signal, or no result before the timeout): only `run_jobs` sees these.

`check_batch(items)` gives the same outcomes for many (description, arch) pairs, their libraries built by one
host-compiler run per arch (jit/batch_build.py; g++ is most of a run's time).

`run_jobs` feeds jobs to `python -m tilelang_musa.fuzz.runner` child processes over stdin (one JSON line per
job, or per batch of jobs) and reads one result line per job; a child that dies or hangs is replaced, and the job
it was running is a crash (a batch's jobs left without a result run again one by one to find which). `run_jobs_on(executor, ...)` runs each job as a task of an executor (tilelang_musa/executors: Ray tasks for
`--ray`), with the same outcomes: a task that times out or whose worker dies is a crash."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .. import env as tl_env
from ..executors import DIED, TIMED_OUT

# removed from messages (no machine paths): the checkout holding tilelang_musa, and the one holding this package
_PREFIXES = tuple({str(Path(p).resolve().parents[1]) + os.sep
                   for p in (importlib.util.find_spec("tilelang_musa").origin, __file__)})
STATUSES = ("pass", "mismatch", "compile_error", "launch_error", "crash")
PREFIX = "@@FUZZ "


@dataclass
class Outcome:
    status: str
    arch: str
    detail: str = ""
    seconds: float = 0.0
    path: str = ""  # the code path taken (Family.path): the GEMM template family, a pipeline's loads, ...
    allocated: int = 0  # outputs the launcher allocated and poisoned (launcher_outputs): the global-output check

    @property
    def failed(self) -> bool:
        return self.status != "pass"


def _one_line(exc: BaseException, limit: int = 400) -> str:
    """The exception on one line; for a failed host-compiler build, its first `error:` line (not the command)."""
    raw = str(exc)
    errors = [line for line in raw.splitlines() if "error:" in line]
    if errors:
        raw = raw.splitlines()[0] + " | " + errors[0]
    text = " ".join(f"{type(exc).__name__}: {raw}".split())
    for prefix in _PREFIXES:
        text = text.replace(prefix, "")
    return text if len(text) <= limit else text[:limit] + " ..."


def check(desc: Any, arch: str, sim_check: bool = True) -> Outcome:
    """Compile `desc`'s program for `arch`, run it in the simulator in checked mode (TILELANG_SIM_CHECK=1, unless
    `sim_check` is False) on fresh random inputs and compare its outputs with the torch reference."""
    import tilelang

    from .family import family_of

    fam = family_of(desc)
    start = time.time()
    with _simulator(sim_check):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = fam.build(desc)
                outputs = launcher_outputs(desc, program)
                kernel = tilelang.compile(program, target=f"musa -arch={arch}", pass_configs=fam.pass_configs(desc),
                                          out_idx=outputs or None)
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome
            return _compile_failed(desc, arch, exc, time.time() - start)
        return _run_and_compare(desc, arch, kernel, start, outputs)


def check_batch(items: list[tuple[Any, str]], sim_check: bool = True,
                on_outcome: Callable[[int, Outcome], None] = lambda index, outcome: None) -> list[Outcome]:
    """check() of every (description, arch) of `items`, their libraries built together: one host-compiler run per
    arch and set of build flags (jit/batch_build.py), a failed joint build split until the program that fails is
    built alone. Each program is still run, compared and reported on its own (`on_outcome(index, outcome)` as soon
    as it is known), with the outcome check() gives it."""
    from ..jit.batch_build import build_together
    from ..jit.compile import compile_deferred
    from .family import family_of

    outcomes: list[Outcome | None] = [None] * len(items)
    pending: list[tuple] = []  # (index, DeferredKernel, seconds spent on it so far, launcher_outputs)

    def settle(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        on_outcome(index, outcome)

    with _simulator(sim_check):
        for index, (desc, arch) in enumerate(items):
            fam = family_of(desc)
            start = time.time()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    program = fam.build(desc)
                    outputs = launcher_outputs(desc, program)
                    deferred = compile_deferred(program, target=f"musa -arch={arch}",
                                                pass_configs=fam.pass_configs(desc), out_idx=outputs or None)
            except Exception as exc:  # noqa: BLE001
                settle(index, _compile_failed(desc, arch, exc, time.time() - start))
                continue
            pending.append((index, deferred, time.time() - start, outputs))
        start = time.time()
        errors = build_together([deferred for _, deferred, _, _ in pending])
        share = (time.time() - start) / max(1, len(pending))
        for (index, deferred, seconds, outputs), error in zip(pending, errors):
            desc, arch = items[index]
            begun = time.time() - seconds - share
            if error is not None:
                settle(index, _compile_failed(desc, arch, error, time.time() - begun))
                continue
            try:
                kernel = deferred.finish()
            except Exception as exc:  # noqa: BLE001
                settle(index, _compile_failed(desc, arch, exc, time.time() - begun))
                continue
            settle(index, _run_and_compare(desc, arch, kernel, begun, outputs))
    return outcomes


class _simulator:
    """The simulator backend, in checked mode unless `sim_check` is False; the environment restored after."""

    def __init__(self, sim_check: bool):
        self.sim_check = sim_check

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in ("TILELANG_SIM_CHECK", "TILELANG_EXECUTION_BACKEND")}
        if self.sim_check:
            os.environ["TILELANG_SIM_CHECK"] = "1"
        else:
            os.environ.pop("TILELANG_SIM_CHECK", None)
        os.environ["TILELANG_EXECUTION_BACKEND"] = "sim"

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _compile_failed(desc: Any, arch: str, exc: BaseException, seconds: float) -> Outcome:
    """A failed build or compile: a pass where the family says the arch must refuse the program this way."""
    from ..errors import CompileError
    from .family import family_of

    refusal = family_of(desc).rejected_on(desc, arch)
    detail = _one_line(exc)
    if refusal and isinstance(exc, CompileError) and re.search(refusal, detail):
        return Outcome("pass", arch, f"refused as expected: {detail}", seconds)
    return Outcome("compile_error", arch, detail, seconds)


def launcher_outputs(desc: Any, program: Any) -> list[int]:
    """The outputs the launcher allocates (out_idx) instead of the fuzzer, for about half the programs (by a digest
    of the description). The launcher poisons them, and in checked mode it registers them, so a read of one before
    it is written is a named error (the global-output check). Only an output that the fuzzer passes all poison,
    that the kernel must overwrite completely and whose shape is static qualifies."""
    import torch
    from tvm import tirx

    from .family import family_of
    from .tensors import INT_POISON

    if hashlib.sha1(repr(desc).encode()).digest()[0] % 2:
        return []
    fam = family_of(desc)
    args = fam.arguments(desc, torch.Generator().manual_seed(desc.data_seed))
    if len(args) != len(program.params):
        return []
    expected = fam.reference(desc, [a.clone() for a in args])

    def all_poison(t: torch.Tensor) -> bool:
        return bool(torch.isnan(t.float()).all()) if t.dtype.is_floating_point else \
            bool((t == INT_POISON.get(str(t.dtype).removeprefix("torch."), -1)).all())

    def some_poison(t: torch.Tensor) -> bool:
        return bool(torch.isnan(t.float()).any()) if t.dtype.is_floating_point else \
            bool((t == INT_POISON.get(str(t.dtype).removeprefix("torch."), -1)).any())

    chosen = []
    for index in sorted(expected):
        buffer = program.buffer_map.get(program.params[index])
        static = buffer is not None and all(isinstance(d, (int, tirx.IntImm)) for d in buffer.shape)
        if static and all_poison(args[index]) and not some_poison(expected[index]):
            chosen.append(index)
    return chosen


def _run_and_compare(desc: Any, arch: str, kernel: Any, start: float, outputs: list[int] = ()) -> Outcome:
    """Runs the compiled `kernel` on fresh random inputs with poisoned outputs (those in `outputs` allocated by the
    launcher), and compares with torch."""
    import torch

    from .family import family_of
    from .tensors import compare

    fam = family_of(desc)
    refusal = fam.rejected_on(desc, arch)
    if refusal:
        return Outcome("mismatch", arch, f"compiled, where a CompileError matching {refusal!r} was expected",
                       time.time() - start)
    path = fam.path(desc, kernel.get_device_source())
    gen = torch.Generator().manual_seed(desc.data_seed)
    args = fam.arguments(desc, gen)
    expected = fam.reference(desc, [a.clone() for a in args])
    try:
        returned = kernel(*[a for i, a in enumerate(args) if i not in outputs])
    except Exception as exc:  # noqa: BLE001
        return Outcome("launch_error", arch, _one_line(exc), time.time() - start, path, len(outputs))
    if outputs:
        returned = returned if isinstance(returned, list) else [returned]
        for index, tensor in zip(outputs, returned):
            args[index] = tensor
    problems = []
    for index, want in expected.items():
        rtol, atol = fam.tolerance(desc, index)
        msg = compare(f"arg {index}", args[index], want, rtol, atol)
        if msg:
            problems.append(msg)
    status = "mismatch" if problems else "pass"
    return Outcome(status, arch, "; ".join(problems), time.time() - start, path, len(outputs))


def failure_signature(outcome: Outcome) -> tuple:
    """What a shrunk program must keep to count as the same failure: the status and, for errors, the exception
    type and the first words of the message after its source location (so a shape change does not matter)."""
    if outcome.status in ("pass", "mismatch", "crash"):
        return (outcome.status,)
    kind, _, text = outcome.detail.partition(":")
    text = text.split(" ^ ", 1)[-1]  # after the caret line of a located CompileError
    if outcome.status == "launch_error":  # the simulator's fault after its "block (..), thread (..):" prefix
        text = re.split(r"thread \(\d+,\d+,\d+\):", text)[-1]
        words = re.sub(r"[^A-Za-z_.` ]", " ", text).split()[:8]
        return (outcome.status, kind, tuple(words))
    text = re.sub(r"\(in \w+\):", "", text)
    words = re.sub(r"[^A-Za-z_. ]", " ", text).split()[:3]
    return (outcome.status, kind, tuple(words))


def same_failure(original: Outcome, new: Outcome) -> bool:
    return failure_signature(original) == failure_signature(new)


# ------------------------------------------------------------------------------------------------------------
# Child processes


@dataclass
class Job:
    id: int
    desc: Any
    arch: str
    result: Outcome | None = field(default=None, repr=False)
    sim_check: bool = True


_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env(extra: dict | None = None) -> dict:
    """A child's environment: this process's, with the TILELANG_* values forced by assignment (as a Ray task gets
    them), on the simulator."""
    env = {**os.environ, **tl_env.exported()}
    env["TILELANG_EXECUTION_BACKEND"] = "sim"
    env.update(extra or {})
    return env


class _Child:
    """One worker process and a thread reading its result lines into a queue."""

    def __init__(self, env: dict):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        # this package by its own name: a copy of it imported under another name (a frozen snapshot for a long
        # run, while its files are edited: T.macro bodies are re-read from disk) runs its own worker. From the
        # folder this package lies in, which `-m` puts first on the child's path: the child imports this very
        # package, not a source tree the working directory happens to hold (a checkout beside an installed copy)
        self.proc = subprocess.Popen([sys.executable, "-m", f"{__package__}.runner"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env,
                                     start_new_session=True, cwd=_PACKAGE_PARENT)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(PREFIX):
                self.lines.put(line[len(PREFIX):])
        self.lines.put(None)  # EOF: the child exited

    def send(self, job: Job):
        from .family import to_plain

        self.proc.stdin.write(json.dumps({"id": job.id, "desc": to_plain(job.desc), "arch": job.arch,
                                          "sim_check": job.sim_check}) + "\n")
        self.proc.stdin.flush()

    def send_batch(self, jobs: list[Job], sim_check: bool):
        from .family import to_plain

        self.proc.stdin.write(json.dumps({"jobs": [{"id": j.id, "desc": to_plain(j.desc), "arch": j.arch}
                                                   for j in jobs], "sim_check": sim_check}) + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self, n: int = 600) -> str:
        self.stderr.seek(0)
        text = self.stderr.read()
        return " ".join(text[-n:].split())

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class Session:
    """A child process kept across jobs (the import of the compiler is paid once); replaced after a crash."""

    def __init__(self, env: dict | None = None, timeout: float = 600, sim_check: bool = True):
        self.env = env if env is not None else child_env()
        self.timeout = timeout
        self.sim_check = sim_check
        self.child: _Child | None = None

    def run(self, desc: Any, arch: str, job_id: int = 0) -> Outcome:
        if self.child is None:
            self.child = _Child(self.env)
        child = self.child
        start = time.time()
        try:
            child.send(Job(job_id, desc, arch, sim_check=self.sim_check))
            line = child.lines.get(timeout=self.timeout)
        except (BrokenPipeError, OSError):
            line = None
        except queue.Empty:
            child.kill()
            outcome = Outcome("crash", arch, f"no result within {self.timeout:.0f} s (killed); stderr: "
                              f"{child.stderr_tail()}", time.time() - start)
            self._drop()
            return outcome
        if line is None:
            code = child.proc.wait()
            outcome = Outcome("crash", arch, f"worker died ({_exit_reason(code)}); stderr: {child.stderr_tail()}",
                              time.time() - start)
            self._drop()
            return outcome
        return Outcome(**json.loads(line)["outcome"])

    def run_batch(self, jobs: list[Job], on_result: Callable[[Job], None] = lambda job: None) -> None:
        """Every job's `result`, their libraries built together (check_batch); `on_result(job)` as each arrives.
        When the child dies or hangs, the jobs it left without a result run again one by one (a fresh child each
        time one crashes), so that a crash is the outcome of the program that caused it."""
        if len(jobs) == 1:
            jobs[0].result = self.run(jobs[0].desc, jobs[0].arch, jobs[0].id)
            on_result(jobs[0])
            return
        if self.child is None:
            self.child = _Child(self.env)
        child = self.child
        by_id = {job.id: job for job in jobs}
        left = dict(by_id)
        # the first result waits for every program's lowering and the joint build
        timeout = self.timeout * len(jobs)
        try:
            child.send_batch(jobs, self.sim_check)
            while left:
                line = child.lines.get(timeout=timeout)
                if line is None:
                    break
                data = json.loads(line)
                job = left.pop(data["id"])
                job.result = Outcome(**data["outcome"])
                on_result(job)
                timeout = self.timeout
        except (BrokenPipeError, OSError, queue.Empty):
            pass
        if left:
            child.kill()
            self._drop()
            for job in left.values():
                job.result = self.run(job.desc, job.arch, job.id)
                on_result(job)

    def _drop(self):
        if self.child is not None:
            self.child.close()
            self.child = None

    def close(self):
        self._drop()


def _drive(jobs: list[Job], env: dict, timeout: float, on_result: Callable[[Job], None], stop: threading.Event,
           sim_check: bool, batch: int = 1):
    session = Session(env, timeout, sim_check)
    try:
        for first in range(0, len(jobs), batch):
            if stop.is_set():
                break
            session.run_batch(jobs[first:first + batch], on_result)
    finally:
        session.close()


def run_jobs(jobs: list[Job], *, workers: int = 1, timeout: float = 600, env: dict | None = None,
             on_result: Callable[[Job], None] = lambda job: None, stop: threading.Event | None = None,
             sim_check: bool = True, batch: int = 1) -> list[Job]:
    """Run every job in child processes (`workers` of them in parallel); each job gets its `result` (jobs left
    when `stop` is set keep None). `batch` > 1: a child takes that many jobs at a time and builds their
    libraries together (check_batch)."""
    env = child_env(env)
    stop = stop or threading.Event()
    lock = threading.Lock()

    def report(job):
        with lock:
            on_result(job)

    shards = [jobs[i::workers] for i in range(max(1, workers))]
    threads = [threading.Thread(target=_drive, args=(shard, env, timeout, report, stop, sim_check, max(1, batch)))
               for shard in shards if shard]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return jobs


@dataclass(frozen=True)
class CheckTask:
    """`task(i)`: check() of the i-th (description, arch), as an executor task (shipped whole to a Ray worker)."""

    jobs: tuple[tuple[Any, str], ...]
    sim_check: bool = True

    def __call__(self, index: int) -> Outcome:
        desc, arch = self.jobs[index]
        return check(desc, arch, self.sim_check)


@dataclass(frozen=True)
class CheckBatchTask:
    """`task(i)`: check_batch() of the i-th group of (description, arch): their libraries built together in the
    executor's worker (a list of outcomes, in the group's order)."""

    groups: tuple[tuple[tuple[Any, str], ...], ...]
    sim_check: bool = True

    def __call__(self, index: int) -> list[Outcome]:
        return check_batch(list(self.groups[index]), self.sim_check)


def run_jobs_on(executor: Any, jobs: list[Job], *, timeout: float = 600,
                on_result: Callable[[Job], None] = lambda job: None, stop: threading.Event | None = None,
                sim_check: bool = True, batch: int = 1) -> list[Job]:
    """Run every job as a task of `executor` (executors/__init__.py); outcomes as run_jobs gives them (jobs left
    when `stop` is set keep None). `batch` > 1: a task takes that many jobs and builds their libraries together
    (check_batch, as a child of run_jobs does); the jobs of a task that dies, hangs or raises run again one per
    task, so a crash is reported against the program that caused it."""
    if batch > 1 and len(jobs) > 1:
        groups = [jobs[first:first + batch] for first in range(0, len(jobs), batch)]
        again: list[Job] = []

        def on_group(i: int, outcomes: list[Outcome] | None, failure: tuple[str, str] | None) -> None:
            if failure is not None or outcomes is None or len(outcomes) != len(groups[i]):
                again.extend(groups[i])
                return
            for job, outcome in zip(groups[i], outcomes):
                job.result = outcome
                on_result(job)

        task = CheckBatchTask(tuple(tuple((job.desc, job.arch) for job in group) for group in groups), sim_check)
        executor.run_tasks(len(groups), task, timeout * batch, on_group, stop)
        if again and not (stop is not None and stop.is_set()):
            run_jobs_on(executor, again, timeout=timeout, on_result=on_result, stop=stop, sim_check=sim_check)
        return jobs

    def on_done(i: int, outcome: Outcome | None, failure: tuple[str, str] | None) -> None:
        job = jobs[i]
        if failure is not None:
            kind, text = failure
            if kind == TIMED_OUT:
                detail = f"no result within {timeout:.0f} s (killed)"
            elif kind == DIED:
                detail = f"worker died: {text}"
            else:  # check() raised: a fault of the fuzzer itself, as in a child process
                last = text.strip().splitlines()[-1] if text.strip() else "no traceback"
                detail = f"fuzzer fault: {' '.join(last.split())}"
            outcome = Outcome("crash", job.arch, detail)
        job.result = outcome
        on_result(job)

    task = CheckTask(tuple((job.desc, job.arch) for job in jobs), sim_check)
    executor.run_tasks(len(jobs), task, timeout, on_done, stop)
    return jobs


def _worker_main():
    """The child: one JSON job per stdin line, one result line per job on stdout."""
    from .family import from_plain
    from . import families  # noqa: F401 - registers the families

    out = sys.stdout
    sys.stdout = sys.stderr  # anything else the compiler or a kernel prints stays out of the protocol
    def emit(job_id: int, outcome: Outcome) -> None:
        out.write(PREFIX + json.dumps({"id": job_id, "outcome": asdict(outcome)}) + "\n")
        out.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        jobs = message["jobs"] if "jobs" in message else [message]
        sim_check = message.get("sim_check", True)
        done: set[int] = set()

        def report(index: int, outcome: Outcome) -> None:
            done.add(index)
            emit(jobs[index]["id"], outcome)

        try:
            items = [(from_plain(job["desc"]), job["arch"]) for job in jobs]
            if "jobs" in message:
                check_batch(items, sim_check, report)
            else:
                report(0, check(items[0][0], items[0][1], sim_check))
        except Exception as exc:  # noqa: BLE001 - a fault of the fuzzer itself is reported, not fatal
            traceback.print_exc()
            for index, job in enumerate(jobs):
                if index not in done:
                    emit(job["id"], Outcome("crash", job["arch"], f"fuzzer fault: {_one_line(exc)}"))

if __name__ == "__main__":
    _worker_main()
