// Host-callable wrappers over the fp16 / bf16 conversions and arithmetic, checked bit for bit against numpy and
// torch by the tests. One kernel also moves half values through shared memory and a warp shuffle.
#include <musa_runtime.h>
#include <musa_fp16.h>
#include <musa_bf16.h>

#include <cstdint>
#include <cstdio>

extern "C" void half_bits_to_float(const uint16_t* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half2float(__ushort_as_half(in[i]));
}
extern "C" void bf16_bits_to_float(const uint16_t* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}
extern "C" void float_to_half_bits(const float* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half_as_ushort(__float2half(in[i]));
}
extern "C" void double_to_half_bits(const double* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half_as_ushort(__double2half(in[i]));
}
extern "C" void float_to_bf16_bits(const float* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __bfloat16_as_ushort(__float2bfloat16(in[i]));
}
extern "C" void double_to_bf16_bits(const double* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __bfloat16_as_ushort(__double2bfloat16(in[i]));
}
extern "C" void int_to_half_bits(const long long* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half_as_ushort(half(in[i]));
}

// out[k * n + i] for k = +, -, *, /, fma(a, b, c) on bit patterns.
extern "C" void half_ops(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]), z = __ushort_as_half(c[i]);
    out[0 * n + i] = __half_as_ushort(x + y);
    out[1 * n + i] = __half_as_ushort(x - y);
    out[2 * n + i] = __half_as_ushort(x * y);
    out[3 * n + i] = __half_as_ushort(x / y);
    out[4 * n + i] = __half_as_ushort(__hfma(x, y, z));
  }
}
extern "C" void bf16_ops(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const __mt_bfloat16 x = __ushort_as_bfloat16(a[i]), y = __ushort_as_bfloat16(b[i]), z = __ushort_as_bfloat16(c[i]);
    out[0 * n + i] = __bfloat16_as_ushort(x + y);
    out[1 * n + i] = __bfloat16_as_ushort(x - y);
    out[2 * n + i] = __bfloat16_as_ushort(x * y);
    out[3 * n + i] = __bfloat16_as_ushort(x / y);
    out[4 * n + i] = __bfloat16_as_ushort(__hfma(x, y, z));
  }
}

// Each thread stores its half in shared memory, then returns its xor-neighbour's value, read back from shared
// memory and moved through a shuffle, as bfloat16. Kernel and entry point take 16-bit types as parameters, so
// they must still be exported.
extern "C" __global__ void half_roundtrip(const half* __restrict__ in, __mt_bfloat16* __restrict__ out) {
  __shared__ half s[64];
  s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  const half mine = s[threadIdx.x];
  out[threadIdx.x] = __float2bfloat16(__half2float(__shfl_xor_sync(0xffffffffu, mine, 1)));
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

extern "C" int call_half_roundtrip(const half* in, __mt_bfloat16* out) {
  void* args[] = {&in, &out};
  musaError_t err = musaLaunchKernel(half_roundtrip, dim3(1), dim3(64), args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
