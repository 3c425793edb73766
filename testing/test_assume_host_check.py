"""`T.assume` facts the host can evaluate are checked at every call, as upstream TileLang's host code checks them.

The compiler simplifies with an assume (here `l >= 0` drops the guard `0 <= l + tx` of a read of `A[l + tx]`), so a
call that breaks it would read out of bounds on a card. An assume whose condition reads only scalar parameters and
the tensors' size and stride symbols, at the kernel's top level or in its `with T.Kernel` body, is recorded in the
kernel's host metadata; the launcher raises "Assume: <condition>" with the values before launching. An assume under
a loop or an `if`, or over thread indices, stays a compiler fact (upstream checks those neither)."""

import pickle

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_musa.jit.host_assumes import _host_expr
from tilelang_musa.jit.kernel import JITKernel
from tilelang_musa.launcher import AssumeViolation, HostAssume, HostExpr
from conftest import poison, rand

ARCHES = ["mp_31", "mp_22"]
ASSUME_LINES = [n for n, line in enumerate(open(__file__).read().splitlines(), 1) if line.strip().startswith("T.assume(l >= 0")]


def offset_read(where):
    """B[tx] = A[l + tx], with `l >= 0 and l + 64 <= N` assumed before the kernel or in its body."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((64,), "float32"), l: T.int32):
        if where == "top":
            T.assume(l >= 0 and l + 64 <= N)
        with T.Kernel(1, threads=64):
            if where == "kernel":
                T.assume(l >= 0 and l + 64 <= N)
            tx = T.get_thread_binding()
            B[tx] = A[l + tx]

    return main


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("where", ["top", "kernel"])
def test_an_assume_over_a_scalar_and_a_size_is_checked_at_call(arch, where):
    kernel = tilelang.compile(offset_read(where), target=f"musa -arch={arch}")
    unchecked = tilelang.compile(offset_read(None), target=f"musa -arch={arch}")
    # the compiler used the fact: the read's lower guard is gone
    assert "(0 <= (l + ((int)threadIdx.x)))" in unchecked.get_kernel_source()
    assert "0 <= (l" not in kernel.get_kernel_source()
    (assume,) = kernel.metadata.host.assumes
    assert assume.text == "l >= 0 and l + 64 <= N"
    assert assume.where == f"{__file__}:{ASSUME_LINES[0 if where == 'top' else 1]}"
    assert unchecked.metadata.host.assumes == ()

    a = rand((100,), torch.float32, 1)
    for l in (0, 17, 36):
        b = poison((64,), torch.float32)
        kernel(a, b, l)
        torch.testing.assert_close(b, a[l:l + 64])
    for l, shown in ((-1, "l = -1, N = 100"), (37, "l = 37, N = 100")):
        b = poison((64,), torch.float32)
        with pytest.raises(RuntimeError, match=f"Assume: l >= 0 and l \\+ 64 <= N does not hold for this call: "
                                               f"{shown} \\(T.assume at .*test_assume_host_check.py:"):
            kernel(a, b, l)
        assert b.isnan().all()  # nothing was launched
    with pytest.raises(ValueError, match="Assume: l >= 0"):  # a ValueError too, as the launcher's other checks
        kernel(rand((40,), torch.float32, 2), poison((64,), torch.float32), 0)


def upstream_runtime_check():
    """Upstream 0.1.13's test_host_evaluable_assume_is_checked_at_runtime."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(N % 4 == 0)
            tx = T.get_thread_binding()
            if tx < N:
                A[tx] = 1.0

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_upstreams_program_raises_its_message(arch):
    kernel = tilelang.jit(upstream_runtime_check, target=f"musa -arch={arch}")()
    a = poison((4,), torch.float32)
    kernel(a)
    torch.testing.assert_close(a, torch.ones(4))
    with pytest.raises(RuntimeError, match="Assume: N % 4 == 0 does not hold for this call: N = 2"):
        kernel(torch.empty(2))
    with pytest.raises(AssumeViolation, match="N = 6"):
        kernel.launcher.bind_shapes(torch.empty(6))  # the symbols a call would bind, checked as a call checks
    assert kernel.launcher.bind_shapes(torch.empty(8)) == {"N": 8}


