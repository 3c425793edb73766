/*!
 * \file target/musa_target.cc
 * \brief Registers the `musa` TargetKind (Moore Threads GPUs) with the stock apache-tvm registry.
 *
 * `Target({"kind": "musa", "arch": "mp_22"})` then works like any built-in kind: options are
 * type-checked, defaults filled, unknown options rejected, and a canonicalizer derives the
 * per-arch attributes (warp size, shared memory per block) that stock passes read.
 *
 * The wheel exports no API that declares options, so they are written into the kind's private
 * ConfigSchema through the mirror in target_kind_mirror.h. Before writing anything a guard checks
 * that mirror against the library: reflection metadata of `target.TargetKind`, and the `cuda`
 * kind read through the mirror compared with `ListTargetKindOptions`. On any mismatch nothing is
 * registered and the reason is reported by `tilelang_musa.target.registration_error`.
 */
#include "target/target_kind_mirror.h"

#include "target/musa_archs.h"

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/reflection/accessor.h>
#include <tvm/ffi/reflection/registry.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tilelang_musa {
namespace {

namespace ffi = ::tvm::ffi;
namespace refl = ::tvm::ffi::reflection;
using ConfigMap = ffi::Map<ffi::String, ffi::Any>;

constexpr const char* kKindName = "musa";
constexpr const char* kTargetKindTypeKey = "target.TargetKind";
constexpr const char* kTargetTypeKey = "target.Target";
// A kind libtvm_compiler registers itself: the guard reads it through the mirror.
constexpr const char* kReferenceKind = "cuda";

constexpr int64_t kDefaultMaxNumThreads = 1024;

int64_t RequirePositive(const ConfigMap& config, const char* key) {
  int64_t value = config.at(key).cast<int64_t>();
  if (value <= 0) {
    TVM_FFI_THROW(ValueError) << "musa target: option '" << key << "' must be positive, got "
                              << value;
  }
  return value;
}

/*! \brief Runs last in Target construction, after validation and defaults. Options it derives
 * from `arch` have no default in the schema, so an explicit value survives to here and is kept. */
ConfigMap CanonicalizeMusaConfig(ConfigMap config) {
  std::string arch = config.count("arch") ? std::string(config.at("arch").cast<ffi::String>())
                                          : std::string(kDefaultArch);
  const MusaArch* defaults = FindArch(arch);
  if (defaults == nullptr) {
    TVM_FFI_THROW(ValueError) << "musa target: unknown arch \"" << arch
                              << "\"; accepted: " << AcceptedArchList();
  }
  if (!config.count("thread_warp_size")) {
    config.Set("thread_warp_size", defaults->thread_warp_size);
  }
  if (!config.count("max_shared_memory_per_block")) {
    config.Set("max_shared_memory_per_block", defaults->max_shared_memory_per_block);
  }
  for (const char* key : {"thread_warp_size", "max_shared_memory_per_block", "max_num_threads"}) {
    RequirePositive(config, key);
  }
  return config;
}

// ---------------------------------------------------------------------------------------------
// Options: the base options every kind gets from TVM_REGISTER_TARGET_KIND, then ours.
// ---------------------------------------------------------------------------------------------
struct OptionSpec {
  std::string key;
  std::string type_str;
  ffi::TypedFunction<ffi::Any(ffi::Any)> validator;
  std::optional<ffi::Any> default_value;
};

/*! \brief A value's type as users write it: strings short enough to be stored inline report the
 * type key "ffi.SmallStr", which means nothing to them. */
std::string UserTypeName(const ffi::Any& value) {
  int32_t index = value.type_index();
  if (index == ffi::TypeIndex::kTVMFFISmallStr || index == ffi::TypeIndex::kTVMFFIStr) return "str";
  return value.GetTypeKey();
}

/*! \brief The check of ConfigSchema's generated validators, with their message except for how
 * the offending type is named. */
template <typename T>
OptionSpec TypedOption(const std::string& key,
                       std::optional<ffi::Any> default_value = std::nullopt) {
  std::string type_str = ffi::TypeTraits<T>::TypeStr();
  auto validate = [key, type_str](ffi::Any value) -> ffi::Any {
    std::optional<T> converted = value.try_cast<T>();
    if (!converted.has_value()) {
      TVM_FFI_THROW(TypeError) << "Option '" << key << "': expected type '" << type_str
                               << "' but got '" << UserTypeName(value) << "'";
    }
    return ffi::Any(*std::move(converted));
  };
  return OptionSpec{key, type_str, ffi::TypedFunction<ffi::Any(ffi::Any)>(validate),
                    std::move(default_value)};
}

/*! \brief `host`: declared as a Target, whose class this plugin cannot name. Target parsing
 * strips `host` before validation, so this only guards direct schema use. */
OptionSpec TargetOption(const std::string& key) {
  auto validate = [key](ffi::Any value) -> ffi::Any {
    int32_t target_index = 0;
    TVMFFIByteArray type_key{kTargetTypeKey, std::char_traits<char>::length(kTargetTypeKey)};
    if (TVMFFITypeKeyToIndex(&type_key, &target_index) != 0 || value.type_index() != target_index) {
      TVM_FFI_THROW(TypeError) << "Option '" << key << "': expected type '" << kTargetTypeKey
                               << "' but got '" << UserTypeName(value) << "'";
    }
    return value;
  };
  return OptionSpec{key, kTargetTypeKey, ffi::TypedFunction<ffi::Any(ffi::Any)>(validate),
                    std::nullopt};
}

std::vector<OptionSpec> BaseOptions() {
  using StrArray = ffi::Array<ffi::String>;
  return {TypedOption<ffi::String>("kind"),        TypedOption<StrArray>("keys"),
          TypedOption<ffi::String>("tag"),         TypedOption<ffi::String>("device"),
          TypedOption<ffi::String>("model"),       TypedOption<StrArray>("libs"),
          TargetOption("host"),                    TypedOption<int64_t>("from_device"),
          TypedOption<int64_t>("target_device_type")};
}

std::vector<OptionSpec> MusaOptions() {
  std::vector<OptionSpec> options = BaseOptions();
  options.push_back(TypedOption<ffi::String>("arch", ffi::Any(ffi::String(kDefaultArch))));
  options.push_back(TypedOption<int64_t>("thread_warp_size"));  // derived from arch
  options.push_back(TypedOption<int64_t>("max_num_threads", ffi::Any(kDefaultMaxNumThreads)));
  options.push_back(TypedOption<int64_t>("max_shared_memory_per_block"));  // derived from arch
  return options;
}

// ---------------------------------------------------------------------------------------------
// Layout guard.
// ---------------------------------------------------------------------------------------------
ffi::Function GlobalFunc(const char* name) {
  ffi::Optional<ffi::Function> func = ffi::Function::GetGlobal(name);
  if (!func.has_value()) {
    TVM_FFI_THROW(RuntimeError) << "libtvm_compiler does not define `" << name << "`";
  }
  return *func;
}

bool IsRegisteredKind(const std::string& name) {
  auto kinds = GlobalFunc("target.ListTargetKinds")().cast<ffi::Array<ffi::String>>();
  return std::any_of(kinds.begin(), kinds.end(), [&](const ffi::String& k) { return k == name; });
}

int32_t TypeIndexOf(const char* type_key) {
  int32_t index = -1;
  TVMFFIByteArray key{type_key, std::char_traits<char>::length(type_key)};
  TVM_FFI_CHECK_SAFE_CALL(TVMFFITypeKeyToIndex(&key, &index));
  return index;
}

/*! \brief Reflection metadata of target.TargetKind against the mirror; safe to run first, since
 * it reads no kind through the mirror. */
void CheckReflectedLayout(std::vector<std::string>* problems) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  const std::pair<const char*, int64_t> fields[] = {
      {"name", offsetof(mirror::TargetKindNode, name)},
      {"default_device_type", offsetof(mirror::TargetKindNode, default_device_type)},
      {"default_keys", offsetof(mirror::TargetKindNode, default_keys)}};
#pragma GCC diagnostic pop
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(TypeIndexOf(kTargetKindTypeKey));
  if (info->metadata == nullptr || info->metadata->total_size != sizeof(mirror::TargetKindNode)) {
    std::ostringstream os;
    os << "target.TargetKind total_size is "
       << (info->metadata ? info->metadata->total_size : -1) << ", the mirror's is "
       << sizeof(mirror::TargetKindNode);
    problems->push_back(os.str());
  }
  for (const auto& [field, offset] : fields) {
    int64_t reflected = refl::GetFieldInfo(kTargetKindTypeKey, field)->offset;
    if (reflected != offset) {
      std::ostringstream os;
      os << "target.TargetKind." << field << " is at offset " << reflected << ", the mirror's at "
         << offset;
      problems->push_back(os.str());
    }
  }
}

