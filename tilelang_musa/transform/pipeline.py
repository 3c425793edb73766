"""The ordered lowering pipeline: TileLang program -> device PrimFuncs ready for the MUSA printer.

Only this file knows the order: SplitKernels first (one program, one kernel per T.Kernel scope), then each kernel
through the phases Legalize, Pipeline, LowerTileOps, LowerMemory, Flatten, Synchronize and Finalize (each says
what the IR is like when it ends). Each pass says why it sits where it does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import tvm
from tvm import tirx

from ..diagnostics import warn_once
from ..instrumentation import create_pass_instruments, pass_pipeline
from ..ir.options import CompileOptions
from ..ir.utils import thread_info
from ..target import arch_of, warp_size
from .apply_layout_exchanges import ApplyLayoutExchanges
from .check_nested_loops import CheckNestedLoops
from .check_parallel_local_index import CheckParallelLocalIndex
from .choose_shared_swizzle import ChooseSharedSwizzle
from .config_index_bitwidth import ConfigIndexBitwidth
from .fit_pipeline_stages import run_fitting_stages
from .fuse_accelerated_ops import FuseAcceleratedOps
from .flatten_strided_params import FlattenStridedParams
from .fold_atomic_add_pairs import FoldAtomicAddPairs
from .remove_empty_tiles import RemoveEmptyTiles
from .fold_cp_async_lanes import FoldCpAsyncLanes
from .fuse_async_copy_lanes import FuseAsyncCopyLanes
from .inject_software_pipeline import InjectSoftwarePipeline
from .hoist_invariant_if import HoistInvariantIf
from .inline_unit_loops import InlineUnitLoops
from .keep_large_bindings import KeepLargeBindings, RestoreKeptBindings
from .mark_rewritten_tiles import MarkRewrittenTiles
from .layout_inference import LayoutInference
from .legalize_negative_index import LegalizeNegativeIndex
from .lower_async_barriers import LowerAsyncBarriers
from .lower_buffer_views import FRAGMENT_VIEWS, ON_CHIP_VIEWS, LowerBufferViews
from .lower_fp4_storage import LowerFP4Storage
from .lower_fragment_access import LowerFragmentAccess
from .lower_global_layout import LowerGlobalLayout
from .lower_parallel_loop import LowerParallelLoop
from .lower_shared_layout import LowerSharedLayout
from .lower_thread_allreduce import LowerThreadAllreduce
from .grid_barriers import CheckGridBarrierConditions, SplitGuardsAtGridBarriers
from .lower_tile_op import LowerTileOp
from .lower_tme_copy import LowerTmeCopy
from .lower_wait_sqmma import LowerWaitSqmma
from . import math_intrinsic_rules  # noqa: F401  (registers the musa rules LowerIntrin applies)
from .one_thread_tme_loads import OneThreadTmeLoads
from .partition_parallel_loop import PartitionParallelLoop
from .pipeline_planning import PipelinePlanning
from .plan_dynamic_shared_memory import PlanDynamicSharedMemory
from .prefer_async_copies import LowerPreferAsyncCopies, MarkPreferAsyncLoops
from .range_barriers import RangeBarriers
from .rasterize_blocks import RasterizeBlocks
from .remove_unused_binds import RemoveUnusedBinds
from .safe_memory_access import SafeMemoryAccess
from .serialize_dynamic_parallel_levels import SerializeDynamicParallelLevels
from .split_kernels import split_kernels
from .stage_gemm_operands import StageGemmOperands
from .stream_k import stream_k
from .legalize_vectorized_loops import LegalizeVectorizedLoops
from .sync_global_accesses import SyncGlobalAccesses
from .sync_write_after_write import SyncWriteAfterWrite
from .thread_sync import ThreadSync
from .verify_buffer_init import VerifyBufferInit
from .vectorize_keeping_lines import VectorizeLoop
from .warn_every_thread_update import WarnEveryThreadUpdate
from .warp_specialize_pipeline import WarpSpecializePipeline
from .widen_walked_fragments import WidenWalkedFragments


@dataclass(frozen=True)
class Phase:
    """A named run of passes, and what the IR is like when it ends."""

    name: str
    produces: str
    passes: tuple


def lowering_phases(configs: CompileOptions | dict) -> list[Phase]:
    """The pipeline, phase by phase (upstream's LowerAndLegalize / OptimizeForTarget, in finer steps)."""
    options = CompileOptions.of(configs)
    return [
        Phase("Legalize", "tile ops on the user's indices, block order and reductions normalized", (
            # Tiles with a 0 in their shape (a tail of width 0) and the copies, fills, gemms and loops over them.
            RemoveEmptyTiles(),
            # Upstream's semantic checks of T.Parallel bodies, on the loops as the user wrote them.
            CheckNestedLoops(),
            # ... and upstream's rule that a thread-private local buffer is not indexed by a T.Parallel variable.
            CheckParallelLocalIndex(),
            # T.sync_grid under the user's condition on a thread or block index: an error, before guards are added.
            CheckGridBarrierConditions(),
            # Upstream's warning for on-chip buffers read before anything writes them (it changes nothing).
            VerifyBufferInit(options),
            # A warning for a read-modify-write of one shared element that every thread runs (a race; changes nothing).
            WarnEveryThreadUpdate(),
            # Run-time-extent T.Parallel levels that place no fragment element: serial, before layouts are planned.
            SerializeDynamicParallelLevels(),
            # A[-1] counts from the end, as in Python (else it would be out of bounds, guarded to zero).
            LegalizeNegativeIndex(),
            # T.use_swizzle: every later pass sees the remapped block indices.
            RasterizeBlocks(),
            # Raw-TIR T.tvm_thread_allreduce reductions become the reduction template.
            LowerThreadAllreduce(),
            # Gemm operands in registers that their instruction reads from shared memory are copied there (a T.copy).
            StageGemmOperands(options),
        )),
        Phase("Pipeline", "T.Pipelined loops unrolled into prologue, steady state and epilogue, loads asynchronous", (
            # T.Pipelined: a stage and an order for each statement of the loop body (upstream's rules, or
            # stage=/order=).
            PipelinePlanning(),
            # A loop whose loads are all TME copies gets a producer squad and full/empty barrier rings.
            WarpSpecializePipeline(options),
            # The others: prologue / steady state / epilogue, shared tiles multi-buffered, loads asynchronous (TME
            # on a barrier ring where it qualifies, else LDLMS in commit groups).
            InjectSoftwarePipeline(options),
            # Per-thread async / robust element copies over T.vectorized lanes become one copy of the run (wider
            # pieces).
            FuseAsyncCopyLanes(),
            # T.ptx_cp_async lanes of a T.vectorized loop become one 4/8/16-byte copy (upstream's fold).
            FoldCpAsyncLanes(),
        )),
        Phase("LowerTileOps", "no tile op left: fragments laid out, every loop over them planned per thread", (
            # A T.copy load that one thread runs (`if tx == 768: T.copy(q[...], q_s)`) is a TME load where the TME
            # exists, not that thread's element loop (lowered by LowerTmeCopy, once the tile's layout is known).
            OneThreadTmeLoads(options),
            # Tile ops that are plain loops (T.copy, T.fill, atomics) become T.Parallel nests.
            LowerTileOp(options),
            # Shared tiles each iteration of a loop writes whole before reading, while the writes are still
            # T.Parallel nests over the tiles' own indices (PlanDynamicSharedMemory may let them share bytes).
            MarkRewrittenTiles(),
            # Loops over a T.reshape / T.view of a fragment access the fragment itself, so they follow its layout.
            LowerBufferViews(FRAGMENT_VIEWS),
            # A fragment its T.Parallel loops index past its declared shape gets the extents they walk (as
            # upstream), now that every copy into a fragment is such a loop.
            WidenWalkedFragments(),
            # Where fragments live, and where each loop over fragments runs (recorded on the loop, not applied yet).
            LayoutInference(options),
            # The shared-memory exchanges it decided: nests onto the relaid copies, reductions into scratches.
            ApplyLayoutExchanges(),
            # T.Parallel(prefer_async=True) nests, marked while their loops still carry the annotation (the
            # partitioning passes rebuild the loops without it).
            MarkPreferAsyncLoops(options),
            # Right after the layouts are chosen: the late tile ops and LowerFragmentAccess take per-thread slot
            # loops.
            LowerParallelLoop(options),
            # TME copies: the shared tiles' layouts are final (the engine's swizzle must produce them).
            LowerTmeCopy(options),
            # Tile ops that need the chosen layouts (reductions, instruction gemms).
            LowerTileOp(options, late=True),
            # Accesses through T.view / T.reshape views of on-chip buffers go to the viewed buffers (every op is
            # lowered by now), so barriers and shared-memory planning see one buffer.
            LowerBufferViews(ON_CHIP_VIEWS),
            # T.wait_sqmma: the SQMMA completion wait where SQMMA exists, nothing elsewhere.
            LowerWaitSqmma(),
        )),
        Phase("LowerMemory", "per-thread code on physical shared, local and global addresses, guarded", (
            # Shared tiles that only element accesses touch: a bank swizzle where it spares the warps' bank
            # conflicts (every tile op is lowered by now, so every access is in the per-thread code).
            ChooseSharedSwizzle(),
            # Shared tiles are stored in their layouts (swizzles), before vector widths are chosen.
            LowerSharedLayout(),
            # Fragments become per-thread local arrays indexed by slot.
            LowerFragmentAccess(),
            # T.Parallel nests become per-thread loops with a vectorized inner loop, while indices are still N-D.
            PartitionParallelLoop(options),
            # Explicit T.vectorized loops: wider than 128 bits, 128-bit pieces (built-in vector types), while the
            # indices are still N-D (the partitioned loops' alignment rule); serial where lanes share a private store.
            LegalizeVectorizedLoops(options),
            # Bounds guards need the final per-thread index expressions and the vectorized loops' widths.
            SafeMemoryAccess(options),
            # The marked nests' copies into shared tiles: LDLMS copies, now that each thread's vector runs and bounds
            # guards are final (the guards become the copies' zero-fill predicates).
            LowerPreferAsyncCopies(),
            # Views of global tensors after their guards, which are on the view's shape; before a tensor's layout
            # applies.
            LowerBufferViews(),
            # Global tensors annotated with a layout are accessed through it; guards above stay on logical indices.
            LowerGlobalLayout(),
            # Float16 / bfloat16 atomic adds of consecutive elements in pairs, one 32-bit atomic each, on the final
            # indices (after the global layouts); other vectorized loops of atomics run lane by lane.
            FoldAtomicAddPairs(),
        )),
        Phase("Flatten", "1-D buffers, vector loads and stores, simplified scalar TIR", (
            # Stock TVM from here: N-D buffers to 1-D, vector loops to Ramp/Broadcast, then cleanup.
            # tl.config_index_bitwidth=64: every loop and index in int64, before FlattenBuffer forms (and folds) the
            # flat offsets, which then are int64 too. Without it a kernel with a tensor past 2^31 elements is
            # promoted the same way (unless TL_DISABLE_INDEX_TYPE_PROMOTION).
            ConfigIndexBitwidth(options),
            # Strided tensor parameters to 1-D over the offsets they reach (FlattenBuffer's extent assumes the first
            # dim has the largest stride).
            FlattenStridedParams(),
            # Large integer bindings read more than once stay bindings through TVM's passes (up to LowerIntrin),
            # which would copy them into every use (a stream-K pair's rotation into every address).
            KeepLargeBindings(),
            tirx.transform.FlattenBuffer(),
            # float4_e2m1fn tensors to bytes, element accesses to nibble helpers, on flat indices; before
            # VectorizeLoop (the helpers are scalar calls: loops over fp4 elements run lane by lane).
            LowerFP4Storage(),
            # `for i: if c:` with c the same at every iteration: `if c: for i:` (upstream issue 1734), a loop that
            # VectorizeLoop below can make vector accesses of.
            HoistInvariantIf(),
            # TVM's VectorizeLoop (nested), the bindings and allocations it rebuilds given back their user lines.
            VectorizeLoop(),
            # Vector patterns MUSA runs as one accelerated op (bf16(f16 x f32) x4).
            FuseAcceleratedOps(),
            tirx.transform.UnrollLoop(),
            # Loops that run once are their body (StmtSimplify cannot simplify one whose start is not a constant).
            InlineUnitLoops(),
            tirx.transform.StmtSimplify(),
            # T.assume has served the simplifier; it prints as nothing.
            tirx.transform.RemoveAssume(),
            # StmtSimplify substitutes integer bindings into their uses and leaves the bindings unread.
            RemoveUnusedBinds(),
        )),
        Phase("Synchronize", "every barrier placed and given its hardware id", (
            # A grid barrier in a partitioned loop: its guards pushed past the barrier, which every thread reaches.
            SplitGuardsAtGridBarriers(),
            # Barriers between shared-memory accesses by different threads (final accesses only, templates'
            # included through their marked pointers): first the write-after-write hazards TVM's ThreadSync does
            # not see, then its read/write ones. Users who place T.sync_threads() themselves switch them off.
            *([] if options.disable_thread_storage_sync else [
                SyncWriteAfterWrite(),
                # Global tensors too, between statements whose threads reach them through different elements.
                SyncGlobalAccesses(),
                ThreadSync("shared"),
                ThreadSync("shared.dyn"),
            ]),
            # Barriers inside T.ws regions and thread guards cover the threads of the region only.
            RangeBarriers(),
            # Barrier buffers and named barriers to MUSA's async-barrier ids, once every barrier is placed
            # (ThreadSync, RangeBarriers), with their initialisation at the kernel's start.
            LowerAsyncBarriers(),
        )),
        Phase("Finalize", "the device function the MUSA printer takes", (
            # Math intrinsics (T.exp ...) to the MUSA math library names.
            tirx.transform.LowerIntrin(),
            # The bindings KeepLargeBindings kept, as the printer emits them.
            RestoreKeptBindings(),
            # Last: offsets of the shared tiles in the dynamic arena, and the launch's smem size.
            PlanDynamicSharedMemory(options),
        )),
    ]


def program_passes(program: tirx.PrimFunc, target: tvm.target.Target, configs: CompileOptions | dict
                   ) -> tirx.PrimFunc:
    """Rewrites of the whole program that run before its parameters are read (the launcher's specs) and before it
    is split into kernels: a rewrite that adds a workspace parameter belongs here."""
    options = CompileOptions.of(configs)
    # tl.stream_k: a data-parallel GEMM on persistent blocks, with two workspaces (partial tiles and their flags).
    return stream_k(program, options, arch_of(target).name)


def lowering_passes(configs: CompileOptions | dict) -> list[Any]:
    """Every pass of the pipeline, in order."""
    return [p for phase in lowering_phases(configs) for p in phase.passes]


def lower_program(program: tirx.PrimFunc, target: tvm.target.Target, configs: CompileOptions | dict,
                  instruments: list[Any] | None = None, dump: Callable[[str, Any], None] | None = None,
                  on_kernel: Callable[[int, int], None] | None = None) -> list[tirx.PrimFunc]:
    """The whole pipeline on a program: its T.Kernel scopes split into kernels (SplitKernels), each lowered by
    `lower`, in launch order. `on_kernel(index, count)` is called before each kernel's passes run; the dumps of
    the kernels after the first are named `kernel<i>_<pass>`."""
    kernels = split_kernels(program)
    lowered = []
    for index, kernel in enumerate(kernels):
        if on_kernel is not None:
            on_kernel(index, len(kernels))
        kernel_dump = dump if dump is None or index == 0 else (lambda n, m, i=index: dump(f"kernel{i}_{n}", m))
        # The open tilelang.instrumentation session's tools: fresh instruments for each kernel's PassContext.
        context = f"stage=lower, kernel={kernel.attrs['global_symbol']}" + (f"#{index}" if len(kernels) > 1 else "")
        with pass_pipeline("musa"):
            lowered.append(lower(kernel, target, configs,
                                 [*(instruments or []), *create_pass_instruments(context=context)], kernel_dump))
    # Each kernel keeps the program's span (its `def` line, which tl.emit_line_directives prints at the kernel's
    # entry), as upstream's SplitHostDevice gives it to the device function: passes rebuild functions without it.
    return [tirx.PrimFunc(k.params, k.body, ret_type=k.ret_type, attrs=k.attrs, span=program.span) for k in lowered]


def lower(func: tirx.PrimFunc, target: tvm.target.Target, configs: CompileOptions | dict,
          instruments: list[Any] | None = None, dump: Callable[[str, Any], None] | None = None) -> tirx.PrimFunc:
    """Run the pipeline on one kernel; returns the device PrimFunc."""
    func = func.with_attr("target", target)
    options = _barriers_for_one_warp_blocks(func, target, CompileOptions.of(configs))
    mod = tvm.IRModule({str(func.attrs["global_symbol"]): func})
    with tvm.transform.PassContext(opt_level=3, instruments=instruments or []):
        with target:
            # T.Pipelined stages lowered where the planned shared memory does not fit (fit_pipeline_stages.py)
            mod = run_fitting_stages(lowering_passes(options), mod, dump)
    (result,) = mod.functions.values()
    return result


def _barriers_for_one_warp_blocks(func: tirx.PrimFunc, target: tvm.target.Target,
                                  options: CompileOptions) -> CompileOptions:
    """TL_DISABLE_THREAD_STORAGE_SYNC does not apply to a block of one warp (128 threads on mp_22, 32 on mp_31).

    Its threads run in lockstep on the hardware, so a kernel without barriers is correct there, and Moore Threads'
    one-warp mp_22 kernels rely on it (T.Parallel stores into a shared tile, then a T.gemm reading it, no barrier).
    The simulator runs a block's threads one after another between barriers, and the compiler's layouts decide
    which thread touches which element: the barriers stay in (on one warp they order nothing the hardware does not
    already order), so the kernel is correct on both."""
    if not options.disable_thread_storage_sync:
        return options
    threads = thread_info(func).num_threads
    if threads > warp_size(target):
        return options
    warn_once(f"one-warp storage sync {threads} {warp_size(target)}",
              f"TL_DISABLE_THREAD_STORAGE_SYNC is ignored for a block of {threads} threads, one warp of "
              f"{arch_of(target).name}: its threads run in lockstep, which the barriers keep in the simulator")
    return options.with_(disable_thread_storage_sync=False)

