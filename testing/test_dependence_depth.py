"""The dependence depth the simulator's build charges with each statement's arithmetic (issue 40;
src/codegen/dependence_depth.h): a loop whose iterations are independent shares one iteration's chain among them,
so the performance model's latency term (model.py dependent_chain_cycles) charges the chain, not every
instruction. The MUSA C is untouched: only the sanitizer build carries `tl_sim::Compute(n, depth, iterations)`."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_perf_model import made_up_counters
from tilelang_musa.profiler.arch_figures import figures_for
from tilelang_musa.profiler.counters import CHAIN_UNITS
from tilelang_musa.profiler.model import dependent_chain_cycles

ARCHS = ["mp_22", "mp_31"]
WARP = {"mp_22": 128, "mp_31": 32}
CHARGE = re.compile(r"tl_sim::Compute\((\d+), (\d+), (\d+)\);")


def checked_source(func, arch):
    """The sanitizer build's device source (what the simulator compiles), without building it."""
    from tilelang_musa.codegen.source import generate
    from tilelang_musa.jit.compile import _settle
    from tilelang_musa.transform.pipeline import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    req = _settle(func, None, f"musa -arch={arch}", "sim", None, None, False, None)
    source = generate([lower(k, req.target, req.pass_options) for k in split_kernels(req.program)], req.target,
                      req.name, sim_checks=True)
    return source.checked_device, source.device


def charges(text):
    return [tuple(int(v) for v in m) for m in CHARGE.findall(text)]


def elementwise(n=2048, threads=128):
    """Each thread runs n / threads independent `b = a * 3 + 1` (depth 2)."""
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads):
            for i in T.Parallel(n):
                B[i] = A[i] * 3.0 + 1.0

    return main


def carried(steps=64):
    """A chain each step of which needs the one before: `acc = acc * 0.5 + a` (depth 2, nothing beside it), and
    a loop whose iterations fold onto shared elements (`c[i // 2] += ...`), which is no independent loop either."""
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_local((1,), "float32")
            pairs = T.alloc_local((4,), "float32")
            acc[0] = 0.0
            for k in T.serial(steps):
                acc[0] = acc[0] * 0.5 + A[tx]
            for i in T.serial(4):
                pairs[i] = 0.0
            for i in T.serial(8):
                pairs[i // 2] = pairs[i // 2] + A[tx] * 2.0
            B[tx] = acc[0]
            C[tx] = pairs[0] + pairs[1] + pairs[2] + pairs[3]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_parallel_loops_statements_are_charged_one_iterations_depth(arch):
    """The elementwise loop: every charge of its statement carries depth 2 over the loop's trip count (its
    iterations, vector lanes aside, are independent); the device source has no charge at all."""
    checked, device = checked_source(elementwise(), arch)
    assert "tl_sim::Compute" not in device
    found = charges(checked)
    assert found, checked
    for instructions, depth, iterations in found:
        assert depth == 2
        lanes = instructions // 2
        assert iterations == 2048 // 128 // lanes > 1, checked


def mixed(n=8):
    """One loop, two statements: `h[i] = h[i] * a` has elements of its own in each iteration; `s += h[i] * k[i]`
    accumulates into an element every iteration shares."""
    @T.prim_func
    def main(A: T.Tensor((128, n), "float32"), K: T.Tensor((128, n), "float32"), S: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            h = T.alloc_local((n,), "float32")
            s = T.alloc_local((1,), "float32")
            s[0] = 0.0
            for i in T.serial(n):
                h[i] = A[tx, i]
            for i in T.serial(n):
                h[i] = h[i] * 0.75
                s[0] = s[0] + h[i] * K[tx, i]
            S[tx] = s[0]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_carried_loop_and_a_folding_index_count_every_step(arch):
    """`acc = acc * 0.5 + a` each step needs the last: depth 2 on one iteration; `pairs[i // 2] += ...` folds two
    iterations onto an element: not independent either (1 iteration), and its chain is the add through the
    element (the product does not wait for it)."""
    checked, _ = checked_source(carried(), arch)
    found = charges(checked)
    assert (2, 2, 1) in found and (2, 1, 1) in found, checked
    assert all(iterations == 1 for _, _, iterations in found), checked


@pytest.mark.parametrize("arch", ARCHS)
def test_each_statement_of_a_loop_is_judged_by_what_it_touches(arch):
    """In the mixed loop, the scaling of h[i] runs beside the other 8 iterations (depth 1 over 8), the
    accumulation into s is a chain of one add an iteration (depth 1, 1 iteration)."""
    checked, _ = checked_source(mixed(), arch)
    found = charges(checked)
    assert (1, 1, 8) in found and (2, 1, 1) in found, checked


@pytest.mark.parametrize("arch", ARCHS)
def test_the_simulator_sums_the_chain_per_warp(arch):
    """Run in the simulator against torch: the elementwise kernel's warps each count 2 x 16 arithmetic
    instructions but a chain of 2; the carried kernel's chain is every instruction of its recurrence."""
    target = f"musa -arch={arch}"
    warps = 128 // WARP[arch]
    kernel = tilelang.compile(elementwise(), target=target)
    a, b = rand((2048,), torch.float32, 3), poison((2048,), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a * 3.0 + 1.0)
    assert counters.arithmetic_instructions == warps * 2 * 16
    assert counters.arithmetic_chain_units == warps * 2 * CHAIN_UNITS
    assert counters.arithmetic_chain == warps * 2

    kernel = tilelang.compile(carried(), target=target)
    a, b, c = rand((128,), torch.float32, 4), poison((128,), torch.float32), poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([a, b, c])
    acc = torch.zeros_like(a)
    for _ in range(64):
        acc = acc * 0.5 + a
    torch.testing.assert_close(b, acc)
    torch.testing.assert_close(c, 4 * (a * 2.0 + a * 2.0), rtol=1e-6, atol=1e-6)
    # 64 steps of 2 dependent instructions, 8 adds through pairs[i // 2] (their products beside), 3 final adds
    assert counters.arithmetic_instructions == warps * (64 * 2 + 8 * 2 + 3)
    assert counters.arithmetic_chain == warps * (64 * 2 + 8 * 1 + 3)

    kernel = tilelang.compile(mixed(), target=target)
    a, k, s = rand((128, 8), torch.float32, 5), rand((128, 8), torch.float32, 6), poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([a, k, s])
    expected = torch.zeros(128)
    for i in range(8):
        expected = expected + (a[:, i] * 0.75) * k[:, i]
    torch.testing.assert_close(s, expected)
    assert counters.arithmetic_instructions == warps * 8 * 3
    assert counters.arithmetic_chain == pytest.approx(warps * (1 + 8 * 1), abs=1e-3)


def test_the_model_charges_the_dependent_latency_on_the_chain():
    """One warp of 3000 arithmetic instructions, 300 of them on its chain: (6 - 1) x 300 cycles, not x 3000;
    counters taken before the chain was counted (-1) put every instruction on it."""
    f = figures_for("mp_31")
    base = dict(grid_blocks=1, threads_per_block=32, blocks=1, block_cycles=3000, block_cycles_max=3000,
                arithmetic_instructions=3000)
    counted = made_up_counters(**base, arithmetic_chain_units=300 * CHAIN_UNITS)
    assert dependent_chain_cycles(counted, f) == pytest.approx((f.dependent_latency_cycles - 1) * 300)
    older = made_up_counters(**base)
    assert dependent_chain_cycles(older, f) == pytest.approx((f.dependent_latency_cycles - 1) * 3000)
    assert counted.scaled() == counted and older.scaled().arithmetic_chain_units == -1
