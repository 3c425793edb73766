// Cooperative launches and the grid barrier (sim/grid_barrier.h): a kernel whose blocks read what other blocks
// wrote before the barrier, and kernels that break the barrier's rules. Each broken one must fail its launch with
// a message naming the kernel, the block and the barrier's line, never hang, and leave the library usable.
#include <musa_runtime.h>
#include <cooperative_groups.h>

#include <cstdio>

// Every block writes its slice, then reads the mirrored slice another block wrote, twice over (two barriers).
extern "C" __global__ void mirror_add(float* a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = static_cast<float>(i);
  cooperative_groups::this_grid().sync();
  const float mirrored = a[n - 1 - i];
  cooperative_groups::this_grid().sync();
  a[i] += mirrored;
}

// Block 1 ends without reaching the barrier the others wait at.
extern "C" __global__ void block_leaves_early(float* a, int n) {
  if (blockIdx.x == 1) return;
  cooperative_groups::this_grid().sync();
  a[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(n);
}

// Thread 5 of each block skips the barrier: the block barrier inside the grid barrier reports it.
extern "C" __global__ void thread_skips(float* a, int n) {
  if (threadIdx.x != 5) cooperative_groups::this_grid().sync();
  a[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(n);
}

// Block 2 traps while the others wait at the barrier: its error is the launch's.
extern "C" __global__ void block_traps(float* a, int n) {
  if (blockIdx.x == 2) __trap();
  cooperative_groups::this_grid().sync();
  a[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(n);
}

// Block 3 spins forever on memory nobody writes while the others wait at the barrier: the watchdog ends it.
extern "C" __global__ void block_spins(float* a, int n) {
  if (blockIdx.x == 3)
    while (*reinterpret_cast<volatile float*>(&a[n - 1]) != -1.0f) {
    }
  cooperative_groups::this_grid().sync();
  a[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(n);
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// which: 0 mirror_add, 1 block_leaves_early, 2 thread_skips, 3 block_traps, 4 block_spins; cooperative: musaLaunchCooperativeKernel
// rather than musaLaunchKernel. Returns 0 or the launch's musaError_t, with its message in get_last_error().
extern "C" int call(int which, int cooperative, float* a, unsigned blocks, unsigned threads, unsigned smem) {
  int n = static_cast<int>(blocks * threads);
  void* args[] = {&a, &n};
  void (*kernels[])(float*, int) = {mirror_add, block_leaves_early, thread_skips, block_traps, block_spins};
  musaError_t err = cooperative ? musaLaunchCooperativeKernel(kernels[which], dim3(blocks), dim3(threads), args, smem)
                                : musaLaunchKernel(kernels[which], dim3(blocks), dim3(threads), args, smem);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
