"""gdn cases (to be written)."""

CASES = []
