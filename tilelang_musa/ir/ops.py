"""The `tl.*` intrinsics (not tile ops: those are `tileop/registry.py`) that travel between stages, by name.

The frontend emits them, passes rewrite or read them and the printer emits their MUSA form. Each is registered
once as an opaque TVM Op, so no pass moves or drops it; `register_intrinsic` is the helper for the ones that
other modules declare next to the code that owns them (tileop/async_copy.py, tileop/tme_copy.py).
"""

from __future__ import annotations

import tvm
from tvm import tirx

_OPAQUE = 3  # CallEffectKind::kOpaque


def register_intrinsic(name: str, doc: str) -> None:
    """Register `name` as an opaque TVM Op (once: the TVM registry outlives a re-import of a module)."""
    try:
        tvm.ir.Op.get(name)
    except Exception:  # noqa: BLE001 - not registered yet (tvm raises a generic error)
        tvm.get_global_func("ir.RegisterOp")(name, doc)
        tvm.ir.Op.get(name).set_attr("TCallEffectKind", _OPAQUE)


# -- template functions called as externs whose result depends only on their arguments and the memory those point
# at: every thread that calls one with the same arguments gets the same value (T.all_of / T.any_of, language/logical.py)
PURE_READING_EXTERNS = frozenset({"tl::all_of", "tl::any_of"})

# -- thread-level built-ins (language/builtin.py)
USE_SWIZZLE_OP = "tl.use_swizzle"
register_intrinsic(USE_SWIZZLE_OP, "block rasterization marker, removed by the RasterizeBlocks pass")
FRAGMENT_PTR_OP = "tl.fragment_ptr"
register_intrinsic(FRAGMENT_PTR_OP, "pointer to a fragment's per-thread slot array (LowerFragmentAccess)")
WAIT_SQMMA_OP = "tl.wait_sqmma"
register_intrinsic(WAIT_SQMMA_OP, "wait for asynchronous SQMMA gemms (T.gemm(..., wg_wait=-1))")
SYNC_GRID_OP = "tl.sync_grid"
register_intrinsic(SYNC_GRID_OP, "grid-wide barrier of a cooperative launch (cooperative_groups::this_grid().sync())")


def fragment_ptr(buffer) -> tvm.ir.Expr:
    """The address of this thread's slot array of fragment `buffer` (templates take it as `T*`)."""
    return tirx.call_intrin("handle", FRAGMENT_PTR_OP, buffer)


# -- warp-group completion of asynchronous SQMMA gemms (language/warpgroup.py)
WARPGROUP_COMMIT_OP = "tl.warpgroup_commit_batch"
register_intrinsic(WARPGROUP_COMMIT_OP, "close the calling thread's group of asynchronous SQMMA gemms")
WARPGROUP_WAIT_OP = "tl.warpgroup_wait"
register_intrinsic(WARPGROUP_WAIT_OP, "wait until at most n committed SQMMA groups are in flight")

# -- asynchronous barriers (language/barrier.py; numbered by transform/lower_async_barriers.py)
BARRIER_ARRIVE_OP = "tl.barrier_arrive"  # (barrier)
BARRIER_WAIT_OP = "tl.barrier_wait"  # (barrier, parity)
BARRIER_EXPECT_TX_OP = "tl.barrier_expect_tx"  # (barrier, bytes)
BARRIER_ARRIVE_EXPECT_TX_OP = "tl.barrier_arrive_expect_tx"  # (barrier, bytes)
NAMED_BARRIER_ARRIVE_OP = "tl.named_barrier_arrive"  # (user id, thread count): T.named_barrier_arrive
register_intrinsic(NAMED_BARRIER_ARRIVE_OP, "arrive on the user's named barrier without waiting (bar.arrive)")
BARRIER_OPS = (BARRIER_ARRIVE_OP, BARRIER_WAIT_OP, BARRIER_EXPECT_TX_OP, BARRIER_ARRIVE_EXPECT_TX_OP)

for _name, _doc in ((BARRIER_ARRIVE_OP, "one arrival of the calling warp on an async barrier"),
                    (BARRIER_WAIT_OP, "wait until the async barrier's phase of the given parity completed"),
                    (BARRIER_EXPECT_TX_OP, "the async barrier's current phase also waits for transaction bytes"),
                    (BARRIER_ARRIVE_EXPECT_TX_OP, "expect transaction bytes, then arrive")):
    register_intrinsic(_name, _doc)

# -- accelerated element-wise ops: the device template function an extern call names (language/accelerated.py
# emits it, transform/fuse_accelerated_ops.py fuses around it)
MUL_HALF_FLOAT_TO_BFLOAT16_X4 = "tl::mul_half_float_to_bfloat16_x4"
