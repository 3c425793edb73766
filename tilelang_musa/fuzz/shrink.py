"""Greedy shrinking of a failing description.

`shrink(desc, fails)` walks the family's simpler candidates (`Family.shrink`) and moves to the first one for which
`fails(candidate)` still holds, until no candidate fails or the budget of attempts is spent. `fails` is any
predicate: the fuzzer's is "this arch still gives the same outcome class" (runner.same_failure), the unit test
plants its own."""

from typing import Any, Callable

from .family import family_of


def shrink(desc: Any, fails: Callable[[Any], bool], *, max_attempts: int = 60,
           log: Callable[[str], None] = lambda msg: None) -> tuple[Any, int]:
    """The smallest description reached from `desc` (which must fail) and the number of attempts made."""
    fam = family_of(desc)
    attempts = 0
    seen = {desc}
    progress = True
    while progress and attempts < max_attempts:
        progress = False
        for cand in fam.shrink(desc):
            if cand in seen:
                continue
            seen.add(cand)
            attempts += 1
            if fails(cand):
                log(f"  shrunk to {cand!r}")
                desc, progress = cand, True
                break
            if attempts >= max_attempts:
                break
    return desc, attempts
