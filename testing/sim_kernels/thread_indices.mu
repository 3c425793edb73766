// Multi-dimensional launches: every thread records its coordinates, the launch extents, and the order in which
// it ran within its block (the simulator runs thread 0 first, then each in linear order until it waits).
#include <musa_runtime.h>

#include <cstdio>

extern "C" __global__ void record(int* __restrict__ out, int* __restrict__ order) {
  const int block_linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread_linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  const int gid = block_linear * threads + thread_linear;
  const int first = atomicAdd(&order[block_linear * 2], 1);  // before the barrier: order of first run
  __syncthreads();
  const int second = atomicAdd(&order[block_linear * 2 + 1], 1);  // after it: order of wake-up
  int* o = out + gid * 14;
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
  o[6] = blockDim.x; o[7] = blockDim.y; o[8] = blockDim.z;
  o[9] = gridDim.x; o[10] = gridDim.y; o[11] = gridDim.z;
  o[12] = first; o[13] = second;
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

extern "C" int call(int* out, int* order, const unsigned* grid3, const unsigned* block3) {
  void* args[] = {&out, &order};
  musaError_t err = musaLaunchKernel(record, dim3(grid3[0], grid3[1], grid3[2]), dim3(block3[0], block3[1], block3[2]),
                                     args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
