"""The autotuner on Ray (`executor="ray"`), on a local Ray instance of two CPUs: the README GEMM's tuning space gives
the local executor's best config and per-config results; a config that raises, hangs past the timeout or kills
its worker is reported, not fatal; the worker sees this process's TILELANG_* variables; what cannot be shipped,
an unknown executor and a missing Ray are clear errors.

The Ray run compiles the configs (in this module's own kernel cache); the local run after it then hits that cache.
Both rank by the simulator's modelled device time, which is deterministic, so their results are compared exactly.
"""

import functools
import math
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest

import tilelang

ray = pytest.importorskip("ray")

from tilelang.autotuner import AutoTuner, autotune  # noqa: E402
from tilelang_musa import env as tl_env  # noqa: E402
from tilelang_musa.autotuner import workers  # noqa: E402
from tilelang_musa.executors import RAISED, RayExecutor, TaskNotShippable  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "autotune"))
import gemm_autotune as readme  # noqa: E402 - the README GEMM under @autotune, and its tuning space

M = N = K = 256


pytestmark = pytest.mark.usefixtures("local_ray")  # a local Ray instance of two CPUs (conftest.py)


@pytest.fixture(scope="module", autouse=True)
def ray_autotune_settings(tmp_path_factory):
    """A kernel cache of this module's own; no persisted tuning results (every run tunes). Ray tasks run with
    these variables (RayExecutor ships them with each task)."""
    names = ("TILELANG_CACHE_DIR", "TILELANG_AUTO_TUNING_CPU_COUNTS", "TILELANG_AUTO_TUNING_DISABLE_CACHE")
    saved = {k: os.environ.get(k) for k in names}
    os.environ["TILELANG_CACHE_DIR"] = str(tmp_path_factory.mktemp("ray_autotune_cache"))
    os.environ["TILELANG_AUTO_TUNING_CPU_COUNTS"] = "2"
    os.environ["TILELANG_AUTO_TUNING_DISABLE_CACHE"] = "1"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def recording_ref(log, A, B):
    """The README's reference, noting whether it ran in a Ray task or not."""
    with open(log, "a") as f:
        f.write("ray\n" if ray.get_runtime_context().get_task_id() is not None else "not ray\n")
    return readme.ref_program(A, B)


def tune(executor, log):
    tuned = autotune(configs=readme.get_configs(), warmup=1, rep=1, ref_prog=functools.partial(recording_ref, log),
                     executor=executor)(readme.matmul.jit_impl)
    kernel = tuned.compile(M=M, N=N, K=K)
    assert kernel is tuned.last_result.kernel
    return tuned.last_result


def outcomes(result):
    return [(t.index, t.config, t.status, t.error, None if math.isnan(t.latency) else t.latency)
            for t in result.trials]


def test_ray_gives_the_local_executors_best_config_and_results_on_the_readme_gemm_space(tmp_path):
    on_ray = tune("ray", tmp_path / "ray.log")
    local = tune("local", tmp_path / "local.log")
    assert outcomes(on_ray) == outcomes(local)
    assert on_ray.config == local.config == on_ray.kernel.config
    assert on_ray.latency == local.latency > 0 and on_ray.latency_source == local.latency_source == "sim_model"
    *valid, too_big = on_ray.trials
    assert all(t.valid for t in valid) and too_big.status == "compile_error" and "shared memory" in too_big.error
    # every valid config was checked against ref_prog: in Ray tasks, then in forked processes
    assert (tmp_path / "ray.log").read_text().split("\n")[:-1] == ["ray"] * len(valid)
    assert (tmp_path / "local.log").read_text().split("\n")[:-1] == ["not ray"] * len(valid)


def readme_gemm(block_M, block_N, block_K, fault=None):
    """The README GEMM's program for AutoTuner.from_kernel, or a config that fails as `fault` says."""
    if fault == "raise":
        raise ValueError("no kernel for this config")
    if fault == "hang":
        time.sleep(600)
    if fault == "die":
        os._exit(3)
    return readme.matmul.jit_impl.get_tir(M=M, N=N, K=K, block_M=block_M, block_N=block_N, block_K=block_K)


TILE = {"block_M": 64, "block_N": 64, "block_K": 32}