def several(M_rows):
    M, N = T.dynamic("M N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), scale: T.float32, flag: T.bool):
        T.assume(N % 8 == 0)
        T.assume(M <= M_rows)
        T.assume(scale > 0.0)
        T.assume(flag)
        with T.Kernel(T.ceildiv(M, 4), threads=32) as bx:
            half = T.int32()
            T.let(half, N // 2)  # a binding of host values: the assume below reads it through the binding
            T.assume(half * 2 == N)
            for i, j in T.Parallel(4, 8):
                T.assume(i < 100)  # under a loop, over a loop variable: a compiler fact only
                if bx * 4 + i < M and j < N:
                    B[bx * 4 + i, j] = A[bx * 4 + i, j] * scale
            if bx > 0:
                T.assume(N > 0)  # under an if: not a fact about every call

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_several_assumes_each_named_when_broken(arch):
    kernel = tilelang.compile(several(16), target=f"musa -arch={arch}")
    texts = [a.text for a in kernel.metadata.host.assumes]
    assert texts[:4] == ["N % 8 == 0", "M <= 16", "scale > T.float32(0.0)", "flag"]
    assert len(texts) == 5 and "N" in texts[4]  # the binding's, spelled as the program prints it
    a = rand((12, 16), torch.float32, 3)
    b = poison((12, 16), torch.float32)
    kernel(a, b, 1.5, True)
    torch.testing.assert_close(b[:, :8], a[:, :8] * 1.5)
    cases = [((rand((12, 12), torch.float32, 4), poison((12, 12), torch.float32), 1.5, True), "N % 8 == 0.*N = 12"),
             ((rand((20, 8), torch.float32, 5), poison((20, 8), torch.float32), 1.5, True), "M <= 16.*M = 20"),
             ((a, b, -1.0, True), r"scale > T.float32\(0.0\).*scale = -1.0"),
             ((a, b, 2.0, False), "Assume: flag does not hold.*flag = False")]
    for args, message in cases:
        with pytest.raises(AssumeViolation, match=message):
            kernel(*args)


@pytest.mark.parametrize("arch", ARCHES)
def test_an_assume_over_a_stride_in_the_eager_style(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")

    @tilelang.jit
    def double_rows(A):
        M, N, dM, dN = T.dynamic("M, N, dM, dN")
        A: T.StridedTensor[[M, N], [dM, dN], T.float32]
        B = T.empty((M, N), T.float32)
        T.assume(dN == 1)
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                B[bx, j] = A[bx, j] * 2.0
        return B

    a = rand((6, 40), torch.float32, 6)
    torch.testing.assert_close(double_rows(a), a * 2)
    torch.testing.assert_close(double_rows(a[:, :20]), a[:, :20] * 2)  # dM = 40, dN = 1
    with pytest.raises(AssumeViolation, match="Assume: dN == 1 does not hold for this call: dN = 40"):
        double_rows(a.T)


def test_the_check_survives_a_reload_and_pickling(tmp_path):
    kernel = tilelang.compile(offset_read("top"), target="musa -arch=mp_31")
    reloaded = JITKernel.from_database(kernel.directory)
    assert reloaded.metadata.host.assumes == kernel.metadata.host.assumes
    a = rand((100,), torch.float32, 7)
    for k in (reloaded, pickle.loads(pickle.dumps(kernel.launcher))):
        with pytest.raises(AssumeViolation, match="l = -3"):
            k(a, poison((64,), torch.float32), -3)


def test_a_kernel_without_host_assumes_has_none_to_check():
    kernel = tilelang.compile(offset_read(None), target="musa -arch=mp_31")
    assert kernel.launcher.assumes == ()


def test_host_expressions_follow_tir_semantics_and_round_trip_through_json():
    def expr(op, *args):
        return HostExpr(op, args)

    values = {"a": -7, "b": 2}
    assert expr("floordiv", "a", "b").evaluate(values) == -4 and expr("div", "a", "b").evaluate(values) == -3
    assert expr("floormod", "a", "b").evaluate(values) == 1 and expr("mod", "a", "b").evaluate(values) == -1
    assert expr("select", expr("lt", "a", 0), "b", "a").evaluate(values) == 2
    assert expr("int", 2.75).evaluate({}) == 2 and expr("not", expr("eq", "b", 2)).evaluate(values) is False
    assume = HostAssume(expr("and", expr("ge", "a", 0), expr("lt", expr("mul", "a", 3), "b")), "a >= 0 and a * 3 < b")
    from dataclasses import asdict
    import json
    assert HostAssume(**json.loads(json.dumps(asdict(assume)))) == assume
    with pytest.raises(ValueError, match="takes 2 operand"):
        HostExpr("add", ("a",))


def test_conditions_the_host_cannot_evaluate_stay_compiler_facts():
    flag, n, tx = (tvm.ir.Var(name, tvm.ir.PrimType(t)) for name, t in (("flag", "bool"), ("n", "int64"), ("tx", "int32")))
    host = {flag: "flag", n: "n"}
    assert _host_expr(tirx.And(flag, tirx.IntImm("bool", 1)), host, {}) == HostExpr("and", ("flag", 1))
    assert _host_expr(tirx.LT(tirx.Cast("int32", n), 5), host, {}) is None  # a narrowing cast wraps
    assert _host_expr(tirx.LT(tx, 5), host, {}) is None  # a thread index
    assert _host_expr(tirx.LT(tx, 5), host, {tx: n + 1}) == HostExpr("lt", (HostExpr("add", ("n", 1)), 5))


AOT_MAIN = r'''
#include <stdio.h>
#include <stdlib.h>
#include "offset.h"

int main(int argc, char** argv) {
  int32_t n = atoi(argv[1]), l = atoi(argv[2]);
  float* a = (float*)malloc(sizeof(float) * n);
  float b[64];
  for (int i = 0; i < n; ++i) a[i] = (float)i * 0.5f;
  for (int i = 0; i < 64; ++i) b[i] = 0.0f / 0.0f;
  if (offset(a, b, l, n, NULL) != 0) { printf("%s\n", offset_last_error()); return 1; }
  for (int i = 0; i < 64; ++i) printf("%.9g\n", b[i]);
  return 0;
}
'''


def test_the_aot_entry_point_checks_the_assumes_over_its_integer_parameters(tmp_path):
    import shutil
    import subprocess

    from tilelang.jit.aot import write_aot

    cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler")
    kernel = tilelang.compile(offset_read("kernel"), target="musa -arch=mp_22")
    header, source = write_aot(kernel, tmp_path, "offset")
    assert "int offset(float* A, float* B, int32_t l, int32_t N, void* stream);" in header.read_text()
    plain = tilelang.compile(offset_read(None), target="musa -arch=mp_22")
    assert "Assume" not in write_aot(plain, tmp_path / "plain", "offset")[1].read_text()  # nothing to check
    (tmp_path / "main.c").write_text(AOT_MAIN)
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", str(tmp_path / "main.c"), str(source), f"-I{tmp_path}",
                    "-ldl", "-lpthread", "-o", str(tmp_path / "main")], check=True)
    good = subprocess.run([str(tmp_path / "main"), "100", "30"], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    torch.testing.assert_close(torch.tensor([float(x) for x in good.stdout.split()]), torch.arange(30, 94) * 0.5)
    for args, shown in ((["100", "-1"], "l = -1, N = 100"), (["50", "0"], "l = 0, N = 50")):
        bad = subprocess.run([str(tmp_path / "main"), *args], capture_output=True, text=True)
        assert bad.returncode == 1
        assert bad.stdout.startswith(f"offset: Assume: l >= 0 and l + 64 <= N does not hold for this call: {shown} "
                                     f"(T.assume at {__file__}:{ASSUME_LINES[1]})")


def test_the_aot_division_helpers_round_as_tir(tmp_path):
    import shutil
    import subprocess

    from tilelang.jit.aot import _assume_source
    from tilelang_musa.launcher import ParamSpec

    cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler")
    params = [ParamSpec("a", "scalar", "int32"), ParamSpec("b", "scalar", "int64")]
    ops = ["floordiv", "floormod", "div", "mod"]
    # an assume per op: `op(a, b) == 0`; the C prints each op's value instead of checking it
    helpers, _ = _assume_source("t", params, tuple(HostAssume(HostExpr("eq", (HostExpr(op, ("a", "b")), 0)), op)
                                                   for op in ops))
    calls = " ".join(f'printf("%lld ", (long long)t_{"trunc" if op in ("div", "mod") else "floor"}'
                     f'{"div" if "div" in op else "mod"}(a, b, &zero));' for op in ops)
    (tmp_path / "t.c").write_text(f"""#include <stdint.h>
#include <stdio.h>
{helpers}
int main(void) {{
  for (int64_t a = -7; a <= 7; ++a)
    for (int64_t b = -3; b <= 3; ++b) {{
      int zero = 0;
      {calls}
      printf("%d\\n", zero);
    }}
  return 0;
}}
""")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", str(tmp_path / "t.c"), "-o", str(tmp_path / "t")], check=True)
    rows = iter(subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout.splitlines())
    for a in range(-7, 8):
        for b in range(-3, 4):
            got = [int(x) for x in next(rows).split()]
            if b == 0:
                assert got[-1] == 1  # a zero divisor breaks the assume, as the launcher's ZeroDivisionError does
                continue
            assert got == [HostExpr(op, ("a", "b")).evaluate({"a": a, "b": b}) for op in ops] + [0], (a, b)
