/*!
 * \file launch_info.cc
 * \brief Launch extents and dynamic shared memory of a device PrimFunc (see launch_info.h).
 */
#include "codegen/launch_info.h"

#include <tvm/ffi/function.h>

#include <utility>

namespace tilelang_musa {
namespace codegen {

namespace {

// Integer arithmetic on ints or IR expressions. Expressions go through TVM's own operator constructors
// (`prim._Op*`), which fold constants and promote types like the Python frontend does.
enum class SymOp { kAdd, kMul, kMax };

Any Symbolic(SymOp op, const Any& a, const Any& b) {
  if (a.type_index() == kTVMFFIInt && b.type_index() == kTVMFFIInt) {
    int64_t x = a.cast<int64_t>(), y = b.cast<int64_t>();
    switch (op) {
      case SymOp::kAdd: return x + y;
      case SymOp::kMul: return x * y;
      case SymOp::kMax: return x > y ? x : y;
    }
  }
  static const ffi::Function add = ffi::Function::GetGlobalRequired("prim._OpAdd");
  static const ffi::Function mul = ffi::Function::GetGlobalRequired("prim._OpMul");
  static const ffi::Function max = ffi::Function::GetGlobalRequired("prim._OpMax");
  const ffi::Function& f = op == SymOp::kAdd ? add : op == SymOp::kMul ? mul : max;
  ObjectRef result = f(a, b, nullptr).cast<ObjectRef>();
  if (auto c = AsConstInt(result)) return *c;
  return result;
}

// An IR integer expression, as an int when it is a constant.
Any AsIntOrExpr(const ObjectRef& expr) {
  if (auto c = AsConstInt(expr)) return *c;
  return expr;
}

// The axis (0..2) a "blockIdx.*" / "threadIdx.*" tag binds, or -1 when `tag` is not of the form `prefix.x|y|z`.
int AxisOf(const std::string& tag, const std::string& prefix) {
  if (tag.size() != prefix.size() + 2 || tag.compare(0, prefix.size(), prefix) != 0 || tag[prefix.size()] != '.') {
    return -1;
  }
  char axis = tag.back();
  return axis >= 'x' && axis <= 'z' ? axis - 'x' : -1;
}

class LaunchInfoCollector {
 public:
  explicit LaunchInfoCollector(std::string kernel_name) : kernel_name_(std::move(kernel_name)) {}

  void Visit(const ObjectRef& stmt) {
    static const TypeKey seq("tirx.SeqStmt"), attr("tirx.AttrStmt"), loop("tirx.For"), branch("tirx.IfThenElse"),
        loop_while("tirx.While"), alloc("tirx.AllocBuffer");
    if (IsA(stmt, seq)) {
      for (const ObjectRef& s : SeqStmtView(stmt).seq()) Visit(s);
    } else if (IsA(stmt, attr)) {
      VisitAttr(AttrStmtView(stmt));
    } else if (IsA(stmt, loop)) {
      Visit(ForView(stmt).body());
    } else if (IsA(stmt, branch)) {
      IfThenElseView op(stmt);
      Visit(op.then_case());
      if (auto e = op.else_case()) Visit(*e);
    } else if (IsA(stmt, loop_while)) {
      Visit(WhileView(stmt).body());
    } else if (IsA(stmt, alloc)) {
      VisitAlloc(stmt);
    }
  }

  LaunchInfo Finish() {
    if (info_.dyn_smem.size() > 1 && unannotated_dyn_smem_ > 0) {
      TVM_FFI_THROW(ValueError) << "MUSA codegen: kernel `" << kernel_name_ << "`: " << info_.dyn_smem.size()
                                << " \"shared.dyn\" allocations, " << unannotated_dyn_smem_
                                << " of them without a `" << kDynSmemOffsetAttr
                                << "` byte-offset annotation, would all start at byte 0 (merge them with "
                                   "MergeSharedMemoryAllocations or annotate their offsets)";
    }
    return std::move(info_);
  }

