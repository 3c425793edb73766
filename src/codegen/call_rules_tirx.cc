/*!
 * \file call_rules_tirx.cc
 * \brief Print rules for the generic TIR intrinsics that reach a device function (`tirx.*`, `prim.*`).
 *
 * Math functions are in call_rules_math.cc; TileLang's own intrinsics (`tl.*`) get their own files.
 */
#include <tvm/ffi/base_detail.h>

#include <optional>
#include <string>

#include "codegen/call_rules.h"
#include "codegen/musa_types.h"

namespace tilelang_musa {
namespace codegen {
namespace {

// The packed-FP4 helpers (common.h, atomic.h; transform/lower_fp4_storage.py) use one nibble of the byte they are
// handed: `fp4_e2m1_to_float(byte, odd)`, `fp4_e2m1_bits(byte, odd)` read it, `fp4_e2m1_store(&byte, odd, bits)`
// writes it. The simulator's checked print tracks that nibble (an fp4 tile is written a nibble at a time), so the
// byte's access is printed knowing it; null when the call is not one of them.
// The packed int4 helpers (common.h) alike: `int4_nibble(byte, odd)` reads, `int4_nibble_store(&byte, odd, code)`
// writes the byte back (not atomic): a store the race detector sees.
std::optional<std::string> PrintNibbleCall(CallContext& ctx, const std::string& name, const Array<ObjectRef>& args) {
  const bool reads = (name == "tl::fp4_e2m1_to_float" || name == "tl::fp4_e2m1_bits" || name == "tl::int4_nibble") &&
                     args.size() == 3;
  const bool racing_store = name == "tl::int4_nibble_store";
  const bool writes = (name == "tl::fp4_e2m1_store" || racing_store) && args.size() == 4;
  if (!reads && !writes) return std::nullopt;
  ObjectRef byte = args[1];
  if (writes) {
    static const TypeKey call_key("ir.Call");
    if (!IsA(byte, call_key)) return std::nullopt;
    CallView address(byte);
    if (address.op_name() != "tirx.address_of" || address.args().size() != 1) return std::nullopt;
    byte = address.args()[0];
  }
  std::string out = name + "(" + ctx.PrintNibbleAccess(byte, args[2], writes, racing_store);
  for (size_t i = 2; i < args.size(); ++i) out += ", " + ctx.PrintBare(args[i]);
  return out + ")";
}

std::string PrintExtern(CallContext& ctx, const CallView& call) {
  std::string name = StringArg(ctx, call, 0);
  if (ctx.options().sim_checks) {
    if (std::optional<std::string> nibble = PrintNibbleCall(ctx, name, call.args())) return *nibble;
  }
  return PrintFunctionCall(ctx, name, call.args(), /*first=*/1);
}

// A pure extern of vector type names a scalar C function (LowerIntrin's `rsqrtf` of a vector T.rsqrt, a user's
// `expf`): called lane by lane (tl::lanewise, common.h). A vector `call_extern` stays a call of the whole vectors:
// the project's own vector helpers (tl::mul_half_float_to_bfloat16_x4) and a user's take them.
std::string PrintPureExtern(CallContext& ctx, const CallView& call) {
  DataType t = call.dtype();
  if (!t.is_vector()) return PrintExtern(ctx, call);
  std::string name = StringArg(ctx, call, 0);
  std::string out = "tl::lanewise<" + CTypeName(t.with_lanes(1)) + ", " + std::to_string(t.lanes()) +
                    ">([](auto... x) { return " + name + "(x...); }";
  Array<ObjectRef> args = call.args();
  for (size_t i = 1; i < args.size(); ++i) out += ", " + ctx.PrintBare(args[i]);
  return out + ")";
}

// tvm_storage_sync(scope[, is_load, num_blocks]): the trailing pair only matters for "global" (grid) sync.
// "warp" comes from LowerThreadAllreduce's in-warp tree steps; Moore Threads' own TileLang port prints it as
// __syncwarp() too.
std::string PrintStorageSync(CallContext& ctx, const CallView& call) {
  std::string scope = StringArg(ctx, call, 0);
  if (scope == "shared" || scope == "shared.dyn") return "__syncthreads()";
  if (scope == "warp") return "__syncwarp()";
  ctx.Fail(call, "synchronisation of scope \"" + scope +
                     "\" is not supported (only \"shared\", \"shared.dyn\" and \"warp\")");
}

// A reinterpret to a typed pointer (T.make_tensor over an address loaded from a pointer table) is a pointer cast;
// any other is a bit cast of the operand (a narrow integer one converted back to its own type first).
std::string PrintReinterpret(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 1);
  static const TypeKey pointer_type("ir.PointerType");
  ObjectRef ty = TypeOf(call.ref());
  if (IsA(ty, pointer_type)) {
    return "reinterpret_cast<" + PointeeTypeName(ty) + "*>(" + ctx.PrintBare(call.args()[0]) + ")";
  }
  // The operand as its own TIR type: C promotes 8- and 16-bit integer arithmetic (`(a << 8) | b` on uint16) to int,
  // and bit_cast needs the source width, not the promoted one.
  DataType from = DTypeOf(call.args()[0]);
  std::string operand = ctx.PrintBare(call.args()[0]);
  if ((from.is_int() || from.is_uint()) && from.bits() < 32) operand = "(" + ValueTypeName(from) + ")(" + operand + ")";
  return "tl::bit_cast<" + ValueTypeName(call.dtype()) + ">(" + operand + ")";
}

// The one argument of an address-of: a buffer element.
ObjectRef ElementArg(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 1);
  static const TypeKey tensor_load("ir.TensorLoad");
  ObjectRef arg = call.args()[0];
  if (!IsA(arg, tensor_load)) ctx.Fail(call, "expects a buffer element (ir.TensorLoad), got `" + TypeKeyOf(arg) + "`");
  return arg;
}

std::string PrintAddressOf(CallContext& ctx, const CallView& call) {
  return "(&" + ctx.PrintLoadLValue(ElementArg(ctx, call)) + ")";
}

// tl.unchecked_address_of(A[i]): `&A[i]` where the element may lie outside A by design (a robust copy's source, whose
// descriptor bounds what is read), so the simulator's sanitizer build does not check it against A's extent.
std::string PrintUncheckedAddressOf(CallContext& ctx, const CallView& call) {
  return "(&" + ctx.PrintLoadLValueUnchecked(ElementArg(ctx, call)) + ")";
}

// tl.access_ptr(address_of(A[i]), rw): the address; rw told the barrier analysis whether the callee reads and/or
// writes A through it (tilelang_musa/tileop/access_ptr.py).
std::string PrintMarkedAccess(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 2);
  return ctx.PrintExpr(call.args()[0]);
}

