"""tools/peer_tests: a file passes only if one of its cases passed; an all-skipped file (exit status 0, nothing
tested) is reported as `skipped`, not `pass`. With --cuda, CUDA targets become MUSA ones and upstream's CUDA gates
are answered as a device of the --cuda-as capability."""

import importlib.util
from pathlib import Path

import pytest

_RUN = Path(__file__).resolve().parents[1] / "tools" / "peer_tests" / "run.py"
_spec = importlib.util.spec_from_file_location("peer_tests_run", _RUN)
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


@pytest.mark.parametrize("returncode, counts, expected", [
    (0, "3 passed in 1.20s", "pass"),
    (0, "1 passed, 4 skipped in 2.00s", "pass"),
    (0, "4 skipped in 0.50s", "skipped"),
    (0, "10 passed, 2 deselected in 9.1s", "pass"),
    (0, "2 skipped, 3 deselected in 0.4s", "skipped"),
    (1, "1 failed, 2 passed in 3.0s", "fail"),
    (5, "no tests ran in 0.01s", "no-tests"),
])
def test_outcome(returncode, counts, expected):
    assert run.outcome(returncode, counts) == expected


def test_a_timed_out_file_says_what_passed_and_what_was_running():
    partial = ("collected 3 items\n\ntest_x.py::test_small PASSED        [ 33%]\n"
               "test_x.py::test_skip SKIPPED (needs sm_100)   [ 66%]\ntest_x.py::test_large[4096] ")
    assert run.timed_out(partial, 300) == ("over 300 s, 1 passed before", "still running test_large[4096]")
    assert run.timed_out("collecting ... ", 300) == ("over 300 s, 0 passed before", "")


def test_cuda_rewrite_turns_cuda_targets_into_musa():
    text = 'k = tilelang.compile(f, target="cuda")\nwith Target("cuda"):\n    x = torch.randn(4, device="cuda")'
    assert run.rewrite(text, cuda=True) == ('k = tilelang.compile(f, target="musa")\nwith Target("musa"):\n'
                                            '    x = torch.randn(4, device="cpu")')
    assert run.rewrite('def data(n, device: str = "cuda"):', cuda=True) == 'def data(n, device: str = "cpu"):'


PEER_TEST = '''
import tilelang.testing


@tilelang.testing.requires_cuda
def test_plain_gpu():
    pass


@tilelang.testing.requires_cuda
@tilelang.testing.requires_cuda_compute_version_eq(9, 0)
def test_hopper():
    pass


@tilelang.testing.requires_cuda_compute_version(10)
def test_blackwell():
    pass
'''


@pytest.mark.parametrize("cuda_as, outcomes", [("9.0", {"test_plain_gpu": "PASSED", "test_hopper": "PASSED",
                                                         "test_blackwell": "SKIPPED"}),
                                               ("", {"test_plain_gpu": "SKIPPED", "test_hopper": "SKIPPED",
                                                     "test_blackwell": "SKIPPED"})])
