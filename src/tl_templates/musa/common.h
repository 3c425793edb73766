/*!
 * \file tl_templates/musa/common.h
 * \brief Base of the device template library: included first by every generated MUSA C translation unit.
 *
 * Compiles under mcc (the clang-based MUSA compiler, where __device__/__forceinline__ are keywords) and under
 * the CPU simulator, whose musa_runtime.h / musa_fp16.h / musa_bf16.h (src/tl_templates/sim/) give the same
 * names host-compiler meanings. Everything the MUSA printer (src/codegen/) emits beyond plain C lives here:
 *  - `half_t`, `bfloat16_t` (also at global scope) and `tl::vec<T, N>` with lane-wise operators;
 *  - `tl::cast` / `tl::vec_cast` / `tl::bit_cast` conversions;
 *  - `tl::floordiv` / `tl::floormod` / `tl::truncmod` (exact for negative operands), `tl::min` / `tl::max`;
 *  - `tl::broadcast`, `tl::ramp`, `tl::make_vec`, `tl::select`, `tl::gather`, `tl::scatter` for vector IR;
 *  - `tl::vec_of` and `tl::vec`'s conversion to MUSA's built-in vector types (`float4`, `half2`, ...), through
 *    which the printer views vector loads and stores;
 *  - `tl::infinity<T>()` and `tl::quiet_nan<T>()` for non-finite constants;
 *  - 8-bit float types, and the FP4 E2M1 conversions (`tl::fp4_e2m1_to_float`, `tl::float_to_fp4_e2m1`, ...).
 */
#pragma once

#include <musa_runtime.h>
#include <musa_fp16.h>
#include <musa_bf16.h>

#include <math.h>
#include <stdint.h>

#include <type_traits>

// The simulator's headers spell these qualifiers for the host compiler, so one definition serves both backends.
#define TL_HOST_DEVICE __host__ __device__ __forceinline__
#define TL_DEVICE __device__ __forceinline__
// Compile-time helpers that device code calls (in constants and static_asserts). CUDA-dialect compilers treat a
// plain constexpr function as host-only, and nvcc rejects calling one from device code; so they are host+device.
#define TL_CONSTEXPR __host__ __device__ constexpr

namespace tl {

/*! \brief An empty asm statement with a memory clobber: the compiler keeps memory accesses on their side of it; no
 *         instruction (T.fence_proxy_async, T.warpgroup_fence_operand: MUSA's TME and SQMMA need no proxy fence). */
TL_DEVICE void compiler_fence() { asm volatile("" ::: "memory"); }

using half_t = half;
using bfloat16_t = __mt_bfloat16;

// ---- 8-bit floats --------------------------------------------------------------------------------
// OCP FP8 E4M3 ("fn": finite, 0x7F/0xFF are NaN, max 448) and E5M2 (IEEE-like: infinities, max 57344), stored as
// their bits and converted in software, bit-exact with torch's conversions: round to nearest even; a value too large
// for E4M3 saturates to +-448, for E5M2 it becomes infinity (as torch does). Arithmetic goes through float. The
// "fnuz" variants (torch's float8_e4m3fnuz / float8_e5m2fnuz) are storage formats converted the same way.

namespace detail {

/*!
 * \brief |x|'s float bits (finite) rounded to nearest even into a minifloat with ManBits mantissa bits and exponent
 *        bias Bias: returns exponent << ManBits | mantissa, which exceeds the format's range for large |x| (the
 *        caller decides what overflow becomes).
 */
template <int ManBits, int Bias>
TL_HOST_DEVICE uint32_t round_to_minifloat(uint32_t abs_bits) {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - Bias) << 23;
  if (abs_bits < kMinNormal) {
    // Subnormal: adding 2^k, whose float ULP is the minifloat's subnormal step, rounds (to nearest even) in float.
    constexpr uint32_t kMagic = static_cast<uint32_t>(127 + 24 - Bias - ManBits) << 23;
    float magic, value;
    __builtin_memcpy(&magic, &kMagic, 4);
    __builtin_memcpy(&value, &abs_bits, 4);
    const float sum = value + magic;
    uint32_t sum_bits;
    __builtin_memcpy(&sum_bits, &sum, 4);
    return sum_bits - kMagic;
  }
  constexpr int kDrop = 23 - ManBits;
  const uint32_t odd = (abs_bits >> kDrop) & 1u;
  abs_bits += (static_cast<uint32_t>(Bias - 127) << 23) + ((1u << (kDrop - 1)) - 1u) + odd;
  return abs_bits >> kDrop;
}

}  // namespace detail

/*!
 * \brief A signed 8-bit float with ManBits mantissa bits and exponent bias Bias, stored as its bits. From float: NaN
 *        stays NaN (0x7F), everything else rounds to nearest even, and a magnitude beyond MaxFinite (infinity
 *        included) becomes Overflow: the largest finite value to saturate, the infinity code otherwise. FiniteOnly:
 *        only the all-ones magnitude is NaN (no infinities).
 */
