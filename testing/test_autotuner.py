"""The autotuner in the CPU simulator: a small GEMM over tile configs, one of which does not compile and one of
which gives wrong results; persisted results; the @autotune-over-@tilelang.jit form; device-style timing.

Every test compiles the same GEMM source for the same configs, so only the first tuning run builds libraries;
the rest hit the kernel cache of this module's cache directory."""

import math
import os
import threading
import time

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang.autotuner import AutoTuner, autotune, set_autotune_inputs
from tilelang_musa.autotuner import tuner as tuner_module
from tilelang_musa.autotuner import workers

M, N, K = 128, 128, 96

CONFIGS = [
    {"block_M": 256, "block_N": 1024, "block_K": 96},  # 240 KiB of shared tiles at one stage: does not compile
    {"block_M": 64, "block_N": 64, "block_K": 64},  # compiles, but 96 // 64 drops a K tail: mismatch
    {"block_M": 64, "block_N": 64, "block_K": 32},  # valid
    {"block_M": 32, "block_N": 64, "block_K": 48},  # valid, and faster by the performance model: twice the blocks
]                                                   # for the S5000's 56 MPs, 2 steps of K instead of 3
BEST = 3


def gemm_program(M, N, K, block_M, block_N, block_K):
    """C = A @ B with K // block_K steps: a block_K that does not divide K leaves part of K out."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm


def ref_gemm(a, b):
    return (a.float() @ b.float()).half()


def logged_kernel(log_path):
    """The GEMM as upstream's AutoTuner.from_kernel takes it; every elaboration of a config appends a line to
    `log_path`, in whichever process it happens."""

    def kernel(block_M=None, block_N=None, block_K=None):
        with open(log_path, "a") as log:
            log.write(f"{block_M},{block_N},{block_K}\n")
        return gemm_program(M, N, K, block_M, block_N, block_K)

    return kernel


@pytest.fixture(scope="module", autouse=True)
def tuning_env(tmp_path_factory):
    """A cache directory of this module's own (kernels and persisted tuning results) and two worker processes."""
    saved = {k: os.environ.get(k) for k in ("TILELANG_CACHE_DIR", "TILELANG_AUTO_TUNING_CPU_COUNTS")}
    os.environ["TILELANG_CACHE_DIR"] = str(tmp_path_factory.mktemp("autotune_cache"))
    os.environ["TILELANG_AUTO_TUNING_CPU_COUNTS"] = "2"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def tuner_for(kernel, configs=CONFIGS, **profile):
    return (AutoTuner.from_kernel(kernel=kernel, configs=configs)
            .set_compile_args(out_idx=[-1], target="musa -arch=mp_31")
            .set_profile_args(**{"ref_prog": ref_gemm, **profile}))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    log = tmp_path_factory.mktemp("elaborations") / "log.txt"
    log.touch()
    result = tuner_for(logged_kernel(str(log))).run(warmup=1, rep=2, timeout=120)
    return result, log


def test_a_config_that_fails_to_compile_is_skipped_with_its_error(first_run):
    result, _ = first_run
    trial = result.trials[0]
    assert trial.status == "compile_error" and not trial.valid
    assert "shared memory" in trial.error and "196608" in trial.error
    assert trial in result.skipped


