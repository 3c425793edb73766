"""`python -m tilelang_musa.fuzz --ray`: the same programs as Ray tasks, on a local Ray instance of two CPUs, give
the local run's outcomes and summary table."""

import json

import pytest

ray = pytest.importorskip("ray")

from tilelang_musa.fuzz.__main__ import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("local_ray")  # a local Ray instance of two CPUs (conftest.py)


def results(out):
    """Each run's outcome but its duration, by (program, arch)."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return sorted((r["index"], r["outcome"]["arch"], r["desc"]["family"], r["outcome"]["status"],
                   r["outcome"]["detail"], r["outcome"]["path"]) for r in rows)


def table(out):
    """The summary's table: a line per family and status counts (not the command or the times)."""
    return (out / "summary.txt").read_text().splitlines()[2:]


def test_fuzz_on_ray_gives_the_local_runs_outcomes(tmp_path):
    # seed 2026's programs 1 and 2 of the first seven families: a small GEMM and an elementwise chain, both arches
    argv = ["--seed", "2026", "--start", "1", "--n", "2", "--arch", "mp_31,mp_22", "--keep-going", "--no-shrink",
            "--families", "elementwise,copy,reduce,cumsum,gemm,softmax,atomic"]
    assert main([*argv, "--ray", "--out", str(tmp_path / "ray")]) == 0
    assert main([*argv, "--workers", "2", "--out", str(tmp_path / "local")]) == 0
    on_ray = results(tmp_path / "ray")
    assert on_ray == results(tmp_path / "local")
    assert [(i, arch, family, status) for i, arch, family, status, _, _ in on_ray] == [
        (1, "mp_22", "gemm", "pass"), (1, "mp_31", "gemm", "pass"),
        (2, "mp_22", "elementwise", "pass"), (2, "mp_31", "elementwise", "pass")]
    assert table(tmp_path / "ray") == table(tmp_path / "local")
