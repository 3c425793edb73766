/*!
 * \file ir_view.cc
 * \brief Type-key resolution and by-name field access for the IR views (see ir_view.h).
 */
#include "codegen/ir_view.h"

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/reflection/accessor.h>

#include <cstring>
#include <unordered_map>
#include <utility>

namespace tilelang_musa {
namespace codegen {

std::optional<int32_t> FindTypeIndex(std::string_view type_key) {
  TVMFFIByteArray key{type_key.data(), type_key.size()};
  int32_t index = -1;
  if (TVMFFITypeKeyToIndex(&key, &index) != 0) {
    // Drop the error the C API raised: not finding a type is an answer here, not a failure.
    TVMFFIObjectHandle err = nullptr;
    TVMFFIErrorMoveFromRaised(&err);
    if (err != nullptr) TVMFFIObjectDecRef(err);
    return std::nullopt;
  }
  return index;
}

int32_t LookupTypeIndex(std::string_view type_key) {
  if (auto index = FindTypeIndex(type_key)) return *index;
  TVM_FFI_THROW(RuntimeError) << "MUSA codegen: IR type `" << type_key
                              << "` is not registered; is the apache-tvm wheel this library was built for loaded?";
  TVM_FFI_UNREACHABLE();
}

int32_t TypeKey::index() const {
  int32_t index = index_.load(std::memory_order_relaxed);
  if (index < 0) {
    index = LookupTypeIndex(key_);  // every thread that races here computes the same value
    index_.store(index, std::memory_order_relaxed);
  }
  return index;
}

std::string TypeKeyOf(const ObjectRef& node) {
  if (!node.defined()) return "none";
  return node->GetTypeKey();
}

bool IsA(const ObjectRef& node, const TypeKey& key) {
  return node.defined() && node->type_index() == key.index();
}

namespace {

bool NameEquals(const TVMFFIByteArray& name, const char* wanted) {
  return std::strlen(wanted) == name.size && std::memcmp(name.data, wanted, name.size) == 0;
}

const TVMFFIFieldInfo* FindFieldInType(const TVMFFITypeInfo* info, const char* name) {
  for (int32_t i = 0; i < info->num_fields; ++i) {
    if (NameEquals(info->fields[i].name, name)) return &info->fields[i];
  }
  return nullptr;
}

// Searches the type itself first, then its ancestors from the nearest one up.
const TVMFFIFieldInfo* FindField(int32_t type_index, const char* name) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(type_index);
  if (info == nullptr) return nullptr;
  if (const TVMFFIFieldInfo* f = FindFieldInType(info, name)) return f;
  for (int32_t depth = info->type_depth - 1; depth >= 0; --depth) {
    if (const TVMFFIFieldInfo* f = FindFieldInType(info->type_ancestors[depth], name)) return f;
  }
  return nullptr;
}

struct FieldCacheKey {
  int32_t type_index;
  const char* name;  // string literals of the views: compared by address, hashed by address
  bool operator==(const FieldCacheKey& o) const { return type_index == o.type_index && name == o.name; }
};
struct FieldCacheHash {
  size_t operator()(const FieldCacheKey& k) const {
    return std::hash<const void*>()(k.name) * 31u + static_cast<size_t>(k.type_index);
  }
};

}  // namespace

Any GetField(const ObjectRef& node, const char* name) {
  if (!node.defined()) {
    TVM_FFI_THROW(ValueError) << "MUSA codegen: cannot read field `" << name << "` of a missing (None) IR node";
  }
  // Per-thread cache: printers may run concurrently (parallel JIT compilation) without locking.
  thread_local std::unordered_map<FieldCacheKey, const TVMFFIFieldInfo*, FieldCacheHash> cache;
  FieldCacheKey key{node->type_index(), name};
  auto it = cache.find(key);
  const TVMFFIFieldInfo* field = nullptr;
  if (it != cache.end()) {
    field = it->second;
  } else {
    field = FindField(key.type_index, name);
    cache.emplace(key, field);
  }
  if (field == nullptr) {
    TVM_FFI_THROW(RuntimeError) << "MUSA codegen: IR node `" << node->GetTypeKey() << "` has no field `" << name
                                << "`; this printer targets apache-tvm 0.27.0.post1";
  }
  return ffi::reflection::FieldGetter(field)(node);
}

View::View(ObjectRef ref, const TypeKey& key) : ref_(std::move(ref)) {
  if (!IsA(ref_, key)) {
    TVM_FFI_THROW(RuntimeError) << "MUSA codegen: expected an IR node of type `" << key.key() << "`, got `"
                                << TypeKeyOf(ref_) << "`";
  }
}

bool HasPrimType(const ObjectRef& expr) {
  static const TypeKey prim_type("ir.PrimType");
  return IsA(TypeOf(expr), prim_type);
}

DataType DTypeOf(const ObjectRef& expr) {
  ObjectRef ty = TypeOf(expr);
  static const TypeKey prim_type("ir.PrimType");
  static const TypeKey pointer_type("ir.PointerType");
  if (IsA(ty, prim_type)) return PrimTypeView(ty).dtype();
  // Handles (pointer-typed expressions) have the opaque handle dtype, as in TIR.
  if (IsA(ty, pointer_type)) return DataType::Make(kDLOpaqueHandle, 64, 1);
  TVM_FFI_THROW(ValueError) << "MUSA codegen: expression `" << TypeKeyOf(expr)
                            << "` has no scalar/vector type (its type is `" << TypeKeyOf(ty) << "`)";
  TVM_FFI_UNREACHABLE();
}

std::optional<int64_t> AsConstInt(const ObjectRef& expr) {
  static const TypeKey int_imm("ir.IntImm");
  if (!IsA(expr, int_imm)) return std::nullopt;
  return IntImmView(expr).value();
}

std::string CallView::op_name() const {
  static const TypeKey op_key("ir.Op");
  static const TypeKey global_var_key("ir.GlobalVar");
  ObjectRef callee = op();
  if (IsA(callee, op_key)) return std::string(OpView(callee).name());
  if (IsA(callee, global_var_key)) return "@" + std::string(GlobalVarView(callee).name_hint());
  TVM_FFI_THROW(ValueError) << "MUSA codegen: a call's callee is a `" << TypeKeyOf(callee)
                            << "`; only operators (ir.Op) can be printed";
  TVM_FFI_UNREACHABLE();
}

}  // namespace codegen
}  // namespace tilelang_musa