/*! \brief Reads kind `name` through the mirror and compares it with what the library reports
 * (reflection getters, ListTargetKindOptions, registry size). Returns the mismatches. */
std::vector<std::string> CheckKindLayout(const std::string& name) {
  std::vector<std::string> problems;
  CheckReflectedLayout(&problems);
  if (!problems.empty()) return problems;
  if (!IsRegisteredKind(name)) return {"target kind \"" + name + "\" is not registered"};

  const mirror::RegEntry& entry = mirror::EntryOf(tvm::TargetKindRegEntry::RegisterOrGet(name));
  if (entry.name != name) {
    problems.push_back("registry entry name is \"" + std::string(entry.name) + "\"");
  }
  if (!entry.kind.defined() || entry.kind->type_index() != TypeIndexOf(kTargetKindTypeKey)) {
    problems.push_back("registry entry of \"" + name + "\" does not hold a target.TargetKind");
    return problems;
  }
  const auto* node = static_cast<const mirror::TargetKindNode*>(entry.kind.get());
  auto reflected = [&](const char* field) {
    return refl::FieldGetter(kTargetKindTypeKey, field)(node);
  };
  if (node->name != name || reflected("name").cast<ffi::String>() != node->name) {
    problems.push_back("TargetKind.name read through the mirror is \"" + std::string(node->name) +
                       "\"");
  }
  if (reflected("default_device_type").cast<int64_t>() != node->default_device_type) {
    problems.push_back("TargetKind.default_device_type differs from its reflected value");
  }
  if (!reflected("default_keys").cast<ffi::ObjectRef>().same_as(node->default_keys)) {
    problems.push_back("TargetKind.default_keys differs from its reflected value");
  }

  const mirror::ConfigSchema& schema = node->schema;
  auto listed = GlobalFunc("target.ListTargetKindOptionsFromName")(ffi::String(name))
                    .cast<ffi::Map<ffi::String, ffi::String>>();
  size_t num_options = schema.options.size();
  if (listed.size() != num_options || schema.key_to_index.size() != num_options) {
    std::ostringstream os;
    os << "\"" << name << "\" lists " << listed.size() << " options; the mirrored schema has "
       << num_options << " options and " << schema.key_to_index.size() << " index entries";
    problems.push_back(os.str());
    return problems;
  }
  for (size_t i = 0; i < num_options; ++i) {
    const mirror::OptionEntry& option = schema.options[i];
    std::string key(option.key);
    auto it = schema.key_to_index.find(key);
    if (!listed.count(option.key) || listed.at(option.key) != option.type_str ||
        it == schema.key_to_index.end() || it->second != i || option.validator == nullptr) {
      problems.push_back("mirrored option #" + std::to_string(i) + " (\"" + key + "\": \"" +
                         std::string(option.type_str) + "\") disagrees with the library");
    }
  }
  if (!schema.error_on_unknown) problems.push_back("ConfigSchema.error_on_unknown_ reads false");
  // set_target_canonicalizer() is the only writer of both, and writes the same function.
  if (node->target_canonicalizer.packed().get() != schema.canonicalizer.packed().get()) {
    problems.push_back("the kind's and the schema's canonicalizers differ");
  }
  auto num_kinds = GlobalFunc("target.ListTargetKinds")().cast<ffi::Array<ffi::String>>().size();
  if (node->index >= num_kinds) problems.push_back("TargetKindNode.index_ is out of range");

  // Every kind starts with the base options: ours must still be the library's.
  std::vector<OptionSpec> base = BaseOptions();
  for (size_t i = 0; i < base.size() && i < schema.options.size(); ++i) {
    if (schema.options[i].key != base[i].key || schema.options[i].type_str != base[i].type_str) {
      problems.push_back("base option #" + std::to_string(i) + " of \"" + name + "\" is \"" +
                         std::string(schema.options[i].key) + "\", not \"" + base[i].key + "\"");
    }
  }
  return problems;
}

