// Kernels that no thread waits in (no barrier, warp collective or asynchronous wait anywhere in the library), so
// the simulator runs their blocks as loops over the threads unless TILELANG_SIM_EXEC=fibers: each fault and check
// must read the same in both modes (testing/test_sim_exec_modes.py).
#include <musa_runtime.h>

#define NOTE_CHECKED_ACCESS(what)                 \
  do {                                            \
    tl_sim::g_thread.last_access_line = __LINE__; \
    tl_sim::g_thread.last_access_what = (what);   \
  } while (0)

extern "C" {

// Block `spinner`'s thread 3 spins on a flag nobody sets.
__global__ void spin_forever(int spinner, volatile int* flag) {
  if (blockIdx.x == spinner && threadIdx.x == 3) {
    flag[1] = 1;
    NOTE_CHECKED_ACCESS("flag[0]");
    while (flag[0] == 0) {
    }
  }
}

__attribute__((noinline)) int recurse(int depth) {
  volatile char frame[512];
  frame[depth % 512] = static_cast<char>(depth);
  if (depth == 0) return frame[0];
  return recurse(depth - 1) + frame[depth % 512];
}

// Thread 2 recurses `depth` frames of over 512 bytes.
__global__ void deep_recursion(int depth, int* out) { out[threadIdx.x] = threadIdx.x == 2 ? recurse(depth) : 1; }

// Thread 2 stores through `wild`, outside every tensor.
__global__ void wild_store(int* wild, int* out) {
  if (threadIdx.x == 2) {
    NOTE_CHECKED_ACCESS("out[2]");
    *reinterpret_cast<volatile int*>(wild) = 1;
  }
  out[threadIdx.x] = 1;
}

// Thread 1 reads what thread 0 wrote, with no barrier between: right only if thread 0 happens to run first.
__global__ void missing_barrier(int* out) {
  __shared__ int s;
  if (threadIdx.x == 0) s = 42;
  if (threadIdx.x == 1) out[blockIdx.x] = s;
}

// Each thread records its coordinates and the order it ran in (a per-block counter in shared memory, poisoned at
// the start of each block, so thread order and the poison both show).
__global__ void record_order(unsigned* out) {
  __shared__ unsigned next;
  const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned* mine = out + 2 * (block * threads + linear);
  if (next == 0xFFFFFFFFu) next = 0;  // the first thread of the block finds the poison
  mine[0] = next++;
  mine[1] = (threadIdx.z << 20) | (threadIdx.y << 10) | threadIdx.x;
}

const char* get_last_error() { return musaGetErrorString(musaPeekAtLastError()); }

static int finish(musaError_t err) {
  if (err == musaSuccess) (void)musaGetLastError();  // clear an earlier failure
  return err;
}

int call_spin_forever(int blocks, int spinner, int* flag) {
  void* args[] = {&spinner, &flag};
  return finish(musaLaunchKernel(spin_forever, dim3(blocks), dim3(32), args, 0, nullptr));
}
int call_deep_recursion(int depth, int* out) {
  void* args[] = {&depth, &out};
  return finish(musaLaunchKernel(deep_recursion, dim3(1), dim3(4), args, 0, nullptr));
}
int call_wild_store(int* wild, int* out) {
  void* args[] = {&wild, &out};
  return finish(musaLaunchKernel(wild_store, dim3(1), dim3(4), args, 0, nullptr));
}
int call_missing_barrier(int blocks, int threads, int* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(missing_barrier, dim3(blocks), dim3(threads), args, 0, nullptr));
}
int call_record_order(int blocks, int x, int y, int z, unsigned* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(record_order, dim3(blocks), dim3(x, y, z), args, 0, nullptr));
}
}
