"""Shared fixtures: every test runs on CPU through the simulator unless a MUSA device is present."""

import inspect
import os
import time
from pathlib import Path

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

os.environ.setdefault("TILELANG_EXECUTION_BACKEND", "sim")


# `pytest -n 2` (pytest-xdist) runs the tests in worker processes. The kernel cache, the archive of generated sources
# and the after-all rendezvous below are shared by the workers: they live in the controller's base temp directory
# (a worker's base temp is a subdirectory of it), or in the run's own base temp without xdist.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
WORKER_COUNT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if WORKER else base


def _shared_subdir(session_dir: Path, name: str) -> Path:
    path = session_dir / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(session_dir):
    """The session's kernels are cached in a directory of its own. The user's examples call
    `tilelang.disable_cache()` when imported (test_gemm imports the GEMM example at collection): enable it again."""
    import tilelang

    # A session started by test_checked_mode.py reuses its parent's kernels (TILELANG_TEST_CACHE_DIR).
    shared = os.environ.get("TILELANG_TEST_CACHE_DIR")
    os.environ["TILELANG_CACHE_DIR"] = shared or str(_shared_subdir(session_dir, "tilelang_cache"))
    tilelang.enable_cache()
    yield


@pytest.fixture(autouse=True, scope="session")
def kernel_archive(session_dir):
    """Every MUSA source the session generates is kept here (TILELANG_SOURCE_ARCHIVE_DIR): the tests marked
    `after_all_kernels` (test_device_compilers.py) compile them all with clang and nvcc, after every other test."""
    archive = _shared_subdir(session_dir, "generated_kernels")
    os.environ["TILELANG_SOURCE_ARCHIVE_DIR"] = str(archive)
    yield archive


GENERATED_BY_FILE = "generated_by.tsv"


def generated_by(archive: Path, name: str) -> str:
    """The test that first generated the archived source `name`, for the reports of test_device_compilers.py."""
    table = archive.parent / GENERATED_BY_FILE
    lines = table.read_text().splitlines() if table.exists() else []
    return next((line.split("\t")[1] for line in lines if line.split("\t")[0] == name), "this module")


@pytest.fixture(autouse=True)
def _attribute_generated_kernels(kernel_archive, request):
    before = set(os.listdir(kernel_archive))
    yield
    new = sorted(set(os.listdir(kernel_archive)) - before)
    if new:
        # One short append per test (O_APPEND): lines from the workers do not interleave.
        with open(kernel_archive.parent / GENERATED_BY_FILE, "a") as table:
            table.write("".join(f"{name}\t{request.node.nodeid}\n" for name in new))


def _run_order(item) -> int:
    """0: tests on the session's Ray instance (the longest tests: started first, and together, so one worker starts
    Ray once); 2: tests marked `after_all_kernels`; 1: every other test."""
    if item.get_closest_marker("after_all_kernels") is not None:
        return 2
    return 0 if _uses_ray(item) else 1


def pytest_collection_modifyitems(config, items):
    """Tests on Ray run first and tests marked `after_all_kernels` last (a stable sort keeps every other order).
    Under xdist the default `--dist load` scheduler hands tests out in this order, in small chunks, so the after-all
    tests are the last a worker receives; `after_all_kernels_ready` then waits for the other workers to finish
    theirs. (`--dist worksteal` gives each worker one contiguous half up front: the worker whose half ends with the
    after-all tests blocks in them, idle, while the other runs the rest of its half alone: a full run took 24 min
    at 122% CPU, against 17 min at 187% with `load`.)"""
    items.sort(key=_run_order)


AFTER_ALL_TIMEOUT_S = 3600


def _announce_done(session_dir: Path) -> Path:
    rendezvous = _shared_subdir(session_dir, "workers_done")
    (rendezvous / (WORKER or "main")).touch()
    return rendezvous


