// Dynamic shared memory: the kernel fills the first `filled` floats of buf_dyn_shmem, then (after a barrier) each
// thread copies the buffer out in reverse. Launches above 48 KiB need musaFuncSetAttribute first, as on the device.
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

extern "C" __global__ void __launch_bounds__(128, 1) reverse_dynamic(float* __restrict__ out, int n, int filled,
                                                                     unsigned long long* __restrict__ align) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  float* s = reinterpret_cast<float*>(buf_dyn_shmem);
  for (int i = threadIdx.x; i < filled; i += blockDim.x) s[i] = static_cast<float>(i);
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
  if (threadIdx.x == 0) *align = reinterpret_cast<uintptr_t>(buf_dyn_shmem) % 4096;
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// Returns 0, or the failing musaError_t with its message in get_last_error().
extern "C" int set_smem_limit(int bytes) {
  musaError_t err = musaFuncSetAttribute(reverse_dynamic, musaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

extern "C" int call(float* out, int smem_bytes, int filled, unsigned long long* align) {
  int n = smem_bytes / 4;
  void* args[] = {&out, &n, &filled, &align};
  musaError_t err = musaLaunchKernel(reverse_dynamic, dim3(1), dim3(128), args, smem_bytes, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
