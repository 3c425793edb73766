/*!
 * \file print_expr.cc
 * \brief Expression handlers of the MUSA printer, and buffer access (scalar, contiguous vector, gather).
 *
 * Every compound expression prints fully parenthesised (`(a + b)`), so an operand never needs precedence
 * analysis; `PrintBare` drops the outermost pair where the context delimits the expression anyway.
 * Vector values are `tl::vec<T, N>` (common.h), whose operators work lane by lane.
 */
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/codegen_musa.h"
#include "codegen/musa_types.h"

namespace tilelang_musa {
namespace codegen {

// True when `s` is one parenthesised group: its first '(' closes at the last character.
bool IsWrapped(const std::string& s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return false;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '(') ++depth;
    else if (c == ')' && --depth == 0) return i == s.size() - 1;
  }
  return false;
}

// A wrapped lambda keeps its parentheses: bare inside a subscript it would print `A[[&]...]`, whose `[[` C++ reads
// as an attribute (clang and mcc reject it; g++ accepts it).
std::string StripParentheses(const std::string& s) {
  return IsWrapped(s) && s[1] != '[' ? s.substr(1, s.size() - 2) : s;
}

namespace {

// C operator of each `prim.*` node that prints as one.
const std::unordered_map<int32_t, const char*>& BinaryOperatorTokens() {
  static const std::unordered_map<int32_t, const char*> table = [] {
    std::unordered_map<int32_t, const char*> t;
    const std::pair<const char*, const char*> ops[] = {
        {"prim.Add", "+"},        {"prim.Sub", "-"},       {"prim.Mul", "*"},        {"prim.Div", "/"},
        {"prim.Mod", "%"},        {"prim.LShift", "<<"},   {"prim.RShift", ">>"},    {"prim.BitwiseAnd", "&"},
        {"prim.BitwiseOr", "|"},  {"prim.BitwiseXor", "^"}, {"prim.EQ", "=="},       {"prim.NE", "!="},
        {"prim.LT", "<"},         {"prim.LE", "<="},       {"prim.GT", ">"},         {"prim.GE", ">="},
        {"prim.And", "&&"},       {"prim.Or", "||"}};
    for (const auto& [key, token] : ops) t.emplace(LookupTypeIndex(key), token);
    return t;
  }();
  return table;
}

// Template-library function of each `prim.*` node that prints as a call: exact for negative operands (floordiv)
// and usable for half types (min/max).
const std::unordered_map<int32_t, const char*>& BinaryHelperNames() {
  static const std::unordered_map<int32_t, const char*> table = [] {
    std::unordered_map<int32_t, const char*> t;
    const std::pair<const char*, const char*> ops[] = {{"prim.Min", "tl::min"},
                                                       {"prim.Max", "tl::max"},
                                                       {"prim.FloorDiv", "tl::floordiv"},
                                                       {"prim.FloorMod", "tl::floormod"}};
    for (const auto& [key, name] : ops) t.emplace(LookupTypeIndex(key), name);
    return t;
  }();
  return table;
}

}  // namespace

const std::unordered_map<int32_t, MusaPrinter::ExprHandler>& MusaPrinter::ExprTable() {
  static const std::unordered_map<int32_t, ExprHandler> table = [] {
    std::unordered_map<int32_t, ExprHandler> t;
    const std::pair<const char*, ExprHandler> handlers[] = {
        {"ir.Var", &MusaPrinter::VisitVar},
        {"ir.IntImm", &MusaPrinter::VisitIntImm},
        {"ir.FloatImm", &MusaPrinter::VisitFloatImm},
        {"ir.StringImm", &MusaPrinter::VisitStringImm},
        {"ir.TensorLoad", &MusaPrinter::VisitTensorLoad},
        {"ir.Call", &MusaPrinter::VisitCall},
        {"prim.Ramp", &MusaPrinter::VisitRamp},
        {"prim.Broadcast", &MusaPrinter::VisitBroadcast},
        {"prim.Shuffle", &MusaPrinter::VisitShuffle},
        {"prim.Cast", &MusaPrinter::VisitCast},
        {"prim.Select", &MusaPrinter::VisitSelect},
        {"prim.Let", &MusaPrinter::VisitLet},
        {"prim.Not", &MusaPrinter::VisitNot},
        {"prim.BitwiseNot", &MusaPrinter::VisitBitwiseNot},
    };
    for (const auto& [key, handler] : handlers) t.emplace(LookupTypeIndex(key), handler);
    for (const auto& kv : BinaryOperatorTokens()) t.emplace(kv.first, &MusaPrinter::VisitBinaryOperator);
    for (const auto& kv : BinaryHelperNames()) t.emplace(kv.first, &MusaPrinter::VisitBinaryHelper);
    return t;
  }();
  return table;
}

std::string MusaPrinter::PrintExpr(const ObjectRef& expr) {
  if (!expr.defined()) Fail("an expression is missing (None) where a value is required");
  const auto& table = ExprTable();
  auto it = table.find(expr->type_index());
  if (it == table.end()) {
    Fail("expression `" + TypeKeyOf(expr) + "` has no MUSA C printer (it should have been lowered before codegen)");
  }
  return (this->*(it->second))(expr);
}

