"""`tilelang.cuda.intrinsics.sparse_layout`: upstream's home of the 2:4 metadata contract (its gemm_sp example's
`sparse_utils` imports it). The same format T.gemm_sp reads here: language/sparse_format.py."""

from ...language.sparse_format import GROUP_CONFIG, get_e_factor, get_e_replicate_factor  # noqa: F401

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]