template <int ManBits, int Bias, uint32_t MaxFinite, uint32_t Overflow, bool FiniteOnly>
struct fp8_t {
  uint8_t bits;
  fp8_t() = default;
  TL_HOST_DEVICE fp8_t(float x) {  // NOLINT: converts implicitly, as half_t does
    uint32_t f;
    __builtin_memcpy(&f, &x, 4);
    const uint32_t sign = (f >> 24) & 0x80u, abs_bits = f & 0x7FFFFFFFu;
    uint32_t magnitude = 0x7Fu;  // NaN
    if (abs_bits <= 0x7F800000u) {
      magnitude = abs_bits == 0x7F800000u ? Overflow : detail::round_to_minifloat<ManBits, Bias>(abs_bits);
      magnitude = magnitude > MaxFinite ? Overflow : magnitude;
    }
    bits = static_cast<uint8_t>(sign | magnitude);
  }
  TL_HOST_DEVICE operator float() const {
    constexpr uint32_t kExpMax = (1u << (7 - ManBits)) - 1u;
    const uint32_t magnitude = bits & 0x7Fu, exp = magnitude >> ManBits, man = magnitude & ((1u << ManBits) - 1u);
    float value;
    if (FiniteOnly ? magnitude == 0x7Fu : exp == kExpMax) {
      value = (FiniteOnly || man != 0) ? __builtin_nanf("") : __builtin_huge_valf();
    } else if (exp == 0) {
      constexpr uint32_t kStepBits = static_cast<uint32_t>(127 + 1 - Bias - ManBits) << 23;  // the subnormal step
      float step;
      __builtin_memcpy(&step, &kStepBits, 4);
      value = static_cast<float>(man) * step;
    } else {
      const uint32_t f = ((exp + 127 - Bias) << 23) | (man << (23 - ManBits));
      __builtin_memcpy(&value, &f, 4);
    }
    return (bits & 0x80u) ? -value : value;
  }
};

/*! \brief FP8 E4M3 (OCP, finite: 0x7F and 0xFF are NaN, max 448; torch saturates to it). */
using fp8_e4_t = fp8_t<3, 7, 0x7Eu, 0x7Eu, true>;
/*! \brief FP8 E5M2 (IEEE-like: infinities and NaNs, max 57344; beyond it, infinity). */
using fp8_e5_t = fp8_t<2, 15, 0x7Bu, 0x7Cu, false>;

/*!
 * \brief An 8-bit float of the "fnuz" kind (finite, no negative zero: the code 0x80 is the only NaN, as torch's
 *        float8_e4m3fnuz / float8_e5m2fnuz) with ManBits mantissa bits and exponent bias Bias. From float, as torch
 *        converts: round to nearest even; NaN, infinity and any magnitude that rounds beyond 0x7F become NaN; a
 *        result of zero is +0. No MUSA instruction reads these formats: kernels keep them as storage and compute
 *        through float.
 */
template <int ManBits, int Bias>
struct fp8_fnuz_t {
  uint8_t bits;
  fp8_fnuz_t() = default;
  TL_HOST_DEVICE fp8_fnuz_t(float x) {  // NOLINT: converts implicitly, as half_t does
    uint32_t f;
    __builtin_memcpy(&f, &x, 4);
    const uint32_t abs_bits = f & 0x7FFFFFFFu;
    if (abs_bits >= 0x7F800000u) {
      bits = 0x80u;
      return;
    }
    const uint32_t magnitude = detail::round_to_minifloat<ManBits, Bias>(abs_bits);
    bits = magnitude > 0x7Fu ? 0x80u : magnitude == 0 ? 0u : static_cast<uint8_t>(((f >> 24) & 0x80u) | magnitude);
  }
  TL_HOST_DEVICE operator float() const {
    if (bits == 0x80u) return __builtin_nanf("");
    const uint32_t magnitude = bits & 0x7Fu, exp = magnitude >> ManBits, man = magnitude & ((1u << ManBits) - 1u);
    float value;
    if (exp == 0) {
      constexpr uint32_t kStepBits = static_cast<uint32_t>(127 + 1 - Bias - ManBits) << 23;  // the subnormal step
      float step;
      __builtin_memcpy(&step, &kStepBits, 4);
      value = static_cast<float>(man) * step;
    } else {
      const uint32_t f = ((exp + 127 - Bias) << 23) | (man << (23 - ManBits));
      __builtin_memcpy(&value, &f, 4);
    }
    return (bits & 0x80u) ? -value : value;
  }
};

/*! \brief FP8 E4M3 fnuz (bias 8, max 240; beyond it, NaN). */
using fp8_e4fnuz_t = fp8_fnuz_t<3, 8>;
/*! \brief FP8 E5M2 fnuz (bias 16, max 57344; beyond it, NaN). */
using fp8_e5fnuz_t = fp8_fnuz_t<2, 16>;

/*!
 * \brief FP8 E8M0 (OCP MX scale: an unsigned power of two 2^(bits - 127); 0xFF is NaN). From float as torch: the
 *        float's exponent, plus one when the mantissa is at least half (more than half for subnormal floats);
 *        the sign is dropped; infinity and NaN become NaN.
 */
struct fp8_e8_t {
  uint8_t bits;
  fp8_e8_t() = default;
  TL_HOST_DEVICE fp8_e8_t(float x) {  // NOLINT: converts implicitly, as half_t does
    uint32_t f;
    __builtin_memcpy(&f, &x, 4);
    const uint32_t exp = (f >> 23) & 0xFFu, man = f & 0x7FFFFFu;
    uint32_t e = exp == 0xFFu ? 0xFFu : exp + (exp == 0 ? (man > 0x400000u) : (man >= 0x400000u));
    bits = static_cast<uint8_t>(e > 0xFFu ? 0xFFu : e);
  }
  TL_HOST_DEVICE operator float() const {
    if (bits == 0xFFu) return __builtin_nanf("");
    const uint32_t f = bits == 0 ? 0x00400000u : static_cast<uint32_t>(bits) << 23;  // 2^-127 is a subnormal
    float value;
    __builtin_memcpy(&value, &f, 4);
    return value;
  }
};

// ---- 4-bit floats (storage only) ------------------------------------------------------------------
// OCP FP4 E2M1 ("fn": 1 sign bit, 2 exponent bits with bias 1, 1 mantissa bit; the magnitudes 0, 0.5, 1, 1.5, 2, 3,
// 4, 6; no infinities, no NaN). Tensors hold two values a byte, the even element in the low nibble; there is no fp4
// arithmetic: kernels (transform/lower_fp4_storage.py) decode a nibble to float and encode a float into one; the
// nibble store, tl::fp4_e2m1_store, is an atomic update (atomic.h).

