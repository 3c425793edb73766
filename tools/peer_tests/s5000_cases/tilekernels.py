"""tilekernels cases (to be written)."""

CASES = []
