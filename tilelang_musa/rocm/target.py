"""`check_hip_availability()`: whether HIP kernels can be built here. Always False in TileLang-MUSA (no ROCm backend);
scripts use it to skip their HIP-only cases."""


def check_hip_availability() -> bool:
    return False
