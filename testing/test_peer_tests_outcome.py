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


def test_stand_in_device_forks_the_rng(tmp_path):
    """Moore Threads' flash_decoding example forks torch's RNG over every CUDA device the stand-in reports (one):
    the fork saves and restores the CPU generator the stand-in device's tensors are drawn from."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(run.CONFTEST)
    (tmp_path / "test_rng.py").write_text(PEER_RNG_TEST)
    env = dict(__import__("os").environ, TILELANG_EXECUTION_BACKEND="sim")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_rng.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "test_rng.py::test_fork_rng_over_the_stand_in_devices PASSED" in proc.stdout, proc.stdout + proc.stderr


def test_a_helper_package_next_to_a_test_is_staged_with_it(tmp_path):
    peer, out = tmp_path / "peer", tmp_path / "out"
    (peer / "examples" / "dq" / "quantize").mkdir(parents=True)
    (peer / "examples" / "dq" / "quantize" / "__init__.py").write_text('DEVICE = "cuda"\n')
    (peer / "examples" / "dq" / "test_dq.py").write_text("from quantize import DEVICE\n")
    (peer / "examples" / "dq" / "other").mkdir()  # a folder of tests: staged with its own tests, not here
    (peer / "examples" / "dq" / "other" / "__init__.py").write_text("")
    (peer / "examples" / "dq" / "other" / "test_other.py").write_text("")
    staged = run.stage(peer, peer / "examples" / "dq" / "test_dq.py", out, cuda=True)
    assert (staged.parent / "quantize" / "__init__.py").read_text() == 'DEVICE = "cpu"\n'
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
