// Kernels that break the rules of block and warp collectives. Each must fail its launch with an error code and a
// message naming the block, the thread and the construct, never hang, and leave the library usable.
#include <musa_runtime.h>

#include <cassert>
#include <cstdio>

// Threads 32.. exit while threads 0..31 wait at the barrier.
extern "C" __global__ void exit_while_waiting(int* out) {
  if (threadIdx.x < 32) __syncthreads();
  out[threadIdx.x] = 1;
}

// The mirror image: threads 0..31 exit first, then the others reach a barrier they can never pass.
extern "C" __global__ void barrier_after_exit(int* out) {
  if (threadIdx.x < 32) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Lane 0 of warp 0 goes to the block barrier while lanes 1..31 shuffle with a mask that names lane 0.
extern "C" __global__ void barrier_vs_shuffle(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x == 0) {
    __syncthreads();
  } else if (threadIdx.x < 32) {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = v;
}

// Even lanes shuffle-xor, odd lanes shuffle-down, both naming the whole warp.
extern "C" __global__ void mixed_shuffles(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x % 2 == 0) v = __shfl_xor_sync(0xffffffffu, v, 1);
  else v = __shfl_down_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

extern "C" __global__ void trap_in_block_one(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 5) __trap();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

extern "C" __global__ void failing_assert(int* out) {
  assert(threadIdx.x != 3);
  out[threadIdx.x] = 1;
}

extern "C" __global__ void healthy(int* out) {
  __syncthreads();
  out[threadIdx.x] = static_cast<int>(threadIdx.x);
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// which: 0 exit_while_waiting, 1 barrier_after_exit, 2 barrier_vs_shuffle, 3 mixed_shuffles, 4 trap, 5 assert,
// 6 healthy. Returns 0 or the launch's musaError_t, with its message in get_last_error().
extern "C" int call(int which, int* out) {
  void* args[] = {&out};
  dim3 block(64);
  musaError_t err = musaErrorInvalidValue;
  switch (which) {
    case 0: err = musaLaunchKernel(exit_while_waiting, dim3(1), block, args, 0, nullptr); break;
    case 1: err = musaLaunchKernel(barrier_after_exit, dim3(1), block, args, 0, nullptr); break;
    case 2: err = musaLaunchKernel(barrier_vs_shuffle, dim3(1), block, args, 0, nullptr); break;
    case 3: err = musaLaunchKernel(mixed_shuffles, dim3(1), dim3(32), args, 0, nullptr); break;
    case 4: err = musaLaunchKernel(trap_in_block_one, dim3(2), block, args, 0, nullptr); break;
    case 5: err = musaLaunchKernel(failing_assert, dim3(1), block, args, 0, nullptr); break;
    case 6: err = musaLaunchKernel(healthy, dim3(1), block, args, 0, nullptr); break;
  }
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