std::string MusaPrinter::PrintBare(const ObjectRef& expr) {
  return StripParentheses(PrintExpr(expr));
}

// ---- leaves -------------------------------------------------------------------------------------

std::string MusaPrinter::VisitVar(const ObjectRef& op) {
  auto it = var_names_.find(op.get());
  if (it != var_names_.end()) return it->second;
  if (buffers_.count(op.get())) return HandOut(LookupBuffer(op));  // a buffer used as its data pointer
  Fail("variable `" + DisplayName(op) +
       "` is used but not defined in the kernel (not a parameter, loop variable, Bind or thread index)");
}

std::string MusaPrinter::VisitIntImm(const ObjectRef& op) { return IntLiteral(DTypeOf(op), IntImmView(op).value()); }

std::string MusaPrinter::VisitFloatImm(const ObjectRef& op) {
  return FloatLiteral(DTypeOf(op), FloatImmView(op).value());
}

std::string MusaPrinter::VisitStringImm(const ObjectRef& op) {
  return StringLiteral(std::string(StringImmView(op).value()));
}

// ---- buffers ------------------------------------------------------------------------------------

const BufferInfo& MusaPrinter::LookupBuffer(const ObjectRef& buffer_var) const {
  auto it = buffers_.find(buffer_var.get());
  if (it == buffers_.end()) {
    static const TypeKey var_key("ir.Var");
    std::string name = IsA(buffer_var, var_key) ? DisplayName(buffer_var) : TypeKeyOf(buffer_var);
    Fail("buffer `" + name + "` is accessed but never declared (no parameter, AllocBuffer or DeclBuffer defines it)");
  }
  return it->second;
}

void MusaPrinter::DefineBuffer(const ObjectRef& buffer_var, const std::string& data, bool is_volatile) {
  BufferTypeView type(VarView(buffer_var).ty());
  BufferInfo info;
  info.data = data;
  info.name = DisplayName(buffer_var);
  info.elem = type.dtype();
  info.shape = type.shape();
  info.strides = type.strides();
  info.elem_offset = type.elem_offset();
  info.is_volatile = is_volatile;
  info.scope = std::string(type.storage_scope());
  if (options_.sim_checks) SetCheckBounds(&info);
  buffers_[buffer_var.get()] = std::move(info);
}

namespace {

bool IsCheckedScope(const std::string& scope) {
  return scope.empty() || scope == "global" || scope == "shared" || scope == "shared.dyn";
}

// Element types whose all-ones bytes (the simulator's poison) are a NaN, which arithmetic never makes from a value:
// a fragment or local load of one is checked for poison in checked mode (uninit_reads.h). Not the FNUZ float8s
// (0xFF is a finite value there), nor integers (-1).
bool PoisonIsNaN(const DataType& t) {
  if (t.is_bfloat16()) return true;
  if (t.is_float()) return t.bits() >= 16;
  return t.code() == DataType::kFloat8E4M3FN || t.code() == DataType::kFloat8E5M2 ||
         t.code() == DataType::kFloat8E8M0FNU;
}

// Element types whose poison bytes are an ordinary value, so that a fragment or local of one gets a defined byte per
// element in checked mode (uninit_reads.h): integers (-1, or the unsigned maximum), the FNUZ float8s (0xFF is
// -240 in e4m3fnuz, -57344 in e5m2fnuz; their only NaN is 0x80) and bool (the byte 0xFF, neither false nor true:
// g++ reads it as true in a condition and as 255 in arithmetic).
// The report's name for a fragment/local array's storage, as a C string literal.
std::string LocalSpace(const BufferInfo& info) {
  return StringLiteral(info.scope == "local.fragment" ? "fragment" : "fragment/local");
}

// The element count of a buffer of constant shape.
std::optional<int64_t> ConstElements(const BufferInfo& info) {
  int64_t n = 1;
  for (const ObjectRef& dim : info.shape) {
    std::optional<int64_t> extent = AsConstInt(dim);
    if (!extent) return std::nullopt;
    n *= *extent;
  }
  return n;
}

bool PoisonIsAValue(const DataType& t) {
  if (t.is_bool()) return true;
  if (t.is_int() || t.is_uint()) return t.bits() >= 8;
  return t.bits() == 8 && (t.code() == DataType::kFloat8E4M3FNUZ || t.code() == DataType::kFloat8E5M2FNUZ);
}

}  // namespace