/*! \brief The value of the E2M1 code in the low 4 bits of `bits`. */
TL_HOST_DEVICE float fp4_e2m1_to_float(uint32_t bits) {
  const uint32_t magnitude = bits & 7u, exp = magnitude >> 1, man = magnitude & 1u;
  // exp 0: 0 or the subnormal 0.5; else (1 + man / 2) * 2^(exp - 1), as float bits.
  const uint32_t f = exp == 0 ? (man ? 0x3F000000u : 0u) : ((exp + 126u) << 23) | (man << 22);
  float value;
  __builtin_memcpy(&value, &f, 4);
  return (bits & 8u) ? -value : value;
}

/*! \brief Element `odd` (0: low nibble, 1: high nibble) of a byte of packed E2M1 values, as float. */
TL_HOST_DEVICE float fp4_e2m1_to_float(uint8_t byte, uint32_t odd) {
  return fp4_e2m1_to_float(static_cast<uint32_t>(byte) >> (odd ? 4 : 0));
}

/*! \brief The 4-bit code (0..15) of element `odd` of a byte of packed int4 / uint4 values (sign: the caller's). */
TL_HOST_DEVICE int int4_nibble(uint8_t byte, uint32_t odd) { return (byte >> (odd ? 4 : 0)) & 0xF; }

/*!
 * \brief Stores 4-bit `code` as element `odd` of the byte at `byte`: a read-modify-write of the byte (not atomic, as
 *        upstream's sub-byte stores): threads writing the two nibbles of one byte race.
 */
TL_HOST_DEVICE void int4_nibble_store(uint8_t* byte, uint32_t odd, int code) {
  const unsigned shift = odd ? 4u : 0u;
  *byte = static_cast<uint8_t>((*byte & ~(0xFu << shift)) | ((static_cast<unsigned>(code) & 0xFu) << shift));
}

/*! \brief The E2M1 code (0..15) of element `odd` of a byte of packed values: a copy without conversion. */
TL_HOST_DEVICE uint8_t fp4_e2m1_bits(uint8_t byte, uint32_t odd) {
  return static_cast<uint8_t>((byte >> (odd ? 4 : 0)) & 0xFu);
}

/*!
 * \brief `x` rounded to nearest even E2M1, as its code. A magnitude beyond 6 (infinity included) saturates to +-6,
 *        NaN becomes +6 (the format has neither); the sign of zero is kept.
 */
TL_HOST_DEVICE uint8_t float_to_fp4_e2m1(float x) {
  uint32_t f;
  __builtin_memcpy(&f, &x, 4);
  const uint32_t abs_bits = f & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return 0x7u;
  const uint32_t sign = (f >> 28) & 8u;
  const uint32_t magnitude = detail::round_to_minifloat<1, 1>(abs_bits);
  return static_cast<uint8_t>(sign | (magnitude > 7u ? 7u : magnitude));
}

namespace detail {

template <typename T>
struct is_half_like : std::integral_constant<bool, std::is_same<T, half_t>::value ||
                                                       std::is_same<T, bfloat16_t>::value ||
                                                       std::is_same<T, fp8_e4_t>::value ||
                                                       std::is_same<T, fp8_e5_t>::value ||
                                                       std::is_same<T, fp8_e8_t>::value ||
                                                       std::is_same<T, fp8_e4fnuz_t>::value ||
                                                       std::is_same<T, fp8_e5fnuz_t>::value> {};

// Alignment of an N-lane vector: its size when that is a power of two, capped at 16 bytes (the widest single
// access), so that a 16-byte-aligned array can be viewed as any vector of its elements.
TL_CONSTEXPR int vec_alignment(int bytes) {
  return (bytes & -bytes) < 16 ? (bytes & -bytes) : 16;
}

// The type arithmetic on T produces, before narrowing back to T (half_t + half_t may be float in the simulator).
template <typename T>
using identity_t = typename std::common_type<T>::type;

}  // namespace detail

// ---- conversions ---------------------------------------------------------------------------------

