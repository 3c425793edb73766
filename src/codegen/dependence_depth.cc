/*!
 * \file dependence_depth.cc
 * \brief ArithmeticDepth, AnalyzeLoop and ChainOf: see dependence_depth.h.
 */
#include "codegen/dependence_depth.h"

#include "codegen/arithmetic_count.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tilelang_musa {
namespace codegen {

namespace {

// Operators through which an index stops moving one-to-one with a variable in it.
bool IsFolding(const ObjectRef& e) {
  static const std::unordered_set<int32_t> folding = [] {
    std::unordered_set<int32_t> s;
    for (const char* key : {"prim.Div", "prim.Mod", "prim.FloorDiv", "prim.FloorMod", "prim.Min", "prim.Max",
                            "prim.RShift", "prim.BitwiseAnd", "prim.BitwiseOr", "prim.BitwiseXor", "prim.EQ",
                            "prim.NE", "prim.LT", "prim.LE", "prim.GT", "prim.GE", "prim.And", "prim.Or"})
      s.insert(LookupTypeIndex(key));
    return s;
  }();
  return folding.count(e->type_index()) != 0;
}

const TypeKey& NotKey() {
  static const TypeKey key("prim.Not");
  return key;
}
const TypeKey& BitwiseNotKey() {
  static const TypeKey key("prim.BitwiseNot");
  return key;
}

int64_t Depth(const ObjectRef& e) {
  if (IsBinaryOperator(e)) return 1 + std::max(Depth(OperandA(e)), Depth(OperandB(e)));
  if (IsA(e, NotKey()) || IsA(e, BitwiseNotKey())) return 1 + Depth(OperandA(e));
  if (IsA(e, CastView::Key())) {
    CastView cast(e);
    return (DTypeOf(e) == DTypeOf(cast.value()) ? 0 : 1) + Depth(cast.value());
  }
  if (IsA(e, SelectView::Key())) {
    SelectView select(e);
    return 1 + std::max({Depth(select.condition()), Depth(select.true_value()), Depth(select.false_value())});
  }
  if (IsA(e, LetView::Key())) return Depth(LetView(e).value()) + Depth(LetView(e).body());  // the body may use it
  if (IsA(e, BroadcastView::Key())) return Depth(BroadcastView(e).value());
  if (IsA(e, CallView::Key())) {
    int64_t deepest = 0;
    for (const ObjectRef& arg : CallView(e).args()) deepest = std::max(deepest, Depth(arg));
    return 1 + deepest;
  }
  return 0;  // variables, constants, loads (their indices are address arithmetic), ramps
}

bool SameIndices(const Array<ObjectRef>& a, const Array<ObjectRef>& b);

// The longest chain of counted instructions from the root of `e` down to a load of `buffer` at `indices` (-1:
// no such load), as Depth counts them.
int64_t PathDepth(const ObjectRef& e, const ObjectRef& buffer, const Array<ObjectRef>& indices) {
  if (IsA(e, TensorLoadView::Key())) {
    TensorLoadView load(e);
    return load.source().get() == buffer.get() && SameIndices(load.indices(), indices) ? 0 : -1;
  }
  std::vector<ObjectRef> operands;
  int64_t step = 1;
  if (IsBinaryOperator(e)) {
    operands = {OperandA(e), OperandB(e)};
  } else if (IsA(e, NotKey()) || IsA(e, BitwiseNotKey())) {
    operands = {OperandA(e)};
  } else if (IsA(e, CastView::Key())) {
    operands = {CastView(e).value()};
    step = DTypeOf(e) == DTypeOf(CastView(e).value()) ? 0 : 1;
  } else if (IsA(e, SelectView::Key())) {
    SelectView select(e);
    operands = {select.condition(), select.true_value(), select.false_value()};
  } else if (IsA(e, BroadcastView::Key())) {
    operands = {BroadcastView(e).value()};
    step = 0;
  } else if (IsA(e, CallView::Key())) {
    for (const ObjectRef& arg : CallView(e).args()) operands.push_back(arg);
  } else {
    return -1;  // variables, constants, lets (the caller takes the whole depth), ramps
  }
  int64_t deepest = -1;
  for (const ObjectRef& operand : operands) deepest = std::max(deepest, PathDepth(operand, buffer, indices));
  return deepest < 0 ? -1 : deepest + step;
}

// Structural equality of index expressions: variables by identity; anything unfamiliar is unequal (the caller
// then takes the loop as dependent).
bool SameIndex(const ObjectRef& a, const ObjectRef& b) {
  if (a.get() == b.get()) return true;
  if (a->type_index() != b->type_index()) return false;
  if (IsA(a, IntImmView::Key())) return IntImmView(a).value() == IntImmView(b).value();
  if (IsBinaryOperator(a)) return SameIndex(OperandA(a), OperandA(b)) && SameIndex(OperandB(a), OperandB(b));
  if (IsA(a, CastView::Key()))
    return DTypeOf(a) == DTypeOf(b) && SameIndex(CastView(a).value(), CastView(b).value());
  if (IsA(a, RampView::Key())) {
    RampView ra(a), rb(b);
    return SameIndex(ra.base(), rb.base()) && SameIndex(ra.stride(), rb.stride()) &&
           SameIndex(ra.lanes(), rb.lanes());
  }
  if (IsA(a, BroadcastView::Key()))
    return SameIndex(BroadcastView(a).value(), BroadcastView(b).value()) &&
           SameIndex(BroadcastView(a).lanes(), BroadcastView(b).lanes());
  return false;
}

bool SameIndices(const Array<ObjectRef>& a, const Array<ObjectRef>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!SameIndex(a[i], b[i])) return false;
  return true;
}

// Whether `var` occurs in `e` other than under a folding operator, a select or a call (so `e` moves with it).
bool MovesWith(const ObjectRef& e, const ObjectRef& var) {
  if (e.get() == var.get()) return true;
  if (IsFolding(e) || IsA(e, SelectView::Key()) || IsA(e, CallView::Key()) || IsA(e, LetView::Key())) return false;
  if (IsBinaryOperator(e)) return MovesWith(OperandA(e), var) || MovesWith(OperandB(e), var);
  if (IsA(e, CastView::Key())) return MovesWith(CastView(e).value(), var);
  if (IsA(e, RampView::Key())) return MovesWith(RampView(e).base(), var);
  if (IsA(e, BroadcastView::Key())) return MovesWith(BroadcastView(e).value(), var);
  return false;
}

// What a loop body stores and loads, and whether anything in it rules independence out.
struct BodyAccesses {
  std::unordered_map<const ffi::Object*, std::vector<Array<ObjectRef>>> stores, loads;  // by buffer Var
  bool opaque = false;