def test_cuda_gates_are_answered_as_the_capability_cuda_as_names(tmp_path, monkeypatch, cuda_as, outcomes):
    """With --cuda-as X.Y upstream's requires_cuda gates let the simulated device run a case, and its
    compute-version gates compare X.Y; without it they skip, as the package's own gates do."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(run.CONFTEST)
    (tmp_path / "test_gated.py").write_text(PEER_TEST)
    env = dict(__import__("os").environ, TL_PEER_CUDA_AS=cuda_as, TILELANG_EXECUTION_BACKEND="sim")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_gated.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    for name, outcome in outcomes.items():
        assert f"test_gated.py::{name} {outcome}" in proc.stdout, proc.stdout


PEER_RNG_TEST = '''
import torch


def test_fork_rng_over_the_stand_in_devices():
    devices = list(range(torch.cuda.device_count()))
    assert devices == [0]
    with torch.cuda.device(0):  # a device guard (flash-linear-attention's): the stand-in device is the CPU
        pass
    torch.manual_seed(1)
    state = torch.get_rng_state()
    draws = []
    for _ in range(2):
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(0)
            if devices:
                torch.cuda.manual_seed_all(0)
            draws.append(torch.randn(8, device="cpu"))
        assert torch.equal(torch.get_rng_state(), state)  # the fork gave the generator back as it was
    assert torch.equal(draws[0], draws[1])
'''


PEER_SMEM_TEST = '''
import os
import torch


def test_stand_in_device_reports_its_shared_memory():
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    want = 73728 if os.environ.get("TILELANG_SIM_ARCH") == "mp_22" else 196608
    assert props.shared_memory_per_multiprocessor == props.shared_memory_per_block_optin == want
'''


PEER_PINNED_TEST = '''
import torch


def test_pinned_host_memory_on_the_stand_in_device():
    staged = torch.empty(6, dtype=torch.int64, device="cpu", pin_memory=True)
    staged.copy_(torch.arange(6))
    ones = torch.ones(3, pin_memory=True).pin_memory()
    assert staged.tolist() == list(range(6)) and ones.tolist() == [1.0, 1.0, 1.0]
'''


PEER_EVENT_TEST = '''
import time
import torch


def test_events_time_what_runs_between_them():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    time.sleep(0.05)  # the simulator's launches return when done: the work between the two records
    end.record()
    torch.cuda.synchronize()
    assert 45 <= start.elapsed_time(end) < 5000
    musa_start, musa_end = torch.musa.Event(enable_timing=True), torch.musa.Event(enable_timing=True)
    musa_start.record()
    musa_end.record()
    assert 0 <= musa_start.elapsed_time(musa_end) < 45
'''


# The stand-in device's peer tests, by file: each pytest session that runs them starts torch and the package (~4 s of
# CPU), so the files of one simulated card run in one session, whose report each test below reads.
STAND_IN_TESTS = {"test_rng.py": PEER_RNG_TEST, "test_smem.py": PEER_SMEM_TEST, "test_pinned.py": PEER_PINNED_TEST,
                  "test_events.py": PEER_EVENT_TEST}


@pytest.fixture(scope="module")
def stand_in_session(tmp_path_factory):
    """stand_in_session(arch, files) -> the finished pytest process that ran the peer `files` (STAND_IN_TESTS names)
    under the harness's conftest on the simulated `arch`; one session per (arch, files)."""
    import subprocess
    import sys

    sessions = {}

    def session(arch, files=tuple(STAND_IN_TESTS)):
        if (arch, files) not in sessions:
            directory = tmp_path_factory.mktemp(f"stand_in_{arch}")
            (directory / "conftest.py").write_text(run.CONFTEST)
            for name in files:
                (directory / name).write_text(STAND_IN_TESTS[name])
            env = dict(__import__("os").environ, TILELANG_EXECUTION_BACKEND="sim", TILELANG_SIM_ARCH=arch)
            sessions[arch, files] = subprocess.run(
                [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(directory),
                 *(str(directory / name) for name in files)], cwd=directory, env=env, capture_output=True, text=True)
        return sessions[arch, files]

    return session


def test_stand_in_device_forks_the_rng(stand_in_session):
    """Moore Threads' flash_decoding example forks torch's RNG over every CUDA device the stand-in reports (one):
    the fork saves and restores the CPU generator the stand-in device's tensors are drawn from."""
    proc = stand_in_session("mp_31")
    assert "test_rng.py::test_fork_rng_over_the_stand_in_devices PASSED" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_stand_in_device_reports_the_simulated_cards_shared_memory(stand_in_session, arch):
    """DeepSeek's TileKernels read `shared_memory_per_multiprocessor` of the device's properties to size tiles: the
    stand-in answers with the simulated card's (mp_31: 192 KB, mp_22: 72 KB)."""
    proc = stand_in_session(arch) if arch == "mp_31" else stand_in_session(arch, ("test_smem.py",))
    assert "test_smem.py::test_stand_in_device_reports_its_shared_memory PASSED" in proc.stdout, \
        proc.stdout + proc.stderr


