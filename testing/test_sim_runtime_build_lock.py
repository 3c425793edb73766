"""jit/sim_runtime: processes that need the same runtime at once build it once. The first takes a flock beside the
library and builds; the others wait for it and take its file (before, each compiled its own and renamed it over
the other's). The compiler here is a stand-in that counts its runs, so the test is about the locking only."""

import subprocess
import sys
import textwrap
from pathlib import Path

import tilelang_musa

# The folder the package under test is imported from: the source tree in development, site-packages when installed
# (whose copy has the built launcher the subprocesses import).
PACKAGE_PARENT = Path(tilelang_musa.__file__).resolve().parents[1]

FAKE_COMPILER = textwrap.dedent("""
    import sys, time
    counter = sys.argv[1]
    output = sys.argv[sys.argv.index("-o") + 1]
    with open(counter, "a") as f:
        f.write("run\\n")
    time.sleep(1.5)
    with open(output, "w") as f:
        f.write("runtime")
""")

CALLER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from tilelang_musa.jit import sim_runtime
    compiler, counter, ready = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    (ready / str(os.getpid())).touch()
    while len(list(ready.iterdir())) < 2:  # both have imported the package: call at once
        time.sleep(0.01)
    library = sim_runtime._cached_library([sys.executable, compiler, counter], ["-O1"], Path("headers"), "mp_31",
                                          "racekey")
    print(library, library.read_text())
""")


def test_two_processes_needing_one_runtime_build_it_once(tmp_path):
    compiler = tmp_path / "fake_cc.py"
    compiler.write_text(FAKE_COMPILER)
    counter = tmp_path / "runs"
    env = {"PYTHONPATH": str(PACKAGE_PARENT), "TILELANG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    ready = tmp_path / "ready"
    ready.mkdir()
    # cwd: `python -c` puts it first on sys.path, where a source checkout's unbuilt package would shadow the one tested
    procs = [subprocess.Popen([sys.executable, "-c", CALLER, str(compiler), str(counter), str(ready)], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert counter.read_text().split() == ["run"], "each process built its own runtime"
    paths = {out.split()[0] for out, _ in outs}
    assert len(paths) == 1 and all(out.split()[1] == "runtime" for out, _ in outs)
    library = Path(paths.pop())
    assert sorted(p.name for p in library.parent.iterdir()) == sorted([library.name, f"{library.name}.lock"])
