"""tools/peer_tests: a file passes only if one of its cases passed; an all-skipped file (exit status 0, nothing
tested) is reported as `skipped`, not `pass`."""

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
