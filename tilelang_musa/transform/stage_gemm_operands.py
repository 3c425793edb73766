"""StageGemmOperands: a gemm operand in registers that its instruction reads from shared memory is copied there.

    T.gemm(P_frag, V_shared, acc)     ->     T.copy(P_frag, P_frag_staged)      # a shared tile, P's shape
                                             T.gemm(P_frag_staged, V_shared, acc)

exactly what a user would write by hand. The gemm registry says which operands a path needs staged
(tileop/gemm/registry.py: FMA reads shared memory only; SQMMA stages one fragment operand; mp_22's MMA stages a
fragment filled from another gemm's accumulator, whose layout is not the operand's).
Runs before the tile ops are lowered, so the copy is an ordinary T.copy: layout inference places it where
the fragment lives, and the barrier passes order it before the gemm and after the gemm's previous read. With
TL_DISABLE_THREAD_STORAGE_SYNC (the user places barriers) the staging tile, being the compiler's, gets its two
barriers here: a user cannot know it exists.
"""

from __future__ import annotations

import dataclasses

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.attrs import TEMPORARY_ANNOTATION
from ..ir.options import CompileOptions
from ..ir.utils import declare_buffers, thread_info
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.copy import Copy
from ..tileop.gemm import Gemm
from ..tileop.gemm.base import STAGING_SCOPE
from ..tileop.gemm.registry import GemmContext
from .gemm_groups import accumulator_fed_fragments, accumulator_groups
from .buffer_roles import annotated_buffers, unswizzled_tiles, view_buffers
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import map_with_guards, reaching_threads


def stage_gemm_operands(func: tirx.PrimFunc, options: CompileOptions | dict) -> tirx.PrimFunc:
    options = CompileOptions.of(options)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    threads = thread_info(func)
    block_ctx = GemmContext(target, options, threads.num_threads, annotated_buffers(func), view_buffers(func),
                            unswizzled_tiles(func), accumulator_groups(func), accumulator_fed_fragments(func))
    tiles: list = []

    def on_evaluate(node, mutator, guards):
        if not is_tile_op(node.value):
            return node
        op = parse_tile_op(node.value)
        if not isinstance(op, Gemm):
            return node
        # the gemm runs on the threads that reach it (a T.ws region): its path is chosen for their count
        ctx = block_ctx
        if guards:
            reach = reaching_threads(guards, threads, thread_analyzer(threads)(), None, "StageGemmOperands",
                                     op.construct, op.loc)
            ctx = dataclasses.replace(block_ctx, num_threads=reach.count)
        staged = op.staging(ctx)
        if not staged:
            return node
        copies, by_operand = [], {}
        for what in staged:
            region = op.A if what == "A" else op.B
            tile = Tb.buffer(op.staging_shape(what), region.dtype, scope=STAGING_SCOPE)
            IRBuilder.name(f"{region.name}_staged", tile)
            tiles.append(tile)
            by_operand[what] = tile
        new = op.staged(staged, by_operand)
        for what in staged:
            src, dst = (op.A, new.A) if what == "A" else (op.B, new.B)
            copies.append(_copy_call(src, dst, node.value))
        index = {"A": 0, "B": 1}
        args = list(node.value.args)
        for what in staged:
            args[index[what]] = (new.A if what == "A" else new.B).to_ir()
        gemm = tvm.ir.Call(node.value.op, args, attrs=node.value.attrs, ret_ty="int32")
        stores = [tirx.Evaluate(c) for c in copies]
        if options.disable_thread_storage_sync:  # earlier reads done; stores landed
            sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
            stores = [sync, *stores, sync]
        return tirx.SeqStmt(stores + [tirx.Evaluate(gemm)])

    body = map_with_guards(func.body, threads, lambda node, mutator, guards: mutator.default_mutate(node),
                           on_evaluate)
    if not tiles:
        return func
    # the staging tile holds the operand from its copy to the gemm only (PlanDynamicSharedMemory may reuse it)
    return func.with_body(declare_buffers(body, tiles, [{TEMPORARY_ANNOTATION: True}] * len(tiles)))


def _copy_call(src, dst, gemm_call) -> tvm.ir.Call:
    """`T.copy(src, dst)` at the gemm's source line."""
    attrs = {"tl.loc": gemm_call.attrs["tl.loc"]} if gemm_call.attrs is not None and "tl.loc" in gemm_call.attrs \
        else {}
    return tvm.ir.Call(tvm.ir.Op.get(Copy.op_name), [src.to_ir(), dst.to_ir()], attrs=attrs, ret_ty="int32")


def StageGemmOperands(configs):  # noqa: N802
    options = CompileOptions.of(configs)
    return tl_pass("StageGemmOperands", lambda func: stage_gemm_operands(func, options))