@pytest.fixture(scope="session")
def after_all_kernels_ready(session_dir):
    """Blocks until every worker has run all its other tests (each announces it here, or when its session ends)."""
    rendezvous = _announce_done(session_dir)
    deadline = time.monotonic() + AFTER_ALL_TIMEOUT_S
    while len(os.listdir(rendezvous)) < WORKER_COUNT:
        if time.monotonic() > deadline:
            pytest.fail(f"after_all_kernels: waited {AFTER_ALL_TIMEOUT_S} s for the other xdist workers "
                        f"({sorted(os.listdir(rendezvous))} of {WORKER_COUNT} done)")
        time.sleep(1)


def pytest_sessionfinish(session):
    if WORKER and hasattr(session.config, "_tmp_path_factory"):
        _announce_done(session.config._tmp_path_factory.getbasetemp().parent)


_ray_started_here = False  # whether this process started the running Ray instance (and so stops it)


@pytest.fixture
def local_ray(tmp_path_factory):
    """A local Ray instance of two CPUs, started by the first Ray test a worker runs and stopped after the last of a
    row of them (`pytest_runtest_teardown`; the Ray tests run first, together): starting Ray, and its worker
    processes' imports of torch and this package, cost seconds each time, and a warm worker serves the next module's
    tasks. Sharing is sound: a task runs with the driver's TILELANG_* variables of its own run (RayExecutor ships
    them with each task), and a task past its timeout is cancelled with its worker killed. Ray puts the driver's
    working directory first on its workers' sys.path: started from the repository root, they would import its
    source tree (no built launcher) instead of the installed package, so the driver starts it from a scratch
    directory. An instance this process did not start is used and left running."""
    global _ray_started_here
    import ray

    if not ray.is_initialized():
        here = os.getcwd()
        os.chdir(tmp_path_factory.mktemp("ray_driver"))
        try:
            ray.init(num_cpus=2, include_dashboard=False)
        finally:
            os.chdir(here)
        _ray_started_here = True
    yield


def _uses_ray(item) -> bool:
    return item is not None and "local_ray" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stops the Ray instance `local_ray` started once the next test does not use it: its daemons would otherwise
    take CPU time for the rest of the session."""
    global _ray_started_here
    if _ray_started_here and _uses_ray(item) and not _uses_ray(nextitem):
        import ray

        ray.shutdown()
        _ray_started_here = False


@pytest.fixture
def device() -> str:
    return "cpu"


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def poison(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype)


def without_locations(func):
    """The program with the source locations the frontend records (they name the test's own lines) dropped."""
    def on_call(node, mutator):
        node = mutator.default_mutate(node)
        if node.attrs is not None and "tl.loc" in node.attrs:
            attrs = {k: v for k, v in node.attrs.items() if k != "tl.loc"}
            return tvm.ir.Call(node.op, list(node.args), attrs=attrs, ret_ty="int32")
        return node

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        annotations = {k: v for k, v in (node.annotations or {}).items() if k != "tl.loc"}
        return tirx.For(node.loop_var, node.min, node.extent, node.kind, node.body, node.thread_binding, annotations)

    def on_alloc(node, mutator):
        annotations = {k: v for k, v in (node.annotations or {}).items() if k != "tl.loc"}
        return tirx.AllocBuffer(node.buffer, annotations) if annotations else tirx.AllocBuffer(node.buffer)

    return tvm_ffi.structural_mutate(func, [(tvm.ir.Call, on_call), (tirx.For, on_for), (tirx.AllocBuffer, on_alloc)])


def marked_temporary(func, *names):
    """The program with the tiles named `names` allocated as the compiler's temporaries (the annotation the passes
    that make them put on their AllocBuffer), for the expected programs of those passes."""
    from tilelang_musa.ir.attrs import TEMPORARY_ANNOTATION

    def on_alloc(node, mutator):
        if node.buffer.name not in names:
            return node
        return tirx.AllocBuffer(node.buffer, {**(node.annotations or {}), TEMPORARY_ANNOTATION: True})

    return tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])


def line_of(func, text: str) -> int:
    """The source line number of the first line of `func` containing `text` (for errors that name the user's line)."""
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if text in line)
