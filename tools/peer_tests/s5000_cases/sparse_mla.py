"""sparse_mla cases (to be written)."""

CASES = []