/*! \brief Value conversion. 16-bit float types convert through float (there is no direct half<->bfloat16). */
template <typename To, typename From>
TL_HOST_DEVICE To cast(const From& x) {
  if constexpr (std::is_same<To, From>::value) {
    return x;
  } else if constexpr (detail::is_half_like<To>::value || detail::is_half_like<From>::value) {
    return static_cast<To>(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

/*! \brief Reinterprets the bits of `from` (same size) as a `To`. */
template <typename To, typename From>
TL_HOST_DEVICE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "tl::bit_cast needs types of the same size");
  To to;
  __builtin_memcpy(&to, &from, sizeof(To));
  return to;
}

/*! \brief +infinity of T (float, double, half_t, bfloat16_t). */
template <typename T>
TL_HOST_DEVICE T infinity() {
  if constexpr (std::is_same<T, double>::value) {
    return __builtin_huge_val();
  } else {
    return cast<T>(__builtin_huge_valf());
  }
}

/*! \brief A quiet NaN of T (float, double, half_t, bfloat16_t). */
template <typename T>
TL_HOST_DEVICE T quiet_nan() {
  if constexpr (std::is_same<T, double>::value) {
    return __builtin_nan("");
  } else {
    return cast<T>(__builtin_nanf(""));
  }
}

// ---- vectors -------------------------------------------------------------------------------------

/*!
 * \brief N lanes of T, laid out like T[N]; the printer's spelling of TIR vector types (`float32x4`).
 * An aggregate: `tl::vec<float, 4>{{a, b, c, d}}` works, and a reinterpret_cast view of memory is a vector load.
 */
namespace detail {

// MUSA's built-in vector type of N lanes of T, where the printer uses one (BuiltinVectorName in
// src/codegen/musa_types.cc: keep the two lists equal), else `none`.
struct no_builtin_vector {};
template <typename T, int N>
struct builtin_vector {
  using type = no_builtin_vector;
};
// Every (lane type, lanes, built-in name) the printer uses: one list for the two tables below.
#define TL_FOR_EACH_BUILTIN_VECTOR(X)                                                                     \
  X(signed char, 2, char2) X(signed char, 3, char3) X(signed char, 4, char4)                              \
  X(unsigned char, 2, uchar2) X(unsigned char, 3, uchar3) X(unsigned char, 4, uchar4)                     \
  X(short, 2, short2) X(short, 3, short3) X(short, 4, short4)                                             \
  X(unsigned short, 2, ushort2) X(unsigned short, 3, ushort3) X(unsigned short, 4, ushort4)               \
  X(int, 2, int2) X(int, 3, int3) X(int, 4, int4)                                                         \
  X(unsigned int, 2, uint2) X(unsigned int, 3, uint3) X(unsigned int, 4, uint4)                           \
  X(float, 2, float2) X(float, 3, float3) X(float, 4, float4)                                             \
  X(int64_t, 2, longlong2) X(uint64_t, 2, ulonglong2) X(double, 2, double2) X(half_t, 2, half2)           \
  X(bfloat16_t, 2, __mt_bfloat162)
#define TL_BUILTIN_VECTOR(T, N, NAME) \
  template <>                         \
  struct builtin_vector<T, N> {       \
    using type = NAME;                \
  };
TL_FOR_EACH_BUILTIN_VECTOR(TL_BUILTIN_VECTOR)
#undef TL_BUILTIN_VECTOR

}  // namespace detail

template <typename T, int N>
struct alignas(detail::vec_alignment(static_cast<int>(sizeof(T)) * N)) vec {
  static_assert(N > 0, "tl::vec needs at least one lane");
  using value_type = T;
  static constexpr int size = N;
  using builtin_type = typename detail::builtin_vector<T, N>::type;
  T data[N];

  TL_HOST_DEVICE T& operator[](int i) { return data[i]; }
  TL_HOST_DEVICE const T& operator[](int i) const { return data[i]; }

  /*! \brief The same lanes as MUSA's built-in vector type (`float4`, `half2`, ...): a store through one. */
  TL_HOST_DEVICE operator builtin_type() const {  // NOLINT: converts implicitly, as a store of the lanes
    static_assert(sizeof(builtin_type) == sizeof(vec), "built-in vector layout");
    builtin_type r;
    __builtin_memcpy(&r, data, sizeof(r));
    return r;
  }

  /*! \brief All lanes equal to `value`. */
  static TL_HOST_DEVICE vec broadcast(const T& value) {
    vec r;
    for (int i = 0; i < N; ++i) r.data[i] = value;
    return r;
  }
};

/*! \brief The lanes of a built-in vector value (`float4`, `half2`, ...) as a tl::vec, for lane-wise arithmetic. */
#define TL_VEC_OF(T, N, NAME)                                        \
  TL_HOST_DEVICE vec<T, N> vec_of(const NAME& v) {                   \
    static_assert(sizeof(NAME) == sizeof(vec<T, N>), "built-in vector layout"); \
    vec<T, N> r;                                                     \
    __builtin_memcpy(r.data, &v, sizeof(r));                         \
    return r;                                                        \
  }
TL_FOR_EACH_BUILTIN_VECTOR(TL_VEC_OF)
#undef TL_VEC_OF
#undef TL_FOR_EACH_BUILTIN_VECTOR

template <typename T, int N>
TL_HOST_DEVICE vec<T, N> broadcast(const detail::identity_t<T>& value) {
  return vec<T, N>::broadcast(cast<T>(value));
}

/*! \brief Lanes base, base + stride, base + 2 * stride, ... */
template <typename T, int N>
TL_HOST_DEVICE vec<T, N> ramp(const detail::identity_t<T>& base, const detail::identity_t<T>& stride) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = static_cast<T>(base + static_cast<T>(i) * stride);
  return r;
}

/*! \brief A vector of the given lanes, each converted to T. */
template <typename T, typename... Lanes>
TL_HOST_DEVICE vec<T, static_cast<int>(sizeof...(Lanes))> make_vec(const Lanes&... lanes) {
  return vec<T, static_cast<int>(sizeof...(Lanes))>{{cast<T>(lanes)...}};
}

template <typename To, typename From, int N>
TL_HOST_DEVICE vec<To, N> vec_cast(const vec<From, N>& v) {
  vec<To, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = cast<To>(v.data[i]);
  return r;
}

/*! \brief Lane-wise `cond ? a : b` (both sides are evaluated, as for TIR Select). */
template <typename T, int N>
TL_HOST_DEVICE vec<T, N> select(const vec<bool, N>& cond, const vec<T, N>& a, const vec<T, N>& b) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = cond.data[i] ? a.data[i] : b.data[i];
  return r;
}

/*! \brief Loads ptr[index[i]] into lane i. */
template <typename T, typename I, int N>
TL_HOST_DEVICE vec<typename std::remove_cv<T>::type, N> gather(T* ptr, const vec<I, N>& index) {
  vec<typename std::remove_cv<T>::type, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = ptr[index.data[i]];
  return r;
}

/*! \brief Stores lane i of `value` to ptr[index[i]], in lane order. */
template <typename T, typename I, int N>
TL_HOST_DEVICE void scatter(T* ptr, const vec<I, N>& index, const vec<T, N>& value) {
  for (int i = 0; i < N; ++i) ptr[index.data[i]] = value.data[i];
}

