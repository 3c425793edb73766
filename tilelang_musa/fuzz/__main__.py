"""Command line: python -m tilelang_musa.fuzz --n N --seed S [--arch mp_31,mp_22] [--out DIR] [--keep-going] [--ray]
(`--list-families` prints the families, one per line).

Generates N programs (program i from random.Random(f"{seed}:{i}"), so any one can be regenerated alone with
--start i --n 1), runs each on every arch in child processes, prints one line per failure and a summary, and
writes results.jsonl and summary.txt into --out. Each failing program is shrunk (unless --no-shrink) and written
as a pytest file into --regressions. Without --keep-going the run stops at the first failure.

With --ray the programs run as Ray tasks (tilelang_musa/executors/ray_executor.py) of --batch programs each, their
libraries built together, on a local Ray instance or the cluster at RAY_ADDRESS, as many at a time as the cluster
has CPUs, with the same outcomes and output; shrinking then runs here, in a child process, as without it.
Ray is an optional extra: pip install "tilelang_musa[ray]"."""

import argparse
import json
import random
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from . import families  # noqa: F401 - registers the families
from .family import FAMILIES, to_plain
from .regression import write_regression
from .runner import STATUSES, Job, Session, child_env, failure_signature, run_jobs, run_jobs_on, same_failure
from .shrink import shrink


