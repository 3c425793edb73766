"""Run another project's TileLang test files unchanged but for the device string, in the simulator.

    python tools/peer_tests/run.py PEER_TREE [PATTERN ...] [--out DIR] [--jobs N] [--timeout S] [--ref REF]
                                   [-k EXPR] [-m MARKS] [--import-root FOLDER ...] [--is-cuda]
                                   [--triton-interpreter SITE]

PEER_TREE is an extracted checkout (of tile-ai/tilelang-musa, or of upstream tile-ai/tilelang with --cuda), or a
bare git directory of one (a mirror): the top-level folders the patterns and import roots name (by default testing/
and examples/) at --ref (default HEAD; a tag such as v0.1.13 for a release's tests) are then extracted under --out
first. The simulated arch is TILELANG_SIM_ARCH's (default mp_31), as for every run of the package.
Each test file's folder is staged under --out with the device strings rewritten (tensors on "musa" or "cuda" go
to "cpu"; with --cuda, target "cuda" becomes "musa", and upstream's requires_cuda* gates answer as a GPU of
compute capability --cuda-as, default 9.0), next to a conftest.py that stands in
for the parts of torch_musa the tests call (the harness's business, not the package's). A library whose tests import
its own packages (TileOPs: `tileops` from src/, `tests.test_base` and `workloads` from its root) names those folders
with --import-root: they are staged whole, rewritten the same way, and put on the tests' path; -m picks a tier of
marked cases (`-m smoke`), and --is-cuda lets the stand-in device's tensors pass a library's `x.is_cuda` checks.
Every file then runs in its own pytest process; the table printed at the end (and written to DIR/results.tsv) gives
each file's outcome and the first error line. Nothing of the peer's tree is kept in this repository.

Some examples compute their reference with Triton kernels (upstream's blocksparse_attention, cast, deepseek_v32,
minference). Triton is not a dependency of this package; with --triton-interpreter SITE, a folder holding an
installed triton (`pip install --target SITE triton`, or a virtual environment's site-packages) is put on the tests'
path and Triton runs in its CPU interpreter (TRITON_INTERPRET=1), on the CPU tensors the rewritten tests allocate.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_PATTERNS = ["testing/python/**/test_*.py", "testing/musa/**/test_*.py", "examples/**/test_*.py"]

# The torch_musa calls the peer's tests make, answered as the simulator would be: one device, always there.
CONFTEST = '''
import os, sys, time, types, torch

# CUDA-only packages some examples take a reference or a benchmark from (flash-attn), in torch: the harness's
# stand-ins, staged in _standins/ beside this file. Last on the path, so an installed package wins.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_standins"))

class _WallClockEvent:
    """torch.musa.Event / torch.cuda.Event on the stand-in device: the simulator's launches return when done, so
    the wall clock at record() is the event's time (examples time their kernels between two of them)."""

    def __init__(self, *args, **kwargs):
        self.at = None

    def record(self, *args):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


if not hasattr(torch, "musa"):
    class _Props:
        name = "MUSA simulator"
        multi_processor_count = 56
        total_memory = 48 << 30
        # the simulated card's shared memory (DeepSeek's TileKernels sizes its tiles from the per-SM figure)
        shared_memory_per_multiprocessor = shared_memory_per_block_optin = \
            73728 if os.environ.get("TILELANG_SIM_ARCH", "mp_31") == "mp_22" else 196608
        major, minor = divmod(int(os.environ.get("TILELANG_SIM_ARCH", "mp_31")[3:]), 10)  # mp_22 -> (2, 2)
        gcnArchName = ""  # torch.compile's inductor reads it of every device (an AMD field; no AMD arch here)

    torch.musa = types.SimpleNamespace(
        is_available=lambda: True, synchronize=lambda *a, **k: None, set_device=lambda *a, **k: None,
        empty_cache=lambda: None, manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed,
        device_count=lambda: 1, current_device=lambda: 0, get_device_name=lambda *a: _Props.name,
        get_device_properties=lambda *a: _Props(), current_stream=lambda *a: None,
        stream=lambda *a, **k: __import__("contextlib").nullcontext(), Stream=lambda *a, **k: None,
        device=lambda *a, **k: __import__("contextlib").nullcontext(),  # `with torch.cuda.device(i):` (fla's guard)
        default_stream=lambda *a: None,
        # Free and total device memory: free is what the harness lets one test's tensors take in the simulator
        # (TL_PEER_DEVICE_FREE_MIB, default 256), so a test that sizes its tensors from it stays small or skips as
        # on a small GPU (language_int64's 512 MiB-floor fill would take hours on CPU threads).
        mem_get_info=lambda *a: (int(os.environ.get("TL_PEER_DEVICE_FREE_MIB", "256")) << 20, _Props.total_memory),
        Event=_WallClockEvent,
    )

