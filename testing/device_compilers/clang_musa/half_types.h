/*!
 * \file testing/device_compilers/clang_musa/half_types.h
 * \brief The 16-bit float types of musa_fp16.h / musa_bf16.h for clang's syntax check, with the public API of
 *        CUDA's cuda_fp16.h / cuda_bf16.h that MUSA's headers copy (names with `__mt_` for bfloat16).
 *
 * What matters to the check is the overload set: construction from the arithmetic types and conversion to float
 * (host and device), arithmetic and comparison operators between two values of the type (not with float: there,
 * as with CUDA's headers and the simulator's, `h + 1.0f` is ambiguous). Declarations only.
 */
#pragma once

#define TL_SHIM_HALF_TYPE(T, T2)                                                          \
  struct T {                                                                              \
    unsigned short __x;                                                                   \
    T() = default;                                                                        \
    __host__ __device__ T(float f);                                                       \
    __host__ __device__ T(double f);                                                      \
    __host__ __device__ T(int i);                                                         \
    __host__ __device__ T(unsigned int i);                                                \
    __host__ __device__ T(short i);                                                       \
    __host__ __device__ T(unsigned short i);                                              \
    __host__ __device__ T(long long i);                                                   \
    __host__ __device__ T(unsigned long long i);                                          \
    __host__ __device__ operator float() const;                                           \
    __host__ __device__ T& operator=(float f);                                            \
    __host__ __device__ T& operator=(double f);                                           \
  };                                                                                      \
  struct T2 {                                                                             \
    T x, y;                                                                               \
  };                                                                                      \
  __host__ __device__ T operator+(const T& a, const T& b);                                \
  __host__ __device__ T operator-(const T& a, const T& b);                                \
  __host__ __device__ T operator*(const T& a, const T& b);                                \
  __host__ __device__ T operator/(const T& a, const T& b);                                \
  __host__ __device__ T& operator+=(T& a, const T& b);                                    \
  __host__ __device__ T& operator-=(T& a, const T& b);                                    \
  __host__ __device__ T& operator*=(T& a, const T& b);                                    \
  __host__ __device__ T& operator/=(T& a, const T& b);                                    \
  __host__ __device__ T operator-(const T& a);                                            \
  __host__ __device__ T operator+(const T& a);                                            \
  __host__ __device__ bool operator==(const T& a, const T& b);                            \
  __host__ __device__ bool operator!=(const T& a, const T& b);                            \
  __host__ __device__ bool operator<(const T& a, const T& b);                             \
  __host__ __device__ bool operator<=(const T& a, const T& b);                            \
  __host__ __device__ bool operator>(const T& a, const T& b);                             \
  __host__ __device__ bool operator>=(const T& a, const T& b);                            \
  __device__ T __shfl_sync(unsigned int mask, T var, int src_lane, int width = warpSize); \
  __device__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = warpSize);

TL_SHIM_HALF_TYPE(__half, __half2)
TL_SHIM_HALF_TYPE(__mt_bfloat16, __mt_bfloat162)
#undef TL_SHIM_HALF_TYPE

typedef __half half;
typedef __half2 half2;

__host__ __device__ __half __float2half(float f);
__host__ __device__ __half __float2half_rn(float f);
__host__ __device__ __half __float2half_rz(float f);  // CUDA's directed roundings (MUSA's headers copy them)
__host__ __device__ __half __float2half_rd(float f);
__host__ __device__ __half __float2half_ru(float f);
__host__ __device__ float __half2float(__half h);
__host__ __device__ __mt_bfloat16 __float2bfloat16(float f);
__host__ __device__ __mt_bfloat16 __float2bfloat16_rn(float f);
__host__ __device__ __mt_bfloat16 __float2bfloat16_rz(float f);
__host__ __device__ __mt_bfloat16 __float2bfloat16_rd(float f);
__host__ __device__ __mt_bfloat16 __float2bfloat16_ru(float f);
__host__ __device__ float __bfloat162float(__mt_bfloat16 h);
__device__ __half atomicAdd(__half* address, __half val);
__device__ __mt_bfloat16 atomicAdd(__mt_bfloat16* address, __mt_bfloat16 val);
__device__ __half2 atomicAdd(__half2* address, __half2 val);
__device__ __mt_bfloat162 atomicAdd(__mt_bfloat162* address, __mt_bfloat162 val);
__device__ __half hrint(const __half h);
__device__ __mt_bfloat16 hrint(const __mt_bfloat16 h);