// Lane-wise operators: vector-vector, vector-scalar and scalar-vector. Arithmetic narrows back to T (C promotes
// small integers and, in the simulator, half types); comparisons and logic give vec<bool, N>.
#define TL_VEC_BINARY_OPERATOR(OP, RESULT)                                                       \
  template <typename T, int N>                                                                   \
  TL_HOST_DEVICE vec<RESULT, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {            \
    vec<RESULT, N> r;                                                                            \
    for (int i = 0; i < N; ++i) r.data[i] = static_cast<RESULT>(a.data[i] OP b.data[i]);         \
    return r;                                                                                    \
  }                                                                                              \
  template <typename T, int N>                                                                   \
  TL_HOST_DEVICE vec<RESULT, N> operator OP(const vec<T, N>& a, const detail::identity_t<T>& b) { \
    return a OP vec<T, N>::broadcast(b);                                                         \
  }                                                                                              \
  template <typename T, int N>                                                                   \
  TL_HOST_DEVICE vec<RESULT, N> operator OP(const detail::identity_t<T>& a, const vec<T, N>& b) { \
    return vec<T, N>::broadcast(a) OP b;                                                         \
  }

TL_VEC_BINARY_OPERATOR(+, T)
TL_VEC_BINARY_OPERATOR(-, T)
TL_VEC_BINARY_OPERATOR(*, T)
TL_VEC_BINARY_OPERATOR(/, T)
TL_VEC_BINARY_OPERATOR(%, T)
TL_VEC_BINARY_OPERATOR(&, T)
TL_VEC_BINARY_OPERATOR(|, T)
TL_VEC_BINARY_OPERATOR(^, T)
TL_VEC_BINARY_OPERATOR(<<, T)
TL_VEC_BINARY_OPERATOR(>>, T)
TL_VEC_BINARY_OPERATOR(==, bool)
TL_VEC_BINARY_OPERATOR(!=, bool)
TL_VEC_BINARY_OPERATOR(<, bool)
TL_VEC_BINARY_OPERATOR(<=, bool)
TL_VEC_BINARY_OPERATOR(>, bool)
TL_VEC_BINARY_OPERATOR(>=, bool)
TL_VEC_BINARY_OPERATOR(&&, bool)
TL_VEC_BINARY_OPERATOR(||, bool)
#undef TL_VEC_BINARY_OPERATOR

#define TL_VEC_UNARY_OPERATOR(OP, RESULT)                                \
  template <typename T, int N>                                           \
  TL_HOST_DEVICE vec<RESULT, N> operator OP(const vec<T, N>& a) {        \
    vec<RESULT, N> r;                                                    \
    for (int i = 0; i < N; ++i) r.data[i] = static_cast<RESULT>(OP a.data[i]); \
    return r;                                                            \
  }

TL_VEC_UNARY_OPERATOR(-, T)
TL_VEC_UNARY_OPERATOR(~, T)
TL_VEC_UNARY_OPERATOR(!, bool)
#undef TL_VEC_UNARY_OPERATOR

// ---- arithmetic helpers --------------------------------------------------------------------------
// Operands may differ in spelling but not in TIR dtype (e.g. `long` and a `long long` literal for int64), so
// each helper computes in their common type.

/*! \brief Division rounding toward negative infinity (TIR floordiv); floor(a / b) for floating point. */
template <typename A, typename B>
TL_HOST_DEVICE typename std::common_type<A, B>::type floordiv(const A& a_, const B& b_) {
  using T = typename std::common_type<A, B>::type;
  const T a = static_cast<T>(a_), b = static_cast<T>(b_);
  if constexpr (std::is_integral<T>::value) {
    const T q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
  } else if constexpr (std::is_same<T, double>::value) {
    return floor(a / b);
  } else {
    return cast<T>(floorf(cast<float>(a) / cast<float>(b)));
  }
}

/*! \brief Remainder with the sign of the divisor (TIR floormod): a - floordiv(a, b) * b. */
template <typename A, typename B>
TL_HOST_DEVICE typename std::common_type<A, B>::type floormod(const A& a_, const B& b_) {
  using T = typename std::common_type<A, B>::type;
  const T a = static_cast<T>(a_), b = static_cast<T>(b_);
  if constexpr (std::is_integral<T>::value) {
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
  } else if constexpr (std::is_same<T, double>::value) {
    return a - floor(a / b) * b;
  } else {
    const float x = cast<float>(a), y = cast<float>(b);
    return cast<T>(x - floorf(x / y) * y);
  }
}

/*! \brief Remainder with the sign of the dividend (TIR truncmod, C `%`), also for floating point. */
template <typename A, typename B>
TL_HOST_DEVICE typename std::common_type<A, B>::type truncmod(const A& a_, const B& b_) {
  using T = typename std::common_type<A, B>::type;
  const T a = static_cast<T>(a_), b = static_cast<T>(b_);
  if constexpr (std::is_integral<T>::value) {
    return a % b;
  } else if constexpr (std::is_same<T, double>::value) {
    return fmod(a, b);
  } else {
    return cast<T>(fmodf(cast<float>(a), cast<float>(b)));
  }
}