// Valid offsets: [elem_offset, elem_offset + span), span = prod(shape) when compact, else 1 + sum((n_k - 1) * s_k).
// An extent naming a variable that is not in scope (or any expression the printer rejects) leaves hi unknown.
void MusaPrinter::SetCheckBounds(BufferInfo* info) {
  if (!IsCheckedScope(info->scope)) return;
  try {
    std::string lo = "0";
    if (info->elem_offset.defined() && AsConstInt(info->elem_offset).value_or(-1) != 0) {
      lo = PrintExpr(info->elem_offset);
    }
    std::string span;
    if (info->strides.empty()) {
      std::optional<int64_t> folded = 1;
      std::vector<std::string> symbolic;
      for (const ObjectRef& dim : info->shape) {
        if (auto c = AsConstInt(dim)) {
          folded = *folded * *c;
        } else {
          symbolic.push_back(PrintExpr(dim));
        }
      }
      span = std::to_string(*folded);
      for (const std::string& dim : symbolic) span += " * (int64_t)" + dim;
    } else {
      if (info->strides.size() != info->shape.size()) return;
      span = "1";
      for (size_t k = 0; k < info->shape.size(); ++k) {
        span += " + ((int64_t)" + PrintExpr(info->shape[k]) + " - 1) * (int64_t)" + PrintExpr(info->strides[k]);
      }
    }
    info->check_lo = lo;
    info->check_hi = lo == "0" ? "(" + span + ")" : "(" + lo + " + " + span + ")";
  } catch (const ffi::Error&) {
    info->check_lo.clear();
    info->check_hi.clear();
  }
}

std::string MusaPrinter::CheckedIndex(const BufferInfo& info, const std::string& index, int lanes,
                                      const std::string& what, std::vector<CarriedDefined>* carried,
                                      const std::string& guard) {
  if (options_.sim_checks && !info.defined.empty()) {  // an integer fragment/local (uninit_reads.h)
    const std::string bare = StripParentheses(index);
    if (what == "address_of") return "tl_sim::HandedOut(" + info.defined + ", " + bare + ")";
    if (what != "load" || unchecked_) return index;
    if (carried != nullptr) {  // the value only flows into another integer fragment/local element
      if (lanes == 1) {
        carried->push_back({info.defined + "[" + bare + "]", "", 1});
      } else {
        carried->push_back({"tl_sim::AllDefined(" + info.defined + " + (" + bare + "), " + std::to_string(lanes) +
                                ")",
                            info.defined + "[(" + bare + ") + tl_sim_lane]", lanes});
      }
      return index;
    }
    if (!guard.empty()) {  // in a branch of a lane-wise select: checked in the lanes that take it
      return "tl_sim::UseLocalWhere(" + info.defined + ", " + bare + ", " + std::to_string(lanes) + ", " + guard +
             ", " + LocalSpace(info) + ", " + StringLiteral(info.name) + ", __LINE__)";
    }
    return "tl_sim::UseLocal(" + info.defined + ", " + bare + ", " + std::to_string(lanes) + ", " +
           LocalSpace(info) + ", " + StringLiteral(info.name) + ", __LINE__)";
  }
  if (options_.sim_checks && !unchecked_ && what == "address_of" && ChecksLocalReads(info)) {
    // handed to a template (a GEMM's accumulator or register operand): named if it reads poison from the array
    const std::optional<int64_t> elements = ConstElements(info);
    if (elements) {
      return "tl_sim::HandOutLocal(" + info.data + ", " + std::to_string(*elements) + ", " + StripParentheses(index) +
             ", " + LocalSpace(info) + ", " + StringLiteral(info.name) + ", __LINE__)";
    }
  }
  if (options_.sim_checks && !unchecked_ && what == "load" && ChecksLocalReads(info)) {
    return "tl_sim::CheckLocalRead(" + info.data + ", " + StripParentheses(index) + ", " + std::to_string(lanes) +
           ", " + LocalSpace(info) + ", " + StringLiteral(info.name) + ", __LINE__)";
  }
  if (!options_.sim_checks || unchecked_ || !IsCheckedScope(info.scope) || info.check_hi.empty()) return index;
  const char* space = info.scope.rfind("shared", 0) == 0 ? "Shared" : "Global";
  const char* kind = what == "load" ? "kLoad" : what == "store" ? "kStore" : "kAddress";
  return std::string("tl_sim::Check") + space + "<tl_sim::" + kind + ">(" + info.data + ", " + StripParentheses(index) +
         ", " + std::to_string(lanes) + ", " + info.check_lo + ", " + info.check_hi + ", " +
         StringLiteral(info.name) + ", __LINE__)";
}

std::string MusaPrinter::NibbleIndex(const BufferInfo& info, const std::string& index, const std::string& odd,
                                     const std::string& what) const {
  if (!options_.sim_checks || unchecked_ || !IsCheckedScope(info.scope) || info.check_hi.empty()) return index;
  const char* space = info.scope.rfind("shared", 0) == 0 ? "Shared" : "Global";
  // kAddress: the address fp4's atomic nibble store writes through; kStore: an int4 nibble's read-modify-write
  const char* kind = what == "load" ? "kLoad" : what == "store" ? "kStore" : "kAddress";
  return std::string("tl_sim::Check") + space + "Nibble<tl_sim::" + kind + ">(" + info.data + ", " +
         StripParentheses(index) + ", " + StripParentheses(odd) + ", " + info.check_lo + ", " + info.check_hi + ", " +
         StringLiteral(info.name) + ", __LINE__)";
}