def generate(seed: int, index: int, names: list[str]):
    """Program `index` of the batch with `seed`: a family by weight, then its random description."""
    rng = random.Random(f"{seed}:{index}")
    fams = [FAMILIES[n] for n in names]
    fam = rng.choices(fams, weights=[f.weight for f in fams])[0]
    return fam.generate(rng, rng.getrandbits(31))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tilelang_musa.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--list-families", action="store_true", help="print the program families, one per line, and exit")
    p.add_argument("--n", type=int, default=20, help="programs to generate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="index of the first program")
    p.add_argument("--arch", default="mp_31,mp_22", help="comma-separated archs (each program runs on every one)")
    p.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "tilelang_fuzz"),
                   help="directory for results.jsonl (appended to) and summary.txt")
    p.add_argument("--keep-going", action="store_true", help="run all N programs even after a failure")
    p.add_argument("--workers", type=int, default=1, help="child processes running programs in parallel")
    p.add_argument("--batch", type=int, default=8,
                   help="programs a child process (or a Ray task) lowers before building all their libraries with "
                        "one host-compiler run per arch (jit/batch_build.py); 1: one build per program")
    p.add_argument("--ray", action="store_true",
                   help="run the programs as Ray tasks, on a local Ray instance or the cluster at RAY_ADDRESS, as "
                        "many at a time as it has CPUs (--workers is not used)")
    p.add_argument("--timeout", type=float, default=600, help="seconds one program may take on one arch")
    p.add_argument("--stop-after", type=float, default=None, metavar="SECONDS",
                   help="start no new program (batch, task) after this many seconds; the programs started finish, "
                        "failures are shrunk and the summary counts the programs that ran")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink failures or write regression tests")
    p.add_argument("--shrink-attempts", type=int, default=40)
    p.add_argument("--no-sim-check", action="store_true",
                   help="run without the simulator's checked mode (TILELANG_SIM_CHECK), e.g. to see the numerics of "
                        "programs the checker stops")
    p.add_argument("--regressions", default="testing/fuzz_regressions",
                   help="directory for the shrunk failures' pytest files")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list_families:
        print("\n".join(FAMILIES))
        return 0
    archs, names = _selection(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m tilelang_musa.fuzz " + shlex.join(sys.argv[1:] if argv is None else argv)
    start = time.time()

    programs = {i: generate(args.seed, i, names) for i in range(args.start, args.start + args.n)}
    jobs = [Job(i * len(archs) + k, programs[i], arch) for i in programs for k, arch in enumerate(archs)]
    index_of = {job.id: i for job in jobs for i in [job.id // len(archs)]}
    _run(args, jobs, index_of, out / "results.jsonl", start)
    ran = [j for j in jobs if j.result is not None]
    run_seconds = time.time() - start
    written = [] if args.no_shrink else _shrink_failures(args, ran, index_of, archs)
    all_failed = [(index_of[j.id], j) for j in ran if j.result.failed]

    text = summarize(args, archs, programs, ran, all_failed, written, run_seconds, time.time() - start, command)
    print(text)
    (out / "summary.txt").write_text(text)
    return 1 if all_failed else 0


def _selection(args) -> tuple[list[str], list[str]]:
    """The archs and families asked for, checked (and Ray importable where --ray asks for it)."""
    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    names = [n.strip() for n in args.families.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        sys.exit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    if args.ray:
        from ..executors.ray_executor import import_ray

        try:
            import_ray()
        except ImportError as err:
            sys.exit(f"--ray: {err}")
    return archs, names


def _run(args, jobs, index_of, results: Path, start: float) -> None:
    """Runs the jobs (locally or through Ray), appending each outcome to `results` as it arrives."""
    stop = threading.Event()
    if args.stop_after is not None and args.stop_after <= 0:
        stop.set()
    elif args.stop_after is not None:  # a long campaign ends on time, still shrinking and summarizing what ran
        timer = threading.Timer(args.stop_after, stop.set)
        timer.daemon = True
        timer.start()
    done = [0]
    with open(results, "a") as log:
        def on_result(job):
            done[0] += 1
            o = job.result
            log.write(json.dumps({"seed": args.seed, "index": index_of[job.id], "desc": to_plain(job.desc),
                                  "outcome": o.__dict__}) + "\n")
            log.flush()
            if o.failed:
                print(f"[{done[0]}/{len(jobs)}] program {index_of[job.id]} ({job.desc.family}) on {o.arch}: "
                      f"{o.status}: {o.detail[:300]}", flush=True)
                if not args.keep_going:
                    stop.set()
            elif done[0] % 50 == 0:
                print(f"[{done[0]}/{len(jobs)}] {time.time() - start:.0f} s", flush=True)

        if args.ray:
            from ..executors import RayExecutor

            run_jobs_on(RayExecutor(), jobs, timeout=args.timeout, stop=stop, on_result=on_result,
                        sim_check=not args.no_sim_check, batch=max(1, args.batch) * len({j.arch for j in jobs}))
        else:
            run_jobs(jobs, workers=args.workers, timeout=args.timeout, stop=stop, on_result=on_result,
                     sim_check=not args.no_sim_check, batch=max(1, args.batch) * len({j.arch for j in jobs}))


def _shrink_failures(args, ran, index_of, archs) -> list:
    """One shrink per distinct failure (family and failure signature), on the first arch it failed on; each
    minimal program is written as a regression test."""
    failures, archs_failed, seen = {}, defaultdict(list), set()
    for job in ran:
        if job.result.failed:
            archs_failed[index_of[job.id]].append(job.arch)
            key = (job.desc.family, failure_signature(job.result))
            if key not in seen:
                seen.add(key)
                failures[index_of[job.id]] = job
    written = []
    if not failures:
        return written
    session = Session(child_env(), args.timeout, sim_check=not args.no_sim_check)
    try:
        for i, job in failures.items():
            print(f"shrinking program {i} ({job.desc.family}, {job.result.status} on {job.arch}) ...", flush=True)
            original = job.result
            small, attempts = shrink(job.desc, lambda d: same_failure(original, session.run(d, job.arch)),
                                     max_attempts=args.shrink_attempts)
            final = session.run(small, job.arch)
            summary = f"{final.status} on {job.arch}: {final.detail[:300]}"
            repro = (f"python -m tilelang_musa.fuzz --seed {args.seed} --families {args.families} --start {i} "
                     f"--n 1 --arch {','.join(archs)}")
            path = write_regression(small, archs_failed[i], summary, repro, Path(args.regressions))
            written.append((i, job, small, final, path, attempts))
            print(f"  -> {path} after {attempts} attempts: {small!r}", flush=True)
    finally:
        session.close()
    return written


def summarize(args, archs, programs, ran, failures, written, run_seconds, total_seconds, command) -> str:
    by_family = defaultdict(Counter)
    paths = Counter()
    for job in ran:
        by_family[job.desc.family][job.result.status] += 1
        if job.result.path:
            paths[f"{job.arch}:{job.result.path}"] += 1
    lines = [f"{command}", f"{len({j.id // len(archs) for j in ran})} of {len(programs)} programs, "
             f"{len(ran)} runs on {', '.join(archs)}; {run_seconds:.0f} s running, {total_seconds:.0f} s in all"]
    header = f"{'family':<12}" + "".join(f"{s:>14}" for s in STATUSES)
    lines.append(header)
    total = Counter()
    for fam in sorted(by_family):
        total.update(by_family[fam])
        lines.append(f"{fam:<12}" + "".join(f"{by_family[fam][s]:>14}" for s in STATUSES))
    lines.append(f"{'all':<12}" + "".join(f"{total[s]:>14}" for s in STATUSES))
    refused = Counter(f"{job.arch}:{job.desc.family}" for job in ran
                      if job.result.status == "pass" and job.result.detail.startswith("refused as expected"))
    if refused:
        lines.append("refused as expected (counted as pass): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(refused.items())))
    if paths:
        lines.append("paths: " + ", ".join(f"{k} {v}" for k, v in sorted(paths.items())))
    allocated = Counter(job.arch for job in ran if job.result.allocated)
    if allocated:
        lines.append("runs whose outputs the launcher allocated (the global-output check): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(allocated.items())))
    for i, job in failures:
        lines.append(f"FAIL program {i} ({job.desc.family}) on {job.arch}: {job.result.status}: "
                     f"{job.result.detail[:240]}")
    for i, job, small, final, path, attempts in written:
        lines.append(f"  shrunk ({attempts} attempts) -> {path}: {small!r}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