  void Expr(const ObjectRef& e) {
    if (opaque || !e.defined()) return;
    if (IsA(e, TensorLoadView::Key())) {
      TensorLoadView load(e);
      loads[load.source().get()].push_back(load.indices());
      for (const ObjectRef& index : load.indices()) Expr(index);
      return;
    }
    if (IsA(e, CallView::Key())) {
      for (const ObjectRef& arg : CallView(e).args()) Expr(arg);
      return;
    }
    if (IsBinaryOperator(e)) {
      Expr(OperandA(e));
      Expr(OperandB(e));
    } else if (IsA(e, NotKey()) || IsA(e, BitwiseNotKey())) {
      Expr(OperandA(e));
    } else if (IsA(e, CastView::Key())) {
      Expr(CastView(e).value());
    } else if (IsA(e, SelectView::Key())) {
      SelectView s(e);
      Expr(s.condition());
      Expr(s.true_value());
      Expr(s.false_value());
    } else if (IsA(e, LetView::Key())) {
      Expr(LetView(e).value());
      Expr(LetView(e).body());
    } else if (IsA(e, BroadcastView::Key())) {
      Expr(BroadcastView(e).value());
    } else if (IsA(e, RampView::Key())) {
      Expr(RampView(e).base());
    } else if (IsA(e, ShuffleView::Key())) {
      for (const ObjectRef& v : ShuffleView(e).vectors()) Expr(v);
    }
  }