namespace detail {

/*!
 * \brief max (kMax) or min of two values. Floating point follows fmax/fmin (a NaN operand loses; both NaN: the
 *        second) and orders -0 below +0, so the result does not depend on the operand order: `tl::max`/`tl::min`
 *        (T.max, T.min, the in-thread fold of T.reduce_max/min/absmax) and the cross-thread `tl::MaxOp`/`MinOp`
 *        (reduce.h) agree bit for bit, whatever the thread layout of a reduction.
 *
 * The ordered, unequal operands are tested first: two compares in the common case. Spelled with compares rather
 * than fmaxf, which the simulator's host compiler calls in libm, and whose result for two NaNs varies.
 */
template <bool kMax, typename T>
TL_HOST_DEVICE T extremum(T a, T b) {
  if constexpr (std::is_floating_point<T>::value || is_half_like<T>::value) {
    using C = typename std::conditional<is_half_like<T>::value, float, T>::type;
    using Bits = typename std::conditional<
        sizeof(T) == 1, uint8_t,
        typename std::conditional<sizeof(T) == 2, uint16_t,
                                  typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type>::type;
    const C x = cast<C>(a), y = cast<C>(b);
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__ && defined(__NO_SIGNED_ZEROS__)
    // fast math: the compiler may take NaNs as absent and -0 as +0 anyway (it folds the tests below away)
    return (kMax ? x < y : x > y) ? b : a;
#else
    if (kMax ? x > y : x < y) return a;
    if (kMax ? x < y : x > y) return b;
    if (x == y) {
      // Equal values differ at most in the sign of zero (the sign bit): AND keeps +0 for max, OR keeps -0 for min.
      const Bits u = bit_cast<Bits>(a), v = bit_cast<Bits>(b);
      return bit_cast<T>(static_cast<Bits>(kMax ? (u & v) : (u | v)));
    }
    return x != x ? b : a;  // unordered: the NaN loses; two NaNs give the second
#endif
  } else {
    return ((a > b) == kMax) ? a : b;
  }
}

}  // namespace detail

/*! \brief The smaller operand; floating point: a NaN operand loses (fmin), -0 is below +0 (detail::extremum).
 *         Works for half_t/bfloat16_t. */
template <typename A, typename B>
TL_HOST_DEVICE typename std::common_type<A, B>::type min(const A& a_, const B& b_) {
  using T = typename std::common_type<A, B>::type;
  return detail::extremum<false>(static_cast<T>(a_), static_cast<T>(b_));
}

/*! \brief The larger operand; floating point: a NaN operand loses (fmax), -0 is below +0 (detail::extremum).
 *         Works for half_t/bfloat16_t. */
template <typename A, typename B>
TL_HOST_DEVICE typename std::common_type<A, B>::type max(const A& a_, const B& b_) {
  using T = typename std::common_type<A, B>::type;
  return detail::extremum<true>(static_cast<T>(a_), static_cast<T>(b_));
}

// ---- explicit global loads and stores (T.ldg32/64/128/256, T.stg32/64/128/256) --------------------------------

/*! \brief Bits words of 32 bits: uint32_t for one, tl::vec<uint32_t, N> for more. */
template <int Words>
using global_word_t = typename std::conditional<Words == 1, uint32_t, vec<uint32_t, Words>>::type;

/*! \brief One `Words * 32`-bit load from `p` (aligned to its width). */
template <int Words>
TL_DEVICE global_word_t<Words> load_global(const void* p) {
  return *reinterpret_cast<const global_word_t<Words>*>(p);
}

/*! \brief The load when `pred` holds, else zero bits (the memory is not touched). */
template <int Words>
TL_DEVICE global_word_t<Words> load_global_conditional(const void* p, bool pred) {
  return pred ? load_global<Words>(p) : global_word_t<Words>{};
}

/*! \brief One `Words * 32`-bit store of `value` to `p` (aligned to its width); skipped when `pred` is false. */
template <int Words>
TL_DEVICE void store_global(void* p, const global_word_t<Words>& value, bool pred = true) {
  if (pred) *reinterpret_cast<global_word_t<Words>*>(p) = value;
}

#define TL_GLOBAL_ACCESS(BITS, WORDS)                                                                      \
  TL_DEVICE global_word_t<WORDS> load_global_##BITS(const void* p) { return load_global<WORDS>(p); }        \
  TL_DEVICE global_word_t<WORDS> load_global_##BITS##_conditional(const void* p, bool pred) {              \
    return load_global_conditional<WORDS>(p, pred);                                                        \
  }                                                                                                        \
  TL_DEVICE void store_global_##BITS(void* p, const global_word_t<WORDS>& v) { store_global<WORDS>(p, v); } \
  TL_DEVICE void store_global_##BITS##_conditional(void* p, const global_word_t<WORDS>& v, bool pred) {     \
    store_global<WORDS>(p, v, pred);                                                                       \
  }
TL_GLOBAL_ACCESS(32, 1)
TL_GLOBAL_ACCESS(64, 2)
TL_GLOBAL_ACCESS(128, 4)
TL_GLOBAL_ACCESS(256, 8)
#undef TL_GLOBAL_ACCESS

// ---- explicit shared-memory loads and stores (T.lds32/64/128, T.sts32/64/128) ------------------------------------
#define TL_SHARED_ACCESS(BITS, WORDS)                                                                        \
  TL_DEVICE global_word_t<WORDS> load_shared_##BITS(const void* p) {                                        \
    return *reinterpret_cast<const global_word_t<WORDS>*>(p);                                             \
  }                                                                                                        \
  TL_DEVICE void store_shared_##BITS(void* p, const global_word_t<WORDS>& v) {                              \
    *reinterpret_cast<global_word_t<WORDS>*>(p) = v;                                                       \
  }
TL_SHARED_ACCESS(32, 1)
TL_SHARED_ACCESS(64, 2)
TL_SHARED_ACCESS(128, 4)
#undef TL_SHARED_ACCESS

/*! \brief T.all_of: whether all `n` elements from `p` are nonzero. Each calling thread reads them all. */
template <typename T>
TL_DEVICE bool all_of(const T* p, int n) {
  for (int i = 0; i < n; ++i) {
    if (!static_cast<bool>(p[i])) return false;
  }
  return true;
}