def test_pinned_host_memory_is_a_plain_host_tensor(stand_in_session):
    """DeepSeek's TileKernels (mHC multilayer_recompute) stage indices in `torch.empty(..., pin_memory=True)`,
    which a CPU-only torch refuses: the stand-in device's tensors are host tensors, so the request is dropped."""
    proc = stand_in_session("mp_31")
    assert "test_pinned.py::test_pinned_host_memory_on_the_stand_in_device PASSED" in proc.stdout, \
        proc.stdout + proc.stderr


def test_cuda_events_on_the_stand_in_device_time_with_the_wall_clock(stand_in_session):
    """Moore Threads' deepseek_v32 topk_selector times its kernel between two `torch.cuda.Event(enable_timing=True)`
    (CPU-only torch has no CUDA events: "Tried to instantiate dummy base class Event"); on the stand-in device an
    event is the wall clock when it is recorded."""
    proc = stand_in_session("mp_31")
    assert "test_events.py::test_events_time_what_runs_between_them PASSED" in proc.stdout, proc.stdout + proc.stderr


def test_a_helper_package_next_to_a_test_is_staged_with_it(tmp_path):
    peer, out = tmp_path / "peer", tmp_path / "out"
    (peer / "examples" / "dq" / "quantize").mkdir(parents=True)
    (peer / "examples" / "dq" / "quantize" / "__init__.py").write_text('DEVICE = "cuda"\n')
    (peer / "examples" / "dq" / "test_dq.py").write_text("from quantize import DEVICE\n")
    (peer / "examples" / "dq" / "other").mkdir()  # a folder of tests: staged with its own tests, not here
    (peer / "examples" / "dq" / "other" / "__init__.py").write_text("")
    (peer / "examples" / "dq" / "other" / "test_other.py").write_text("")
    (peer / "examples" / "dq" / "ops").mkdir()  # sources an example builds (minference's C++ extension)
    (peer / "examples" / "dq" / "ops" / "kernels.cpp").write_text("int f();\n")
    staged = run.stage(peer, peer / "examples" / "dq" / "test_dq.py", out, cuda=True)
    assert (staged.parent / "quantize" / "__init__.py").read_text() == 'DEVICE = "cpu"\n'
    assert (staged.parent / "ops" / "kernels.cpp").read_text() == "int f();\n"
    assert not (staged.parent / "other").exists()


def test_a_device_passed_positionally_to_a_function_taking_device_becomes_the_cpu():
    """`generate_random_padding_mask(N_CTX, BATCH, "cuda", ...)` (upstream's flash_attention): the literal sits where
    the function takes `device`. A positional "cuda" anywhere else may be a target and is left to the target rules."""
    text = ('def mask(n, batch, device, mode="random"):\n    return torch.ones(n, device=device)\n'
            'm = mask(8, 2, "cuda", mode="random")\nk = build(f, "cuda")\nn = mask(8, 2, "cuda:1")\n')
    assert run.rewrite(text, cuda=True) == (
        'def mask(n, batch, device, mode="random"):\n    return torch.ones(n, device=device)\n'
        'm = mask(8, 2, "cpu", mode="random")\nk = build(f, "cuda")\nn = mask(8, 2, "cpu")\n')
    # a function another module of the folder defines (`from utils import mask`)
    assert run.rewrite('x = utils.mask(8, 2, "cuda")', cuda=True, device_params={"mask": 2}) == \
        'x = utils.mask(8, 2, "cpu")'


def test_a_dict_target_of_kind_cuda_becomes_musa():
    text = 'k = tilelang.compile(f, target={"kind": "cuda", "arch": "sm_75"})\nT = {"kind": "cuda", "arch": "sm_90"}'
    assert run.rewrite(text, cuda=True) == 'k = tilelang.compile(f, target={"kind": "musa"})\nT = {"kind": "musa"}'
    assert run.rewrite(text, cuda=False) == text


