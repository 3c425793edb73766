"""Block orders a tuning hint recommends (upstream's `tilelang.carver.roller.rasterization`). A kernel applies one
with `T.use_swizzle(plan.panel_width, order="row" | "col")`; NoRasterization keeps the launch order."""

from __future__ import annotations


class Rasterization:
    """A block order; `panel_width` is the panel size to pass to T.use_swizzle."""

    panel_width_: int | None = None

    @property
    def panel_width(self) -> int:
        if self.panel_width_ is None:
            raise ValueError(f"{self!r} has no panel width")
        return self.panel_width_


class NoRasterization(Rasterization):
    """The launch order."""

    def __repr__(self) -> str:
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    """Panels of `panel_width` rows of blocks: T.use_swizzle(panel_width, order="row")."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DRow({self.panel_width_})>"


class Rasterization2DColumn(Rasterization):
    """Panels of `panel_width` columns of blocks: T.use_swizzle(panel_width, order="col")."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DColumn({self.panel_width_})>"