/*! \brief T.any_of: whether any of the `n` elements from `p` is nonzero. Each calling thread reads them all. */
template <typename T>
TL_DEVICE bool any_of(const T* p, int n) {
  for (int i = 0; i < n; ++i) {
    if (static_cast<bool>(p[i])) return true;
  }
  return false;
}

/*! \brief T.__fns: the position of the |offset|-th set bit of `mask` counting from bit `base` (upward for offset > 0,
 * downward for offset < 0; offset 0 asks whether bit `base` itself is set), 0xFFFFFFFF if there is none. PTX's
 * `fns` semantics, in portable code (no MUSA built-in is documented for it). */
TL_DEVICE uint32_t fns(uint32_t mask, uint32_t base, int offset) {
  if (offset == 0) return (mask >> (base & 31u)) & 1u ? base : 0xFFFFFFFFu;
  int count = (offset > 0 ? offset : -offset) - 1;
  const int step = offset > 0 ? 1 : -1;
  for (int pos = static_cast<int>(base); pos >= 0 && pos < 32; pos += step) {
    if ((mask >> pos) & 1u) {
      if (count == 0) return static_cast<uint32_t>(pos);
      --count;
    }
  }
  return 0xFFFFFFFFu;
}

/*! \brief T.match_all_sync: __match_all_sync without its predicate output (the result is nonzero exactly when the
 *         predicate would be set). */
template <typename T>
TL_DEVICE unsigned match_all_sync(unsigned mask, T value) {
  int predicate;
  return __match_all_sync(mask, value, &predicate);
}

#define TL_VEC_BINARY_HELPER(NAME)                                                  \
  template <typename T, int N>                                                      \
  TL_HOST_DEVICE vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b) {           \
    vec<T, N> r;                                                                    \
    for (int i = 0; i < N; ++i) r.data[i] = static_cast<T>(NAME(a.data[i], b.data[i])); \
    return r;                                                                       \
  }

TL_VEC_BINARY_HELPER(floordiv)
TL_VEC_BINARY_HELPER(floormod)
TL_VEC_BINARY_HELPER(truncmod)
TL_VEC_BINARY_HELPER(min)
TL_VEC_BINARY_HELPER(max)
#undef TL_VEC_BINARY_HELPER

