// Threads exchange values through static shared memory: each thread writes its element, then reads its right
// neighbour's. With the barrier the neighbour has written; without it (thread 0 runs first in the simulator) the
// read sees the poison fill. Also exported: a per-block isolation kernel where only thread 0 of each block writes.
#include <musa_runtime.h>

#include <cstdio>

extern "C" __global__ void __launch_bounds__(256, 1) exchange_synced(const float* __restrict__ in,
                                                                     float* __restrict__ out) {
  __shared__ __align__(16) float s[256];
  const int t = threadIdx.x;
  const int base = blockIdx.x * blockDim.x;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[(t + 1) % blockDim.x];
}

extern "C" __global__ void __launch_bounds__(256, 1) exchange_unsynced(const float* __restrict__ in,
                                                                       float* __restrict__ out) {
  __shared__ __align__(16) float s[256];
  const int t = threadIdx.x;
  const int base = blockIdx.x * blockDim.x;
  s[t] = in[base + t];
  out[base + t] = s[(t + 1) % blockDim.x];
}

// Thread 0 of block b writes s[b] only; after the barrier it copies all of s: every other slot must still be
// poison, never a value a previous block wrote.
extern "C" __global__ void __launch_bounds__(32, 1) block_isolation(float* __restrict__ out, int n) {
  __shared__ float s[64];
  if (threadIdx.x == 0) s[blockIdx.x] = static_cast<float>(blockIdx.x);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < n; ++i) out[blockIdx.x * n + i] = s[i];
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

static int launch_exchange(bool synced, const float* in, float* out, int blocks, int threads) {
  dim3 grid(blocks, 1, 1);
  dim3 block(threads, 1, 1);
  void* args[] = {&in, &out};
  musaError_t err = synced ? musaLaunchKernel(exchange_synced, grid, block, args, 0, nullptr)
                           : musaLaunchKernel(exchange_unsynced, grid, block, args, 0, nullptr);
  if (err != musaSuccess) {
    snprintf(tl_error_buf, sizeof(tl_error_buf), "exchange: %s", musaGetErrorString(err));
    return -1;
  }
  return 0;
}

extern "C" int call_synced(const float* in, float* out, int blocks, int threads) {
  return launch_exchange(true, in, out, blocks, threads);
}
extern "C" int call_unsynced(const float* in, float* out, int blocks, int threads) {
  return launch_exchange(false, in, out, blocks, threads);
}

extern "C" int call_isolation(float* out, int blocks) {
  int n = blocks;
  void* args[] = {&out, &n};
  musaError_t err = musaLaunchKernel(block_isolation, dim3(blocks), dim3(32), args, 0, nullptr);
  if (err != musaSuccess) {
    snprintf(tl_error_buf, sizeof(tl_error_buf), "block_isolation: %s", musaGetErrorString(err));
    return -1;
  }
  return 0;
}
