/*!
 * \file call_rules_async.cc
 * \brief Print rules for the asynchronous barriers and robust descriptors (`tl.barrier_*`, `tl.async_bar_*`,
 *        `tl.async_barrier_sync`, `tl.make_robust_desc`): the `tl::` wrappers of tl_templates/musa/async_copy.h
 *        around the MUSA built-ins of docs/ASYNC_MODEL.md section 1 (the wrappers keep the built-ins out of mcc's
 *        host pass, which parses kernel bodies without them).
 *
 * LowerAsyncBarriers has replaced every barrier by its integer id (1..63) by the time these print. Async barriers
 * exist where the arch table says so (target/musa_archs.h: mp_31 on); that pass already rejects them elsewhere at
 * the user's line, and the rules refuse them too.
 * The asynchronous copies themselves are `tl::` templates (async_copy.h) called through call_extern.
 */
#include <tvm/ffi/base_detail.h>

#include <string>

#include "codegen/call_rules.h"
#include "target/musa_archs.h"

namespace tilelang_musa {
namespace codegen {
namespace {

void RequireAsyncBarriers(CallContext& ctx, const CallView& call) {
  if (!ctx.options().has_async_barriers) {
    ctx.Fail(call, ctx.options().arch + " has no asynchronous barriers (they need " +
                       OldestArchWith(&MusaArch::has_async_barriers) + " or newer)");
  }
}

// A rule `wrapper(arg0, ..., arg{arity-1})` of a barrier op.
CallPrinter Builtin(std::string wrapper, size_t arity) {
  return [wrapper, arity](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, arity);
    RequireAsyncBarriers(ctx, call);
    return PrintFunctionCall(ctx, wrapper, call.args());
  };
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  const auto kExpr = CallPosition::kExpression;
  const auto kStmt = CallPosition::kStatement;
  RegisterCallRule("tl.barrier_arrive", kExpr, Builtin("tl::barrier_arrive", 1));
  RegisterCallRule("tl.barrier_wait", kStmt, Builtin("tl::barrier_wait", 2));
  RegisterCallRule("tl.barrier_expect_tx", kStmt, Builtin("tl::barrier_expect_tx", 2));
  RegisterCallRule("tl.barrier_arrive_expect_tx", kStmt, Builtin("tl::barrier_arrive_expect_tx", 2));
  RegisterCallRule("tl.async_bar_record", kStmt, Builtin("tl::barrier_record", 1));
  RegisterCallRule("tl.async_bar_init", kStmt, Builtin("tl::barrier_init", 2));
  RegisterCallRule("tl.async_barrier_sync", kStmt, Builtin("tl::barrier_sync", 1));
  RegisterCallRule("tl.make_robust_desc", kExpr, [](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, 2);
    return PrintFunctionCall(ctx, "tl::make_robust_desc", call.args());
  });
}

}  // namespace codegen
}  // namespace tilelang_musa
