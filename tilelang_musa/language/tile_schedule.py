"""`T.PersistentTileScheduler(num_m_tiles, num_n_tiles, ...)`: upstream's persistent tile scheduler, the state a
persistent kernel's `while sched.valid():` loop walks tiles with.

Worker `w` (a block, `sched.init(block_id)`) takes the linear tile indices `w, w + num_workers, ...` until they
pass the total; `coord(t)` decodes an index into the tile `(m, n)`: `column_major` (default: m fastest) or row
major, in panels of `swizzle_size` tiles along the slow axis (the last panel narrower when they do not divide),
over the grid of `ceildiv(num_m_tiles, cluster_size)` cluster rows when `cluster_size > 1` (the caller adds its
rank in the cluster: rows of MUSA blocks have no cluster rank, so there it is its own arithmetic). The state
(`m_idx`, `n_idx`, `linear_idx`, `current_iter`) lives in `T.alloc_var` scalars, read through properties."""

from __future__ import annotations

from typing import Any

from .allocate import alloc_var
from .builder import current_trace, kernel_trace
from .math import ceildiv, max as tl_max, min as tl_min
from .runtime import store


class PersistentTileScheduler:
    """Persistent, grid-strided tile scheduler (upstream's `T.PersistentTileScheduler`).

    Example:
        sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=num_blocks, swizzle_size=8)
        sched.init(block_id)
        while sched.valid():
            bx, by = sched.m_idx, sched.n_idx
            ...                                  # the tile (bx, by)
            sched.next_tile()

    `num_workers` defaults to the number of blocks the kernel launches // cluster_size (upstream's default, the
    multiprocessor count, is what its persistent kernels launch);
    `stateful=False` allocates no state and offers only `coord(tile_id)`."""

    def __init__(self, num_m_tiles: Any, num_n_tiles: Any, num_workers: Any = None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True, name: str | None = None):
        trace = kernel_trace("T.PersistentTileScheduler")
        for what, v in (("swizzle_size", swizzle_size), ("cluster_size", cluster_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise trace.error(f"T.PersistentTileScheduler: {what} must be a positive int; got {v!r}")
        if num_workers is None:  # one worker per block launched (upstream: the SM count, which its persistent
            num_workers = 1      # kernels launch: `T.Kernel(driver.get_num_sms())`), per cluster of them
            for extent in trace.kernel.grid:
                num_workers = num_workers * extent
            num_workers = num_workers // cluster_size
        self.num_workers = num_workers
        self.swizzle_size = swizzle_size
        self.cluster_size = cluster_size
        self._column_major = column_major
        self._stateful = stateful
        m_clusters = ceildiv(num_m_tiles, cluster_size)
        self._total_tiles = m_clusters * num_n_tiles
        # the fast axis is swept whole inside a panel; the slow axis is cut into panels of swizzle_size tiles
        self._fast, self._slow = (m_clusters, num_n_tiles) if column_major else (num_n_tiles, m_clusters)
        if stateful:
            prefix = f"{name}_" if name else "sched_"
            self._m, self._n, self._linear, self._iter = (self._state(trace, prefix + s)
                                                          for s in ("m_idx", "n_idx", "linear_idx", "current_iter"))

    @staticmethod
    def _state(trace: Any, name: str) -> Any:
        trace.naming_hint = name
        return alloc_var("int32")

    def _need_state(self, what: str) -> None:
        if not self._stateful:
            raise current_trace(f"sched.{what}").error(
                f"T.PersistentTileScheduler(stateful=False) has no state: sched.{what} needs stateful=True; use "
                "sched.coord(tile_id)")

    @property
    def m_idx(self) -> Any:
        self._need_state("m_idx")
        return self._m[0]

    @property
    def n_idx(self) -> Any:
        self._need_state("n_idx")
        return self._n[0]

    @property
    def linear_idx(self) -> Any:
        self._need_state("linear_idx")
        return self._linear[0]

    @property
    def current_iter(self) -> Any:
        self._need_state("current_iter")
        return self._iter[0]

    def coord(self, tile_id: Any) -> tuple[Any, Any]:
        """The tile `(m, n)` of linear index `tile_id` (m is the cluster row when cluster_size > 1)."""
        panel = self._fast * self.swizzle_size
        group = tile_id // panel
        base = group * self.swizzle_size
        width = tl_max(1, tl_min(self.swizzle_size, self._slow - base))  # >= 1: no division by zero past the end
        in_group = tile_id - group * panel
        fast, slow = in_group // width, base + in_group % width
        return (fast, slow) if self._column_major else (slow, fast)

    def _seek(self, linear: Any) -> None:
        m, n = self.coord(linear)
        store(self._m, (0,), m)
        store(self._n, (0,), n)

    def init(self, worker_id: Any) -> None:
        """Start worker `worker_id` (its block index) at its first tile."""
        self._need_state("init")
        store(self._iter, (0,), 0)
        store(self._linear, (0,), worker_id)
        self._seek(self._linear[0])

    def next_tile(self) -> None:
        """Advance to this worker's next tile (`num_workers` further on)."""
        self._need_state("next_tile")
        store(self._iter, (0,), self._iter[0] + 1)
        store(self._linear, (0,), self._linear[0] + self.num_workers)
        self._seek(self._linear[0])

    def valid(self) -> Any:
        """Whether the current tile is inside the grid (the persistent loop's condition)."""
        self._need_state("valid")
        return self._linear[0] < self._total_tiles
