/*!
 * \file arithmetic_count.cc
 * \brief CountArithmetic: see arithmetic_count.h.
 */
#include "codegen/arithmetic_count.h"

#include <unordered_set>

namespace tilelang_musa {
namespace codegen {

// The two-operand `prim.*` nodes: one instruction each.
bool IsBinaryOperator(const ObjectRef& e) {
  static const std::unordered_set<int32_t> operators = [] {
    std::unordered_set<int32_t> s;
    for (const char* key : {"prim.Add", "prim.Sub", "prim.Mul", "prim.Div", "prim.Mod", "prim.FloorDiv",
                            "prim.FloorMod", "prim.Min", "prim.Max", "prim.LShift", "prim.RShift", "prim.BitwiseAnd",
                            "prim.BitwiseOr", "prim.BitwiseXor", "prim.EQ", "prim.NE", "prim.LT", "prim.LE",
                            "prim.GT", "prim.GE", "prim.And", "prim.Or"})
      s.insert(LookupTypeIndex(key));
    return s;
  }();
  return operators.count(e->type_index()) != 0;
}

namespace {

int64_t Count(const ObjectRef& e) {
  static const TypeKey not_key("prim.Not"), bitwise_not_key("prim.BitwiseNot");
  if (IsBinaryOperator(e)) return 1 + Count(OperandA(e)) + Count(OperandB(e));
  if (IsA(e, not_key) || IsA(e, bitwise_not_key)) return 1 + Count(OperandA(e));
  if (IsA(e, CastView::Key())) {
    CastView cast(e);
    return (DTypeOf(e) == DTypeOf(cast.value()) ? 0 : 1) + Count(cast.value());
  }
  if (IsA(e, SelectView::Key())) {
    SelectView select(e);
    return 1 + Count(select.condition()) + Count(select.true_value()) + Count(select.false_value());
  }
  if (IsA(e, LetView::Key())) return Count(LetView(e).value()) + Count(LetView(e).body());
  if (IsA(e, BroadcastView::Key())) return Count(BroadcastView(e).value());
  if (IsA(e, CallView::Key())) {
    int64_t n = 1;
    for (const ObjectRef& arg : CallView(e).args()) n += Count(arg);
    return n;
  }
  return 0;  // variables, constants, loads (their indices are address arithmetic), ramps
}

}  // namespace

int64_t CountArithmetic(const ObjectRef& expr) {
  if (!HasPrimType(expr)) return 0;
  return Count(expr) * DTypeOf(expr).lanes();
}

}  // namespace codegen
}  // namespace tilelang_musa
