/*!
 * \file call_rules_math.cc
 * \brief Print rules for the math intrinsics (`tirx.exp`, `prim.log2`, `tirx.popcount`, ...).
 *
 * LowerIntrin normally turns them into `call_pure_extern("expf", ...)`; these rules cover functions that
 * reach the printer unlowered. float32 calls the `f`-suffixed C function, float64 the plain one, and
 * float16/bfloat16 compute in float and round back (the MUSA half math set is not documented publicly).
 * Vectors (VectorizeLoop keeps the math ops TVM marks vectorizable) call the same names in `tl::vmath`, which
 * common.h defines lane by lane on `tl::vec` values.
 */
#include <tvm/ffi/base_detail.h>

#include <string>
#include <vector>

#include "codegen/call_rules.h"
#include "codegen/musa_types.h"

namespace tilelang_musa {
namespace codegen {
namespace {

// The C function for `base` at the call's float type, and how to bring half-like values to and from float.
struct FloatMath {
  std::string function;
  bool via_float;  // float16/bfloat16: arguments are widened to float and the result narrowed back
};

FloatMath ResolveFloatMath(CallContext& ctx, const CallView& call, const std::string& base, DataType t) {
  const std::string ns = t.is_vector() ? "tl::vmath::" : "";  // lane-wise (see the file comment)
  t = t.with_lanes(1);
  if (t.is_half_like()) return {ns + base + "f", true};
  if (t.is_float() && t.bits() == 32) return {ns + base + "f", false};
  if (t.is_float() && t.bits() == 64) return {ns + base, false};
  ctx.Fail(call, "expects float16/bfloat16/float32/float64 operands, got " + t.str());
}

std::string WidenArg(CallContext& ctx, const ObjectRef& arg, bool via_float) {
  DataType t = DTypeOf(arg);
  if (!via_float || !t.is_half_like()) return ctx.PrintBare(arg);
  return (t.is_vector() ? "tl::vec_cast<float>(" : "tl::cast<float>(") + ctx.PrintBare(arg) + ")";
}

// `text` (computed in float) narrowed back to the call's half-like type t, lane-wise for vectors.
std::string Narrow(DataType t, const std::string& text) {
  std::string fn = t.is_vector() ? "tl::vec_cast<" : "tl::cast<";
  return fn + CTypeName(t.with_lanes(1)) + ">(" + text + ")";
}

// f(x, y, ...) where the result has the operands' float type (exp, pow, fma, ldexp's first operand, ...).
CallPrinter FloatFunction(std::string base, size_t arity) {
  return [base, arity](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, arity);
    DataType t = call.dtype();
    FloatMath m = ResolveFloatMath(ctx, call, base, t);
    std::string text = m.function + "(";
    Array<ObjectRef> args = call.args();
    for (size_t i = 0; i < args.size(); ++i) text += (i ? ", " : "") + WidenArg(ctx, args[i], m.via_float);
    text += ")";
    return m.via_float ? Narrow(t, text) : text;
  };
}

// isnan/isinf/isfinite: a bool result about a float operand. Overloaded in C++ for float and double.
CallPrinter FloatPredicate(std::string name) {
  return [name](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, 1);
    ObjectRef x = call.args()[0];
    DataType t = DTypeOf(x);
    if (t.is_vector()) ctx.Fail(call, "a vector operand (" + t.str() + ") is not supported");
    ResolveFloatMath(ctx, call, name, t);  // validates the operand type
    return name + "(" + WidenArg(ctx, x, t.is_half_like()) + ")";
  };
}

// sigmoid(x) = 1 / (1 + exp(-x)), in the operand's type (float for half-like operands).
std::string PrintSigmoid(CallContext& ctx, const CallView& call) {
  CheckArgCount(ctx, call, 1);
  DataType t = call.dtype();
  FloatMath m = ResolveFloatMath(ctx, call, "exp", t);
  DataType compute = m.via_float ? DataType::Float(32) : t.with_lanes(1);
  std::string one = FloatLiteral(compute, 1.0);
  std::string text = "(" + one + " / (" + one + " + " + m.function + "(-" + WidenArg(ctx, call.args()[0], m.via_float) +
                     ")))";
  return m.via_float ? Narrow(t, text) : text;
}

// popcount/clz on 32- or 64-bit integers: the CUDA-style device built-ins MUSA shares.
CallPrinter IntegerBitFunction(std::string name32, std::string name64) {
  return [name32, name64](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, 1);
    ObjectRef x = call.args()[0];
    DataType t = DTypeOf(x);
    if (!t.is_integer() || t.is_vector() || (t.bits() != 32 && t.bits() != 64)) {
      ctx.Fail(call, "expects a 32- or 64-bit integer scalar, got " + t.str());
    }
    return (t.bits() == 64 ? name64 : name32) + "(" + ctx.PrintBare(x) + ")";
  };
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  const auto kExpr = CallPosition::kExpression;
  const std::vector<std::string> unary = {"exp",  "exp2",  "exp10", "log",   "log10", "log1p", "sqrt",
                                          "rsqrt", "sin",  "cos",   "tan",   "sinh",  "cosh",  "tanh",
                                          "asin", "acos",  "atan",  "asinh", "acosh", "atanh", "erf",
                                          "fabs", "floor", "trunc", "nearbyint"};
  for (const std::string& f : unary) RegisterCallRule("tirx." + f, kExpr, FloatFunction(f, 1));
  // TIR's round takes halfway cases to the even neighbour (TVM lowers it to nearbyint): C's round would not.
  RegisterCallRule("tirx.round", kExpr, FloatFunction("nearbyint", 1));
  // These two are registered under the `prim.` prefix in this TVM build.
  RegisterCallRule("prim.ceil", kExpr, FloatFunction("ceil", 1));
  RegisterCallRule("prim.log2", kExpr, FloatFunction("log2", 1));
  for (const char* f : {"pow", "fmod", "atan2", "hypot", "copysign", "nextafter", "ldexp"}) {
    RegisterCallRule(std::string("tirx.") + f, kExpr, FloatFunction(f, 2));
  }
  RegisterCallRule("tirx.fma", kExpr, FloatFunction("fma", 3));
  for (const char* f : {"isnan", "isinf", "isfinite"}) {
    RegisterCallRule(std::string("tirx.") + f, kExpr, FloatPredicate(f));
  }
  RegisterCallRule("tirx.sigmoid", kExpr, PrintSigmoid);
  RegisterCallRule("tirx.popcount", kExpr, IntegerBitFunction("__popc", "__popcll"));
  RegisterCallRule("prim.clz", kExpr, IntegerBitFunction("__clz", "__clzll"));
}

}  // namespace codegen
}  // namespace tilelang_musa
