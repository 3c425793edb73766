"""The kernel cache and the compile stages: a hit runs no stage (no lowering, no codegen, no build), the entry's
metadata.json reloads the kernel in another process, the key changes with everything that changes the kernel,
concurrent writers of one entry leave nothing behind, and the stage outputs can be dumped and replaced."""

import importlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.jit import cache
from tilelang_musa.jit.backend import backend_named
from tilelang_musa.jit.build_identity import MEMO_DIR
from tilelang_musa.jit.precompiled_prelude import PRELUDE_DIR
from tilelang_musa.jit.sim_runtime import RUNTIME_DIR
from tilelang_musa.jit.stages import REPLACEABLE, STAGES
from tilelang_musa.jit.toolchains import SimToolchain
from tilelang_musa.target import determine_target
from tilelang_musa.transform import normalize_pass_configs

N = 256
COMPILE = sys.modules["tilelang_musa.jit.compile"]  # the module (tilelang_musa.jit.compile is the function)


def negate_program(threads=128):
    @T.prim_func
    def negate(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = -A[bx * threads + i]

    return negate


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """negate_program() compiled once for the module, in a cache directory of its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return tilelang.compile(negate_program(), out_idx=[-1])


@pytest.fixture
def in_built_cache(built, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(built.directory.parent))
    return built.directory.parent


@pytest.fixture
def no_stage_runs(monkeypatch):
    """Makes every stage fail: lowering, code generation and the build."""
    def refuse(*args, **kwargs):
        raise AssertionError("a cache hit ran a compile stage")

    def arm():
        for name in ("lower_program", "lower"):
            monkeypatch.setattr(COMPILE, name, refuse)
        monkeypatch.setattr(importlib.import_module("tilelang_musa.codegen"), "generate", refuse)
        monkeypatch.setattr(SimToolchain, "build", refuse)

    return arm


def test_a_hit_runs_no_stage_and_reloads_from_metadata(built, in_built_cache, no_stage_runs):
    kernel = built
    assert tilelang.compile(kernel.program, out_idx=[-1]) is kernel  # the in-process memo
    cache.clear_memory_cache()
    no_stage_runs()
    again = tilelang.compile(negate_program(), out_idx=[-1])  # structurally equal: the same entry
    assert again is not kernel and again.directory == kernel.directory
    assert again.get_kernel_source() == kernel.get_kernel_source()
    assert again.get_device_source() == kernel.get_device_source() and "negate_kernel(" in again.get_device_source()
    assert "int call_packed(" in again.get_host_source() and "__global__" not in again.get_host_source()
    a = rand((N,), torch.float32, 1)
    torch.testing.assert_close(again(a), -a)
    assert sorted(set(os.listdir(in_built_cache)) - {PRELUDE_DIR, RUNTIME_DIR, MEMO_DIR}) == [kernel.directory.name]

    meta = json.loads((kernel.directory / "metadata.json").read_text())
    assert meta["name"] == "negate" and meta["key"] == kernel.directory.name and meta["format"] == 1
    assert meta["target"]["kind"] == "musa" and meta["target"]["arch"] == "mp_31"
    assert meta["execution_backend"] == "sim" and meta["toolchain"].startswith("sim:")
    assert meta["options"] == {"out_idx": [-1], "pass_configs": {}, "compile_flags": [], "fast_math": False}
    assert meta["host"]["params"] == [
        {"name": "A", "kind": "tensor", "dtype": "float32", "shape": [N], "strides": None, "is_output": False,
         "align": 16, "unused": False, "is_workspace": False, "zeroed": False},
        {"name": "B", "kind": "tensor", "dtype": "float32", "shape": [N], "strides": None, "is_output": True,
         "align": 16, "unused": False, "is_workspace": False, "zeroed": False}]
    assert meta["host"]["launches"] == [{"name": "negate_kernel", "grid": ["2", "1", "1"], "block": [128, 1, 1],
                                         "dynamic_smem_bytes": 0}]
    assert meta["stages"] == {"tir": "negate.tir.py", "lowered": "negate.lowered.py", "mu": "negate.mu",
                              "host": "negate.host.json", "bin": "negate.so"}
    assert sorted(os.listdir(kernel.directory)) == sorted([*meta["stages"].values(), "metadata.json"])
    assert meta["replaced"] == [] and meta["sections"]["device"][0] > 0


def test_a_kernel_reloads_from_its_entry_in_a_fresh_process(built):
    kernel = built
    child = textwrap.dedent(f"""
        import sys, torch
        from tilelang.jit import JITKernel
        sys.modules["tilelang_musa.jit.compile"].lower = None  # a reload must not lower
        kernel = JITKernel.from_database({str(kernel.directory)!r})
        a = torch.arange({N}, dtype=torch.float32)
        assert torch.equal(kernel(a), -a)
        print(kernel.kernel_name, kernel.target.attrs["arch"], kernel.backend.name, kernel.out_idx,
              kernel.get_kernel_source(kernel_only=False) == open({str(kernel.stage_path("mu"))!r}).read())
    """)
    # cwd: not the repository root, whose source tree would shadow an installed (non-editable) package
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                         cwd=kernel.directory)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["negate_kernel", "mp_31", "sim", "[1]", "True"]


def _compile_in_child(barrier, results):
    barrier.wait()  # all lower and store at once: one entry, three writers
    try:
        results.put(str(tilelang.compile(negate_program(), out_idx=[-1]).directory))
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        results.put(f"error: {err!r}")


def test_concurrent_compiles_of_one_kernel_share_one_entry_and_leave_no_temporaries(built, cache_dir, tmp_path,
                                                                                  monkeypatch):
    # the library is the one built already (TILELANG_REPLACE_STAGES), so the children race without 3 host builds
    replace = tmp_path / "replace"
    replace.mkdir()
    shutil.copyfile(built.library_path, replace / "negate.so")
    monkeypatch.setenv("TILELANG_REPLACE_STAGES", str(replace))
    context = multiprocessing.get_context("fork")  # the children share this process's imports
    barrier, results = context.Barrier(3), context.Queue()
    children = [context.Process(target=_compile_in_child, args=(barrier, results)) for _ in range(3)]
    for child in children:
        child.start()
    directories = [results.get(timeout=300) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0, 0, 0]
    assert len(set(directories)) == 1, directories
    assert os.listdir(cache_dir) == [os.path.basename(directories[0])]  # no `.<key>.<random>` left


def test_a_writer_that_loses_the_race_deletes_its_copy(cache_dir):
    def build(directory):
        (directory / "metadata.json").write_text("{}")

    first = cache.store("k" * 32, build)
    assert cache.store("k" * 32, build) == first
    assert os.listdir(cache_dir) == ["k" * 32]


def test_the_key_changes_with_what_changes_the_kernel(monkeypatch, tmp_path):
    program, target, sim = negate_program(), determine_target("musa"), backend_named("sim")

    def key(program=program, target=target, backend=sim, configs=None, flags=(), out_idx=None, name="negate"):
        return cache.kernel_key(program, name, target, backend, normalize_pass_configs(configs), flags, out_idx)

    base = key()
    assert key(program=negate_program()) == base  # the same program built again
    replacement = tmp_path / "mine.mu"
    replacement.write_text("// one")
    variants = [key(program=negate_program(threads=64)),
                key(program=program.with_attr("tilelang_pass_configs", {"tl.disable_sqmma": True})),
                key(program=program.with_attr("global_symbol", "renamed"), name="renamed"),
                key(target=determine_target("musa -arch=mp_22")),
                key(backend=backend_named("cython")),
                key(configs={tilelang.PassConfigKey.TL_DISABLE_SQMMA: True}),
                key(configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}),
                key(flags=("-O2",)),
                key(out_idx=[-1])]
    monkeypatch.setenv("TILELANG_MCC_EXTRA_ARGS", "-v")
    variants.append(key())
    monkeypatch.delenv("TILELANG_MCC_EXTRA_ARGS")
    monkeypatch.setenv("TILELANG_REPLACE_MUSAC", str(replacement))
    variants.append(key())
    replacement.write_text("// two")
    variants.append(key())
    assert len({base, *variants}) == len(variants) + 1


def test_replace_musac_is_compiled_and_shown_by_get_kernel_source(built, cache_dir, tmp_path, monkeypatch,
                                                                   no_stage_runs):
    program, generated = built.program, built.get_kernel_source(kernel_only=False)
    replacement = tmp_path / "edited.mu"
    replacement.write_text("// edited by hand\n" + generated)
    monkeypatch.setenv("TILELANG_REPLACE_MUSAC", str(replacement))
    kernel = tilelang.compile(program, out_idx=[-1])
    assert kernel.get_kernel_source() == replacement.read_text() == kernel.stage_path("mu").read_text()
    assert kernel.metadata.replaced == ("mu",) and kernel.get_device_source() == kernel.get_kernel_source()
    cache.clear_memory_cache()
    no_stage_runs()
    again = tilelang.compile(program, out_idx=[-1])
    assert again.directory == kernel.directory and again.get_kernel_source().startswith("// edited by hand\n")
    a = rand((N,), torch.float32, 2)
    torch.testing.assert_close(again(a), -a)


def test_stages_are_dumped_and_a_replaced_stage_feeds_the_later_ones(built, in_built_cache, tmp_path, monkeypatch):
    dump = tmp_path / "stages"
    monkeypatch.setenv("TILELANG_DUMP_STAGES", str(dump))
    kernel = tilelang.compile(built.program, out_idx=[-1])  # a hit dumps too
    assert sorted(os.listdir(dump)) == ["negate.host.json", "negate.lowered.py", "negate.metadata.json",
                                        "negate.mu", "negate.so", "negate.tir.py"]
    assert "def negate_kernel(" in (dump / "negate.lowered.py").read_text()
    replace = tmp_path / "replace"
    replace.mkdir()
    (replace / "negate.lowered.py").write_text((dump / "negate.lowered.py").read_text())
    monkeypatch.setenv("TILELANG_REPLACE_STAGES", str(replace))
    again = tilelang.compile(built.program, out_idx=[-1])
    assert again.directory != kernel.directory and again.metadata.replaced == ("lowered",)
    assert again.get_kernel_source() == kernel.get_kernel_source()  # the stages after `lowered` from the file
    a = rand((N,), torch.float32, 4)
    torch.testing.assert_close(again(a), -a)


def test_templates_override_builds_against_another_header_tree(tmp_path):
    """TILELANG_TEMPLATES (development: another revision's headers, benchmark/bench_simulator.py) is the tree kernels
    are built against, and is part of the cache key: a marker in its simulator header shows in the build."""
    from tilelang_musa._paths import include_root

    shutil.copytree(include_root() / "tl_templates", tmp_path / "tl_templates")
    musa_h = tmp_path / "tl_templates" / "sim" / "musa_runtime.h"
    musa_h.write_text(musa_h.read_text() + '\n#error "built against the TILELANG_TEMPLATES tree"\n')
    script = textwrap.dedent("""
        import tilelang, tilelang.language as T
        @T.prim_func
        def f(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    A[i] = A[i] + 1
        try:
            tilelang.compile(f, target="musa -arch=mp_31")
        except Exception as err:
            print(type(err).__name__, err)
    """)
    (tmp_path / "build.py").write_text(script)  # a prim_func needs its source in a file
    env = dict(os.environ, TILELANG_TEMPLATES=str(tmp_path))
    proc = subprocess.run([sys.executable, str(tmp_path / "build.py")], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert "built against the TILELANG_TEMPLATES tree" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_stage_table_runs_the_stages_in_order_each_after_what_it_reads():
    table = COMPILE._STAGE_TABLE
    assert tuple(stage.name for stage in table) == STAGES
    for index, stage in enumerate(table):
        assert set(stage.reads) <= set(STAGES[:index]), stage.name
        assert (stage.load is None) == (stage.name not in REPLACEABLE), stage.name


def test_a_long_kernel_name_gets_a_file_stem_that_fits_and_stays_distinct():
    """A global symbol longer than a file name may be (255 bytes) is cut, with a hash of the whole symbol."""
    from tilelang_musa.jit.stages import MAX_STEM_BYTES, file_stem, stage_file

    a, b = "k" * 300 + "_a", "k" * 300 + "_b"
    assert file_stem("gemm") == "gemm" and stage_file("gemm", "mu") == "gemm.mu"
    assert len(file_stem(a).encode()) <= MAX_STEM_BYTES and file_stem(a) != file_stem(b)
    assert max(len(stage_file(a, stage)) for stage in ("tir", "lowered", "mu", "host", "bin")) < 255


def _same_kernel_here():
    @T.prim_func
    def twin(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[T.get_thread_binding()] = 1.0

    return twin


def _same_kernel_there():
    @T.prim_func
    def twin(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[T.get_thread_binding()] = 1.0

    return twin


def test_identical_kernels_written_in_two_places_do_not_share_a_cache_entry():
    """A cached kernel keeps its generated-line -> user-line table (simulator reports name the user's line): a
    structurally identical kernel written elsewhere must get its own entry, or its reports name the other's lines
    (seen: a race in test_sim_sanitizer.py reported at test_sim_exec_modes.py's line)."""
    import tvm

    here, there = _same_kernel_here(), _same_kernel_there()
    assert tvm.ir.structural_equal(here, there)
    target, sim = determine_target("musa"), backend_named("sim")

    def cache_key(program):
        return cache.kernel_key(program, "twin", target, sim, normalize_pass_configs(None), (), None)

    assert cache_key(here) != cache_key(there)
    assert cache_key(_same_kernel_here()) == cache_key(here)  # the same place: the same key


SHIFTED_READ = '''
import tilelang.language as T


@T.prim_func
def shifted(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:{gap}
        tx = T.get_thread_binding()
        B[bx * 128 + tx] = A[bx * 128 + tx + 3]  # reads past A
'''


def _shifted_read_written(path, gap):
    """The kernel of SHIFTED_READ from `path`, with `gap` blank lines inside its body: the same first statement
    (the cache key's anchor) and structure, its read that many lines further down."""
    path.write_text(SHIFTED_READ.format(gap="\n" * gap))
    spec = importlib.util.spec_from_file_location(f"shifted_{gap}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = 1 + SHIFTED_READ.format(gap="\n" * gap).splitlines().index(
        "        B[bx * 128 + tx] = A[bx * 128 + tx + 3]  # reads past A")
    return module.shifted, line


@pytest.mark.parametrize("memory", [True, False], ids=["memo_hit", "disk_hit"])
def test_a_kernel_edited_inside_its_body_reports_its_own_lines_from_the_shared_entry(tmp_path, memory):
    """Two structurally equal kernels with the same first statement share an entry (no walk of the program on a
    hit); the entry's line table (generated line -> user line) is moved to the second one's lines when a simulator
    report names them, and with `#line` directives printed the lines are in the key."""
    import tvm
    from tilelang_musa.launcher import KernelLaunchError

    configs = {"tl.disable_safe_memory_legalize": True}
    path = tmp_path / "kernel_file.py"
    first, first_line = _shifted_read_written(path, 0)
    second, second_line = _shifted_read_written(path, 2)
    assert tvm.ir.structural_equal(first, second) and second_line == first_line + 2
    built = tilelang.compile(first, target="musa -arch=mp_31", pass_configs=configs)
    if not memory:
        cache.clear_memory_cache()
    served = tilelang.compile(second, target="musa -arch=mp_31", pass_configs=configs)
    assert served.directory == built.directory  # one entry
    for kernel, line in ((served, second_line), (built, first_line)):
        with pytest.raises(KernelLaunchError, match=rf"{path}:{line} in the user's source"):
            kernel(rand((256,), torch.float32), torch.full((256,), float("nan")))

    target, sim = determine_target("musa -arch=mp_31"), backend_named("sim")

    def cache_key(program, directives):
        given = normalize_pass_configs({**configs, "tl.emit_line_directives": directives})
        return cache.kernel_key(program, "shifted", target, sim, given, (), None)

    assert cache_key(first, False) == cache_key(second, False)
    assert cache_key(first, True) != cache_key(second, True)  # the printed source names the lines
