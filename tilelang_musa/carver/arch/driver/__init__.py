"""Device queries as upstream's `tilelang.carver.arch.driver` answers them, for the MUSA device in use."""

from .musa_driver import (  # noqa: F401
    get_device_attribute, get_device_name, get_max_dynamic_shared_size_bytes, get_musa_device_properties,
    get_num_sms, get_persisting_l2_cache_max_size, get_registers_per_block, get_shared_memory_per_block,
)
