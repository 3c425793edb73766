"""Annotation, attribute and scope keys that travel on the IR from the frontend to the passes and codegen.

Grouped by what carries them: PrimFunc attributes, loop annotations, AttrStmt keys, buffer annotations and call
attributes. The frontend module that writes each key is named beside it; the passes that read it import it here.
"""

from __future__ import annotations

# -- PrimFunc attributes
ANNOTATIONS_ATTR = "tl.layout_annotations"  # T.annotate_layout: buffer -> Layout / Fragment (language/annotate.py)
PASS_CONFIGS_ATTR = "tilelang_pass_configs"  # T.annotate_pass_configs
COMPILE_FLAGS_ATTR = "tilelang_compile_flags"  # T.annotate_compile_flags
# One int per kernel of the program, in launch order (the n of `__launch_bounds__(threads, n)`; 1 if not annotated).
MIN_BLOCKS_ATTR = "tl.min_blocks_per_sm"
# Tensor name -> the value its out-of-bounds reads return instead of zero (read by SafeMemoryAccess).
SAFE_VALUES_ATTR = "tl.safe_values"
# Names of the tensor parameters printed without `__restrict__` (T.annotate_restrict_buffers; read by codegen).
NON_RESTRICT_ATTR = "tl.non_restrict_params"
# C source texts T.import_source put before the kernels (language/extern.py; read by codegen/source.py).
IMPORTED_SOURCES_ATTR = "tl.imported_sources"
VIEWS_ATTR = "tl.buffer_views"  # T.view / T.reshape: view buffer -> the buffer it views (language/view.py)
# T.view of a shared tile as another dtype: view buffer -> the "file:line:col" of the T.view (for errors naming it).
DTYPE_VIEWS_ATTR = "tl.dtype_views"
# Tensor parameters declared with an on-chip scope (`T.Tensor(..., scope="shared.dyn")`): name -> "file:line:col" of
# the declaration. Such a function builds IR for passes to inspect, but is not compiled (ir/param_scopes.py).
SCOPED_PARAMS_ATTR = "tl.scoped_params"
WORKSPACES_ATTR = "tl.workspaces"  # names of the T.alloc_global parameters (language/pointer.py)
ZEROED_WORKSPACES_ATTR = "tl.zeroed_workspaces"  # those the launcher zeroes for each call (transform/stream_k.py)
# The eager style's outputs (T.empty buffers), in `return` order (language/prim_func.py).
OUTPUTS_ATTR = "tilelang_out_idx"
# The trailing parameters added for T.dynamic sizes (not the user's parameters).
SIZE_PARAMS_ATTR = "tl.size_params"

# -- loop annotations (language/loop.py)
PARALLEL = "tl.parallel"  # marks a T.Parallel nest (kind PARALLEL): distributed over the block's threads
COALESCED_WIDTH = "tl.coalesced_width"  # caps the elements one thread accesses at once in the nest
PIPELINE_STAGES = "tl.pipeline.num_stages"
PIPELINE_ORDER = "tl.pipeline.order"
PIPELINE_STAGE = "tl.pipeline.stage"
PIPELINE_GROUP = "tl.pipeline.group"
UNROLL_FACTOR = "tl.unroll_factor"  # `#pragma unroll k`
PRAGMA_UNROLL = "tl.pragma_unroll"  # a serial loop printed under `#pragma unroll`

# -- warp specialization (language/warp_specialize.py)
WS_ATTR = "tl.ws"  # AttrStmt around a T.ws region's `if`; its value names the region ("T.ws(1) at file:line")
SQUAD_THREADS = 128  # a squad (warp group) on both archs: 4 x 32 lanes on mp_31, 1 x 128 lanes on mp_22

# -- asynchronous barriers (language/barrier.py)
BARRIER_SCOPE = "shared.barrier"
ARRIVE_COUNTS = "tl.barrier_arrive_counts"  # AllocBuffer annotation: the arrive count (threads) of each barrier
USER_NAMED_BARRIER = "tl.user_named_barrier"  # call attr of T.sync_threads(id, count): the id is the user's
USER_BLOCK_BARRIER = "tl.user_block_barrier"  # call attr of T.sync_threads(): a block barrier the user placed
USER_BARRIER_ID = "tl.user_barrier_id"  # call attr of T.sync_threads(id, all threads): the id the user named

