/*!
 * \file name_table.cc
 * \brief Identifier sanitising and uniquing (see name_table.h).
 */
#include "codegen/name_table.h"

#include <cctype>

namespace tilelang_musa {
namespace codegen {

namespace {

// Names a generated identifier must never take: C++ keywords, MUSA built-ins and qualifiers, and the names the
// printed code refers to unqualified (template-library namespace and types, math functions of extern calls).
const std::unordered_set<std::string>& ReservedNames() {
  static const std::unordered_set<std::string> names = {
      // C++17 keywords and alternative tokens
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
      "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast", "continue", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept",
      "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast",
      "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
      "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor",
      "xor_eq", "NULL", "main",
      // fixed-width types and the template library
      "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
      "tl", "std", "half", "half_t", "bfloat16_t", "__mt_bfloat16",
      // MUSA kernel language
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "buf_dyn_shmem", "dim3", "musa",
      "INFINITY", "NAN",
      // math functions that extern calls print unqualified
      "exp", "expf", "exp2", "exp2f", "exp10", "exp10f", "log", "logf", "log2", "log2f", "log10", "log10f",
      "log1p", "log1pf", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "pow", "powf", "sin", "sinf", "cos", "cosf", "tan",
      "tanf", "tanh", "tanhf", "fabs", "fabsf", "abs", "floor", "floorf", "ceil", "ceilf", "round", "roundf",
      "trunc", "truncf", "fmod", "fmodf", "fma", "fmaf", "min", "max", "fmin", "fminf", "fmax", "fmaxf",
      "isnan", "isinf", "isfinite", "erf", "erff"};
  return names;
}

std::string Sanitize(const std::string& hint, const std::string& fallback) {
  std::string out;
  out.reserve(hint.size());
  for (char c : hint) {
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_');
  }
  // Collapse what sanitising left meaningless ("", "_", "__") and avoid the reserved `__x` / `_X` forms.
  size_t first = out.find_first_not_of('_');
  if (first == std::string::npos) return fallback;
  out = out.substr(first);
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = fallback + "_" + out;
  return out;
}

}  // namespace

NameTable::NameTable() = default;

void NameTable::Reserve(const std::string& name) { used_.insert(name); }

std::string NameTable::Fresh(const std::string& hint, const std::string& fallback) {
  std::string base = Sanitize(hint, fallback);
  std::string name = base;
  int& suffix = next_suffix_[base];
  while (used_.count(name) || ReservedNames().count(name)) {
    name = base + "_" + std::to_string(++suffix);
  }
  used_.insert(name);
  return name;
}

bool NameTable::IsValidIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return !ReservedNames().count(name);
}

}  // namespace codegen
}  // namespace tilelang_musa