std::string JoinProblems(const std::vector<std::string>& problems) {
  std::ostringstream os;
  for (const std::string& p : problems) os << "\n  - " << p;
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Registration.
// ---------------------------------------------------------------------------------------------
bool HasOptions(const mirror::ConfigSchema& schema, const std::vector<OptionSpec>& specs) {
  if (schema.options.size() != specs.size()) return false;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (schema.options[i].key != specs[i].key || schema.options[i].type_str != specs[i].type_str) {
      return false;
    }
  }
  return true;
}

void RegisterMusaKind() {
  std::vector<std::string> problems = CheckKindLayout(kReferenceKind);
  if (!problems.empty()) {
    TVM_FFI_THROW(RuntimeError)
        << "the target-kind registry of this apache-tvm build does not match the layout "
           "tilelang_musa was written for (apache-tvm 0.27.0.post1), so the `musa` kind was not "
           "registered:"
        << JoinProblems(problems);
  }
  std::vector<OptionSpec> specs = MusaOptions();
  bool existed = IsRegisteredKind(kKindName);
  mirror::RegEntry& entry = mirror::EntryOf(tvm::TargetKindRegEntry::RegisterOrGet(kKindName));
  auto* node = const_cast<mirror::TargetKindNode*>(
      static_cast<const mirror::TargetKindNode*>(entry.kind.get()));
  if (existed) {
    // The library was loaded a second time (from another path): the first load registered it.
    if (node->name == kKindName && node->default_device_type == kDLExtDev &&
        HasOptions(node->schema, specs)) {
      return;
    }
    TVM_FFI_THROW(RuntimeError) << "a `musa` target kind with other options is already "
                                   "registered; refusing to modify it";
  }

  node->name = kKindName;
  node->default_device_type = kDLExtDev;  // what torch_musa tensors report through DLPack
  node->default_keys = ffi::Array<ffi::String>{"musa", "gpu"};
  mirror::ConfigSchema& schema = node->schema;
  for (OptionSpec& spec : specs) {
    mirror::OptionEntry option;
    option.key = spec.key;
    option.type_str = spec.type_str;
    option.validator = std::move(spec.validator);
    if (spec.default_value.has_value()) {
      option.has_default = true;
      option.default_value = *spec.default_value;
    }
    schema.key_to_index[spec.key] = schema.options.size();
    schema.options.push_back(std::move(option));
  }
  auto canonicalizer = ffi::TypedFunction<ConfigMap(ConfigMap)>(CanonicalizeMusaConfig);
  node->target_canonicalizer = canonicalizer;
  schema.canonicalizer = canonicalizer;  // Resolve() uses this one

  problems = CheckKindLayout(kKindName);
  if (!problems.empty()) {
    TVM_FFI_THROW(RuntimeError) << "the registered `musa` kind fails its own layout check:"
                                << JoinProblems(problems);
  }
}

