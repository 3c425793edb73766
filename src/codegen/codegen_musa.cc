/*!
 * \file codegen_musa.cc
 * \brief Entry points of the MUSA C device printer: the kernel signature, and the tvm-ffi global functions
 *
 *   tilelang_musa.codegen.print_device_kernel(func: tirx.PrimFunc, kernel_name: str, options: Map) -> str
 *   tilelang_musa.codegen.kernel_launch_info(func: tirx.PrimFunc) -> Map
 *   tilelang_musa.codegen.list_call_rules() -> Array[str]
 *
 * `print_device_kernel` returns one `extern "C" __global__` definition, without #include lines or host code.
 */
#include "codegen/codegen_musa.h"

#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "codegen/musa_types.h"
#include "target/musa_archs.h"

namespace tilelang_musa {
namespace codegen {

CodegenOptions ParseCodegenOptions(const Map<String, Any>& options) {
  CodegenOptions out;
  if (auto arch = options.Get("arch")) {
    auto text = arch->try_cast<String>();
    if (!text) TVM_FFI_THROW(TypeError) << "MUSA codegen: option `arch` must be a str, got " << arch->GetTypeKey();
    out.arch = std::string(*text);
  }
  const std::string& a = out.arch;
  bool valid_arch = a.size() == 5 && a.compare(0, 3, "mp_") == 0 && std::isdigit(static_cast<unsigned char>(a[3])) &&
                    std::isdigit(static_cast<unsigned char>(a[4]));
  if (!valid_arch) {
    TVM_FFI_THROW(ValueError) << "MUSA codegen: option `arch` must look like \"mp_22\" or \"mp_31\", got \"" << a
                              << "\"";
  }
  const MusaArch* known = FindArch(a);
  if (known == nullptr) {
    TVM_FFI_THROW(ValueError) << "MUSA codegen: unknown arch \"" << a << "\"; accepted: " << AcceptedArchList();
  }
  out.warp_size = static_cast<int>(known->thread_warp_size);
  out.has_async_barriers = known->has_async_barriers;
  if (auto warp = options.Get("warp_size")) {
    auto value = warp->try_cast<int64_t>();
    if (!value || *value <= 0) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `warp_size` must be a positive int, got "
                               << warp->GetTypeKey();
    }
    out.warp_size = static_cast<int>(*value);
  }
  if (auto blocks = options.Get("min_blocks_per_sm")) {
    auto value = blocks->try_cast<int64_t>();
    if (!value || *value <= 0) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `min_blocks_per_sm` must be a positive int, got "
                               << blocks->GetTypeKey();
    }
    out.min_blocks_per_sm = static_cast<int>(*value);
  }
  if (auto checks = options.Get("sim_checks")) {
    auto value = checks->try_cast<bool>();
    if (!value) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `sim_checks` must be a bool, got " << checks->GetTypeKey();
    }
    out.sim_checks = *value;
  }
  if (auto directives = options.Get("line_directives")) {
    auto value = directives->try_cast<bool>();
    if (!value) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `line_directives` must be a bool, got "
                               << directives->GetTypeKey();
    }
    out.line_directives = *value;
  }
  if (auto descriptors = options.Get("tme_descriptors")) {
    auto names = descriptors->try_cast<Array<String>>();
    if (!names) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `tme_descriptors` must be a list of str, got "
                               << descriptors->GetTypeKey();
    }
    for (const String& name : *names) out.tme_descriptors.push_back(std::string(name));
  }
  if (auto params = options.Get("non_restrict_params")) {
    auto names = params->try_cast<Array<String>>();
    if (!names) {
      TVM_FFI_THROW(TypeError) << "MUSA codegen: option `non_restrict_params` must be a list of str, got "
                               << params->GetTypeKey();
    }
    for (const String& name : *names) out.non_restrict_params.push_back(std::string(name));
  }
  return out;
}

MusaPrinter::MusaPrinter(std::string kernel_name, CodegenOptions options)
    : kernel_name_(std::move(kernel_name)), options_(std::move(options)) {}

void MusaPrinter::Fail(const std::string& message) const {
  TVM_FFI_THROW(ValueError) << "MUSA codegen: kernel `" << kernel_name_ << "`: " << message;
  TVM_FFI_UNREACHABLE();
}