def test_a_sibling_folder_a_module_puts_on_sys_path_is_staged_too(tmp_path):
    """Upstream's attention_sink examples append "../flash_attention" to sys.path for its varlen_utils: the folder is
    staged beside (rewritten, its own tests not run)."""
    peer, out = tmp_path / "peer", tmp_path / "out"
    (peer / "examples" / "sink").mkdir(parents=True)
    (peer / "examples" / "flash").mkdir(parents=True)
    (peer / "examples" / "flash" / "varlen_utils.py").write_text('def mask(n, device):\n    pass\nD = "cuda"\n'
                                                                 'DEVICE = "cuda"\n')
    (peer / "examples" / "sink" / "example_sink.py").write_text(
        'import os, sys\nsys.path.append(os.path.join(os.path.dirname(__file__), "../flash"))\n'
        'from varlen_utils import mask\n')
    (peer / "examples" / "sink" / "test_sink.py").write_text("import example_sink\n")
    staged = run.stage(peer, peer / "examples" / "sink" / "test_sink.py", out, cuda=True)
    assert staged == out / "tree" / "examples" / "sink" / "test_sink.py" and staged.is_file()
    assert (out / "tree" / "examples" / "flash" / "varlen_utils.py").read_text() == \
        'def mask(n, device):\n    pass\nD = "cuda"\nDEVICE = "cpu"\n'