bool MusaPrinter::ChecksLocalReads(const BufferInfo& info) const {
  return options_.sim_checks && (info.scope == "local" || info.scope == "local.fragment") && info.scalar.empty() &&
         !info.is_volatile && PoisonIsNaN(info.elem);
}

std::string AllOf(const std::vector<std::string>& conditions) {
  if (conditions.empty()) return "1";
  std::string all;
  for (const std::string& c : conditions) all += (all.empty() ? "" : " && ") + c;
  return conditions.size() == 1 ? all : "(" + all + ")";
}

std::string AllOf(const std::vector<CarriedDefined>& carried) {
  std::vector<std::string> all;
  for (const CarriedDefined& c : carried) all.push_back(c.all);
  return AllOf(all);
}

std::string AllOfLane(const std::vector<CarriedDefined>& carried, int lanes) {
  std::vector<std::string> conditions;
  for (const CarriedDefined& c : carried) conditions.push_back(c.lanes == lanes && !c.lane.empty() ? c.lane : c.all);
  return AllOf(conditions);
}

bool HasLaneConditions(const std::vector<CarriedDefined>& carried, int lanes) {
  return std::any_of(carried.begin(), carried.end(),
                     [lanes](const CarriedDefined& c) { return c.lanes == lanes && !c.lane.empty(); });
}

std::string MusaPrinter::PrintBufferPointer(const ObjectRef& buffer) { return HandOut(LookupBuffer(buffer)); }

std::string MusaPrinter::HandOut(const BufferInfo& info) const {
  if (info.defined.empty()) return info.data;
  // a comma expression: still the array lvalue (a template deducing the array's extent sees the same type)
  return "(tl_sim::DefineAll(" + info.defined + "), " + info.data + ")";
}

bool MusaPrinter::TracksDefined(const std::string& scope, DataType elem, bool is_volatile) const {
  return options_.sim_checks && (scope == "local" || scope == "local.fragment") && !is_volatile &&
         elem.lanes() == 1 && PoisonIsAValue(elem);
}

std::vector<std::string> MusaPrinter::ElementStrides(const BufferInfo& info, size_t rank) {
  std::vector<std::string> strides(rank, "1");
  if (rank == 1) return strides;  // a flat index is already an element offset
  if (!info.strides.empty()) {
    if (info.strides.size() != rank) return {};
    for (size_t k = 0; k < rank; ++k) {
      strides[k] = AsConstInt(info.strides[k]).value_or(0) == 1 ? "1" : PrintExpr(info.strides[k]);
    }
    return strides;
  }
  if (info.shape.size() != rank) return {};
  // Compact row-major: stride[k] = shape[k+1] * ... * shape[rank-1], folded while the extents are constants.
  std::optional<int64_t> folded = 1;
  std::string running = "1";
  for (size_t k = rank; k-- > 0;) {
    strides[k] = running;
    auto dim = AsConstInt(info.shape[k]);
    if (folded && dim) {
      folded = *folded * *dim;
      running = std::to_string(*folded);
    } else {
      folded = std::nullopt;
      running = running == "1" ? PrintExpr(info.shape[k]) : "(" + running + " * " + PrintExpr(info.shape[k]) + ")";
    }
  }
  return strides;
}