void MusaPrinter::Line(const std::string& text) {
  if (options_.line_directives) DirectiveBefore(text);
  out_ << std::string(2 * indent_, ' ') << text << '\n';
  presumed_line_ += 1 + static_cast<int64_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string MusaPrinter::DefineVar(const ObjectRef& var, const std::string& fallback) {
  std::string name = names_.Fresh(std::string(VarView(var).name()), fallback);
  var_names_[var.get()] = name;  // a re-bound Var (e.g. a Let printed twice) takes the newest name
  return name;
}

// Buffer and pointer parameters are never aliased by another parameter (`tirx.noalias`, which TileLang sets),
// except those T.annotate_restrict_buffers names.
std::string MusaPrinter::PrintParam(const ObjectRef& param) {
  static const TypeKey var_key("ir.Var"), buffer_type("tirx.BufferType"), pointer_type("ir.PointerType"),
      prim_type("ir.PrimType");
  if (!IsA(param, var_key)) Fail("parameter of type `" + TypeKeyOf(param) + "` is not an ir.Var");
  VarView var(param);
  ObjectRef ty = var.ty();
  std::string hint(var.name());
  const auto& may_alias = options_.non_restrict_params;
  const char* restrict_ =
      std::find(may_alias.begin(), may_alias.end(), hint) == may_alias.end() ? "* __restrict__ " : "* ";
  if (IsA(ty, buffer_type)) {
    BufferTypeView type(ty);
    std::string scope(type.storage_scope());
    if (scope != "global" && !scope.empty()) {
      Fail("buffer parameter `" + hint + "` is in scope \"" + scope + "\"; kernel parameters must be global memory");
    }
    std::string name = names_.Fresh(hint, "arg");
    DefineBuffer(param, name);
    return ValueTypeName(type.dtype()) + restrict_ + name;
  }
  if (IsA(ty, pointer_type)) return PointeeTypeName(ty) + restrict_ + DefineVar(param, "arg");
  if (IsA(ty, prim_type)) {
    DataType t = PrimTypeView(ty).dtype();
    if (t.is_handle()) return std::string("void") + restrict_ + DefineVar(param, "arg");
    return ValueTypeName(t) + " " + DefineVar(param, "arg");
  }
  Fail("parameter `" + hint + "` has type `" + TypeKeyOf(ty) + "`; expected a buffer, a pointer or a scalar");
}

std::string MusaPrinter::PrintKernel(const ObjectRef& func) {
  if (!NameTable::IsValidIdentifier(kernel_name_)) {
    Fail("the kernel name is not a valid, unreserved C identifier");
  }
  names_.Reserve(kernel_name_);
  for (const std::string& desc : options_.tme_descriptors) {
    if (!NameTable::IsValidIdentifier(desc)) Fail("TME descriptor name `" + desc + "` is not a valid C identifier");
    names_.Reserve(desc);
  }
  PrimFuncView f(func);
  launch_ = CollectLaunchInfo(f.body(), kernel_name_);

  std::vector<std::string> params;
  for (const ObjectRef& p : f.params()) params.push_back(PrintParam(p));
  // Read by the TME through its address; `__grid_constant__` keeps it in the parameter space (no local copy).
  for (const std::string& desc : options_.tme_descriptors) {
    params.push_back("__grid_constant__ const MUtensorDescriptor " + desc);
  }
  indent_ = 1;
  BeginFunctionLines(func);
  if (!launch_.dyn_smem.empty()) Line("extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];");
  PrintStmt(f.body());

  std::string text = "extern \"C\" __global__ void ";
  if (auto threads = launch_.StaticThreadsPerBlock()) {
    text += "__launch_bounds__(" + std::to_string(*threads) + ", " + std::to_string(options_.min_blocks_per_sm) +
            ") ";
  }
  text += kernel_name_ + "(";
  for (size_t i = 0; i < params.size(); ++i) text += (i ? ", " : "") + params[i];
  return text + ") {\n" + out_.str() + "}\n";
}

namespace {

void CheckPrimFunc(const ObjectRef& func, const char* entry) {
  static const TypeKey prim_func("tirx.PrimFunc");
  if (!IsA(func, prim_func)) {
    TVM_FFI_THROW(TypeError) << entry << ": expected a tirx.PrimFunc, got " << TypeKeyOf(func);
  }
}

}  // namespace

// A second copy of this library (loaded from another path) runs the static initialisers again, and GlobalDef
// throws on a name that is already defined: the first copy's functions stay.
template <typename Func>
void DefineGlobalOnce(const char* name, Func func) {
  if (!ffi::Function::GetGlobal(name).has_value()) ::tvm::ffi::reflection::GlobalDef().def(name, std::move(func));
}

TVM_FFI_STATIC_INIT_BLOCK() {
  DefineGlobalOnce("tilelang_musa.codegen.print_device_kernel",
                   [](ObjectRef func, String kernel_name, Map<String, Any> options) -> String {
                     CheckPrimFunc(func, "tilelang_musa.codegen.print_device_kernel");
                     MusaPrinter printer(std::string(kernel_name), ParseCodegenOptions(options));
                     return String(printer.PrintKernel(func));
                   });
  DefineGlobalOnce("tilelang_musa.codegen.kernel_launch_info", [](ObjectRef func) -> Map<String, Any> {
    CheckPrimFunc(func, "tilelang_musa.codegen.kernel_launch_info");
    return KernelLaunchInfoMap(func);
  });
  DefineGlobalOnce("tilelang_musa.codegen.is_valid_identifier",
                   [](String name) -> bool { return NameTable::IsValidIdentifier(std::string(name)); });
  DefineGlobalOnce("tilelang_musa.codegen.list_call_rules", []() -> Array<String> {
    Array<String> out;
    for (const std::string& name : ListCallRules()) out.push_back(String(name));
    return out;
  });
}

}  // namespace codegen
}  // namespace tilelang_musa
