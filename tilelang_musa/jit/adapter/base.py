"""Upstream's `tilelang.jit.adapter.base.BaseKernelAdapter`: the base of the kernel adapters, here of the one
adapter (kernel_adapter.py). Scripts import it to patch `_legalize_result_idx`, the method that turns a
kernel's `out_idx` into the list of output indices (SGLang's NSA kernels wrap it at import); every compile
legalizes its `out_idx` through that method as the adapter classes have it then, so a patch takes effect."""

from __future__ import annotations

from typing import Any


class BaseKernelAdapter:
    """What every kernel adapter has: `params` (one per parameter of the user's program, T.dynamic sizes not
    among them) and `result_idx` (the indices of the outputs the kernel allocates and returns)."""

    params: list = []

    def _legalize_result_idx(self, result_idx: Any) -> list[int]:
        """`out_idx` (None, an int, or a list of ints, negative ones counting from the end) as a list of
        indices into `params`; ValueError when one is out of range. Unlike upstream's, which rewrites a list in
        place, this returns a new list: a factory that compiles programs of different arity with one `out_idx`
        list gets the same outputs each time."""
        count = len(self.params)
        if result_idx is None:
            return []
        if isinstance(result_idx, bool) or not isinstance(result_idx, (int, list, tuple)):
            raise ValueError(f"result_idx should be a list of integers; got {result_idx!r}")
        single = isinstance(result_idx, int)
        indices = [result_idx] if single else list(result_idx)
        legal = []
        for index in indices:
            # upstream accepts an int equal to len(params) but no list entry equal to it; both are out of range here
            if isinstance(index, bool) or not isinstance(index, int) or not -count <= index < count:
                raise ValueError(f"result_idx should be an integer between {-count} and {count - 1}; got {index!r}")
            legal.append(index % count)
        return legal
