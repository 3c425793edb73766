"""`for bx, by in T.Persistent([m_tiles, n_tiles], wave_size, block_id, group_size=8)`: a persistent kernel's
tile loop. A grid of `wave_size` blocks walks all tiles of the domain: block `block_id` takes tiles
`block_id, block_id + wave_size, ...` in waves. Tiles are numbered group by group: the last dimension is cut into
groups of `group_size` columns, and a group's tiles (all rows, `group_size` columns) are consecutive, so the blocks
of one wave share operand tiles in L2 (upstream TileLang's order). Tiles past the domain are skipped.
"""

from __future__ import annotations

from typing import Any, Iterator

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import current_trace, static_value
from .loop import LoopFrame


def _ceildiv(a: Any, b: Any) -> Any:
    return tirx.floordiv(a + b - 1, b)


class PersistentFrame(LoopFrame):
    """Iterated by a kernel's for statement as a LoopFrame is; it builds its own loop."""

    def __init__(self, domain: list[Any], wave_size: Any, index: Any, group_size: Any):
        super().__init__("T.Persistent", [], None)
        self.domain, self.wave_size, self.index, self.group_size = domain, wave_size, index, group_size

    def build(self, names: tuple[str, ...] | None) -> Iterator[Any]:
        trace = current_trace(self.construct)
        domain = [tirx.const(d, "int32") if isinstance(d, int) else d for d in self.domain]
        if names is not None and len(names) != len(domain):
            raise trace.error(f"T.Persistent walks a {len(domain)}-D domain but the for statement binds {len(names)}")
        last = domain[-1]
        group = self.group_size
        group_value, last_value = static_value(group), static_value(last)
        if group_value is not None and last_value is not None:  # at least 1, at most the last extent
            group = max(1, min(group_value, last_value))
        else:
            group = tirx.max(1, tirx.min(group, last))
        # mixed radix of a tile number, most significant first: column group, the leading dims, column in group
        radix = [_ceildiv(last, group), *domain[:-1], group]
        tiles = radix[0]
        for extent in radix[1:]:
            tiles = tiles * extent
        frames = []
        try:
            loop = Tb.serial(0, _ceildiv(tiles, self.wave_size))
            wave = loop.__enter__()
            frames.append(loop)
            IRBuilder.name("wave", wave)
            tile = wave * self.wave_size + self.index
            digits, rest = [], tile
            for extent in reversed(radix[1:]):
                digits.append(tirx.floormod(rest, extent))
                rest = tirx.floordiv(rest, extent)
            digits = [rest, *reversed(digits)]
            coords = [*digits[1:-1], digits[0] * group + digits[-1]]
            for frame in (Tb.If(tirx.And(tile < tiles, coords[-1] < last)), Tb.Then()):
                frame.__enter__()
                frames.append(frame)
            bound = []
            for k, coord in enumerate(coords):
                var = Tb.Bind(coord)
                IRBuilder.name(names[k] if names is not None else f"v{k}", var)
                bound.append(var)
            yield bound[0] if len(bound) == 1 else tuple(bound)
        finally:
            for frame in reversed(frames):
                frame.__exit__(None, None, None)


def Persistent(domain: Any, wave_size: Any, index: Any, group_size: Any = 8) -> PersistentFrame:  # noqa: N802
    trace = current_trace("T.Persistent")
    domain = list(domain) if isinstance(domain, (list, tuple)) else [domain]
    if not domain:
        raise trace.error("T.Persistent needs a non-empty domain")
    return PersistentFrame(domain, wave_size, index, 8 if group_size is None else group_size)