# The peer's examples/ still call torch.cuda for streams and device queries: answered by the stand-in above.
for _name in ("Event", "Stream", "stream", "device", "default_stream", "current_stream", "synchronize",
              "current_device", "device_count", "get_device_properties", "get_device_name", "is_available",
              "set_device", "empty_cache", "mem_get_info"):
    setattr(torch.cuda, _name, getattr(torch.musa, _name))
torch.cuda.get_device_capability = lambda *a: (8, 0)  # the examples' heuristics take their portable branch
# torch.random.fork_rng(devices=range(torch.cuda.device_count())) saves and restores each device's generator. The
# stand-in device's tensors are CPU tensors drawn from the CPU generator, which fork_rng saves and restores itself.
torch.cuda.get_rng_state = lambda device="cuda": torch.get_rng_state()
torch.cuda.set_rng_state = lambda new_state, device="cuda": None

# Pinned host memory speeds up copies to a GPU; a CPU-only torch has no allocator for it and refuses
# `torch.empty(..., pin_memory=True)` (DeepSeek's TileKernels mHC stage their indices that way). The stand-in
# device's tensors are host tensors already: the request is dropped.
def _unpinned(factory):
    def made(*args, **kwargs):
        kwargs.pop("pin_memory", None)
        return factory(*args, **kwargs)
    return made
for _name in ("empty", "zeros", "ones", "full"):
    setattr(torch, _name, _unpinned(getattr(torch, _name)))
torch.Tensor.pin_memory = lambda self, *a, **k: self
# `x.record_stream(stream)` keeps a GPU tensor alive for another stream's work; the simulator's launches return when
# done, so there is nothing to keep (a CPU tensor refuses the call).
torch.Tensor.record_stream = lambda self, *a, **k: None

# --is-cuda: a library that refuses inputs not on the GPU (`assert x.is_cuda`, TileOPs' kernels) takes the stand-in
# device's tensors, which are CPU tensors.
if os.environ.get("TL_PEER_IS_CUDA") == "1":
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cpu", "cuda"))


# --cuda: upstream gates its GPU tests on CUDA; the simulated MUSA device answers them as an NVIDIA GPU of compute
# capability TL_PEER_CUDA_AS (e.g. "9.0"), so a case runs unless it asks for another generation's features.
if os.environ.get("TL_PEER_CUDA_AS"):
    import operator
    import tilelang.testing as _testing

    _AS = tuple(int(part) for part in os.environ["TL_PEER_CUDA_AS"].split("."))
    _MODES = {"ge": operator.ge, "gt": operator.gt, "eq": operator.eq, "lt": operator.lt, "le": operator.le}

    def _cuda_version(major_version, minor_version=0, mode="ge"):
        import pytest
        ok = _MODES[mode](_AS, (int(major_version), int(minor_version)))
        why = (f"requires CUDA compute {mode} {major_version}.{minor_version}; the harness answers as "
               f"sm_{_AS[0]}{_AS[1]} (--cuda-as)")
        return lambda func: _testing.requires_musa(pytest.mark.skipif(not ok, reason=why)(func))

    _testing.requires_cuda = _testing.requires_cuda_or_cdna = _testing.requires_musa
    _testing.requires_cuda_compute_version = _cuda_version
    for _mode in _MODES:
        setattr(_testing, f"requires_cuda_compute_version_{_mode}",
                lambda major_version, minor_version=0, _mode=_mode: _cuda_version(major_version, minor_version, _mode))
    torch.cuda.get_device_capability = lambda *a: _AS
    if "_Props" in globals():  # the stand-in device: get_device_properties(0).major, as Hopper checks read it
        _Props.major, _Props.minor = _AS


