"""sim_build.build_shared: the session's processes (xdist's workers) build each handwritten kernel library once.

The builds here are stand-in commands (a shell line that counts its runs and writes the output), so the test is
about the sharing only: concurrent callers wait for one build and take its file; another command is another file;
a failed build leaves nothing behind and reports the compiler's stderr."""

from concurrent.futures import ThreadPoolExecutor

from sim_build import build_shared


def counting_build(counter, text, status=0):
    def command(output):
        return ["sh", "-c", f'echo run >> "{counter}"; sleep 0.3; printf "{text}" > "{output}"; echo why >&2; '
                            f"exit {status}"]

    return command


def test_concurrent_callers_share_one_build_and_other_commands_get_their_own(tmp_path):
    counter = tmp_path / "runs"
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: build_shared(tmp_path / "libs", "k", counting_build(counter, "one")),
                                range(4)))
    assert counter.read_text().split() == ["run"]
    assert len({path for path, _ in results}) == 1 and all(err == "" for _, err in results)
    path = results[0][0]
    assert path.read_text() == "one" and path.parent == tmp_path / "libs"

    other, _ = build_shared(tmp_path / "libs", "k", counting_build(counter, "two"))
    assert other != path and other.read_text() == "two" and counter.read_text().split() == ["run", "run"]


def test_a_failed_build_reports_stderr_leaves_no_library_and_is_retried(tmp_path):
    counter = tmp_path / "runs"
    for attempt in (1, 2):
        path, err = build_shared(tmp_path / "libs", "bad", counting_build(counter, "x", status=1))
        assert path is None and err == "why\n" and len(counter.read_text().split()) == attempt
    assert [p.name for p in (tmp_path / "libs").iterdir() if p.suffix != ".lock"] == []
