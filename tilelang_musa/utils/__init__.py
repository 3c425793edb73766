"""Helpers under upstream TileLang's `tilelang.utils` import paths: tensor comparison and dtype mapping
(`utils.tensor`), target checks (`utils.target`), the device kernels take their tensors on (`utils.device`)."""

from .device import get_current_device, synchronize
from .target import determine_target
from .tensor import TensorSupplyType, map_torch_type, torch_assert_close

__all__ = ["TensorSupplyType", "determine_fp8_type", "determine_target", "get_current_device", "map_torch_type",
           "synchronize", "torch_assert_close"]


def determine_fp8_type(fp8_format: str = "e4m3"):
    """tilelang.language.fp8.determine_fp8_type, under the path upstream's tilelibrary tests import it from
    (imported when called, so that `T` does not show the fp8 module as an attribute)."""
    from ..language.fp8 import determine_fp8_type as determine

    return determine(fp8_format)