def test_a_config_that_mismatches_ref_prog_is_skipped_and_the_modelled_fastest_config_wins(first_run):
    result, _ = first_run
    assert [t.status for t in result.trials] == ["compile_error", "mismatch", "ok", "ok"]
    assert "differ from the reference" in result.trials[1].error
    assert result.config == CONFIGS[BEST] and result.kernel.config == CONFIGS[BEST]
    # in the simulator the valid configs are ranked by the performance model's time for one launch
    assert result.latency_source == "sim_model" and math.isnan(result.ref_latency)
    valid = [t for t in result.trials if t.valid]
    assert result.latency == min(t.latency for t in valid) and all(t.latency > 0 for t in valid)
    assert result.latency == pytest.approx(result.kernel.get_profiler().model().milliseconds)
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    torch.testing.assert_close(result.kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert "T.gemm" not in result.libcode and result.kernel.kernel_name in result.libcode


def test_a_second_run_reads_the_persisted_result_and_compiles_only_the_best_config(first_run):
    first, log = first_run
    before = log.read_text().splitlines()
    assert len(before) >= len(CONFIGS)  # every config was elaborated (in the workers) the first time
    AutoTuner._memory_cache.clear()  # as in a new process
    start = time.perf_counter()
    second = tuner_for(logged_kernel(str(log))).run(warmup=1, rep=2, timeout=120)
    elapsed = time.perf_counter() - start
    assert second.loaded_from_disk and not first.loaded_from_disk
    best = ",".join(str(CONFIGS[BEST][k]) for k in ("block_M", "block_N", "block_K"))
    assert log.read_text().splitlines()[len(before):] == [best]  # the best config alone, from the kernel cache
    assert second.config == first.config
    assert [(t.status, t.error) for t in second.trials] == [(t.status, t.error) for t in first.trials]
    assert elapsed < 10


def test_the_persisted_key_covers_the_target_the_configs_and_ref_prog():
    def key_of(tuner, configs=CONFIGS):
        return tuner.generate_cache_key(configs=configs, warmup=1, rep=2, timeout=60)

    kernel = logged_kernel("unused")
    key = key_of(tuner_for(kernel))
    assert key is not None and key_of(tuner_for(kernel)) == key
    assert key_of(tuner_for(kernel).set_compile_args(out_idx=[-1], target="musa -arch=mp_22")) != key
    assert key_of(tuner_for(kernel), CONFIGS[1:]) != key
    assert key_of(tuner_for(kernel, ref_prog=lambda a, b: a @ b)) != key
    lock = threading.Lock()  # a closure value with no stable fingerprint: the result is not persisted

    def locked_ref(a, b):
        with lock:
            return ref_gemm(a, b)

    assert key_of(tuner_for(kernel, ref_prog=locked_ref)) is None


def test_configs_with_keys_that_are_not_kernel_parameters_are_rejected():
    with pytest.raises(ValueError, match=r"keys \['block_X'\] that are not parameters"):
        tuner_for(logged_kernel("unused"), configs=[{"block_X": 1}]).run()


@autotune(configs=lambda M, N, K: CONFIGS[1:], warmup=1, rep=2, ref_prog=ref_gemm)
@tilelang.jit(out_idx=[-1], target="musa -arch=mp_31")
def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
    return gemm_program(M, N, K, block_M, block_N, block_K)


def test_autotune_goes_above_jit_as_upstream():
    with pytest.raises(TypeError, match=r"put @autotune\(...\) above @tilelang.jit"):
        tilelang.jit(autotune(configs=CONFIGS)(gemm_program))


def test_autotune_over_jit_tunes_when_called_with_only_the_problem_sizes(first_run):
    kernel = matmul(M, N, K)
    assert kernel.config == CONFIGS[BEST] and kernel.latency == matmul.last_result.latency > 0
    assert [t.status for t in matmul.last_result.trials] == ["mismatch", "ok", "ok"]
    a, b = rand((M, K), torch.float16, 3), rand((K, N), torch.float16, 4)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert matmul(M, N, K) is kernel  # the same problem again: tuned once per process
    # the caller fixes the tunable parameters: compiled as given, no tuning
    fixed = matmul(M, N, K, block_M=64, block_N=64, block_K=32)
    assert fixed is not kernel
    torch.testing.assert_close(fixed(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_on_a_device_the_fastest_valid_config_wins(first_run, monkeypatch):
    """Device timing, exercised in the simulator: the workers only compile, then this process checks and times
    each config (do_bench with warmup/rep runs; wall-clock here) and keeps the fastest."""
    monkeypatch.setattr(tuner_module, "device_timing", lambda compile_args: True)
    result = tuner_for(logged_kernel(os.devnull)).run(warmup=1, rep=3, timeout=120)
    assert result.latency_source == "musa_events"
    timed = [t for t in result.trials if t.valid]
    assert [t.index for t in timed] == [2, 3] and all(t.latency > 0 for t in timed)
    assert result.latency == min(t.latency for t in timed) and result.ref_latency > 0
    assert result.trials[1].status == "mismatch"


def test_the_cost_model_hook_ranks_valid_configs_in_the_simulator(first_run):
    def cost_model(kernel, config):  # a model of the user's own, in place of the simulator's
        return 2 ** 20 / (config["block_M"] * config["block_N"])  # "larger tiles are faster"

    result = tuner_for(logged_kernel(os.devnull), cost_model=cost_model).run(warmup=1, rep=2, timeout=120)
    assert result.latency_source == "cost_model"
    assert result.config == CONFIGS[2] and result.latency == 2 ** 20 / (64 * 64)
    assert [t.latency for t in result.trials if t.valid] == [2 ** 20 / (64 * 64), 2 ** 20 / (32 * 64)]


def test_set_autotune_inputs_are_the_inputs_configs_are_checked_on(first_run):
    a, b = rand((M, K), torch.float16, 5), rand((K, N), torch.float16, 6)
    expected = ref_gemm(a, b)

    def ref(x, y):  # right only for a and b: a config checked on generated inputs would mismatch
        return expected

    with set_autotune_inputs(a, b):
        tuner = tuner_for(logged_kernel(os.devnull), configs=CONFIGS[2:3], ref_prog=ref)
        result = tuner.run(warmup=1, rep=2, timeout=120)
    assert result.config == CONFIGS[2] and result.trials[0].valid
    assert tuner.generate_cache_key(configs=CONFIGS[2:3]) is None  # captured inputs are not persisted


def test_workers_kill_a_task_past_its_timeout_and_report_a_crash():
    outcomes = {}

    def task(i):
        if i == 1:
            time.sleep(60)
        if i == 2:
            os._exit(3)
        return i * 10

    start = time.perf_counter()
    workers.run_tasks(3, task, 3, 1.0, lambda i, value, failure: outcomes.__setitem__(i, (value, failure)))
    assert time.perf_counter() - start < 20
    assert outcomes[0] == (0, None)
    assert outcomes[1][1][0] == workers.TIMED_OUT
    assert outcomes[2][1] == (workers.DIED, "the worker process exited with code 3")


def test_worker_count_follows_upstream_variables(monkeypatch):
    monkeypatch.setattr(workers, "available_cpus", lambda: 8)
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "-1")
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_UTILITIES", "0.5")
    assert workers.worker_count(100) == 4
    monkeypatch.setenv("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "3")
    assert workers.worker_count(100) == 3
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "6")
    monkeypatch.delenv("TILELANG_AUTO_TUNING_MAX_CPU_COUNT")
    assert workers.worker_count(100) == 6 and workers.worker_count(2) == 2


@autotune(configs=[{"threads": 64}, {"threads": 128}], warmup=1, rep=2, ref_prog=lambda a, b: a + b)
@tilelang.jit
def eager_add(A, B, threads=256, dtype="float32"):
    N = T.const("N")
    A: T.Tensor[(N,), dtype]
    B: T.Tensor[(N,), dtype]
    C = T.empty((N,), dtype)
    with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
        for i in T.Parallel(threads):
            C[bx * threads + i] = A[bx * threads + i] + B[bx * threads + i]
    return C


def test_autotune_over_an_eager_jit_function_tunes_for_sizes_or_tensors():
    kernel = eager_add.compile(N=1024)
    # modelled: 8 blocks of 4 warps end a dependent latency before 16 blocks of 2 (each warp has one arithmetic
    # instruction fewer, at the S5000's fitted latency); both take one round of the MPs
    assert kernel.config == {"threads": 128}
    a, b = rand((1024,), torch.float32, 7), rand((1024,), torch.float32, 8)
    torch.testing.assert_close(eager_add(a, b), a + b)  # the same sizes: the same tuning, then a run
    assert len(eager_add._tuner_cache) == 1 and eager_add.last_result.kernel is kernel
