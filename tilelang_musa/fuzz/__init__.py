"""A differential fuzzer: random valid TileLang programs, compiled for mp_31 and mp_22, run in the simulator
(checked mode) and compared with torch.

    python -m tilelang_musa.fuzz --n 200 --seed 1 [--arch mp_31,mp_22] [--out DIR] [--keep-going]

- `families/`: one file per program family; each holds a frozen description dataclass, its random generator,
  the TileLang program built from it, the torch reference and the simpler descriptions the shrinker tries.
- `tensors.py`: inputs (random, never all zeros), poisoned outputs and the per-dtype comparison.
- `runner.py`: compile + run + compare one (description, arch) and classify the outcome; batches run in child
  processes so that a crash or a hang is an outcome, not the end of the fuzzer.
- `shrink.py`: greedy shrinking of a failing description; `regression.py` writes it as a pytest file.
- `__main__.py`: the command line and its summary.
"""

from .family import FAMILIES, Family, family_of
from .runner import Outcome, check

__all__ = ["FAMILIES", "Family", "family_of", "Outcome", "check"]
