/*!
 * \file print_stmt.cc
 * \brief Statement handlers of the MUSA printer.
 *
 * Bind, AllocBuffer and DeclBuffer have no body: they scope over the rest of the enclosing SeqStmt, which is
 * exactly where their C declaration lands, since a SeqStmt prints its statements one after another in the
 * current C block. AttrStmts print their body in place (no braces) for the same reason.
 */
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codegen/arithmetic_count.h"
#include "codegen/codegen_musa.h"
#include "codegen/musa_types.h"

namespace tilelang_musa {
namespace codegen {

namespace {

// Statements that can reach the printer but have no device meaning, and why.
const std::unordered_map<int32_t, const char*>& RejectedStmts() {
  static const std::unordered_map<int32_t, const char*> table = [] {
    std::unordered_map<int32_t, const char*> t;
    const std::pair<const char*, const char*> reasons[] = {
        {"tirx.AssertStmt", "device code cannot raise errors; keep assertions in host code"},
        {"tirx.Return", "device kernels return nothing; use tirx.thread_return to exit a thread early"},
        {"tirx.ScopeIdDefStmt", "execution-scope ids must be lowered to thread bindings before codegen"},
        {"tirx.TilePrimitiveCall", "tile primitives must be lowered before codegen"},
        {"s_tir.SBlock", "blocks must be lowered (LowerOpaqueBlock) before codegen"},
        {"s_tir.SBlockRealize", "blocks must be lowered (LowerOpaqueBlock) before codegen"},
    };
    for (const auto& [key, reason] : reasons) {
      if (auto index = FindTypeIndex(key)) t.emplace(*index, reason);  // an unregistered type cannot occur
    }
    return t;
  }();
  return table;
}

// A boolean annotation: a Python bool/int, or a TIR constant (`T.bool(True)`). Absent means false.
bool AnnotationFlag(const AnnotationMap& annotations, const char* key) {
  std::optional<Any> value = annotations.Get(key);
  if (!value.has_value()) return false;
  if (auto flag = value->try_cast<bool>()) return *flag;
  if (auto ref = value->as<ObjectRef>()) {
    if (auto c = AsConstInt(*ref)) return *c != 0;
  }
  TVM_FFI_THROW(ValueError) << "MUSA codegen: annotation `" << key << "` must be a boolean, got "
                            << value->GetTypeKey();
  TVM_FFI_UNREACHABLE();
}

// AttrStmt keys that only annotate analysis results and need no device code.
const std::unordered_set<std::string>& SilentAttrKeys() {
  static const std::unordered_set<std::string> keys = {
      "reduce_scope",  // LowerThreadAllreduce: marks the reduction it already lowered
      "pragma_unroll_explicit", "storage_alignment"};
  return keys;
}

bool IsLocalScope(const std::string& scope) {
  return scope == "local" || scope == "local.fragment" || scope == "local.var" || scope == "warp";
}

}  // namespace

const std::unordered_map<int32_t, MusaPrinter::StmtHandler>& MusaPrinter::StmtTable() {
  static const std::unordered_map<int32_t, StmtHandler> table = [] {
    std::unordered_map<int32_t, StmtHandler> t;
    const std::pair<const char*, StmtHandler> handlers[] = {
        {"tirx.SeqStmt", &MusaPrinter::VisitSeqStmt},       {"tirx.Bind", &MusaPrinter::VisitBind},
        {"tirx.AttrStmt", &MusaPrinter::VisitAttrStmt},     {"tirx.BufferStore", &MusaPrinter::VisitBufferStore},
        {"tirx.DeclBuffer", &MusaPrinter::VisitDeclBuffer}, {"tirx.AllocBuffer", &MusaPrinter::VisitAllocBuffer},
        {"tirx.Evaluate", &MusaPrinter::VisitEvaluate},     {"tirx.IfThenElse", &MusaPrinter::VisitIfThenElse},
        {"tirx.For", &MusaPrinter::VisitFor},               {"tirx.While", &MusaPrinter::VisitWhile},
        {"tirx.Break", &MusaPrinter::VisitBreak},           {"tirx.Continue", &MusaPrinter::VisitContinue},
    };
    for (const auto& [key, handler] : handlers) t.emplace(LookupTypeIndex(key), handler);
    for (const auto& kv : RejectedStmts()) t.emplace(kv.first, &MusaPrinter::RejectStmt);
    return t;
  }();
  return table;
}

void MusaPrinter::PrintStmt(const ObjectRef& stmt) {
  if (!stmt.defined()) Fail("a statement is missing (None)");
  const auto& table = StmtTable();
  auto it = table.find(stmt->type_index());
  if (it == table.end()) Fail("statement `" + TypeKeyOf(stmt) + "` has no MUSA C printer");
  if (!options_.line_directives) {
    (this->*(it->second))(stmt);
    return;
  }
  std::optional<UserLine> own = UserLineOf(stmt);
  const UserLine* enclosing = user_line_;
  if (own) user_line_ = &*own;
  statement_began_ = true;  // every statement's first line of code names its line (line_directives.cc)
  (this->*(it->second))(stmt);
  user_line_ = enclosing;
}

void MusaPrinter::RejectStmt(const ObjectRef& op) {
  Fail("statement `" + TypeKeyOf(op) + "` cannot be printed: " + RejectedStmts().at(op->type_index()));
}

void MusaPrinter::VisitSeqStmt(const ObjectRef& op) {
  for (const ObjectRef& stmt : SeqStmtView(op).seq()) PrintStmt(stmt);
}

void MusaPrinter::VisitBind(const ObjectRef& op) {
  BindView bind(op);
  ObjectRef var = bind.var();
  std::string value = PrintBare(bind.value());
  ObjectRef ty = VarView(var).ty();
  static const TypeKey pointer_type("ir.PointerType");
  static const TypeKey call_type("ir.Call");
  std::string type;
  if (IsA(bind.value(), call_type) && CallView(bind.value()).op_name() == "tl.make_robust_desc") {
    type = "const tl::RobustDesc";  // a descriptor value (T.make_robust_desc), not a pointer: async_copy.h
  } else if (IsA(ty, pointer_type)) {
    type = PointeeTypeName(ty) + "*";
  } else {
    DataType t = DTypeOf(var);
    type = t.is_handle() ? "void*" : "const " + CTypeName(t);  // a `const void*` could not be passed on
  }
  // floating-point bindings are a statement's arithmetic; integer ones are address arithmetic (arithmetic_count.h)
  const bool arithmetic = !IsA(ty, pointer_type) && DTypeOf(var).is_floating();
  std::string name = DefineVar(var);
  if (!IsA(ty, pointer_type) && !BuiltinVectorName(DTypeOf(var)).empty()) {
    // `const float4 b = ...` (as upstream prints a bound vector); its lanes enter arithmetic as tl::vec_of(b)
    value = UnwrapBuiltinVectorLoad(bind.value(), value);
    var_names_[var.get()] = "tl::vec_of(" + name + ")";
  }
  Line((arithmetic ? ComputeCharge(bind.value()) : "") + type + " " + name + " = " + value + ";");
}

void MusaPrinter::VisitAttrStmt(const ObjectRef& op) {
  AttrStmtView attr(op);
  std::string key(attr.attr_key());
  static const TypeKey iter_var("tirx.IterVar");
  std::optional<ObjectRef> node = attr.node().as<ObjectRef>();
  const bool binds_iter_var = node.has_value() && IsA(*node, iter_var);
  if (key == "thread_extent") {
    if (!binds_iter_var) Fail("attr \"thread_extent\" must bind a tirx.IterVar, got " + attr.node().GetTypeKey());
    // CollectLaunchInfo validated the tag, which is also the built-in's spelling ("threadIdx.x"). The built-ins
    // are unsigned: the cast gives the TIR variable's signed type so that index arithmetic can go negative.
    IterVarView iv(*node);
    ObjectRef var = iv.var();
    var_names_[var.get()] = "((" + CTypeName(DTypeOf(var)) + ")" + std::string(iv.thread_tag()) + ")";
  } else if (binds_iter_var) {
    // e.g. "virtual_thread": its body must run once per value of the variable, which only a pass can arrange.
    Fail("attr \"" + key + "\" binds a loop variable and must be lowered before codegen" +
         (key == "virtual_thread" ? std::string(" (InjectVirtualThread)") : std::string()));
  } else if (!SilentAttrKeys().count(key)) {
    Line("// attr \"" + key + "\" has no MUSA lowering; its body follows unchanged");
  }
  PrintStmt(attr.body());
}

void MusaPrinter::VisitBufferStore(const ObjectRef& op) {
  BufferStoreView store(op);
  // sim_checks, a store to an integer fragment/local: the integer fragment/local elements its value carries
  // (uninit_reads.h); their defined-ness becomes the stored elements'.
  const std::string defined = LookupBuffer(store.buffer()).defined;
  std::vector<CarriedDefined> carried;
  carried_defined_ = defined.empty() ? nullptr : &carried;
  std::string value;
  try {
    value = PrintBare(store.value());
  } catch (...) {
    carried_defined_ = nullptr;
    throw;
  }
  carried_defined_ = nullptr;
  AccessText target = PrintAccess(store.buffer(), store.indices(), DTypeOf(store.value()), "store");
  if (target.form != AccessForm::kGather) value = UnwrapBuiltinVectorLoad(store.value(), value);
  const Array<ObjectRef> indices = store.indices();
  const std::string charge = ComputeCharge(store.value(), store.buffer(), &indices);
  std::string mark;
  const std::string offset = StripParentheses(target.defined_offset);
  const std::string own = target.defined_lanes == 1 ? defined + "[" + offset + "]"
                                                     : "tl_sim::AllDefined(" + defined + " + (" + offset + "), " +
                                                           std::to_string(target.defined_lanes) + ")";
  if (carried.size() == 1 && carried[0].all == own && target.form != AccessForm::kGather) {
    // `x = x + (defined values)`, an accumulation: the element's state is unchanged, and its hot loop pays nothing
  } else if (!defined.empty() && target.form == AccessForm::kGather) {
    mark = " tl_sim::DefineAll(" + defined + ");";
  } else if (!defined.empty() && target.defined_lanes == 1) {
    mark = " if (tl_sim::UninitChecked()) " + own + " = " + AllOf(carried) + ";";
  } else if (!defined.empty() && HasLaneConditions(carried, target.defined_lanes)) {
    // each lane's defined byte from the elements that lane was computed from
    mark = " if (tl_sim::UninitChecked()) for (int tl_sim_lane = 0; tl_sim_lane < " +
           std::to_string(target.defined_lanes) + "; ++tl_sim_lane) " + defined + "[(" + offset +
           ") + tl_sim_lane] = " + AllOfLane(carried, target.defined_lanes) + ";";
  } else if (!defined.empty()) {
    mark = " if (tl_sim::UninitChecked()) tl_sim::SetDefined(" + defined + " + (" + offset + "), " +
           std::to_string(target.defined_lanes) + ", " + AllOf(carried) + ");";
  }
  if (target.form == AccessForm::kGather) {
    Line(charge + "tl::scatter(" + target.pointer + ", " + target.index + ", " + value + ");" + mark);
  } else if (!target.store_open.empty()) {
    Line(charge + target.store_open + value + target.store_close + ";" + mark);
  } else {
    Line(charge + StripParentheses(target.text) + " = " + value + ";" + mark);
  }
}

std::string MusaPrinter::ComputeCharge(const ObjectRef& value, const ObjectRef& buffer,
                                       const Array<ObjectRef>* indices) const {
  if (!options_.sim_checks) return "";
  const int64_t instructions = CountArithmetic(value);
  if (instructions == 0) return "";
  const StatementChain chain = ChainOf(value, buffer, indices, loops_);
  return "tl_sim::Compute(" + std::to_string(instructions) + ", " + std::to_string(chain.depth) + ", " +
         std::to_string(chain.iterations) + "); ";
}

// DeclBuffer(buffer, data): a new view of existing storage. Same element type: reuse the storage's identifier.
// Otherwise (e.g. a typed view into the merged dynamic shared memory): declare a reinterpreting pointer.
void MusaPrinter::VisitDeclBuffer(const ObjectRef& op) {
  DeclBufferView decl(op);
  ObjectRef buffer = decl.buffer(), data = decl.data();
  DataType elem = BufferTypeView(VarView(buffer).ty()).dtype();

  std::string source;  // C identifier of the storage, when it is known
  DataType source_elem;
  bool source_volatile = false;
  const BufferInfo* storage_info = nullptr;  // the buffer whose storage this views, when known
  static const TypeKey call_key("ir.Call"), var_key("ir.Var"), pointer_type("ir.PointerType"),
      prim_type("ir.PrimType");
  if (IsA(data, call_key) && CallView(data).op_name() == "tirx.buffer_data" && CallView(data).args().size() == 1) {
    // A view of another buffer's storage (e.g. of the merged dynamic shared memory).
    const BufferInfo& storage = LookupBuffer(CallView(data).args()[0]);
    storage_info = &storage;
    source = storage.data;
    source_elem = storage.elem;
    source_volatile = storage.is_volatile;
  } else if (IsA(data, var_key) && IsA(VarView(data).ty(), pointer_type)) {
    // A pointer parameter or a Bind of a pointer.
    source = PrintExpr(data);
    ObjectRef pointee = PointerTypeView(VarView(data).ty()).element_type();
    if (IsA(pointee, prim_type)) source_elem = PrimTypeView(pointee).dtype();
  }
  // A view's checked range is its storage's: flattening gives a strided buffer's view a shape that need not
  // cover its elements (the extent of dim 0 times its stride, for a column-major one).
  auto inherit_bounds = [&](int64_t view_bytes) {
    BufferInfo& view = buffers_[buffer.get()];
    if (storage_info == nullptr || storage_info->check_hi.empty()) return;
    const int64_t storage_bytes = std::max(1, storage_info->elem.bytes());
    auto scaled = [&](const std::string& bound, bool round_up) {
      if (storage_bytes == view_bytes) return bound;
      std::string bytes = "((int64_t)" + bound + " * " + std::to_string(storage_bytes) + ")";
      if (round_up) bytes = "(" + bytes + " + " + std::to_string(view_bytes - 1) + ")";
      return "(" + bytes + " / " + std::to_string(view_bytes) + ")";
    };
    view.check_lo = scaled(storage_info->check_lo, true);
    view.check_hi = scaled(storage_info->check_hi, false);
  };
  const int64_t view_bytes = std::max(1, elem.bytes());
  if (!source.empty() && source_elem == elem) {
    DefineBuffer(buffer, source, source_volatile);
    inherit_bounds(view_bytes);
    if (storage_info != nullptr) buffers_[buffer.get()].defined = storage_info->defined;
    return;
  }
  std::string qualifier = source_volatile ? "volatile " : "";
  std::string type = qualifier + ValueTypeName(elem) + "*";
  std::string name = names_.Fresh(std::string(VarView(buffer).name()), "buf");
  std::string from = source.empty() ? PrintBare(data) : source;
  // sim_checks: the view's stores are not tracked, so the viewed integer fragment/local counts as defined.
  const std::string handed = storage_info != nullptr && !storage_info->defined.empty()
                                 ? " tl_sim::DefineAll(" + storage_info->defined + ");"
                                 : "";
  Line(type + " " + name + " = reinterpret_cast<" + type + ">(" + from + ");" + handed);
  DefineBuffer(buffer, name, source_volatile);
  inherit_bounds(view_bytes);
}

void MusaPrinter::VisitAllocBuffer(const ObjectRef& op) {
  AllocBufferView alloc(op);
  ObjectRef buffer = alloc.buffer();
  BufferTypeView type(VarView(buffer).ty());
  std::string scope(type.storage_scope());
  std::string hint(VarView(buffer).name());
  const std::string shown = DisplayName(buffer);
  const bool is_volatile = AnnotationFlag(alloc.annotations(), "tirx.volatile");
  const std::string elem = (is_volatile ? "volatile " : "") + ValueTypeName(type.dtype());

  if (scope == "shared.dyn") {
    Any offset = DynSmemOffset(op);
    std::string offset_text = offset.type_index() == kTVMFFIInt ? std::to_string(offset.cast<int64_t>())
                                                                 : PrintExpr(offset.cast<ObjectRef>());
    if (offset_text == "0" && !is_volatile && type.dtype() == DataType::Make(kDLUInt, 8, 1)) {
      DefineBuffer(buffer, "buf_dyn_shmem");  // the merged byte buffer is the extern array itself
      return;
    }
    std::string name = names_.Fresh(hint, "buf");
    std::string at = offset_text == "0" ? "buf_dyn_shmem" : "buf_dyn_shmem + " + offset_text;
    Line(elem + "* " + name + " = reinterpret_cast<" + elem + "*>(" + at + ");");
    DefineBuffer(buffer, name, is_volatile);
    return;
  }

  bool is_shared = scope == "shared";
  if (!is_shared && !IsLocalScope(scope)) {
    Fail("buffer `" + shown + "` is allocated in scope \"" + scope +
         "\", which a kernel cannot allocate (supported: shared, shared.dyn, local, local.fragment, local.var, warp)");
  }
  int64_t count = 1;
  for (const ObjectRef& dim : type.shape()) {
    auto c = AsConstInt(dim);
    if (!c || *c <= 0) {
      Fail("buffer `" + shown + "` (scope \"" + scope + "\") needs a constant positive size, got extent " +
           PrintExpr(dim));
    }
    count *= *c;
  }
  std::string name = names_.Fresh(hint, "buf");
  // The sanitizer build poisons local storage, on the declaration's line: a read before any write shows as NaN.
  const std::string poison = options_.sim_checks && !is_shared ? " tl_sim::Poison(" + name + ");" : "";
  if (scope == "local.var" && count == 1 && !is_volatile) {  // T.alloc_var: a C scalar, as upstream prints it
    // Upstream's T.alloc_var without an initializer starts at zero (every upstream printer declares it `= 0`);
    // an explicit initializer is a store after the declaration.
    DataType dtype = type.dtype();
    Line(elem + " " + name + " = " + (dtype.is_scalar() ? IntLiteral(dtype, 0) : elem + "{}") + ";");
    DefineBuffer(buffer, "(&" + name + ")", false);
    buffers_[buffer.get()].scalar = name;
    return;
  }
  // 16-byte alignment lets any tl::vec view of the array be loaded with one access.
  std::string align = is_shared || count > 1 ? "__align__(16) " : "";
  // sim_checks: an integer fragment/local's defined bytes (uninit_reads.h), cleared in checked mode.
  std::string defined;
  if (!is_shared && TracksDefined(scope, type.dtype(), is_volatile)) defined = names_.Fresh(name + "_defined", "buf");
  const std::string defined_decl = defined.empty() ? "" : " unsigned char " + defined + "[" + std::to_string(count) +
                                                              "]; tl_sim::Undefine(" + defined + ");";
  Line((is_shared ? "__shared__ " : "") + align + elem + " " + name + "[" + std::to_string(count) + "];" + poison +
       defined_decl);
  DefineBuffer(buffer, name, is_volatile);
  buffers_[buffer.get()].defined = defined;
}

void MusaPrinter::VisitEvaluate(const ObjectRef& op) {
  ObjectRef value = EvaluateView(op).value();
  static const TypeKey call_key("ir.Call"), int_imm("ir.IntImm"), float_imm("ir.FloatImm");
  if (IsA(value, int_imm) || IsA(value, float_imm)) return;  // a no-op
  if (IsA(value, call_key)) {
    std::string text = PrintCall(CallView(value), /*as_statement=*/true);
    if (!text.empty()) Line(text + ";");
    return;
  }
  Line("(void)" + PrintExpr(value) + ";");
}

void MusaPrinter::VisitIfThenElse(const ObjectRef& op) { PrintIfChain(IfThenElseView(op), /*is_else_if=*/false); }

void MusaPrinter::PrintIfChain(const IfThenElseView& op, bool is_else_if) {
  std::string header = (is_else_if ? "} else if (" : "if (") + PrintBare(op.condition()) + ") {";
  Line(header);
  ++indent_;
  PrintStmt(op.then_case());
  --indent_;
  static const TypeKey if_key("tirx.IfThenElse");
  if (auto else_case = op.else_case()) {
    if (IsA(*else_case, if_key)) {
      PrintIfChain(IfThenElseView(*else_case), /*is_else_if=*/true);
      return;  // the innermost link closes the chain
    }
    Line("} else {");
    ++indent_;
    PrintStmt(*else_case);
    --indent_;
  }
  Line("}");
}

void MusaPrinter::VisitFor(const ObjectRef& op) {
  ForView loop(op);
  ObjectRef var = loop.loop_var();
  std::string var_hint = DisplayName(var);
  auto kind = static_cast<ForKind>(loop.kind());
  if (kind != ForKind::kSerial && kind != ForKind::kUnrolled) {
    const char* what = kind == ForKind::kParallel     ? "parallel"
                       : kind == ForKind::kVectorized ? "vectorized (run VectorizeLoop)"
                                                      : "thread-bound (bind threads with thread_extent attrs)";
    Fail("loop `" + var_hint + "` is " + what + "; only serial and unrolled loops can be printed");
  }
  DataType t = DTypeOf(var);
  std::string begin = PrintBare(loop.min());
  auto min_c = AsConstInt(loop.min()), extent_c = AsConstInt(loop.extent());
  std::string end;
  if (min_c && *min_c == 0) {
    end = PrintExpr(loop.extent());
  } else if (min_c && extent_c) {
    end = IntLiteral(t, *min_c + *extent_c);
  } else {
    end = "(" + PrintExpr(loop.min()) + " + " + PrintExpr(loop.extent()) + ")";
  }
  std::string increment;
  std::string name = DefineVar(var);
  auto step = loop.step();
  auto step_c = step ? AsConstInt(*step) : std::optional<int64_t>(1);
  if (step_c && *step_c == 1) {
    increment = "++" + name;
  } else if (step_c && *step_c <= 0) {
    Fail("loop `" + var_hint + "` has non-positive step " + std::to_string(*step_c));
  } else {
    increment = name + " += " + PrintExpr(*step);
  }
  // T.unroll loops are serial loops marked "tl.pragma_unroll" (TVM's UnrollLoop would unroll a kUnrolled loop in
  // the IR, and rejects one whose trip count is not a constant); kUnrolled loops left by UnrollLoop print the same.
  if (kind == ForKind::kUnrolled || loop.annotations().count("tl.pragma_unroll")) {
    // T.unroll(..., unroll_factor=k): unroll by k, leaving the compiler the remainder.
    std::optional<Any> factor = loop.annotations().Get("tl.unroll_factor");
    std::optional<int64_t> k;
    if (factor.has_value()) {
      if (auto i = factor->try_cast<int64_t>()) k = *i;
      else if (auto ref = factor->as<ObjectRef>()) k = AsConstInt(*ref);
      if (!k || *k <= 0) Fail("loop `" + var_hint + "`: tl.unroll_factor must be a positive integer");
    }
    Line(k ? "#pragma unroll " + std::to_string(*k) : std::string("#pragma unroll"));
  }
  Line("for (" + CTypeName(t) + " " + name + " = " + begin + "; " + name + " < " + end + "; " + increment + ") {");
  // sim_checks: what the iterations share decides which statements' chains run side by side (dependence_depth.h)
  if (options_.sim_checks) loops_.push_back(AnalyzeLoop(loop));
  ++indent_;
  PrintStmt(loop.body());
  --indent_;
  if (options_.sim_checks) loops_.pop_back();
  Line("}");
}

void MusaPrinter::VisitWhile(const ObjectRef& op) {
  WhileView loop(op);
  Line("while (" + PrintBare(loop.condition()) + ") {");
  ++indent_;
  PrintStmt(loop.body());
  --indent_;
  Line("}");
}

void MusaPrinter::VisitBreak(const ObjectRef&) { Line("break;"); }

void MusaPrinter::VisitContinue(const ObjectRef&) { Line("continue;"); }

}  // namespace codegen
}  // namespace tilelang_musa
