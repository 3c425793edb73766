"""`kernel.get_profiler()`: run a kernel on generated inputs, check it against a reference, time it."""

from __future__ import annotations

from typing import Any, Callable

import torch

from .bench import do_bench
from .tensor_supply import TensorSupplyType, supply_tensor


class Profiler:
    def __init__(self, kernel: Any, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto, seed: int = 0):
        self.kernel = kernel
        self.supply_type = tensor_supply_type
        self.seed = seed
        self.device = kernel.backend.device

    def _inputs(self) -> list[Any]:
        specs = self.kernel.params
        unbound = sorted({d for s in specs if s.kind == "tensor" for d in s.shape if isinstance(d, str)})
        if unbound:
            raise ValueError(f"profiler: sizes {unbound} are symbolic; call the kernel with tensors instead")
        gen = torch.Generator().manual_seed(self.seed)
        inputs = []
        for spec in specs:
            if spec.is_output:
                continue
            if spec.kind == "scalar":
                raise ValueError(f"profiler: scalar parameter `{spec.name}` needs a value; benchmark a lambda instead")
            inputs.append(supply_tensor(spec, {}, self.supply_type, self.device, gen))
        return inputs

    def run_once(self, func: Callable | None = None) -> Any:
        inputs = self._inputs()
        return (func or self.kernel)(*inputs)

    def assert_allclose(self, reference_program: Callable, atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio: float = 0.0) -> None:
        inputs = self._inputs()
        outs = self.kernel(*inputs)
        refs = reference_program(*inputs)
        outs = outs if isinstance(outs, (tuple, list)) else [outs] if outs is not None else list(inputs)
        refs = refs if isinstance(refs, (tuple, list)) else [refs]
        if len(outs) != len(refs):
            raise AssertionError(f"the kernel returned {len(outs)} outputs, the reference {len(refs)}")
        for out, ref in zip(outs, refs):
            out, ref = out.float(), ref.to(out.device).float()
            close = torch.isclose(out, ref, rtol=rtol, atol=atol)
            ratio = 1.0 - close.float().mean().item()
            if ratio > max_mismatched_ratio:
                torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)

    def do_bench(self, func: Callable | None = None, n_warmup: int = 5, n_repeat: int = 20, backend: str = "event",
                 quantiles: Any = None, return_mode: str = "mean", input_tensors: list | None = None,
                 warmup: float | None = None, rep: float | None = None) -> Any:
        inputs = input_tensors if input_tensors is not None else self._inputs()
        target = func or self.kernel
        return do_bench(lambda: target(*inputs), n_warmup=n_warmup, n_repeat=n_repeat, quantiles=quantiles,
                        return_mode=return_mode, device=self.device, backend=backend)