std::string PrintBufferData(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 1);
  return ctx.PrintBufferPointer(call.args()[0]);
}

// The branch not taken is never evaluated: it may read out of bounds (RewriteUnsafeSelect relies on this).
std::string PrintIfThenElse(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 3);
  Array<ObjectRef> args = call.args();
  if (DTypeOf(args[0]).is_vector()) {
    ctx.Fail(call, "a vector condition cannot guard its branches lane by lane; scalarize the loop instead");
  }
  return ctx.PrintConditional(args[0], args[1], args[2]);
}

std::string PrintLikely(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 1);
  return ctx.PrintExpr(call.args()[0]);
}

// tvm_access_ptr(type_annotation(), data, offset, extent, rw_mask) -> a typed pointer to data[offset].
std::string PrintAccessPtr(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 5);
  Array<ObjectRef> args = call.args();
  std::string elem = ValueTypeName(DTypeOf(args[0]));
  return "(reinterpret_cast<" + elem + "*>(" + ctx.PrintBare(args[1]) + ") + " + ctx.PrintExpr(args[2]) + ")";
}

std::string PrintTypeAnnotation(CallContext& ctx, const CallView& call) {
  ctx.Fail(call, "is only meaningful as the first argument of tirx.tvm_access_ptr");
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  const auto kExpr = CallPosition::kExpression;
  const auto kStmt = CallPosition::kStatement;
  RegisterCallRule("tirx.call_extern", kExpr, PrintExtern);
  RegisterCallRule("tirx.call_pure_extern", kExpr, PrintPureExtern);
  RegisterCallRule("tirx.tvm_storage_sync", kStmt, PrintStorageSync);
  RegisterCallRule("tirx.reinterpret", kExpr, PrintReinterpret);
  RegisterCallRule("tirx.address_of", kExpr, PrintAddressOf);
  RegisterCallRule("tl.unchecked_address_of", kExpr, PrintUncheckedAddressOf);
  RegisterCallRule("tl.access_ptr", kExpr, PrintMarkedAccess);
  RegisterCallRule("tirx.buffer_data", kExpr, PrintBufferData);
  RegisterCallRule("tirx.tvm_access_ptr", kExpr, PrintAccessPtr);
  RegisterCallRule("tirx.type_annotation", kExpr, PrintTypeAnnotation);
  RegisterCallRule("prim.if_then_else", kExpr, PrintIfThenElse);
  RegisterCallRule("prim.likely", kExpr, PrintLikely);
  RegisterCallRule("tirx.break_loop", kStmt, [](CallContext&, const CallView&) { return std::string("break"); });
  RegisterCallRule("tirx.continue_loop", kStmt,
                   [](CallContext&, const CallView&) { return std::string("continue"); });
  RegisterCallRule("tirx.thread_return", kStmt, [](CallContext&, const CallView&) { return std::string("return"); });
  // T.sync_grid: the kernel is launched cooperatively (codegen/host.py), which this call needs.
  RegisterCallRule("tl.sync_grid", kStmt,
                   [](CallContext&, const CallView&) { return std::string("cooperative_groups::this_grid().sync()"); });
}

}  // namespace codegen
}  // namespace tilelang_musa