AccessText MusaPrinter::PrintAccess(const ObjectRef& buffer_var, const Array<ObjectRef>& indices,
                                    DataType value_type, const std::string& what) {
  const BufferInfo& info = LookupBuffer(buffer_var);
  auto fail = [&](const std::string& msg) { Fail(what + " of buffer `" + info.name + "`: " + msg); };
  // The indices are uses of any integer fragment/local they load (checked), not values carried into a store.
  struct CarriedScope {
    std::vector<CarriedDefined>*& slot;
    std::vector<CarriedDefined>* saved;
    ~CarriedScope() { slot = saved; }
  } carried_scope{carried_defined_, carried_defined_};
  std::vector<CarriedDefined>* const carried = carried_defined_;
  carried_defined_ = nullptr;
  // Both branches of a lane-wise select compute their addresses in every lane: the indices are checked in all.
  struct GuardScope {
    std::string& slot;
    std::string saved;
    ~GuardScope() { slot = saved; }
  } guard_scope{lane_guard_, std::exchange(lane_guard_, std::string())};
  const std::string& guard = guard_scope.saved;
  const std::string nibble_odd = std::exchange(nibble_odd_, std::string());  // this access's, not its indices'
  const bool nibble_store = std::exchange(nibble_store_, false);
  const size_t rank = indices.size();
  if (rank == 0) fail("has no indices");
  std::vector<std::string> strides = ElementStrides(info, rank);
  if (strides.empty()) fail("uses " + std::to_string(rank) + " indices but the buffer's shape/strides differ in rank");

  ObjectRef last = indices[rank - 1];
  const int index_lanes = DTypeOf(last).lanes();
  if (!info.scalar.empty() && value_type == info.elem &&
      std::all_of(indices.begin(), indices.end(), [](const ObjectRef& i) { return AsConstInt(i).value_or(-1) == 0; })) {
    return {AccessForm::kScalar, info.scalar, "", ""};
  }
  if (value_type.lanes() != info.elem.lanes() * index_lanes) {
    fail("accesses " + value_type.str() + " through " + std::to_string(index_lanes) + " index lane(s) of " +
         info.elem.str() + " elements");
  }
  // The scalar terms of the element offset, each an operand-safe string.
  std::vector<std::string> terms;
  if (info.elem_offset.defined() && AsConstInt(info.elem_offset).value_or(-1) != 0) {
    terms.push_back(PrintExpr(info.elem_offset));
  }
  auto scaled = [&](const ObjectRef& index, size_t k) {
    return strides[k] == "1" ? PrintExpr(index) : "(" + PrintExpr(index) + " * " + strides[k] + ")";
  };
  for (size_t k = 0; k + 1 < rank; ++k) {
    if (DTypeOf(indices[k]).is_vector()) fail("a vector index is only supported in the last dimension");
    terms.push_back(scaled(indices[k], k));
  }
  auto joined = [&terms]() {
    std::string s;
    for (const std::string& t : terms) s += (s.empty() ? "" : " + ") + t;
    return s;
  };

  static const TypeKey ramp_key("prim.Ramp");
  const bool unit_ramp = IsA(last, ramp_key) && AsConstInt(RampView(last).stride()).value_or(0) == 1;
  const bool checked = options_.sim_checks && !info.check_hi.empty() && IsCheckedScope(info.scope);
  // A checked store: tl_sim::CheckedStore<shared, stored unit>(data, offset, value, lanes, lo, hi, name, line).
  auto checked_store = [&](AccessText access, const std::string& unit, const std::string& offset, int lanes) {
    if (!checked || what != "store") return access;
    const bool shared = info.scope.rfind("shared", 0) == 0;
    access.store_open = std::string("tl_sim::CheckedStore<") + (shared ? "true" : "false") + ", " + unit + ">(" +
                        info.data + ", " + StripParentheses(offset) + ", ";
    access.store_close = ", " + std::to_string(lanes) + ", " + info.check_lo + ", " + info.check_hi + ", " +
                         StringLiteral(info.name) + ", __LINE__)";
    return access;
  };
  if (index_lanes == 1) {
    terms.push_back(scaled(last, rank - 1));
    std::string index = joined();
    if (terms.size() == 1) index = StripParentheses(index);
    const std::string checked_index = nibble_odd.empty() || !checked
                                          ? CheckedIndex(info, index, 1, what, carried, guard)
                                          : NibbleIndex(info, index, nibble_odd, nibble_store ? "store" : what);
    AccessText access{AccessForm::kScalar, info.data + "[" + checked_index + "]", "", ""};
    access.defined_offset = index;
    access.defined_lanes = 1;
    return checked_store(access, ValueTypeName(info.elem), index, 1);
  }
  if (info.is_volatile) fail("vector access to a volatile buffer is not supported");
  if (unit_ramp && strides[rank - 1] == "1") {
    ObjectRef base = RampView(last).base();
    if (AsConstInt(base).value_or(-1) != 0) terms.push_back(PrintExpr(base));
    std::string ptr = info.data;
    const std::string offset = terms.empty() ? "0" : joined();
    if (checked || (what == "load" && ChecksLocalReads(info)) || (!info.defined.empty() && what != "store")) {
      ptr += " + " + CheckedIndex(info, offset, index_lanes, what, carried, guard);
    } else if (terms.size() == 1) {
      ptr += " + " + terms[0];
    } else if (terms.size() > 1) {
      ptr += " + (" + offset + ")";
    }
    // Loads and stores view memory through MUSA's built-in vector type where there is one; an address taken is
    // handed to templates that deduce tl::vec, so it keeps that spelling.
    const std::string unit = what == "address_of" ? ValueTypeName(value_type) : CTypeName(value_type);
    AccessText access{AccessForm::kContiguous, "(*reinterpret_cast<" + unit + "*>(" + ptr + "))", "", ""};
    access.defined_offset = offset;
    access.defined_lanes = index_lanes;
    return checked_store(access, unit, offset, index_lanes);
  }
  if (rank != 1) fail("a strided or gathered vector index needs a flat buffer; run FlattenBuffer");
  if (info.elem.is_vector()) fail("cannot gather elements that are themselves vectors");
  std::string ptr = terms.empty() ? info.data : info.data + " + " + terms[0];  // terms: at most the elem_offset
  std::string index = PrintBare(last);
  if (checked) {
    // every lane's offset from the data pointer: the element offset (if any) plus the lane's index
    index = CheckedIndex(info, terms.empty() ? index : "(" + index + " + " + terms[0] + ")", 1, what);
    if (!terms.empty()) index = "(" + index + " - " + terms[0] + ")";
  } else if (options_.sim_checks && !unchecked_ && what == "load" && !info.defined.empty()) {
    // a gathered load of an integer fragment/local: carried when every lane's element is defined, else a use of
    // each lane's element (in a lane-wise select's branch, of the lanes that take it)
    const std::string defined = terms.empty() ? info.defined : "(" + info.defined + " + " + terms[0] + ")";
    if (carried != nullptr) {
      carried->push_back({"tl_sim::AllDefinedAt(" + defined + ", " + index + ")",
                          defined + "[(" + index + ").data[tl_sim_lane]]", index_lanes});
    } else {
      index = "tl_sim::UseGathered(" + defined + ", " + index + (guard.empty() ? "" : ", " + guard) + ", " +
              LocalSpace(info) + ", " + StringLiteral(info.name) + ", __LINE__)";
    }
  } else if (options_.sim_checks && !unchecked_ && what == "load" && ChecksLocalReads(info)) {
    index = "tl_sim::CheckGatheredRead(" + ptr + ", " + index + ", " + LocalSpace(info) + ", " +
            StringLiteral(info.name) + ", __LINE__)";
  }
  // A scattered store to an integer fragment/local counts the whole array defined (defined_lanes 0).
  return {AccessForm::kGather, "tl::gather(" + ptr + ", " + index + ")", ptr, index};
}