 private:
  void VisitAttr(const AttrStmtView& op) {
    if (std::string(op.attr_key()) == "thread_extent") {
      IterVarView iv(op.node().cast<ObjectRef>());
      std::string tag(iv.thread_tag());
      int block_axis = AxisOf(tag, "blockIdx"), thread_axis = AxisOf(tag, "threadIdx");
      if (block_axis < 0 && thread_axis < 0) {
        TVM_FFI_THROW(ValueError) << "MUSA codegen: kernel `" << kernel_name_ << "`: unsupported thread tag `"
                                  << tag << "` (expected blockIdx.x/y/z or threadIdx.x/y/z)";
      }
      std::array<ObjectRef, 3>& axes = block_axis >= 0 ? info_.grid : info_.threads;
      const int axis = block_axis >= 0 ? block_axis : thread_axis;
      ObjectRef extent = op.value();
      ObjectRef& slot = axes[axis];
      if (!slot.defined()) {
        slot = extent;
      } else if (!slot.same_as(extent)) {
        auto a = AsConstInt(slot), b = AsConstInt(extent);
        if (!a || !b || *a != *b) {
          TVM_FFI_THROW(ValueError) << "MUSA codegen: kernel `" << kernel_name_ << "`: `" << tag
                                    << "` is bound twice with different extents";
        }
      }
    }
    Visit(op.body());
  }

  void VisitAlloc(const ObjectRef& stmt) {
    AllocBufferView op(stmt);
    BufferTypeView type(VarView(op.buffer()).ty());
    if (std::string(type.storage_scope()) != "shared.dyn") return;
    if (!op.annotations().Get(kDynSmemOffsetAttr).has_value()) ++unannotated_dyn_smem_;
    Any bytes = static_cast<int64_t>(type.dtype().bytes());
    for (const ObjectRef& dim : type.shape()) bytes = Symbolic(SymOp::kMul, bytes, AsIntOrExpr(dim));
    info_.dyn_smem.push_back(DynSmemAlloc{op.buffer(), DynSmemOffset(stmt), bytes});
  }

  std::string kernel_name_;
  LaunchInfo info_;
  int unannotated_dyn_smem_ = 0;
};

}  // namespace

std::optional<int64_t> LaunchInfo::StaticThreadsPerBlock() const {
  int64_t product = 1;
  for (const ObjectRef& extent : threads) {
    if (!extent.defined()) continue;
    auto c = AsConstInt(extent);
    if (!c) return std::nullopt;
    product *= *c;
  }
  return product;
}

Any DynSmemOffset(const ObjectRef& alloc_buffer_stmt) {
  std::optional<Any> offset = AllocBufferView(alloc_buffer_stmt).annotations().Get(kDynSmemOffsetAttr);
  if (!offset.has_value()) return static_cast<int64_t>(0);
  const Any& v = *offset;
  if (v.type_index() == kTVMFFIInt) return v;
  if (auto ref = v.as<ObjectRef>()) {
    if (HasPrimType(*ref) && DTypeOf(*ref).is_integer()) return AsIntOrExpr(*ref);
  }
  TVM_FFI_THROW(ValueError) << "MUSA codegen: annotation `" << kDynSmemOffsetAttr
                            << "` must be an int or an integer expression, got `" << v.GetTypeKey() << "`";
  TVM_FFI_UNREACHABLE();
}

LaunchInfo CollectLaunchInfo(const ObjectRef& body, const std::string& kernel_name) {
  LaunchInfoCollector collector(kernel_name);
  collector.Visit(body);
  return collector.Finish();
}

Map<String, Any> KernelLaunchInfoMap(const ObjectRef& func) {
  PrimFuncView f(func);
  LaunchInfo info = CollectLaunchInfo(f.body(), "<kernel_launch_info>");
  auto extents = [](const std::array<ObjectRef, 3>& axes) {
    Array<Any> out;
    for (const ObjectRef& e : axes) out.push_back(e.defined() ? AsIntOrExpr(e) : Any(static_cast<int64_t>(1)));
    return out;
  };
  Any smem = static_cast<int64_t>(0);  // the end of the furthest-reaching allocation
  for (size_t i = 0; i < info.dyn_smem.size(); ++i) {
    Any end = Symbolic(SymOp::kAdd, info.dyn_smem[i].offset, info.dyn_smem[i].bytes);
    smem = i == 0 ? end : Symbolic(SymOp::kMax, smem, end);
  }
  Map<String, Any> out;
  out.Set("threads", extents(info.threads));
  out.Set("grid_vars", extents(info.grid));
  out.Set("dynamic_smem_bytes", smem);
  return out;
}

}  // namespace codegen
}  // namespace tilelang_musa
