/*!
 * \file musa_types.h
 * \brief MUSA C spellings of TIR dtypes and of integer/float constants.
 *
 * Scalars: float32 `float`, float64 `double`, float16 `half_t`, bfloat16 `bfloat16_t`, int8..int64
 * `signed char`/`short`/`int`/`int64_t`, uint8..uint64 `unsigned char`/`unsigned short`/`unsigned int`/`uint64_t`,
 * bool `bool`, handle `void*`. Vectors: `tl::vec<T, N>` (src/tl_templates/musa/common.h) for values; memory is
 * viewed through MUSA's built-in vector type where the dtype has one (BuiltinVectorName), as upstream prints it.
 */
#ifndef TILELANG_MUSA_CODEGEN_MUSA_TYPES_H_
#define TILELANG_MUSA_CODEGEN_MUSA_TYPES_H_

#include <cstdint>
#include <string>

#include "codegen/ir_view.h"

namespace tilelang_musa {
namespace codegen {

/*!
 * \brief MUSA's built-in vector type for a vector dtype, or "" where none exists: 2 to 4 lanes of an 8- to 32-bit
 * integer or float32 (`char4`, `uchar2`, `short3`, `int4`, `uint2`, `float4`, ...), 2 lanes of a 64-bit one
 * (`longlong2`, `ulonglong2`, `double2`; their 4-lane types are 32 bytes, deprecated by CUDA 13's headers),
 * `half2` and `__mt_bfloat162`. Layout and lanes are those of `tl::vec<T, N>`, so either views the same bytes.
 */
std::string BuiltinVectorName(DataType dtype);

/*!
 * \brief The C type of a scalar or vector dtype as memory is viewed: the built-in vector type where one exists
 * (BuiltinVectorName), else `tl::vec<T, N>`; throws naming the dtype when MUSA C has no spelling for it.
 */
std::string CTypeName(DataType dtype);

/*! \brief The C type of a scalar or vector value computed lane by lane: always `tl::vec<T, N>` for vectors. */
std::string ValueTypeName(DataType dtype);

/*! \brief The C element type an `ir.PointerType` points to: its PrimType's spelling, or `void`. */
std::string PointeeTypeName(const ObjectRef& pointer_type);

/*! \brief An exact integer (or bool) literal of `dtype`, e.g. `7`, `7LL`, `7u`, `((short)7)`, `(-3)`. */
std::string IntLiteral(DataType dtype, int64_t value);

/*!
 * \brief An exact float literal of `dtype`: the shortest `%e` form that reads back to the same value, e.g.
 * `1.000000e+00f`, `half_t(5.000000e-01f)`, and `tl::infinity<float>()` / `tl::quiet_nan<float>()` for inf/nan.
 */
std::string FloatLiteral(DataType dtype, double value);

/*! \brief A C string literal with escapes, for StringImm arguments (e.g. format strings of extern calls). */
std::string StringLiteral(const std::string& value);

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_MUSA_TYPES_H_
