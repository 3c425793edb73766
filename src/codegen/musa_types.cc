/*!
 * \file musa_types.cc
 * \brief MUSA C spellings of TIR dtypes and constants (see musa_types.h).
 */
#include "codegen/musa_types.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

namespace tilelang_musa {
namespace codegen {

namespace {

[[noreturn]] void Unsupported(DataType dtype, const char* what) {
  TVM_FFI_THROW(ValueError) << "MUSA codegen: dtype `" << dtype.str() << "` has no MUSA C " << what
                            << " (supported: float16/32/64, bfloat16, float8_e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0fnu, int8..64, "
                               "uint8..64, bool, handle, and vectors of those)";
  TVM_FFI_UNREACHABLE();
}

std::string ScalarTypeName(DataType t) {
  if (t.is_bool()) return "bool";
  if (t.is_handle()) return "void*";
  if (t.is_bfloat16()) return "bfloat16_t";
  if (t.is_float8()) {
    switch (t.code()) {
      case DataType::kFloat8E4M3FN: return "fp8_e4_t";
      case DataType::kFloat8E4M3FNUZ: return "fp8_e4fnuz_t";
      case DataType::kFloat8E5M2: return "fp8_e5_t";
      case DataType::kFloat8E5M2FNUZ: return "fp8_e5fnuz_t";
      default: return "fp8_e8_t";
    }
  }
  if (t.is_float()) {
    switch (t.bits()) {
      case 16: return "half_t";
      case 32: return "float";
      case 64: return "double";
    }
  } else if (t.is_int()) {
    switch (t.bits()) {
      case 8: return "signed char";
      case 16: return "short";
      case 32: return "int";
      case 64: return "int64_t";
    }
  } else if (t.is_uint()) {
    switch (t.bits()) {
      case 8: return "unsigned char";
      case 16: return "unsigned short";
      case 32: return "unsigned int";
      case 64: return "uint64_t";
    }
  }
  Unsupported(t, "type");
}

// Shortest scientific form with at least 7 significant digits that parses back to exactly `value`.
template <typename F>
std::string ExactScientific(F value) {
  constexpr int kMaxPrecision = std::numeric_limits<F>::max_digits10 - 1;
  char buf[64];
  for (int precision = 6;; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision, static_cast<double>(value));
    // Parse as the device compiler will: a float literal is rounded to float directly, not through double.
    F back;
    if constexpr (std::is_same_v<F, float>) {
      back = std::strtof(buf, nullptr);
    } else {
      back = std::strtod(buf, nullptr);
    }
    if (back == value || precision >= kMaxPrecision) break;
  }
  return buf;
}

}  // namespace

std::string BuiltinVectorName(DataType dtype) {
  const int lanes = dtype.lanes();
  if (lanes < 2 || lanes > 4) return "";
  if (dtype.is_float16()) return lanes == 2 ? "half2" : "";
  if (dtype.is_bfloat16()) return lanes == 2 ? "__mt_bfloat162" : "";
  const char* prefix = nullptr;
  if (dtype.is_integer()) {
    const bool u = dtype.is_uint();
    switch (dtype.bits()) {
      case 8: prefix = u ? "uchar" : "char"; break;
      case 16: prefix = u ? "ushort" : "short"; break;
      case 32: prefix = u ? "uint" : "int"; break;
      case 64: prefix = lanes == 2 ? (u ? "ulonglong" : "longlong") : nullptr; break;
    }
  } else if (dtype.is_float()) {
    if (dtype.bits() == 32) prefix = "float";
    if (dtype.bits() == 64 && lanes == 2) prefix = "double";
  }
  return prefix == nullptr ? "" : std::string(prefix) + std::to_string(lanes);
}

std::string ValueTypeName(DataType dtype) {
  if (dtype.lanes() < 1) Unsupported(dtype, "type (scalable vectors)");
  std::string elem = ScalarTypeName(dtype.element());
  if (dtype.is_scalar()) return elem;
  if (dtype.is_handle()) Unsupported(dtype, "type (vector of handles)");
  return "tl::vec<" + elem + ", " + std::to_string(dtype.lanes()) + ">";
}

std::string CTypeName(DataType dtype) {
  std::string builtin = dtype.lanes() > 1 && !dtype.is_handle() ? BuiltinVectorName(dtype) : "";
  return builtin.empty() ? ValueTypeName(dtype) : builtin;
}

std::string PointeeTypeName(const ObjectRef& pointer_type) {
  static const TypeKey prim_type("ir.PrimType");
  ObjectRef elem = PointerTypeView(pointer_type).element_type();
  if (!IsA(elem, prim_type)) return "void";
  DataType dtype = PrimTypeView(elem).dtype();
  // `void` (an untyped T.ptr / T.handle) is the opaque-handle code with no bits and no lanes.
  return dtype.is_handle() && dtype.bits() == 0 && dtype.lanes() == 0 ? "void" : ValueTypeName(dtype);
}

std::string IntLiteral(DataType dtype, int64_t value) {
  if (dtype.is_vector()) Unsupported(dtype, "scalar literal");
  if (dtype.is_bool()) return value ? "true" : "false";
  if (dtype.is_handle()) {
    if (value == 0) return "nullptr";
    Unsupported(dtype, "non-null pointer literal");
  }
  if (dtype.is_floating()) return FloatLiteral(dtype, static_cast<double>(value));
  const int bits = dtype.bits();
  if (dtype.is_uint()) {
    uint64_t u = static_cast<uint64_t>(value);
    if (bits == 64) return std::to_string(u) + "ull";
    if (bits == 32) return std::to_string(u) + "u";
    return "((" + ScalarTypeName(dtype) + ")" + std::to_string(u) + ")";
  }
  if (!dtype.is_int()) Unsupported(dtype, "integer literal");
  // The most negative value has no literal: `-2147483648` is unary minus applied to a long.
  if (bits == 64) {
    if (value == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1LL)";
    return value < 0 ? "(" + std::to_string(value) + "LL)" : std::to_string(value) + "LL";
  }
  if (bits == 32) {
    if (value == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
    return value < 0 ? "(" + std::to_string(value) + ")" : std::to_string(value);
  }
  if (bits == 8 || bits == 16) return "((" + ScalarTypeName(dtype) + ")" + std::to_string(value) + ")";
  Unsupported(dtype, "integer literal");
}

std::string FloatLiteral(DataType dtype, double value) {
  if (dtype.is_vector()) Unsupported(dtype, "scalar literal");
  if (!dtype.is_floating()) Unsupported(dtype, "float literal");
  const std::string type = ScalarTypeName(dtype);
  if (std::isnan(value)) return "tl::quiet_nan<" + type + ">()";
  if (std::isinf(value)) return value > 0 ? "tl::infinity<" + type + ">()" : "(-tl::infinity<" + type + ">())";
  std::string text;
  if (dtype.bits() == 64) {
    text = ExactScientific<double>(value);
  } else {
    // float16/bfloat16/float8 values are exactly representable as float; their constructor rounds nothing.
    text = ExactScientific<float>(static_cast<float>(value)) + "f";
  }
  if (dtype.is_half_like()) return type + "(" + text + ")";
  return value < 0 || std::signbit(value) ? "(" + text + ")" : text;
}

std::string StringLiteral(const std::string& value) {
  std::ostringstream os;
  os << '"';
  for (unsigned char c : value) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      case '\r': os << "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\%03o", c);  // octal: never swallows a following hex digit
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
  return os.str();
}

}  // namespace codegen
}  // namespace tilelang_musa