std::string MusaPrinter::VisitTensorLoad(const ObjectRef& op) {
  TensorLoadView load(op);
  AccessText access = PrintAccess(load.source(), load.indices(), DTypeOf(op), "load");
  // A built-in vector type has no operators: its value enters lane-wise arithmetic as the tl::vec of its lanes.
  if (access.form == AccessForm::kContiguous && !BuiltinVectorName(DTypeOf(op)).empty()) {
    return "tl::vec_of" + access.text;
  }
  return access.text;
}

std::string MusaPrinter::UnwrapBuiltinVectorLoad(const ObjectRef& value, const std::string& text) {
  static const TypeKey load_key("ir.TensorLoad"), var_key("ir.Var");
  static const std::string wrapper = "tl::vec_of";
  if (!(IsA(value, load_key) || IsA(value, var_key)) || text.rfind(wrapper + "(", 0) != 0) return text;
  return StripParentheses(text.substr(wrapper.size()));
}

std::string MusaPrinter::PrintLoadLValue(const ObjectRef& load_expr) {
  TensorLoadView load(load_expr);
  AccessText access = PrintAccess(load.source(), load.indices(), DTypeOf(load_expr), "address_of");
  if (access.form == AccessForm::kGather) Fail("cannot take the address of a gathered vector load");
  return access.text;
}

std::string MusaPrinter::PrintNibbleAccess(const ObjectRef& load_expr, const ObjectRef& odd, bool address,
                                           bool store) {
  static const TypeKey tensor_load("ir.TensorLoad");
  if (!IsA(load_expr, tensor_load) || DTypeOf(load_expr).lanes() != 1) {  // not a plain byte: no nibble to track
    return address ? "&" + PrintLoadLValue(load_expr) : PrintBare(load_expr);
  }
  const std::string odd_text = PrintBare(odd);  // before: its own loads print as ordinary ones
  nibble_odd_ = odd_text;
  nibble_store_ = store;
  const std::string text = address ? "&" + PrintLoadLValue(load_expr) : PrintBare(load_expr);  // a call's argument
  nibble_odd_.clear();
  nibble_store_ = false;
  return text;
}

std::string MusaPrinter::PrintLoadLValueUnchecked(const ObjectRef& load_expr) {
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{unchecked_};
  unchecked_ = true;
  return PrintLoadLValue(load_expr);
}

// ---- vectors ------------------------------------------------------------------------------------

std::string MusaPrinter::VisitRamp(const ObjectRef& op) {
  RampView ramp(op);
  DataType t = DTypeOf(op);
  return "tl::ramp<" + CTypeName(t.element()) + ", " + std::to_string(t.lanes()) + ">(" + PrintBare(ramp.base()) +
         ", " + PrintBare(ramp.stride()) + ")";
}

std::string MusaPrinter::VisitBroadcast(const ObjectRef& op) {
  DataType t = DTypeOf(op);
  return "tl::broadcast<" + CTypeName(t.element()) + ", " + std::to_string(t.lanes()) + ">(" +
         PrintBare(BroadcastView(op).value()) + ")";
}

