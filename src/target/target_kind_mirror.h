/*!
 * \file target/target_kind_mirror.h
 * \brief Self-written declarations of the apache-tvm 0.27 target-kind registry internals.
 *
 * The apache-tvm wheel ships no compiler headers, yet a TargetKind's options can only be declared
 * by writing its private ConfigSchema. These structs mirror the private layout of
 * `tvm::TargetKindNode`, `tvm::ir::ConfigSchema` and `tvm::TargetKindRegEntry` of that wheel
 * (documented in docs/TVM_IR_REFERENCE.md section 3). Nothing here is trusted blindly:
 * `musa_target.cc` checks the mirror against reflection metadata and against kinds the library
 * registered itself before it writes anything.
 */
#ifndef TILELANG_MUSA_TARGET_TARGET_KIND_MIRROR_H_
#define TILELANG_MUSA_TARGET_TARGET_KIND_MIRROR_H_

// The container headers must come before the other tvm-ffi headers (TVM_FACTS.md).
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/object.h>
#include <tvm/ffi/string.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tvm {

/*!
 * \brief The exported registry entry of libtvm_compiler, declared with its one static function
 * we call. The return type is not part of the mangled name, so this links to
 * `tvm::TargetKindRegEntry::RegisterOrGet(tvm::ffi::String const&)`. The entry's data members are
 * read through `tilelang_musa::mirror::RegEntry`, never through this class.
 */
class TargetKindRegEntry {
 public:
  static TargetKindRegEntry& RegisterOrGet(const ffi::String& target_kind_name);
  TargetKindRegEntry() = delete;
};

}  // namespace tvm

namespace tilelang_musa {
namespace mirror {

namespace ffi = ::tvm::ffi;

/*! \brief `tvm::ir::ConfigSchema::OptionEntry`: one declared option of a kind. */
struct OptionEntry {
  ffi::String key;
  ffi::String type_str;                    // e.g. "str", "int", "Array<str>", "target.Target"
  ffi::TypedFunction<ffi::Any(ffi::Any)> validator;  // validates and coerces a given value
  bool has_default = false;
  bool default_from_factory = false;       // default_value is then a Function () -> Any
  ffi::Any default_value;
};

/*! \brief `tvm::ir::ConfigSchema`: the options of a kind, resolved by `Target` construction. */
struct ConfigSchema {
  using ConfigMap = ffi::Map<ffi::String, ffi::Any>;
  std::vector<OptionEntry> options;                      // declaration order
  std::unordered_map<std::string, size_t> key_to_index;  // key -> index into `options`
  ffi::TypedFunction<ConfigMap(ConfigMap)> canonicalizer;  // runs last in Resolve()
  bool error_on_unknown = true;
};

/*! \brief `tvm::TargetKindNode` (type key "target.TargetKind"). Only the first three fields are
 * reflected; the rest is private. */
struct TargetKindNode : public ffi::Object {
  ffi::String name;
  int default_device_type;
  ffi::Array<ffi::String> default_keys;
  ffi::TypedFunction<ConfigSchema::ConfigMap(ConfigSchema::ConfigMap)> target_canonicalizer;
  ConfigSchema schema;
  uint32_t index;  // the kind's index in the attribute registry
};

/*! \brief The data members of `tvm::TargetKindRegEntry`, in order. */
struct RegEntry {
  ffi::ObjectRef kind;  // a TargetKind, i.e. a reference to a TargetKindNode
  ffi::String name;
};

inline RegEntry& EntryOf(tvm::TargetKindRegEntry& entry) {
  return *reinterpret_cast<RegEntry*>(&entry);
}

// The layout documented in TVM_IR_REFERENCE.md section 3, as this compiler lays out the mirror.
// The run-time guard compares the same numbers with what the library itself reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // offsetof on a class deriving from Object
static_assert(sizeof(ffi::Object) == 24, "tvm-ffi object header changed");
static_assert(sizeof(ffi::String) == 16 && sizeof(ffi::Any) == 16, "tvm-ffi value sizes changed");
static_assert(sizeof(ffi::Function) == 8 && sizeof(ffi::ObjectRef) == 8,
              "tvm-ffi reference sizes changed");
static_assert(sizeof(OptionEntry) == 64, "OptionEntry mirror size");
static_assert(offsetof(OptionEntry, validator) == 32 && offsetof(OptionEntry, has_default) == 40 &&
                  offsetof(OptionEntry, default_from_factory) == 41 &&
                  offsetof(OptionEntry, default_value) == 48,
              "OptionEntry mirror layout");
static_assert(offsetof(ConfigSchema, key_to_index) == 24 &&
                  offsetof(ConfigSchema, canonicalizer) == 80 &&
                  offsetof(ConfigSchema, error_on_unknown) == 88,
              "ConfigSchema mirror layout (libstdc++ vector 24 B, unordered_map 56 B)");
static_assert(offsetof(TargetKindNode, name) == 24 &&
                  offsetof(TargetKindNode, default_device_type) == 40 &&
                  offsetof(TargetKindNode, default_keys) == 48 &&
                  offsetof(TargetKindNode, target_canonicalizer) == 56 &&
                  offsetof(TargetKindNode, schema) == 64 && offsetof(TargetKindNode, index) == 160,
              "TargetKindNode mirror layout");
static_assert(sizeof(TargetKindNode) == 168, "TargetKindNode mirror size");
static_assert(offsetof(RegEntry, name) == 8, "TargetKindRegEntry mirror layout");
#pragma GCC diagnostic pop

}  // namespace mirror
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_TARGET_TARGET_KIND_MIRROR_H_