def test_k_selects_cases_and_triton_interpreter_sets_up_the_interpreter(tmp_path, monkeypatch):
    """-k goes to pytest; --triton-interpreter SITE puts SITE last on the tests' path (after the package, so a
    folder holding more than triton cannot shadow it) and turns on Triton's CPU interpreter."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    test = tmp_path / "tree" / "examples" / "cast" / "test_cast.py"
    assert run.pytest_command(test, tmp_path / "tree", "per_token")[-2:] == ["-k", "per_token"]
    assert "-k" not in run.pytest_command(test, tmp_path / "tree")
    site = tmp_path / "site"
    env = run.file_environment(test, None, site)
    assert env["TRITON_INTERPRET"] == "1"
    assert env["PYTHONPATH"].split(__import__("os").pathsep)[0] == str(test.parent)
    assert env["PYTHONPATH"].split(__import__("os").pathsep)[-1] == str(site)
    assert "TRITON_INTERPRET" not in run.file_environment(test)
    with pytest.raises(SystemExit, match="no triton package there"):
        run.triton_site_packages(site)
    (site / "triton").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text("")
    assert run.triton_site_packages(site) == site.resolve()


# A triton with only what the harness's interpreter driver touches: the real one is not a dependency of the package.
FAKE_TRITON = {
    "triton/__init__.py": "from . import runtime, backends, language\n",
    "triton/language.py": "bfloat16, float32 = 'bf16', 'fp32'\n",
    # the interpreter's dot: returns its operands, so the test sees what the harness passed it
    "triton/runtime/interpreter.py": "import collections\nimport numpy as np\n"
                                     "TensorHandle = collections.namedtuple('TensorHandle', 'data dtype')\n\n\n"
                                     "class InterpreterBuilder:\n    def create_dot(self, a, b, d, *rest):\n"
                                     "        return a, b\n",
    "triton/backends/__init__.py": "",
    "triton/backends/compiler.py": "import collections\nGPUTarget = collections.namedtuple('GPUTarget', "
                                   "'backend arch warp_size')\n",
    "triton/runtime/__init__.py": "from .driver import driver\n",
    "triton/runtime/driver.py": "class DriverConfig:\n    active = None\n\n    def set_active(self, d):\n"
                                "        self.active = d\n\n\ndriver = DriverConfig()\n",
}

PEER_TRITON_TEST = '''
import triton


def test_interpreter_driver():
    active = triton.runtime.driver.active
    assert tuple(active.get_current_target()) == ("cuda", 90, 32)
    ran = []
    assert active.get_benchmarker()(lambda: ran.append(1), quantiles=(0.5, 0.2, 0.8)) == [1.0, 1.0, 1.0]
    assert ran == []  # configs are not run to be timed: the autotuner takes the first
    assert active.utils.get_device_properties(0)["multiprocessor_count"] == 56


def test_bfloat16_dot_operands_are_widened():
    import numpy as np
    from triton.runtime import interpreter

    bits = np.array([[0x3F80, 0xC040]], dtype=np.uint16)  # bfloat16 1.0, -3.0
    scalar = type("Scalar", (), {"scalar": "bf16"})()
    other = type("Scalar", (), {"scalar": "fp16"})()
    a, b = interpreter.InterpreterBuilder().create_dot(interpreter.TensorHandle(bits, scalar),
                                                       interpreter.TensorHandle(bits, other), None, None, None)
    assert a.dtype == "fp32" and a.data.tolist() == [[1.0, -3.0]]
    assert b.dtype is other and b.data is bits  # only bfloat16 operands
'''


def test_triton_interpreter_answers_for_the_missing_gpu_driver(tmp_path):
    """Under TRITON_INTERPRET=1 there is no GPU driver for the autotuner's benchmarker or the examples' target
    checks: the conftest sets one that answers as the GPU the harness reports (--cuda-as)."""
    import subprocess

    for path, text in FAKE_TRITON.items():
        (tmp_path / "site" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / path).write_text(text)
    (tmp_path / "conftest.py").write_text(run.CONFTEST)
    (tmp_path / "test_triton.py").write_text(PEER_TRITON_TEST)
    env = dict(run.file_environment(tmp_path / "test_triton.py", None, tmp_path / "site"), TL_PEER_CUDA_AS="9.0")
    proc = subprocess.run(run.pytest_command(tmp_path / "test_triton.py", tmp_path), cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert "test_triton.py::test_interpreter_driver PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert "test_triton.py::test_bfloat16_dot_operands_are_widened PASSED" in proc.stdout, proc.stdout + proc.stderr


PEER_AUTOTUNE_TEST = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"B": 32}), triton.Config({"B": 64})], key=["n"])
@triton.jit
def double(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)


def test_autotuned_kernel_in_the_interpreter():
    x = torch.randn(100, device="cuda")
    y = torch.empty(100, device="cuda")
    double[lambda meta: (triton.cdiv(100, meta["B"]),)](x, y, 100)
    assert torch.equal(y, 2 * x)


@triton.jit
def matmul16(A, B, C):
    r = tl.arange(0, 16)
    a = tl.load(A + r[:, None] * 16 + r[None, :])
    b = tl.load(B + r[:, None] * 16 + r[None, :])
    tl.store(C + r[:, None] * 16 + r[None, :], tl.dot(a, b))


def test_bfloat16_dot_in_the_interpreter():
    a = torch.randn(16, 16, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(16, 16, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(16, 16, device="cuda")
    matmul16[(1,)](a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float())
'''


@pytest.mark.skipif(not __import__("os").environ.get("TILELANG_TEST_TRITON_SITE"),
                    reason="needs a folder holding triton (TILELANG_TEST_TRITON_SITE); triton is not a dependency")
def test_a_real_autotuned_triton_kernel_runs_in_the_interpreter(tmp_path):
    """With a real triton: an autotuned kernel (as upstream's blocksparse references are) runs on CPU tensors, and a
    bfloat16 tl.dot (upstream's block_sparse_attn_triton) is right."""
    import os
    import subprocess

    site = run.triton_site_packages(Path(os.environ["TILELANG_TEST_TRITON_SITE"]))
    peer, out = tmp_path / "peer", tmp_path / "out"
    (peer / "examples" / "tt").mkdir(parents=True)
    (peer / "examples" / "tt" / "test_tt.py").write_text(PEER_AUTOTUNE_TEST)
    staged = run.stage(peer, peer / "examples" / "tt" / "test_tt.py", out, cuda=True)
    (out / "tree" / "conftest.py").write_text(run.CONFTEST)
    proc = subprocess.run(run.pytest_command(staged, out / "tree"), cwd=staged.parent,
                          env=run.file_environment(staged, None, site), capture_output=True, text=True)
    assert "test_tt.py::test_autotuned_kernel_in_the_interpreter PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert "test_tt.py::test_bfloat16_dot_in_the_interpreter PASSED" in proc.stdout, proc.stdout + proc.stderr


PEER_FLASH_ATTN_TEST = '''
import torch
from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache


def test_kvcache_reference():
    q, k, v = torch.randn(2, 1, 4, 8), torch.randn(2, 16, 2, 8), torch.randn(2, 16, 2, 8)
    out = flash_attn_with_kvcache(q, k, v, cache_seqlens=torch.tensor([16, 5]))
    # batch 1 attends to its first 5 keys only; each query head h reads kv head h // 2
    s = torch.einsum("hd,khd->hk", q[1, 0], k[1, :5].repeat_interleave(2, 1)) / 8 ** 0.5
    ref = torch.einsum("hk,khd->hd", s.softmax(-1), v[1, :5].repeat_interleave(2, 1))
    torch.testing.assert_close(out[1, 0], ref)


def test_varlen_causal_query_that_sees_no_key_is_zero():
    # causal masks align on the bottom right: with 5 queries and 3 keys the first 2 queries see nothing (0, not NaN)
    q, k, v = torch.randn(5, 2, 8), torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    out = flash_attn_varlen_func(q, k, v, torch.tensor([0, 5]), torch.tensor([0, 3]), 5, 3, 0.0, causal=True)
    assert torch.equal(out[:2], torch.zeros(2, 2, 8))
    s = torch.einsum("qhd,khd->hqk", q[2:], k) / 8 ** 0.5
    s = s.masked_fill(torch.ones(3, 3, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(out[2:], torch.einsum("hqk,khd->qhd", s.softmax(-1), v))
'''


def test_flash_attn_is_stood_in_where_it_is_not_installed(tmp_path):
    """Examples take a reference or a latency baseline from flash-attn (CUDA-only): its entry points in torch,
    last on the path (an installed flash-attn wins)."""
    import subprocess

    run.write_support(tmp_path)
    (tmp_path / "test_fa.py").write_text(PEER_FLASH_ATTN_TEST)
    proc = subprocess.run(run.pytest_command(tmp_path / "test_fa.py", tmp_path), cwd=tmp_path,
                          env=run.file_environment(tmp_path / "test_fa.py"), capture_output=True, text=True)
    assert "test_fa.py::test_kvcache_reference PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert "test_fa.py::test_varlen_causal_query_that_sees_no_key_is_zero PASSED" in proc.stdout, \
        proc.stdout + proc.stderr


def test_a_librarys_device_strings_become_the_cpu():
    """TileOPs names its device `dev = "cuda"` (also in a tuple assignment), annotates a default
    `device: Optional[Union[torch.device, str]] = "cuda"`, builds `{"device": "cuda"}` and checks
    `x.device.type != "cuda"`: all the stand-in device's, the CPU. Other names ("devices", a target) are left."""
    text = ('dev = "cuda"\ndtype, dev = torch.bfloat16, "cuda"\nname, other = "a", "cuda"\n'
            'def f(device: Optional[Union[torch.device, str]] = "cuda"):\n    pass\n'
            'kw = {"dtype": t, "device": "cuda"}\nif x.device.type != "cuda":\n    pass\ndevices = "cuda"\n')
    assert run.rewrite(text, cuda=True) == (
        'dev = "cpu"\ndtype, dev = torch.bfloat16, "cpu"\nname, other = "a", "cuda"\n'
        'def f(device: Optional[Union[torch.device, str]] = "cpu"):\n    pass\n'
        'kw = {"dtype": t, "device": "cpu"}\nif x.device.type != "cpu":\n    pass\ndevices = "cuda"\n')


def test_import_roots_are_staged_rewritten_and_put_on_the_path(tmp_path):
    """--import-root src and . (TileOPs: `import tileops` from src/, `from tests.test_base import ...` and `workloads`
    from its root): each folder staged whole, modules rewritten and other files copied, and the staged folders on
    the tests' path before the peer's own copy; a bare repository extracts the folders they and the patterns name."""
    peer, out = tmp_path / "peer", tmp_path / "out"
    for rel, text in {"src/lib/__init__.py": 'dev = "cuda"\n', "tests/__init__.py": "", "tests/base.py": "B = 1\n",
                      "tests/ops/test_op.py": 'x = torch.ones(2, device="cuda")\n', "pyproject.toml": "[tool]\n",
                      "workloads/w.py": 'DEVICE = "cuda"\n', ".git/config": "x"}.items():
        (peer / rel).parent.mkdir(parents=True, exist_ok=True)
        (peer / rel).write_text(text)
    test = run.stage(peer, peer / "tests" / "ops" / "test_op.py", out, cuda=True)
    roots = [run.stage_import_root(peer, peer / folder, out, cuda=True) for folder in ("src", ".")]
    assert roots == [out / "tree" / "src", out / "tree"]
    assert (out / "tree" / "src" / "lib" / "__init__.py").read_text() == 'dev = "cpu"\n'
    assert (out / "tree" / "workloads" / "w.py").read_text() == 'DEVICE = "cpu"\n'
    assert (out / "tree" / "pyproject.toml").read_text() == "[tool]\n" and not (out / "tree" / ".git").exists()
    assert test.read_text() == 'x = torch.ones(2, device="cpu")\n'
    path = run.file_environment(test, peer, None, tuple(roots))["PYTHONPATH"].split(__import__("os").pathsep)
    assert path.index(str(roots[0])) < path.index(str(roots[1])) < path.index(str(peer))
    assert run.extracted_folders(["tests/ops/**/test_*.py"], ["src"]) == ("src", "tests")
    assert run.extracted_folders(["tests/ops/**/test_*.py"], ["src", "."]) == (".", "src", "tests")
    assert run.extracted_folders(run.DEFAULT_PATTERNS, []) == ("examples", "testing")


MARKED_TEST = '''
import pytest
import torch


def test_unmarked():
    pass


@pytest.mark.smoke
def test_first_smoke():
    assert torch.ones(2).is_cuda
    torch.ones(2).record_stream(None)


@pytest.mark.smoke
def test_second_smoke():
    pass
'''


def test_marks_pick_cases_before_max_cases_and_is_cuda_answers(tmp_path):
    """-m smoke goes to pytest, and --max-cases counts only the cases it leaves (the first smoke case, not the file's
    first case); --is-cuda: the stand-in device's tensors answer `is_cuda`, and `record_stream` does nothing."""
    import subprocess

    (tmp_path / "conftest.py").write_text(run.CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    smoke: fast\n")
    (tmp_path / "test_marked.py").write_text(MARKED_TEST)
    test = tmp_path / "test_marked.py"
    command = run.pytest_command(test, tmp_path, marker="smoke")
    assert command[-2:] == ["-m", "smoke"]
    env = dict(__import__("os").environ, TL_PEER_MAX_CASES="1", TL_PEER_IS_CUDA="1")
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "test_first_smoke PASSED" in proc.stdout and "1 passed, 2 deselected" in proc.stdout, proc.stdout
    env.pop("TL_PEER_IS_CUDA")
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "test_first_smoke FAILED" in proc.stdout, proc.stdout
