// Warp shuffles and votes; built for mp_22 (128-lane warps) and mp_31 (32-lane warps). Blocks hold two warps so
// that exchanges must stay inside each warp.
#include <musa_runtime.h>

#include <cstdio>

// Butterfly sum over the whole warp: every lane ends with the warp's total.
extern "C" __global__ void xor_reduce(const float* __restrict__ in, float* __restrict__ out) {
  float v = in[threadIdx.x];
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

// The four shuffle kinds with one (width, arg) for every lane; out[t * 4 + k] for k = idx, up, down, xor.
extern "C" __global__ void shuffle_kinds(const int* __restrict__ in, int* __restrict__ out, int width, int arg) {
  const int v = in[threadIdx.x];
  int* o = out + threadIdx.x * 4;
  o[0] = __shfl_sync(0xffffffffu, v, arg, width);
  o[1] = __shfl_up_sync(0xffffffffu, v, arg, width);
  o[2] = __shfl_down_sync(0xffffffffu, v, arg, width);
  o[3] = __shfl_xor_sync(0xffffffffu, v, arg, width);
}

// Two disjoint lane groups shuffle at the same time with their own masks; the first group also reads lanes
// outside its mask (undefined on the device, all-one bits here).
extern "C" __global__ void split_masks(const int* __restrict__ in, int* __restrict__ out) {
  const int v = in[threadIdx.x];
  const int lane = threadIdx.x % warpSize;
  int* o = out + threadIdx.x * 2;
  if ((lane & 31) < 16) {
    o[0] = __shfl_xor_sync(0x0000ffffu, v, 1);
    o[1] = __shfl_xor_sync(0x0000ffffu, v, 16);
  } else {
    o[0] = __shfl_down_sync(0xffff0000u, v, 1, 16);
    o[1] = 0;
  }
}

// Votes over the warp and a counting block barrier: out[t * 5 + k] for any, all, ballot (0 on 128-lane warps),
// __syncthreads_count, and __activemask after a __syncwarp.
extern "C" __global__ void votes(const int* __restrict__ pred, int* __restrict__ out) {
  const int p = pred[threadIdx.x];
  int* o = out + threadIdx.x * 5;
  o[0] = __any_sync(0xffffffffu, p);
  o[1] = __all_sync(0xffffffffu, p);
#if __MUSA_ARCH__ >= 300
  o[2] = static_cast<int>(__ballot_sync(0xffffffffu, p));
#else
  o[2] = 0;
#endif
  o[3] = __syncthreads_count(p);
  __syncwarp();
  o[4] = static_cast<int>(__activemask());
}

// Lanes 0..15 of each 32 leave; the others then ask which lanes are active.
extern "C" __global__ void early_exit_activemask(int* __restrict__ out) {
  if ((threadIdx.x & 31) < 16) return;
  out[threadIdx.x] = static_cast<int>(__activemask());
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }
extern "C" int warp_size() { return warpSize; }

static int finish(musaError_t err) {
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

extern "C" int call_xor_reduce(const float* in, float* out) {
  void* args[] = {&in, &out};
  return finish(musaLaunchKernel(xor_reduce, dim3(1), dim3(2 * warpSize), args, 0, nullptr));
}
extern "C" int call_shuffle_kinds(const int* in, int* out, int width, int arg) {
  void* args[] = {&in, &out, &width, &arg};
  return finish(musaLaunchKernel(shuffle_kinds, dim3(1), dim3(2 * warpSize), args, 0, nullptr));
}
extern "C" int call_split_masks(const int* in, int* out) {
  void* args[] = {&in, &out};
  return finish(musaLaunchKernel(split_masks, dim3(1), dim3(2 * warpSize), args, 0, nullptr));
}
extern "C" int call_votes(const int* pred, int* out) {
  void* args[] = {&pred, &out};
  return finish(musaLaunchKernel(votes, dim3(1), dim3(2 * warpSize), args, 0, nullptr));
}
extern "C" int call_early_exit_activemask(int* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(early_exit_activemask, dim3(1), dim3(2 * warpSize), args, 0, nullptr));
}