def test_a_ray_task_sees_this_process_tilelang_variables_and_reports_what_it_raises(monkeypatch):
    monkeypatch.setenv("TILELANG_RAY_PROBE", "from the driver")
    outcomes = {}

    def task(i):
        if i == 1:
            raise KeyError("boom")
        return {k: os.environ.get(k) for k in ("TILELANG_RAY_PROBE", "TILELANG_CACHE_DIR", "TILELANG_SIM_SEED")}

    tl_env.TILELANG_SIM_SEED = 7  # forced by assignment, not in os.environ: it travels too
    try:
        RayExecutor().run_tasks(2, task, 60, lambda i, value, failure: outcomes.__setitem__(i, (value, failure)))
    finally:
        tl_env.TILELANG_SIM_SEED = None
    assert outcomes[0] == ({"TILELANG_RAY_PROBE": "from the driver", "TILELANG_CACHE_DIR": os.environ[
        "TILELANG_CACHE_DIR"], "TILELANG_SIM_SEED": "7"}, None)
    kind, text = outcomes[1][1]
    assert kind == RAISED and "KeyError: 'boom'" in text and "in task" in text


def test_what_cannot_be_shipped_to_ray_is_named_before_anything_runs():
    lock = threading.Lock()

    def locked_ref(A, B):
        with lock:
            return readme.ref_program(A, B)

    tuner = AutoTuner.from_kernel(readme_gemm, [TILE], executor="ray").set_profile_args(ref_prog=locked_ref)
    with pytest.raises(TaskNotShippable, match=r"cannot ship ConfigTask\.profile_args\.ref_prog, closure variable "
                                               r"`lock` \(lock\) to Ray workers: TypeError: cannot pickle"):
        tuner.run(timeout=30)


def test_executors_by_name_or_by_variable_and_unknown_names(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown executor 'dask'; known: 'local', 'ray'"):
        AutoTuner.from_kernel(readme_gemm, [TILE], executor="dask")
    with pytest.raises(ValueError, match=r"unknown executor 'dask'"):
        autotune(configs=[TILE], executor="dask")(readme.matmul.jit_impl)
    assert workers.executor_for(None, 4).name == "local"
    monkeypatch.setenv("TILELANG_AUTO_TUNING_EXECUTOR", "ray")
    assert workers.executor_for(None, 4).name == "ray" and workers.executor_for("local", 4).name == "local"
    executor = RayExecutor(max_in_flight=8)
    assert workers.executor_for(executor, 4) is executor
    monkeypatch.setenv("TILELANG_AUTO_TUNING_EXECUTOR", "dask")
    with pytest.raises(ValueError, match=r"TILELANG_AUTO_TUNING_EXECUTOR='dask' names no executor"):
        workers.executor_for(None, 4)


def test_without_ray_installed_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ImportError, match=re.escape('pip install "tilelang_musa[ray]"')):
        RayExecutor().run_tasks(1, lambda i: i, None, lambda i, value, failure: None)


# Seconds each config may take on Ray: what ends the hanging config, so the test waits this long. The good config
# runs in a warm Ray worker (below) and finds its kernel in the module's cache: a load and a check in the simulator,
# ~1 s. (A cold worker's imports alone take over 15 s on a loaded 2-core machine.)
HANG_TIMEOUT_S = 10


def warm_worker(i):
    """Imports what a config's task needs; long enough that the two tasks hold both of Ray's CPUs at once."""
    import tilelang  # noqa: F401

    time.sleep(1)
    return i


def test_a_config_that_raises_hangs_or_kills_its_worker_is_reported_and_the_run_goes_on():
    tilelang.compile(readme_gemm(**TILE))  # into the cache the Ray tasks share (TILELANG_CACHE_DIR travels)
    RayExecutor().run_tasks(2, warm_worker, None, lambda i, value, failure: None)  # both workers started
    configs = [TILE, {**TILE, "fault": "raise"}, {**TILE, "fault": "hang"}, {**TILE, "fault": "die"}]
    start = time.perf_counter()
    result = (AutoTuner.from_kernel(readme_gemm, configs, executor="ray")
              .set_profile_args(ref_prog=readme.ref_program).run(timeout=HANG_TIMEOUT_S))
    # the timeout counts from the hand-over to Ray, and is what ends the hanging config
    assert time.perf_counter() - start < HANG_TIMEOUT_S + 60
    assert [t.status for t in result.trials] == ["ok", "compile_error", "timeout", "run_error"]
    assert result.trials[1].error == "ValueError: no kernel for this config"
    assert result.trials[2].error == f"did not finish within the {HANG_TIMEOUT_S} s timeout"
    assert result.trials[3].error.startswith("the Ray worker died (WorkerCrashedError")
    assert result.config == TILE and result.latency > 0
