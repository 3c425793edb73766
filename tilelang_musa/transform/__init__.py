"""Lowering passes, one per file; `pipeline.py` holds the order."""

from .pass_config import PassConfigKey, normalize_pass_configs
from .pipeline import lower, lowering_passes

__all__ = ["PassConfigKey", "lower", "lowering_passes", "normalize_pass_configs"]
