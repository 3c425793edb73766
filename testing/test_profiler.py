"""do_bench as upstream TileLang's: warmup and rep are milliseconds (run counts come from a first estimate),
n_warmup / n_repeat fix the counts, return_mode and quantiles summarize the run times; and the kernel profiler."""

import time

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.profiler import do_bench
from tilelang_musa.profiler import bench

ESTIMATE_AND_FIRST_CALL = bench.ESTIMATE_RUNS + 1


class Sleeper:
    """A callable that sleeps `durations_ms[i % len]` on its i-th call and counts its calls."""

    def __init__(self, *durations_ms):
        self.durations = durations_ms
        self.calls = 0

    def __call__(self):
        time.sleep(self.durations[self.calls % len(self.durations)] / 1e3)
        self.calls += 1


def test_warmup_and_rep_are_time_budgets_in_milliseconds():
    fn = Sleeper(4.0)
    latency = do_bench(fn, warmup=20, rep=40)
    assert latency >= 4.0
    # about 20/4 warmup and 40/4 timed runs; fewer when a sleep overshoots, never fewer than one each
    runs = fn.calls - ESTIMATE_AND_FIRST_CALL
    assert 2 <= runs <= 5 + 10


def test_n_warmup_and_n_repeat_fix_the_run_counts():
    fn = Sleeper(0.1)
    do_bench(fn, warmup=1000, rep=1000, n_warmup=3, n_repeat=7)
    assert fn.calls == ESTIMATE_AND_FIRST_CALL + 3 + 7
    fn = Sleeper(0.1)
    do_bench(fn, _n_warmup=2, _n_repeat=4)  # upstream's spelling of the overrides
    assert fn.calls == ESTIMATE_AND_FIRST_CALL + 2 + 4


def test_return_mode_and_quantiles_summarize_the_run_times():
    # the timed runs alternate 1 ms and 6 ms (the warmup run count is fixed at 2, so timing starts on a 1 ms run)
    def bench_of(**kwargs):
        return do_bench(Sleeper(1.0, 6.0), n_warmup=2, n_repeat=8, **kwargs)

    low, high = bench_of(return_mode="min"), bench_of(return_mode="max")
    assert 1.0 <= low < 6.0 <= high
    assert low < bench_of(return_mode="mean") < high
    q = bench_of(quantiles=[0.0, 0.5, 1.0])
    assert isinstance(q, list) and len(q) == 3 and q[0] <= q[1] <= q[2] and q[0] < 6.0 <= q[2]
    assert isinstance(bench_of(quantiles=[0.5]), float)  # one quantile: a number, as upstream


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError, match="return_mode must be one of min, max, mean, median"):
        do_bench(Sleeper(0.0), return_mode="average")
    with pytest.raises(ValueError, match="quantiles must lie in"):
        do_bench(Sleeper(0.0), quantiles=[1.5])


def test_the_simulator_says_once_that_times_are_not_device_time(monkeypatch, capsys):
    monkeypatch.setattr(bench, "_noted_wall_clock", False)
    do_bench(Sleeper(0.0), n_warmup=1, n_repeat=1)
    do_bench(Sleeper(0.0), n_warmup=1, n_repeat=1)
    assert capsys.readouterr().err.count("not MUSA device time") == 1


def test_kernels_in_the_simulator_are_timed_on_the_wall_clock_even_where_torch_musa_reports_a_device(monkeypatch):
    """device=None follows where kernels run: with TILELANG_EXECUTION_BACKEND=sim that is the CPU, whatever
    torch.musa says (a torch_musa install on a machine whose kernels are simulated)."""
    import types

    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "sim")
    monkeypatch.setattr(torch, "musa", types.SimpleNamespace(is_available=lambda: True), raising=False)
    assert do_bench(Sleeper(0.0), n_warmup=1, n_repeat=2, backend="cupti") >= 0.0


def test_an_estimate_above_early_stop_baseline_is_returned_untimed():
    fn = Sleeper(2.0)
    assert do_bench(fn, early_stop_baseline=0.5) >= 2.0
    assert fn.calls == ESTIMATE_AND_FIRST_CALL


@tilelang.jit(out_idx=[-1])
def scale(N, factor, threads=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = A[bx * threads + i] * factor

    return main


def test_kernel_profiler_checks_with_a_mismatch_budget_and_benches_given_inputs():
    kernel = scale(1024, 2.0)
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda a: a * 2.0)
    a = torch.arange(1024, dtype=torch.float32)
    off_by_one_element = lambda a: torch.where(torch.arange(1024) == 7, -1.0, a * 2.0)  # noqa: E731
    profiler.assert_allclose(off_by_one_element, input_tensors=[a], max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match=r"1 of 1024 elements \(0.10%\) differ"):
        profiler.assert_allclose(off_by_one_element, input_tensors=[a], max_mismatched_ratio=0.0)
    with_nans = torch.where(torch.arange(1024) % 3 == 0, float("nan"), a)
    profiler.assert_allclose(lambda x: x * 2.0, input_tensors=[with_nans], max_mismatched_ratio=0.0)  # NaN == NaN
    p25, p75 = profiler.do_bench(n_warmup=1, n_repeat=4, input_tensors=[a], quantiles=[0.25, 0.75])
    assert 0 < p25 <= p75
    assert profiler.do_bench(lambda x: x * 2, warmup=1, rep=2, return_mode="median") > 0


@pytest.mark.parametrize("target", ["musa -arch=mp_31", "musa -arch=mp_22"])
def test_profiler_sizes_a_dynamic_output_from_the_constraints(target):
    """A T.dynamic size the launcher reads off the tensors is no argument of its own: the profiler makes the inputs
    at the constrained size and the kernel returns the output it allocates."""
    m = T.dynamic("m")

    @T.prim_func
    def double(a: T.Tensor((m, 16), "float32"), c: T.Tensor((m, 16), "float32")):
        with T.Kernel(T.ceildiv(m, 8), threads=128) as bx:
            for i, j in T.Parallel(8, 16):
                if bx * 8 + i < m:
                    c[bx * 8 + i, j] = a[bx * 8 + i, j] * 2

    kernel = tilelang.compile(double, out_idx=[-1], target=target)
    profiler = kernel.get_profiler()
    inputs = profiler._get_inputs(dynamic_symbolic_constraints={"m": 20})
    assert [tuple(t.shape) for t in inputs] == [(20, 16)]
    torch.testing.assert_close(kernel(*inputs), inputs[0] * 2)
    assert profiler.do_bench(n_warmup=1, n_repeat=2, dynamic_symbolic_constraints={"m": 20}) > 0
    with pytest.raises(ValueError, match="'m'"):
        profiler.do_bench(dynamic_symbolic_constraints={"wrong": 20})