// Lanes are picked from the concatenation of `vectors`; the result is a scalar or a tl::make_vec of the picks.
std::string MusaPrinter::VisitShuffle(const ObjectRef& op) {
  ShuffleView shuffle(op);
  // A store's carried defined-ness: a shuffle moves lanes, so what it picks from carries for every lane.
  std::vector<CarriedDefined>* const carried = carried_defined_;
  std::vector<CarriedDefined> picked;
  struct Collapse {
    std::vector<CarriedDefined>*& slot;
    std::vector<CarriedDefined>* carried;
    std::vector<CarriedDefined>& picked;
    ~Collapse() {
      slot = carried;
      if (carried != nullptr)
        for (const CarriedDefined& c : picked) carried->push_back({c.all, "", 1});
    }
  } collapse{carried_defined_, carried, picked};
  if (carried != nullptr) carried_defined_ = &picked;
  std::vector<std::pair<std::string, int>> sources;  // printed vector (or scalar) and its lane count
  for (const ObjectRef& v : shuffle.vectors()) sources.emplace_back(PrintExpr(v), DTypeOf(v).lanes());
  std::vector<std::string> picks;
  for (const ObjectRef& index : shuffle.indices()) {
    auto lane = AsConstInt(index);
    if (!lane) Fail("prim.Shuffle needs constant lane indices");
    int64_t rest = *lane;
    size_t j = 0;
    while (j < sources.size() && rest >= sources[j].second) rest -= sources[j++].second;
    if (j == sources.size() || rest < 0) Fail("prim.Shuffle lane " + std::to_string(*lane) + " is out of range");
    picks.push_back(sources[j].second == 1 ? sources[j].first : sources[j].first + "[" + std::to_string(rest) + "]");
  }
  DataType t = DTypeOf(op);
  if (t.is_scalar()) return picks.at(0);
  std::string text = "tl::make_vec<" + CTypeName(t.element()) + ">(";
  for (size_t i = 0; i < picks.size(); ++i) text += (i ? ", " : "") + picks[i];
  return text + ")";
}

// ---- conversions and operators ------------------------------------------------------------------

std::string MusaPrinter::VisitCast(const ObjectRef& op) {
  ObjectRef value = CastView(op).value();
  DataType to = DTypeOf(op), from = DTypeOf(value);
  if (to == from) return PrintExpr(value);
  if (to.lanes() != from.lanes()) Fail("prim.Cast from " + from.str() + " to " + to.str() + " changes the lane count");
  if (to.is_vector()) return "tl::vec_cast<" + CTypeName(to.element()) + ">(" + PrintBare(value) + ")";
  // half_t/bfloat16_t convert through float (no direct half<->bfloat16 or int64<->half constructors).
  if (to.is_half_like() || from.is_half_like()) return "tl::cast<" + CTypeName(to) + ">(" + PrintBare(value) + ")";
  return "((" + CTypeName(to) + ")" + PrintExpr(value) + ")";
}

std::string MusaPrinter::VisitSelect(const ObjectRef& op) {
  SelectView select(op);
  if (DTypeOf(select.condition()).is_vector()) return PrintLaneSelect(select);
  return PrintConditional(select.condition(), select.true_value(), select.false_value());
}

// Lane-wise `tl::select`: both branches are evaluated in every lane. sim_checks: the condition is a use; in a store's
// carried defined-ness, every lane's chosen branch must be defined (the lanes collapse, as a vector load's do);
// where the value is used, a branch's tracked loads are checked in the lanes that take it (lane_guard_), the
// condition bound once as a lambda's parameter.
std::string MusaPrinter::PrintLaneSelect(const SelectView& select) {
  if (!options_.sim_checks) {
    return "tl::select(" + PrintBare(select.condition()) + ", " + PrintBare(select.true_value()) + ", " +
           PrintBare(select.false_value()) + ")";
  }
  std::vector<CarriedDefined>* const carried = carried_defined_;
  struct Restore {
    MusaPrinter& p;
    std::vector<CarriedDefined>* carried;
    std::string guard;
    ~Restore() {
      p.carried_defined_ = carried;
      p.lane_guard_ = guard;
    }
  } restore{*this, carried, lane_guard_};
  carried_defined_ = nullptr;
  const std::string condition = PrintBare(select.condition());
  if (carried != nullptr) {  // lane l carries its chosen branch's lane l
    std::vector<CarriedDefined> when_true, when_false;
    carried_defined_ = &when_true;
    const std::string true_value = PrintBare(select.true_value());
    carried_defined_ = &when_false;
    const std::string false_value = PrintBare(select.false_value());
    if (!when_true.empty() || !when_false.empty()) {
      const int lanes = DTypeOf(select.condition()).lanes();
      const std::string lane = "((" + condition + ").data[tl_sim_lane] ? " + AllOfLane(when_true, lanes) + " : " +
                               AllOfLane(when_false, lanes) + ")";
      carried->push_back({"tl_sim::AllLanes(" + std::to_string(lanes) + ", [&](int tl_sim_lane) { return " + lane +
                              "; })",
                          lane, lanes});
    }
    return "tl::select(" + condition + ", " + true_value + ", " + false_value + ")";
  }
  const std::string outer = lane_guard_;
  const std::string lanes = "tl_sim_lanes" + std::to_string(lane_selects_++);
  auto taking = [&](bool branch) {
    return "tl_sim::Taking(" + (outer.empty() ? "" : outer + ", ") + lanes + ", " + (branch ? "true" : "false") +
           ")";
  };
  lane_guard_ = taking(true);
  const std::string true_value = PrintBare(select.true_value());
  lane_guard_ = taking(false);
  const std::string false_value = PrintBare(select.false_value());
  --lane_selects_;
  if (true_value.find(lanes) == std::string::npos && false_value.find(lanes) == std::string::npos) {
    return "tl::select(" + condition + ", " + true_value + ", " + false_value + ")";
  }
  return "([&](const auto& " + lanes + ") { return tl::select(" + lanes + ", " + true_value + ", " + false_value +
         "); }(" + condition + "))";
}

