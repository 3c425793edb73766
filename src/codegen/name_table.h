/*!
 * \file name_table.h
 * \brief Unique, valid C identifiers for the variables and buffers of one kernel.
 *
 * TIR names may be empty, contain dots ("blockIdx.x"), start with a digit, repeat, or be C++ keywords. Each
 * is sanitised, then suffixed (`_1`, `_2`, ...) until it collides with nothing already used in the kernel nor
 * with a reserved name (keywords, MUSA built-ins, the template library's names), so every declaration in the
 * printed kernel has its own name and C++ block scoping never matters.
 */
#ifndef TILELANG_MUSA_CODEGEN_NAME_TABLE_H_
#define TILELANG_MUSA_CODEGEN_NAME_TABLE_H_

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace tilelang_musa {
namespace codegen {

class NameTable {
 public:
  NameTable();
  /*! \brief Reserves an exact name (e.g. the kernel's own); later requests for it get a suffix. */
  void Reserve(const std::string& name);
  /*! \brief A fresh identifier derived from `hint`; `fallback` is used when `hint` has no usable character. */
  std::string Fresh(const std::string& hint, const std::string& fallback = "v");
  /*! \brief True when `name` is a valid C identifier that is not reserved (used to validate kernel names). */
  static bool IsValidIdentifier(const std::string& name);

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, int> next_suffix_;
};

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_NAME_TABLE_H_