# -- copies
# AttrStmt key wrapping a lowered copy whose accesses must not be guarded (TL_DISABLE_SAFE_COPY_PREDICATION).
NO_SAFE_ACCESS = "tl.no_safe_access"
# AttrStmt key wrapping a lowered copy that keeps its guards under TL_DISABLE_SAFE_MEMORY_ACCESS (as upstream, a
# copy is predicated unless TL_DISABLE_SAFE_COPY_PREDICATION; the pass then guards only these).
SAFE_COPY = "tl.safe_copy"

# -- plans of the loops over fragments (LayoutInference records them on a T.Parallel nest's outer loop;
# LowerParallelLoop lowers the nest from them, see transform/lower_parallel_loop.py)
PARALLEL_LOOP_LAYOUT = "parallel_loop_layout"  # the plan's Fragment: iteration -> (thread, slot) (upstream's key)
PREFER_ASYNC = "parallel_prefer_async"  # T.Parallel(prefer_async=): upstream's cp.async hint (LDLMS copies here)
# T.Parallel(annotations={...: True}): the user commits and waits for the nest's asynchronous copies (upstream's key)
PREFER_ASYNC_WITHOUT_COMMIT_WAIT = "parallel_async_without_async_commit_wait"
# AttrStmt around such a nest through the partitioning passes (1: the compiler commits and waits; 0: the user does)
PREFER_ASYNC_REGION = "tl.prefer_async_copies"
LOOP_PLAN = "tl.loop_plan"  # how to rebuild the plan: kind, its Fragment(s) and sizes, the threads that run it
LAYOUT_EXCHANGES = "tl.layout_exchanges"  # [fragment, copy, shared tile, written]: relaid out around the nest
# AttrStmt key around a T.reduce_* whose result LayoutInference relays to its destination: [scratch, shared tile,
# first thread, thread count] (ApplyLayoutExchanges writes the relay and removes the AttrStmt).
REDUCE_EXCHANGE = "tl.reduce_exchange"

# -- set by the passes and tile ops, read by later passes, codegen and the host stage
SIZE_ATTR = "tl.dynamic_smem_bytes"  # bytes of dynamic shared memory a kernel uses (PlanDynamicSharedMemory)
# Descriptor name -> [tensor param name, dtype, dims innermost first, byte strides of dims 1..] (LowerTmeCopy).
DESCRIPTORS_ATTR = "tl.tme_descriptors"
LAYOUTS_ATTR = "tl.fragment_layouts"  # buffer -> the Layout / Fragment LayoutInference chose
REDUCERS_ATTR = "tl.reducers"  # reducer buffer -> op (T.alloc_reducer; tileop/finalize_reducer.py)

# -- shared tile annotations (AllocBuffer)
OFFSET_ANNOTATION = "tl.dyn_smem_offset"  # a shared tile's byte offset in the dynamic arena (PlanDynamicSharedMemory)
ALIGNMENT_ANNOTATION = "tl.smem_alignment"  # bytes a swizzled tile's offset must be a multiple of (LowerSharedLayout)
# A tile the compiler made (a staged gemm operand, a layout exchange, a reduction's scratch): each read is of values
# written just before it, in the same iteration of every loop around the two, so it holds nothing from one use to
# the next (StageGemmOperands, ApplyLayoutExchanges, the reductions; read by PlanDynamicSharedMemory). A pipeline
# that gives the tile versions drops the mark.
TEMPORARY_ANNOTATION = "tl.smem_temporary"
# A user's shared tile every use of which sits in one serial loop, each iteration of which writes it whole before
# anything reads it: it carries nothing from one iteration to the next (MarkRewrittenTiles; the value is the loop
# variable's name; read by PlanDynamicSharedMemory).
REWRITTEN_ANNOTATION = "tl.smem_rewritten_each_iteration"

# -- call attributes of T.copy and its lowered forms
PIPELINED_ATTR = "tl.pipelined"  # a pipelined TME load (TmeCopy.pipelined)
ASYNC_ATTR = "tl.async"  # T.copy's asynchronous mode (tileop/async_copy.py)
DISABLE_TMA_ATTR = "tl.disable_tma"  # T.copy(..., disable_tma=True): never a TME copy (pipelined loads included)
PER_THREAD_ATTR = "tl.per_thread"  # a copy each thread runs for its own run of elements
LOOP_LAYOUT_ATTR = "loop_layout"  # T.copy(..., loop_layout=F): the copy loop's plan (a T.Fragment over its extents)
