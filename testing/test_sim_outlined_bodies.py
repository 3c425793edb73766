"""The simulator's container-using bodies (sim/*_outlined.h, visibility.h's TL_SIM_OUTLINED) are out of a linked
kernel library's view and in its runtime: a linked build's preprocessed headers include no outlined file, the
runtime's and a self-contained library's do, and the runtime exports the outlined functions under its arch's names.
(Counters, traces and launches through these functions are checked end to end by test_sim_counters.py,
test_profiler_trace.py and the other simulator tests, in both forms.)"""

import subprocess

import pytest

from tilelang_musa._paths import include_root, simulator_headers
from tilelang_musa.jit import sim_runtime, sim_runtime_recipe
from tilelang_musa.jit.toolchains import SimToolchain

OUTLINED = ("profile_outlined.h", "timeline_outlined.h", "fiber_outlined.h", "sqmma_outlined.h",
            "async_barrier_outlined.h", "tme_outlined.h", "scheduler_outlined.h", "race_detector_outlined.h",
            "uninit_reads_outlined.h", "access_checks_outlined.h", "warp_mma_outlined.h", "async_copy_outlined.h",
            "mma_decoded_operand.h")
ARCHS = {"mp_22": 220, "mp_31": 310}


def preprocessed_files(musa_arch: int, form_flags: list[str]) -> set[str]:
    """The header files a build of musa_runtime.h reads with `form_flags` (the line markers of g++ -E)."""
    flags = sim_runtime_recipe.base_flags(musa_arch, include_root(), simulator_headers(), [])
    text = subprocess.run(["g++", *flags, *form_flags, "-E", "-x", "c++", "-"], input='#include "musa_runtime.h"\n',
                          capture_output=True, text=True, check=True).stdout
    return {line.split('"')[1].rsplit("/", 1)[-1] for line in text.splitlines() if line.startswith("# ")}


@pytest.mark.parametrize("arch", ARCHS)
def test_a_linked_kernel_library_sees_no_outlined_body(arch):
    linked = preprocessed_files(ARCHS[arch], [sim_runtime_recipe.LINK_FLAG])
    assert "profile.h" in linked and "timeline.h" in linked and "fiber.h" in linked and "sqmma.h" in linked
    assert "async_barrier.h" in linked
    assert not linked & set(OUTLINED)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_runtime_and_a_self_contained_library_compile_the_bodies(arch):
    assert set(OUTLINED) <= preprocessed_files(ARCHS[arch], [sim_runtime_recipe.BUILD_FLAG])
    # a self-contained library has no shared stack pool: its StackPool maps and unmaps in place
    assert set(OUTLINED) - {"fiber_outlined.h"} <= preprocessed_files(ARCHS[arch], [])


@pytest.mark.parametrize("arch", ARCHS)
def test_the_runtime_exports_the_outlined_functions_under_its_arch(arch):
    toolchain = SimToolchain()
    flags = sim_runtime_recipe.base_flags(ARCHS[arch], include_root(), simulator_headers(), [])
    library = sim_runtime.runtime_library(["g++"], toolchain.identity(), flags, arch)
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                              check=True).stdout.split()
    prefix = f"tl_sim_rt{ARCHS[arch]}_"
    for name in ("profile_access", "profile_add_mma_shape", "profile_publish", "timeline_add", "timeline_publish",
                 "stack_pool_acquire", "stack_pool_release", "stack_pool_trim", "sqmma_check_flags",
                 "sqmma_exchange_issue", "sqmma_complete", "sqmma_commit_group",
                 "async_record", "async_init_arrival", "async_add_trans", "async_arrive", "async_wait",
                 "async_issue_load", "tme_load", "tme_store", "tme_commit", "tme_read_wait",
                 "block_runner_run", "block_runner_join", "block_runner_sleep_until_woken",
                 "block_runner_fail", "block_runner_suspend", "block_runner_meet_clocks",
                 "race_detector_access_shared", "race_detector_access_global", "race_detector_mark_transfer",
                 "written_shadow_mark_written", "written_shadow_check_model_read", "check_global_init"):
        assert prefix + name in exported
    # Outlined only under arch-qualified names: a simulator function exported under its C++ name (gcc ignores the asm
    # name of a constructor) would be one symbol for every arch's runtime, and bind across them.
    assert not [symbol for symbol in exported if symbol.startswith("_ZN6tl_sim")]


@pytest.mark.parametrize("arch", ARCHS)
def test_the_runtime_keeps_no_shared_memory_of_its_own(arch):
    """The runtime's thread-locals are initial-exec, taken from glibc's small static-TLS reserve when a kernel library
    loads it: an outlined model that touched the headers' buf_dyn_shmem (a kernel library's dynamic shared memory,
    192 KiB) would pull a copy into the runtime, which then fails to load ("cannot allocate memory in static TLS
    block"). Models take the kernel's shared memory as an argument instead (sqmma::IssueCall::arena, tme::Load)."""
    toolchain = SimToolchain()
    flags = sim_runtime_recipe.base_flags(ARCHS[arch], include_root(), simulator_headers(), [])
    library = sim_runtime.runtime_library(["g++"], toolchain.identity(), flags, arch)
    headers = subprocess.run(["readelf", "-lW", str(library)], capture_output=True, text=True, check=True).stdout
    tls = [line.split() for line in headers.splitlines() if line.split()[:1] == ["TLS"]]
    assert len(tls) == 1 and int(tls[0][5], 16) <= 4096, tls  # MemSiz: the thread state only