// ---- lane-wise math on vectors -------------------------------------------------------------------------------
// The printer calls `tl::vmath::expf(v)` for math on the vectors of vectorized loops. A namespace of their own:
// overloads named like the C functions inside `tl` itself would hide the scalar ones from the code above.
namespace vmath {
#define TL_VEC_MATH(F, ...)                                                         \
  template <typename T, int N>                                                      \
  TL_HOST_DEVICE vec<T, N> F(TL_VEC_MATH_PARAMS_##__VA_ARGS__) {                     \
    vec<T, N> r;                                                                    \
    for (int i = 0; i < N; ++i) r.data[i] = static_cast<T>(::F(TL_VEC_MATH_ARGS_##__VA_ARGS__)); \
    return r;                                                                       \
  }
#define TL_VEC_MATH_PARAMS_1 const vec<T, N>& a
#define TL_VEC_MATH_ARGS_1 a.data[i]
#define TL_VEC_MATH_PARAMS_2 const vec<T, N>& a, const vec<T, N>& b
#define TL_VEC_MATH_ARGS_2 a.data[i], b.data[i]
#define TL_VEC_MATH_PARAMS_3 const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c
#define TL_VEC_MATH_ARGS_3 a.data[i], b.data[i], c.data[i]
#define TL_VEC_MATH_F_AND_D(F, ARITY) TL_VEC_MATH(F##f, ARITY) TL_VEC_MATH(F, ARITY)
TL_VEC_MATH_F_AND_D(exp, 1) TL_VEC_MATH_F_AND_D(exp2, 1) TL_VEC_MATH_F_AND_D(exp10, 1) TL_VEC_MATH_F_AND_D(log, 1)
TL_VEC_MATH_F_AND_D(log2, 1) TL_VEC_MATH_F_AND_D(log10, 1) TL_VEC_MATH_F_AND_D(log1p, 1) TL_VEC_MATH_F_AND_D(sqrt, 1)
TL_VEC_MATH_F_AND_D(sin, 1) TL_VEC_MATH_F_AND_D(cos, 1) TL_VEC_MATH_F_AND_D(tan, 1) TL_VEC_MATH_F_AND_D(sinh, 1)
TL_VEC_MATH_F_AND_D(cosh, 1) TL_VEC_MATH_F_AND_D(tanh, 1) TL_VEC_MATH_F_AND_D(asin, 1) TL_VEC_MATH_F_AND_D(acos, 1)
TL_VEC_MATH_F_AND_D(atan, 1) TL_VEC_MATH_F_AND_D(asinh, 1) TL_VEC_MATH_F_AND_D(acosh, 1)
TL_VEC_MATH_F_AND_D(atanh, 1) TL_VEC_MATH_F_AND_D(erf, 1) TL_VEC_MATH_F_AND_D(fabs, 1) TL_VEC_MATH_F_AND_D(floor, 1)
TL_VEC_MATH_F_AND_D(ceil, 1) TL_VEC_MATH_F_AND_D(trunc, 1) TL_VEC_MATH_F_AND_D(round, 1)
TL_VEC_MATH_F_AND_D(nearbyint, 1) TL_VEC_MATH_F_AND_D(pow, 2) TL_VEC_MATH_F_AND_D(fmod, 2)
TL_VEC_MATH_F_AND_D(atan2, 2) TL_VEC_MATH_F_AND_D(hypot, 2) TL_VEC_MATH_F_AND_D(copysign, 2)
TL_VEC_MATH_F_AND_D(nextafter, 2) TL_VEC_MATH_F_AND_D(fma, 3)
// rsqrtf is a device built-in with no host declaration every toolchain shares: lane-wise 1 / sqrtf (at least as
// accurate as the built-in's approximation).
template <typename T, int N>
TL_HOST_DEVICE vec<T, N> rsqrtf(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = static_cast<T>(1.0f / ::sqrtf(a.data[i]));
  return r;
}
#undef TL_VEC_MATH_F_AND_D
#undef TL_VEC_MATH
#undef TL_VEC_MATH_PARAMS_1
#undef TL_VEC_MATH_ARGS_1
#undef TL_VEC_MATH_PARAMS_2
#undef TL_VEC_MATH_ARGS_2
#undef TL_VEC_MATH_PARAMS_3
#undef TL_VEC_MATH_ARGS_3
}  // namespace vmath

// A pure extern function of vector type (`call_pure_extern("float32x4", "rsqrtf", v)`), which names a scalar C
// function: the printer calls it lane by lane, `tl::lanewise<float, 4>([](auto... x) { return rsqrtf(x...); }, v)`,
// each operand evaluated once; a scalar operand is the same in every lane.
template <typename T, int N>
TL_HOST_DEVICE T lane_of(const vec<T, N>& v, int i) {
  return v.data[i];
}
template <typename T>
TL_HOST_DEVICE T lane_of(const T& scalar, int) {
  return scalar;
}
template <typename T, int N, typename F, typename... Args>
TL_HOST_DEVICE vec<T, N> lanewise(F f, const Args&... args) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r.data[i] = static_cast<T>(f(lane_of(args, i)...));
  return r;
}

// ---- accelerated ops --------------------------------------------------------------------------------------------

/*! \brief bfloat16(float(x[i]) * y[i]) for 4 lanes, each rounded once to nearest even
 *         (T.mul_half_float_to_bfloat16_x4, and what the compiler fuses Cast(bf16, Cast(f32, x) * y) into). */
TL_HOST_DEVICE vec<bfloat16_t, 4> mul_half_float_to_bfloat16_x4(const vec<half_t, 4>& x, const vec<float, 4>& y) {
  vec<bfloat16_t, 4> out;
#pragma unroll
  for (int i = 0; i < 4; ++i) out.data[i] = cast<bfloat16_t>(static_cast<float>(x.data[i]) * y.data[i]);
  return out;
}

// ---- packed two-lane arithmetic (T.add2, T.sub2, T.mul2, T.fma2, T.max2, T.min2, T.abs2) ------------------------
// Lane by lane in T: each lane is computed in float and rounded once to T (exact for a 16-bit T's add, sub and mul,
// which float holds exactly before rounding; fma2 rounds the fused float result). max2 / min2 follow fmaxf / fminf.
#define TL_PACKED2(NAME, EXPR)                                                                 \
  template <typename T>                                                                        \
  TL_HOST_DEVICE vec<T, 2> NAME(const vec<T, 2>& a, const vec<T, 2>& b) {                      \
    vec<T, 2> r;                                                                               \
    for (int i = 0; i < 2; ++i) {                                                              \
      const float x = static_cast<float>(a.data[i]), y = static_cast<float>(b.data[i]);        \
      r.data[i] = cast<T>(EXPR);                                                               \
    }                                                                                          \
    return r;                                                                                  \
  }
TL_PACKED2(add2, x + y)
TL_PACKED2(sub2, x - y)
TL_PACKED2(mul2, x * y)
TL_PACKED2(max2, ::fmaxf(x, y))
TL_PACKED2(min2, ::fminf(x, y))
#undef TL_PACKED2

template <typename T>
TL_HOST_DEVICE vec<T, 2> fma2(const vec<T, 2>& a, const vec<T, 2>& b, const vec<T, 2>& c) {
  vec<T, 2> r;
  for (int i = 0; i < 2; ++i) {
    r.data[i] = cast<T>(::fmaf(static_cast<float>(a.data[i]), static_cast<float>(b.data[i]),
                               static_cast<float>(c.data[i])));
  }
  return r;
}

template <typename T>
TL_HOST_DEVICE vec<T, 2> abs2(const vec<T, 2>& a) {
  vec<T, 2> r;
  for (int i = 0; i < 2; ++i) r.data[i] = cast<T>(::fabsf(static_cast<float>(a.data[i])));
  return r;
}

// ---- warps ------------------------------------------------------------------------------------------------------
// The warp size of the arch being compiled: __MUSA_ARCH_LIST__ names one arch and is defined in both of mcc's passes.
#if defined(__MUSA_ARCH_LIST__) && __MUSA_ARCH_LIST__ < 300
constexpr int kWarpSize = 128;  // mp_21 / mp_22
#else
constexpr int kWarpSize = 32;  // mp_31 / mp_32
#endif

/*! \brief The calling thread's id in the block, x fastest. */
TL_DEVICE int linear_thread_id() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

/*! \brief Lane of the calling thread in its warp of WarpSize threads (T.get_lane_idx). */
template <int WarpSize = kWarpSize>
TL_DEVICE int get_lane_idx() {
  return linear_thread_id() % WarpSize;
}

/*! \brief Warp of the calling thread in the block (T.get_warp_idx). */
template <int WarpSize = kWarpSize>
TL_DEVICE int get_warp_idx() {
  return linear_thread_id() / WarpSize;
}

}  // namespace tl

using tl::bfloat16_t;
using tl::fp8_e4_t;
using tl::fp8_e5_t;
using tl::fp8_e8_t;
using tl::fp8_e4fnuz_t;
using tl::fp8_e5fnuz_t;
using tl::half_t;
