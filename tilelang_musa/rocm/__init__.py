"""Upstream TileLang's `tilelang.rocm`, as far as portable scripts import it unconditionally: TileLang-MUSA has no
ROCm backend, so `tilelang.rocm.target.check_hip_availability()` is False and nothing here compiles for HIP."""