std::string MusaPrinter::PrintConditional(const ObjectRef& cond, const ObjectRef& a, const ObjectRef& b) {
  if (carried_defined_ == nullptr) return "(" + PrintExpr(cond) + " ? " + PrintExpr(a) + " : " + PrintExpr(b) + ")";
  // A store's carried defined-ness: the condition is a use; only the chosen branch's elements are carried.
  std::vector<CarriedDefined>* const carried = carried_defined_;
  carried_defined_ = nullptr;
  const std::string condition = PrintExpr(cond);
  std::vector<CarriedDefined> when_true, when_false;
  carried_defined_ = &when_true;
  const std::string true_value = PrintExpr(a);
  carried_defined_ = &when_false;
  const std::string false_value = PrintExpr(b);
  carried_defined_ = carried;
  if (!when_true.empty() || !when_false.empty()) {
    CarriedDefined chosen{"(" + condition + " ? " + AllOf(when_true) + " : " + AllOf(when_false) + ")", "", 1};
    const int lanes = DTypeOf(a).lanes();  // a vector value: per lane, the chosen branch's lane
    if (HasLaneConditions(when_true, lanes) || HasLaneConditions(when_false, lanes)) {
      chosen.lane = "(" + condition + " ? " + AllOfLane(when_true, lanes) + " : " + AllOfLane(when_false, lanes) + ")";
      chosen.lanes = lanes;
    }
    carried->push_back(chosen);
  }
  return "(" + condition + " ? " + true_value + " : " + false_value + ")";
}

// An immediately invoked lambda keeps the binding local to the expression, so a Let under a short-circuiting
// operator or a select branch is only evaluated where TIR evaluates it.
std::string MusaPrinter::VisitLet(const ObjectRef& op) {
  LetView let(op);
  std::vector<CarriedDefined>* const carried = carried_defined_;
  carried_defined_ = nullptr;  // a bound value is a use
  std::string value = PrintBare(let.value());
  carried_defined_ = carried;
  std::string type = ValueTypeName(DTypeOf(let.var()));
  std::string name = DefineVar(let.var());
  const std::string binding = "const " + type + " " + name + " = " + value + "; ";
  std::vector<CarriedDefined> in_body;  // a store's carried defined-ness may name the bound variable
  if (carried != nullptr) carried_defined_ = &in_body;
  std::string body = PrintBare(let.body());
  carried_defined_ = carried;
  // ... (int64 floormod's `rmod`) and is evaluated outside this lambda, so each condition binds it again (a Let's
  // value is a pure expression: evaluating it twice changes nothing)
  auto rebound = [&binding](const std::string& condition) {
    return condition.empty() ? condition : "([&]() -> bool { " + binding + "return " + condition + "; }())";
  };
  for (const CarriedDefined& c : in_body) carried->push_back({rebound(c.all), rebound(c.lane), c.lanes});
  return "([&]() -> " + ValueTypeName(DTypeOf(op)) + " { " + binding + "return " + body + "; }())";
}

std::string MusaPrinter::VisitNot(const ObjectRef& op) {
  return "(!" + PrintExpr(OperandA(op)) + ")";
}

std::string MusaPrinter::VisitBitwiseNot(const ObjectRef& op) {
  return "(~" + PrintExpr(OperandA(op)) + ")";
}

std::string MusaPrinter::VisitBinaryOperator(const ObjectRef& op) {
  ObjectRef a = OperandA(op), b = OperandB(op);
  static const TypeKey mod_key("prim.Mod");
  if (IsA(op, mod_key) && DTypeOf(op).is_floating()) {
    return "tl::truncmod(" + PrintBare(a) + ", " + PrintBare(b) + ")";  // C `%` is integer-only
  }
  return "(" + PrintExpr(a) + " " + BinaryOperatorTokens().at(op->type_index()) + " " + PrintExpr(b) + ")";
}

std::string MusaPrinter::VisitBinaryHelper(const ObjectRef& op) {
  return std::string(BinaryHelperNames().at(op->type_index())) + "(" + PrintBare(OperandA(op)) + ", " +
         PrintBare(OperandB(op)) + ")";
}

// ---- calls --------------------------------------------------------------------------------------

std::string MusaPrinter::VisitCall(const ObjectRef& op) { return PrintCall(CallView(op), /*as_statement=*/false); }

std::string MusaPrinter::PrintCall(const CallView& call, bool as_statement) {
  std::string name = call.op_name();
  if (name[0] == '@') Fail("calling another function (`" + name.substr(1) + "`) from a kernel is not supported");
  const CallRule* rule = FindCallRule(name);
  if (rule == nullptr) {
    Fail(call, "no MUSA print rule is registered for this operator (rules live in src/codegen/call_rules_*.cc)");
  }
  if (rule->position == CallPosition::kStatement && !as_statement) {
    Fail(call, "is a statement and cannot be used as a value");
  }
  return rule->print(*this, call);
}

}  // namespace codegen
}  // namespace tilelang_musa
