"""Compile, run and compare one (description, arch); run many in child processes.

`check(desc, arch)` classifies one program on one arch:
- pass: every output matches the torch reference within the family's tolerance (or, for a program the family
  says the arch must refuse, the compile error names what it must);
- mismatch: the kernel ran and an output differs (or still holds the NaN / sentinel poison);
- compile_error: building the program or compiling it raised (the detail names the exception type);
- launch_error: the compiled kernel raised when called (the simulator's checked mode reports out-of-bounds
  accesses and similar faults this way);
- crash: the process running it died (a signal, or no result before the timeout): only `run_jobs` sees these.

`run_jobs` feeds jobs to `python -m tilelang_musa.fuzz.runner` child processes over stdin (one JSON line per
job) and reads one result line per job; a child that dies or hangs is replaced, and the job it was running is a
crash. `run_jobs_on(executor, ...)` runs each job as a task of an executor (tilelang_musa/executors: Ray tasks for
`--ray`), with the same outcomes: a task that times out or whose worker dies is a crash."""

from __future__ import annotations

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
    import torch

    import tilelang

    from ..errors import CompileError
    from .family import family_of
    from .tensors import compare

    fam = family_of(desc)
    refusal = fam.rejected_on(desc, arch)
    start = time.time()
    saved = {k: os.environ.get(k) for k in ("TILELANG_SIM_CHECK", "TILELANG_EXECUTION_BACKEND")}
    if sim_check:
        os.environ["TILELANG_SIM_CHECK"] = "1"
    else:
        os.environ.pop("TILELANG_SIM_CHECK", None)
    os.environ["TILELANG_EXECUTION_BACKEND"] = "sim"
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = fam.build(desc)
                kernel = tilelang.compile(program, target=f"musa -arch={arch}", pass_configs=fam.pass_configs(desc))
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome
            detail = _one_line(exc)
            if refusal and isinstance(exc, CompileError) and re.search(refusal, detail):
                return Outcome("pass", arch, f"refused as expected: {detail}", time.time() - start)
            return Outcome("compile_error", arch, detail, time.time() - start)
        if refusal:
            return Outcome("mismatch", arch, f"compiled, where a CompileError matching {refusal!r} was expected",
                           time.time() - start)
        path = fam.path(desc, kernel.get_device_source())
        gen = torch.Generator().manual_seed(desc.data_seed)
        args = fam.arguments(desc, gen)
        expected = fam.reference(desc, [a.clone() for a in args])
        try:
            kernel(*args)
        except Exception as exc:  # noqa: BLE001
            return Outcome("launch_error", arch, _one_line(exc), time.time() - start, path)
        problems = []
        for index, want in expected.items():
            rtol, atol = fam.tolerance(desc, index)
            msg = compare(f"arg {index}", args[index], want, rtol, atol)
            if msg:
                problems.append(msg)
        status = "mismatch" if problems else "pass"
        return Outcome(status, arch, "; ".join(problems), time.time() - start, path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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

    def _drop(self):
        if self.child is not None:
            self.child.close()
            self.child = None

    def close(self):
        self._drop()


def _drive(jobs: list[Job], env: dict, timeout: float, on_result: Callable[[Job], None], stop: threading.Event,
           sim_check: bool):
    session = Session(env, timeout, sim_check)
    try:
        for job in jobs:
            if stop.is_set():
                break
            job.result = session.run(job.desc, job.arch, job.id)
            on_result(job)
    finally:
        session.close()


def run_jobs(jobs: list[Job], *, workers: int = 1, timeout: float = 600, env: dict | None = None,
             on_result: Callable[[Job], None] = lambda job: None, stop: threading.Event | None = None,
             sim_check: bool = True) -> list[Job]:
    """Run every job in child processes (`workers` of them in parallel); each job gets its `result` (jobs left
    when `stop` is set keep None)."""
    env = child_env(env)
    stop = stop or threading.Event()
    lock = threading.Lock()

    def report(job):
        with lock:
            on_result(job)

    shards = [jobs[i::workers] for i in range(max(1, workers))]
    threads = [threading.Thread(target=_drive, args=(shard, env, timeout, report, stop, sim_check))
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


def run_jobs_on(executor: Any, jobs: list[Job], *, timeout: float = 600,
                on_result: Callable[[Job], None] = lambda job: None, stop: threading.Event | None = None,
                sim_check: bool = True) -> list[Job]:
    """Run every job as a task of `executor` (executors/__init__.py); outcomes as run_jobs gives them (jobs left
    when `stop` is set keep None)."""

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
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            outcome = check(from_plain(job["desc"]), job["arch"], job.get("sim_check", True))
        except Exception as exc:  # noqa: BLE001 - a fault of the fuzzer itself is reported, not fatal
            traceback.print_exc()
            outcome = Outcome("crash", job["arch"], f"fuzzer fault: {_one_line(exc)}")
        out.write(PREFIX + json.dumps({"id": job["id"], "outcome": asdict(outcome)}) + "\n")
        out.flush()


if __name__ == "__main__":
    _worker_main()