  void Stmt(const ObjectRef& s) {
    static const TypeKey break_key("tirx.Break"), continue_key("tirx.Continue");
    if (opaque) return;
    if (IsA(s, SeqStmtView::Key())) {
      for (const ObjectRef& item : SeqStmtView(s).seq()) Stmt(item);
    } else if (IsA(s, BufferStoreView::Key())) {
      BufferStoreView store(s);
      stores[store.buffer().get()].push_back(store.indices());
      for (const ObjectRef& index : store.indices()) Expr(index);
      Expr(store.value());
    } else if (IsA(s, BindView::Key())) {
      Expr(BindView(s).value());
    } else if (IsA(s, IfThenElseView::Key())) {
      IfThenElseView branch(s);
      Expr(branch.condition());
      Stmt(branch.then_case());
      if (branch.else_case().has_value()) Stmt(*branch.else_case());
    } else if (IsA(s, ForView::Key())) {
      ForView loop(s);
      Expr(loop.min());
      Expr(loop.extent());
      Stmt(loop.body());
    } else if (IsA(s, AttrStmtView::Key())) {
      Stmt(AttrStmtView(s).body());
    } else if (IsA(s, AllocBufferView::Key())) {
      // a per-iteration local array: its stores are checked as any other buffer's
    } else {
      // calls (barriers, shuffles, templates, atomics), while loops, buffer views, break/continue
      opaque = true;
    }
  }
};

}  // namespace

int64_t ArithmeticDepth(const ObjectRef& expr) {
  if (!HasPrimType(expr)) return 0;
  return Depth(expr);
}

LoopDependence AnalyzeLoop(const ForView& loop) {
  LoopDependence result;
  auto extent = AsConstInt(loop.extent());
  auto step = loop.step() ? AsConstInt(*loop.step()) : std::optional<int64_t>(1);
  if (extent && step && *step > 0) result.trips = (*extent + *step - 1) / *step;
  BodyAccesses body;
  body.Stmt(loop.body());
  result.opaque = body.opaque;
  if (body.opaque) return result;
  const ObjectRef var = loop.loop_var();
  for (const auto& [buffer, stored] : body.stores) {
    const Array<ObjectRef>& indices = stored.front();
    bool own = false;
    for (const ObjectRef& index : indices) own = own || MovesWith(index, var);
    for (const Array<ObjectRef>& other : stored) own = own && SameIndices(indices, other);
    auto loaded = body.loads.find(buffer);
    if (loaded != body.loads.end())
      for (const Array<ObjectRef>& other : loaded->second) own = own && SameIndices(indices, other);
    if (!own) result.carried.insert(buffer);
  }
  return result;
}

StatementChain ChainOf(const ObjectRef& value, const ObjectRef& buffer, const Array<ObjectRef>* indices,
                       const std::vector<LoopDependence>& loops) {
  StatementChain chain;
  if (!HasPrimType(value)) return chain;
  chain.depth = Depth(value);
  BodyAccesses reads;  // the buffers the statement reads: its value's and its indices' loads
  reads.Expr(value);
  if (indices != nullptr)
    for (const ObjectRef& index : *indices) reads.Expr(index);
  bool accumulates = false;
  for (const LoopDependence& loop : loops) {
    const bool stores_carried = buffer.defined() && loop.carried.count(buffer.get()) != 0;
    bool beside = !loop.opaque && loop.trips > 1 && !stores_carried;
    for (const auto& read : reads.loads) beside = beside && loop.carried.count(read.first) == 0;
    if (beside) chain.iterations *= loop.trips;
    accumulates = accumulates || (!loop.opaque && stores_carried);
  }
  if (accumulates && indices != nullptr) {
    const int64_t through = PathDepth(value, buffer, *indices);
    if (through >= 0) chain.depth = through;
  }
  return chain;
}

}  // namespace codegen
}  // namespace tilelang_musa