/*! \brief Empty when registration succeeded. A function-local static, so that it is
 * constructed before the static initialiser below writes it. */
std::string& RegistrationError() {
  static std::string error;
  return error;
}

}  // namespace

// An exception escaping a static initialiser would abort the host process inside dlopen, so the
// failure is recorded here and raised by `tilelang_musa.target` on first use.
TVM_FFI_STATIC_INIT_BLOCK() {
  try {
    RegisterMusaKind();
  } catch (const ffi::Error& e) {
    RegistrationError() = e.message();
  } catch (const std::exception& e) {
    RegistrationError() = e.what();
  }
  if (!RegistrationError().empty()) {
    std::fprintf(stderr, "tilelang_musa: %s\n", RegistrationError().c_str());
  }
}

// Loading a second copy of this library (another path) runs this again: GlobalDef throws on a
// name that exists, so the first load's functions are kept.
TVM_FFI_STATIC_INIT_BLOCK() {
  auto define_once = [](const char* name, auto func) {
    if (!ffi::Function::GetGlobal(name).has_value()) refl::GlobalDef().def(name, std::move(func));
  };
  try {
    define_once("tilelang_musa.target.registration_error",
                []() -> ffi::String { return RegistrationError(); });
    // Diagnostics: reads any registered kind through the mirror; empty when it agrees.
    define_once("tilelang_musa.target.check_kind_layout", [](const ffi::String& kind) {
      ffi::Array<ffi::String> problems;
      for (const std::string& p : CheckKindLayout(kind)) problems.push_back(p);
      return problems;
    });
    // The arch table (musa_archs.h), for testing/test_target.py to compare with tilelang_musa/target.py.
    define_once("tilelang_musa.target.list_archs", []() {
      ffi::Array<ConfigMap> archs;
      for (const MusaArch& arch : kArchs) {
        ConfigMap row;
        row.Set("name", ffi::String(arch.name));
        row.Set("warp_size", arch.thread_warp_size);
        row.Set("max_shared_memory_per_block", arch.max_shared_memory_per_block);
        row.Set("has_async_barriers", arch.has_async_barriers);
        archs.push_back(row);
      }
      return archs;
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tilelang_musa: %s\n", e.what());
  }
}

}  // namespace tilelang_musa
