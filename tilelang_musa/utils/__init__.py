"""Helpers under upstream TileLang's `tilelang.utils` import paths: tensor comparison and dtype mapping
(`utils.tensor`), target checks (`utils.target`), the device kernels take their tensors on (`utils.device`)."""

from ..language.fp8 import determine_fp8_type  # upstream scripts import it from tilelang.utils too
from .device import get_current_device, synchronize
from .target import determine_target
from .tensor import TensorSupplyType, map_torch_type, torch_assert_close

__all__ = ["TensorSupplyType", "determine_fp8_type", "determine_target", "get_current_device", "map_torch_type",
           "synchronize", "torch_assert_close"]
