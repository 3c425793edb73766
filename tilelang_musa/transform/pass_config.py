"""`tilelang.transform.pass_config`, upstream TileLang's module for the pass configuration keys.

The keys and the validation of a user's `pass_configs` live in the bottom layer (`ir/pass_config.py`), since tile
ops read them as well as passes (through ir/options.CompileOptions); this module keeps upstream's import path."""

from ..ir.pass_config import SAME_EFFECT_AS, WITHOUT_EFFECT, PassConfigKey, normalize_pass_configs

__all__ = ["SAME_EFFECT_AS", "WITHOUT_EFFECT", "PassConfigKey", "normalize_pass_configs"]