# --triton-interpreter: Triton's interpreter runs kernels on CPU tensors, but its autotuner and the examples still ask
# the active GPU driver for a benchmarker and a target (`driver.active.get_current_target().backend == "hip"`), and
# with no GPU there is none ("0 active drivers"). This stand-in answers as the NVIDIA GPU the harness reports. Its
# benchmarker runs nothing and times every config alike, so the autotuner takes the first config: the interpreter's
# timings say nothing about a GPU, and every config computes the same result.
if os.environ.get("TRITON_INTERPRET") == "1":
    import triton
    from triton.backends.compiler import GPUTarget as _GPUTarget

    class _InterpreterDriver:
        def is_active(self):
            return True

        def get_current_target(self):
            major, minor = torch.cuda.get_device_capability()
            return _GPUTarget("cuda", major * 10 + minor, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

        def get_device_interface(self):
            return torch.cuda

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_benchmarker(self):
            return lambda fn, quantiles=None, **_: [1.0] * len(quantiles) if quantiles else 1.0

        def get_empty_cache_for_benchmark(self):
            return torch.empty(1 << 20, dtype=torch.int8)

        def clear_cache(self, cache):
            cache.zero_()

        utils = types.SimpleNamespace(get_device_properties=lambda *a: {
            "multiprocessor_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "max_shared_mem": 228 << 10, "max_num_regs": 65536, "warpSize": 32})

    triton.runtime.driver.set_active(_InterpreterDriver())

    # Triton's interpreter (3.9.0) keeps bfloat16 values as their uint16 bits, and its tl.dot multiplies those bits
    # as integers (it widens only fp8 operands first): a 16x16 bfloat16 tl.dot is off by 2e10, which made upstream's
    # blocksparse_attention Triton kernel return garbage. Its operands are widened to float32 here (exact), as a
    # GPU's bfloat16 MMA accumulates in float32; every other dot is left as it is.
    from triton.runtime import interpreter as _interpreter

    def _widened_bf16(handle):
        if handle.dtype.scalar != triton.language.bfloat16:
            return handle
        bits = handle.data.astype(_interpreter.np.uint32) << 16
        return _interpreter.TensorHandle(bits.view(_interpreter.np.float32), triton.language.float32)

    _create_dot = _interpreter.InterpreterBuilder.create_dot
    _interpreter.InterpreterBuilder.create_dot = (
        lambda self, a, b, d, *rest: _create_dot(self, _widened_bf16(a), _widened_bf16(b), d, *rest))


@__import__("pytest").hookimpl(trylast=True)  # after -m / -k deselected theirs: N of the cases they leave
def pytest_collection_modifyitems(config, items):
    # --max-cases N: files with more cases (sizes made for a GPU, 100+ combinations) run N of them, evenly spaced.
    cap = int(os.environ.get("TL_PEER_MAX_CASES", "0"))
    if 0 < cap < len(items):
        keep = {round(k * (len(items) - 1) / max(cap - 1, 1)) for k in range(cap)}
        config.hook.pytest_deselected(items=[item for k, item in enumerate(items) if k not in keep])
        items[:] = [item for k, item in enumerate(items) if k in keep]
'''


# References some examples take from flash-attn (a CUDA package), written in torch: the harness's stand-in.
FLASH_ATTN_STANDIN = '''"""Stand-in for flash-attn's reference entry points, in torch (the upstream-examples harness)."""
import math
import torch


def _attend(q, k, v, scale, causal, k_len=None):
    # q (Lq, H, D), k/v (Lk, Hk, D); causal masks align the last query with the last key, as flash-attn does
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    s = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
    lq, lk = q.shape[0], k.shape[0] if k_len is None else k_len
    keys = torch.arange(k.shape[0])
    mask = keys[None, :] >= lk
    if causal:
        mask = mask | (keys[None, :] > torch.arange(lq)[:, None] + (lk - lq))
    s = s.masked_fill(mask[None], float("-inf"))
    # a query that sees no key (causal, more queries than keys) gets 0, as flash-attn documents, not softmax's NaN
    p = torch.softmax(s, -1).masked_fill(mask.all(-1)[None, :, None], 0.0)
    return torch.einsum("hqk,khd->qhd", p, v.float()).to(q.dtype)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, **_):
    scale = softmax_scale or 1 / math.sqrt(q.shape[-1])
    out = torch.empty_like(q)
    for b in range(len(cu_seqlens_q) - 1):
        qs, qe, ks, ke = (int(x) for x in (cu_seqlens_q[b], cu_seqlens_q[b + 1], cu_seqlens_k[b], cu_seqlens_k[b + 1]))
        out[qs:qe] = _attend(q[qs:qe], k[ks:ke], v[ks:ke], scale, causal)
    return out


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, softmax_scale=None, causal=False, **_):
    scale = softmax_scale or 1 / math.sqrt(q.shape[-1])
    lens = [k_cache.shape[1]] * q.shape[0] if cache_seqlens is None else [int(x) for x in cache_seqlens]
    return torch.stack([_attend(q[b], k_cache[b], v_cache[b], scale, causal, lens[b]) for b in range(q.shape[0])])
'''


def device_parameters(text: str) -> dict[str, int]:
    """The functions `text` defines with a parameter named `device`: name -> its position (for calls that pass the
    device positionally, `generate_random_padding_mask(N_CTX, BATCH, "cuda", mode="random")`)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in node.args.posonlyargs + node.args.args]
            if "device" in names:
                found[node.name] = names.index("device")
    return found


def _with_cpu_at(text: str, spans: list) -> str:
    """`text` with each one-line span (line, start, end: ast's offsets) replaced by "cpu"."""
    lines = text.split("\n")
    for lineno, start, end in sorted(spans, reverse=True):
        line = lines[lineno - 1].encode()  # ast's offsets count UTF-8 bytes
        lines[lineno - 1] = (line[:start] + b'"cpu"' + line[end:]).decode()
    return "\n".join(lines)


def _positional_devices(text: str, params: dict[str, int]) -> str:
    """A device string literal passed positionally to one of `params`' functions becomes "cpu". Only there: a bare
    "cuda" elsewhere may be a target (which --cuda turns into "musa")."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else None
        k = params.get(name)
        if k is None or k >= len(node.args) or any(isinstance(a, ast.Starred) for a in node.args[:k + 1]):
            continue
        arg = node.args[k]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                re.fullmatch(r"(musa|cuda)(:\d+)?", arg.value) and arg.lineno == arg.end_lineno:
            spans.append((arg.lineno, arg.col_offset, arg.end_col_offset))
    return _with_cpu_at(text, spans)


def _assigned_devices(text: str) -> str:
    """A device string literal assigned to a name `dev` / `device` in a tuple assignment (`dtype, dev = torch.bfloat16,
    "cuda"`) becomes "cpu"."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    spans = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple)):
            continue
        for target in node.targets:
            if not isinstance(target, ast.Tuple) or len(target.elts) != len(node.value.elts):
                continue
            for name, arg in zip(target.elts, node.value.elts):
                if isinstance(name, ast.Name) and name.id in ("dev", "device") and isinstance(arg, ast.Constant) \
                        and isinstance(arg.value, str) and re.fullmatch(r"(musa|cuda)(:\d+)?", arg.value) \
                        and arg.lineno == arg.end_lineno:
                    spans.append((arg.lineno, arg.col_offset, arg.end_col_offset))
    return _with_cpu_at(text, spans)


def rewrite(text: str, cuda: bool, device_params: dict[str, int] | None = None) -> str:
    devices = "musa|cuda"  # the peer's examples/ still allocate on "cuda"
    text = _positional_devices(text, {**device_parameters(text), **(device_params or {})})
    text = _assigned_devices(text)
    # device="cuda", `dev = "cuda"`, and a parameter's default `device: str = "cuda"` (any annotation)
    text = re.sub(rf"""\b(device|dev)(\s*:\s*[^=\n]+?)?(\s*=\s*)(["'])({devices})(:\d+)?\4""", r'\1\2\3"cpu"', text)
    text = re.sub(rf"""(["'])device\1(\s*:\s*)(["'])({devices})(:\d+)?\3""", r'\1device\1\2"cpu"', text)  # dicts
    # `x.device.type != "cuda"`: the stand-in device's tensors are CPU tensors
    text = re.sub(rf"""(\.device\.type\s*[!=]=\s*)(["'])({devices})\2""", r'\1"cpu"', text)
    text = re.sub(rf"""\b(DEVICE\s*=\s*)(["'])({devices})(:\d+)?\2""", r'\1"cpu"', text)  # module constants
    text = re.sub(rf"""torch\.device\((["'])({devices})(:\d+)?\1\)""", 'torch.device("cpu")', text)
    text = re.sub(rf"""\.({devices})\(\)""", ".cpu()", text)
    text = re.sub(rf"""\.to\((["'])({devices})\1""", '.to("cpu"', text)
    # get_test_device()-style helpers name the device as a returned string literal
    text = re.sub(r"""return (["'])musa\1""", 'return "cpu"', text)
    text = text.replace("torch.cuda.synchronize()", "torch.musa.synchronize()")  # as their "cuda" tensors are
    if cuda:
        text = re.sub(r"""target\s*=\s*(["'])cuda\1""", 'target="musa"', text)
        text = re.sub(r"""Target\((["'])cuda\1\)""", 'Target("musa")', text)  # tvm.target.Target("cuda")
        # a config dict, `target={"kind": "cuda", "arch": "sm_90"}`: its arch and code are NVIDIA's, the kind is all
        # that carries over
        text = re.sub(r"""\{\s*(["'])kind\1\s*:\s*(["'])cuda\2[^{}]*\}""", '{"kind": "musa"}', text)
    return text


def stage(peer: Path, test: Path, out: Path, cuda: bool) -> Path:
    peer, test = peer.resolve(), test.resolve()
    stage_folder(peer, test.parent, out, cuda)
    return out / "tree" / test.relative_to(peer)


def stage_folder(peer: Path, folder: Path, out: Path, cuda: bool) -> None:
    """`folder`'s files (rewritten), its helper packages, and the sibling folders its modules put on sys.path
    (`sys.path.append(os.path.join(os.path.dirname(__file__), "../flash_attention"))`, as upstream's attention_sink
    examples import flash_attention's varlen_utils), under `out`/tree as in the peer's tree."""
    dest_dir = out / "tree" / folder.relative_to(peer)
    dest_dir.mkdir(parents=True, exist_ok=True)
    # A test package named like a standard-library module (`math`) would shadow it once its parent is on sys.path:
    # staged without its __init__.py, its files are plain modules.
    shadows = folder.name in sys.stdlib_module_names
    modules = {src: src.read_text() for src in sorted(folder.glob("*.py"))}
    params = {name: k for text in modules.values() for name, k in device_parameters(text).items()}
    siblings = []
    for src in folder.iterdir():
        if shadows and src.name == "__init__.py":
            continue
        if src.is_file() and not (dest_dir / src.name).exists():
            if src.suffix == ".py":
                (dest_dir / src.name).write_text(rewrite(modules[src], cuda, params))
                siblings += sibling_folders(modules[src], folder, peer)
            else:
                shutil.copy(src, dest_dir / src.name)
        elif is_helper_folder(src) and not (dest_dir / src.name).exists():  # `from quantize import ...`, ops/*.cu
            shutil.copytree(src, dest_dir / src.name, ignore=shutil.ignore_patterns("__pycache__"))
            for module in (dest_dir / src.name).rglob("*.py"):
                module.write_text(rewrite(module.read_text(), cuda))
    for sibling in siblings:
        stage_folder(peer, sibling, out, cuda)


def sibling_folders(text: str, folder: Path, peer: Path) -> list[Path]:
    """The folders of the peer's tree that a module names by a relative path (`"../flash_attention"`)."""
    found = []
    for rel in re.findall(r"""["'](\.\./[\w./-]+?)/?["']""", text):
        target = (folder / rel).resolve()
        if target.is_dir() and target.is_relative_to(peer) and target != folder:
            found.append(target)
    return found


def is_helper_folder(folder: Path) -> bool:
    """A folder next to a test file that its examples use: a Python package they import (`quantize/`), or sources
    they build or read (minference's `ops/`, the C++ extension it compiles). It holds no tests of its own (a
    folder that does is staged when its tests are)."""
    return folder.is_dir() and folder.name != "__pycache__" and not any(folder.rglob("test_*.py"))


def stage_import_root(peer: Path, folder: Path, out: Path, cuda: bool) -> Path:
    """`folder` of the peer's tree (its root, or a source folder such as TileOPs' src/) staged whole under `out`/tree,
    every module rewritten as the tests are: the packages the tests import (`tileops`, `tests.test_base`) then use
    the stand-in device too. Returns the staged folder, which goes on the tests' path."""
    peer, folder = peer.resolve(), folder.resolve()
    dest = out / "tree" / folder.relative_to(peer)
    for src in sorted(folder.rglob("*")):
        rel = src.relative_to(folder)
        if not src.is_file() or any(part in (".git", "__pycache__") for part in rel.parts):
            continue
        target = dest / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".py":
            target.write_text(rewrite(src.read_text(errors="replace"), cuda))
        else:
            shutil.copy(src, target)
    return dest


def write_support(root: Path) -> None:
    """The conftest.py (torch_musa's and the GPU gates' stand-ins) and the stand-in packages, at the staged root."""
    (root / "conftest.py").write_text(CONFTEST)
    (root / "_standins").mkdir(exist_ok=True)
    (root / "_standins" / "flash_attn.py").write_text(FLASH_ATTN_STANDIN)


def summarize(output: str) -> tuple[str, str]:
    tail = [line for line in output.strip().splitlines() if line.strip()]
    counts = tail[-1].strip("= ") if tail else ""  # pytest -v frames its last line in "="
    errors = [line for line in output.splitlines() if line.startswith("E ") or line.startswith("FAILED")]
    return counts, (errors[0][:200] if errors else "")


def file_environment(path: Path, peer: Path | None = None, triton_site: Path | None = None,
                     import_roots: tuple[Path, ...] = ()) -> dict[str, str]:
    """The environment one staged test file runs in."""
    # A test that asks for a device launcher (execution_backend="cython" / "tvm_ffi") runs in the simulator, as
    # a user without a MUSA device would run it (the switch Triton's TRITON_INTERPRET=1 is for Triton).
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TILELANG_EXECUTION_BACKEND="sim",
               PYTHONPATH=os.pathsep.join(filter(None, [str(path.parent), os.environ.get("PYTHONPATH")])))
    for staged in import_roots:  # --import-root: the staged, rewritten packages, before the peer's own
        env["PYTHONPATH"] += os.pathsep + str(staged)
    if peer is not None:  # tests import helpers from the peer's examples/ (`from examples.x import ...`), as from its root
        env["PYTHONPATH"] += os.pathsep + str(peer)
    if triton_site is not None:  # last on the path: it must not shadow the package or torch with its own copies
        env["PYTHONPATH"] += os.pathsep + str(triton_site)
        env["TRITON_INTERPRET"] = "1"
    return env


def triton_site_packages(site: Path) -> Path:
    """--triton-interpreter's folder, checked: it must hold an importable triton package."""
    site = site.resolve()
    if not (site / "triton" / "__init__.py").is_file():
        raise SystemExit(f"--triton-interpreter {site}: no triton package there (install one with "
                         f"`pip install --target {site} triton`, or name a virtual environment's site-packages)")
    return site


def run_one(path: Path, root: Path, timeout: float, max_cases: int = 0, cuda_as: str = "",
            peer: Path | None = None, keyword: str = "", triton_site: Path | None = None,
            import_roots: tuple[Path, ...] = (), marker: str = "", is_cuda: bool = False) -> tuple[str, str, str]:
    env = file_environment(path, peer, triton_site, import_roots)
    # Moore Threads' per-arch folders (testing/musa/mp22, mp31) run on a simulated device of that arch.
    arch_dirs = [part for part in path.parts if re.fullmatch(r"mp\d\d", part)]
    if arch_dirs:
        env["TILELANG_SIM_ARCH"] = f"mp_{arch_dirs[-1][2:]}"
    if max_cases:
        env["TL_PEER_MAX_CASES"] = str(max_cases)
    if cuda_as:
        env["TL_PEER_CUDA_AS"] = cuda_as
    if is_cuda:
        env["TL_PEER_IS_CUDA"] = "1"
    try:
        proc = subprocess.run(pytest_command(path, root, keyword, marker), cwd=path.parent, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as stopped:
        partial = stopped.stdout.decode(errors="replace") if isinstance(stopped.stdout, bytes) else stopped.stdout or ""
        (path.parent / (path.name + ".log")).write_text(partial)
        return ("timeout",) + timed_out(partial, timeout)
    (path.parent / (path.name + ".log")).write_text(proc.stdout + proc.stderr)
    counts, first_error = summarize(proc.stdout + proc.stderr)
    return outcome(proc.returncode, counts), counts, first_error


def pytest_command(path: Path, root: Path, keyword: str = "", marker: str = "") -> list[str]:
    # importlib import mode, as the peer's own pytest configuration (pyproject addopts) runs its tests.
    # -v names each case as it starts and ends, so a file stopped by the timeout still says what had passed
    return [sys.executable, "-m", "pytest", "-v", "-x", "-p", "no:cacheprovider", "--import-mode=importlib",
            "--rootdir", str(root), str(path)] + (["-k", keyword] if keyword else []) + \
        (["-m", marker] if marker else [])


def timed_out(partial: str, timeout: float) -> tuple[str, str]:
    """(counts, running case) of a file stopped after `timeout` s, from pytest -v's partial output."""
    ended = re.findall(r"::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", partial)
    started = re.findall(r"::(\S+) ", partial)
    passed = sum(result == "PASSED" for _, result in ended)
    running = started[-1] if started and len(started) > len(ended) else ""
    return (f"over {timeout:.0f} s, {passed} passed before",
            f"still running {running}" if running else "")


def outcome(returncode: int, counts: str) -> str:
    """A file passes only if some case passed: one whose every case was skipped (a CUDA-only requirement, say)
    exits 0 but tested nothing, and is reported as `skipped`."""
    if returncode == 5:
        return "no-tests"
    if returncode != 0:
        return "fail"
    return "pass" if re.search(r"\b[1-9]\d* passed\b", counts) else "skipped"


def extract(git_dir: Path, dest: Path, ref: str = "HEAD", folders: tuple[str, ...] = ("testing", "examples")) -> Path:
    """`folders` (top-level, "." for the whole tree) at `ref` of a bare repository, written under `dest` (replacing an
    older extraction)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    paths = [] if "." in folders else sorted(set(folders))
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", ref, *paths],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def extracted_folders(patterns: list[str], import_roots: list[str]) -> tuple[str, ...]:
    """The top-level folders of a bare repository that the run needs: each pattern's and each import root's ("."
    for its root: the whole tree)."""
    folders = {Path(pattern).parts[0] for pattern in patterns}
    folders |= {"." if Path(root) == Path(".") else Path(root).parts[0] for root in import_roots}
    return tuple(sorted(folders))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", type=Path)
    parser.add_argument("patterns", nargs="*", default=DEFAULT_PATTERNS)
    parser.add_argument("--out", type=Path, default=Path("/tmp/peer_tests"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--cuda", action="store_true", help="the tree is upstream TileLang's (CUDA device strings)")
    parser.add_argument("--ref", default="HEAD", help="of a bare repository: the commit or tag whose tests run")
    parser.add_argument("--max-cases", type=int, default=0,
                        help="run at most this many cases of a file, evenly spaced (0: all); the table says so")
    parser.add_argument("--cuda-as", default="9.0", metavar="MAJOR.MINOR",
                        help="with --cuda: the compute capability upstream's requires_cuda* gates see (the simulated "
                             "MUSA device runs the cases they let through); 'none' skips every CUDA-gated case")
    parser.add_argument("-k", dest="keyword", default="",
                        help="pytest's -k: run only the cases of each file whose names match the expression (it "
                             "matches the test function's attribute names too: 'not tma' drops every gated case, "
                             "whose gate set `pytestmark`)")
    parser.add_argument("--triton-interpreter", type=Path, metavar="SITE",
                        help="a folder holding triton (pip install --target SITE triton, or a venv's site-packages): "
                             "the tests' Triton references run in Triton's CPU interpreter (TRITON_INTERPRET=1)")
    parser.add_argument("-m", dest="marker", default="",
                        help="pytest's -m: run only the cases with these marks (TileOPs' 'smoke' tier)")
    parser.add_argument("--import-root", action="append", default=[], metavar="FOLDER",
                        help="a folder of the peer's tree, relative ('.' for its root), that its tests import packages "
                             "from (TileOPs: 'src' for tileops, '.' for tests.test_base and workloads): staged whole "
                             "and rewritten as the tests are, and put on the tests' path before the peer's own copy")
    parser.add_argument("--is-cuda", action="store_true",
                        help="CPU tensors answer `is_cuda` (a library that refuses inputs not on the GPU, as TileOPs' "
                             "kernels do, takes the stand-in device's tensors; a test that expects a CPU tensor "
                             "refused fails)")
    args = parser.parse_args()
    cuda_as = args.cuda_as if args.cuda and args.cuda_as != "none" else ""
    triton_site = triton_site_packages(args.triton_interpreter) if args.triton_interpreter else None

    peer = args.peer.resolve()
    if (peer / "HEAD").is_file() and not (peer / "testing").exists():  # a bare repository: extract its tests
        peer = extract(peer, args.out / "src", args.ref, extracted_folders(args.patterns, args.import_root))
    tests = sorted({p for pattern in args.patterns for p in peer.glob(pattern)})
    root = args.out / "tree"
    root.mkdir(parents=True, exist_ok=True)
    write_support(root)
    staged = {test: stage(peer, test, args.out, args.cuda) for test in tests}
    import_roots = tuple(stage_import_root(peer, peer / folder, args.out, args.cuda) for folder in args.import_root)

    results = {}
    with futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {pool.submit(run_one, path, root, args.timeout, args.max_cases, cuda_as, peer, args.keyword,
                            triton_site, import_roots, args.marker, args.is_cuda): test
                for test, path in staged.items()}
        for job in futures.as_completed(jobs):
            test = jobs[job]
            results[test] = job.result()
            print(f"{results[test][0]:8} {test.relative_to(peer)}  {results[test][1]}", flush=True)

    lines = [f"{results[t][0]}\t{t.relative_to(peer)}\t{results[t][1]}\t{results[t][2]}" for t in tests]
    (args.out / "results.tsv").write_text("\n".join(lines) + "\n")
    passed = sum(results[t][0] == "pass" for t in tests)
    print(f"\n{passed} of {len(tests)} files pass; table in {args.out / 'results.tsv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
