// Kernels for the simulator's runtime checks: the watchdog (spin loops), faults (stack overflow, a wild pointer),
// checked mode's random thread order (a missing barrier) and the sync epochs the race detector reads.
#include <musa_runtime.h>

#include <chrono>

// What the race detector does at a checked access: record it for the watchdog's and the fault handler's messages.
#define NOTE_CHECKED_ACCESS(what)                 \
  do {                                            \
    tl_sim::g_thread.last_access_line = __LINE__; \
    tl_sim::g_thread.last_access_what = (what);   \
  } while (0)

// Thread 3 of block `spinner` says it spins (flag[1]) and waits for a flag nobody sets (flag[0]).
extern "C" __global__ void spin_forever(int spinner, volatile int* flag) {
  if (blockIdx.x == spinner && threadIdx.x == 3) {
    flag[1] = 1;
    NOTE_CHECKED_ACCESS("flag[0]");
    while (flag[0] == 0) {
    }
  }
}

// Fine on hardware: thread 0 waits for thread 1's flag after a barrier. Launched with two warps. In the simulator
// the last thread through the barrier runs first, to the __syncwarp of warp 1; then thread 0 runs and spins
// forever, since the simulator switches threads only at collectives.
extern "C" __global__ void spin_on_neighbour(volatile int* flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    while (flag[0] == 0) {
    }
  } else if (threadIdx.x == 1) {
    flag[0] = 1;
  }
  if (threadIdx.x >= tl_sim::kWarpSize) __syncwarp();
  __syncthreads();
}

// Long, but every iteration is a barrier: the watchdog must not fire.
extern "C" __global__ void barrier_loop(double seconds, int* iterations) {
  __shared__ int stop;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (threadIdx.x == 0) stop = elapsed > seconds;
    __syncthreads();
    const bool done = stop;
    __syncthreads();
    if (done) {
      if (threadIdx.x == 0) iterations[blockIdx.x] = i;
      return;
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
extern "C" __global__ void deep_recursion(int depth, int* out) {
  out[threadIdx.x] = threadIdx.x == 2 ? recurse(depth) : 1;
}

// Thread 2 stores through `wild`, outside every tensor.
extern "C" __global__ void wild_store(int* wild, int* out) {
  if (threadIdx.x == 2) {
    NOTE_CHECKED_ACCESS("out[2]");
    *reinterpret_cast<volatile int*>(wild) = 1;
  }
  out[threadIdx.x] = 1;
}

// Thread 1 reads what thread 0 wrote, with no barrier between: right only if thread 0 happens to run first.
extern "C" __global__ void missing_barrier(int* out) {
  __shared__ int s;
  if (threadIdx.x == 0) s = 42;
  if (threadIdx.x == 1) out[blockIdx.x] = s;
}

// Each thread records the sync epochs of its block and warp around a block barrier and a warp barrier:
// out[thread][0..3] = block epoch before / after __syncthreads, warp epoch before / after __syncwarp.
extern "C" __global__ void record_epochs(unsigned long long* out) {
  tl_sim::BlockRunner& block = tl_sim::CurrentBlock("record_epochs");
  const unsigned warp = threadIdx.x / tl_sim::kWarpSize;
  unsigned long long* mine = out + 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  mine[0] = block.epoch(tl_sim::Group::kBlock, 0);
  __syncthreads();
  mine[1] = block.epoch(tl_sim::Group::kBlock, 0);
  mine[2] = block.epoch(tl_sim::Group::kWarp, warp);
  __syncwarp();
  mine[3] = block.epoch(tl_sim::Group::kWarp, warp);
}

// The message of the calling host thread's last failed launch: the runtime keeps errors per host thread, so
// concurrent launches from several threads do not mix their messages.
extern "C" const char* get_last_error() { return musaGetErrorString(musaPeekAtLastError()); }

static int finish(musaError_t err) {
  if (err == musaSuccess) (void)musaGetLastError();  // clear an earlier failure
  return err;
}

extern "C" int call_spin_forever(int blocks, int spinner, int* flag) {
  void* args[] = {&spinner, &flag};
  return finish(musaLaunchKernel(spin_forever, dim3(blocks), dim3(32), args, 0, nullptr));
}
extern "C" int call_spin_on_neighbour(int* flag) {
  void* args[] = {&flag};
  return finish(musaLaunchKernel(spin_on_neighbour, dim3(1), dim3(2 * tl_sim::kWarpSize), args, 0, nullptr));
}
extern "C" int call_barrier_loop(int blocks, double seconds, int* iterations) {
  void* args[] = {&seconds, &iterations};
  return finish(musaLaunchKernel(barrier_loop, dim3(blocks), dim3(64), args, 0, nullptr));
}
extern "C" int call_deep_recursion(int depth, int* out) {
  void* args[] = {&depth, &out};
  return finish(musaLaunchKernel(deep_recursion, dim3(1), dim3(4), args, 0, nullptr));
}
extern "C" int call_wild_store(int* wild, int* out) {
  void* args[] = {&wild, &out};
  return finish(musaLaunchKernel(wild_store, dim3(1), dim3(4), args, 0, nullptr));
}
extern "C" int call_missing_barrier(int blocks, int threads, int* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(missing_barrier, dim3(blocks), dim3(threads), args, 0, nullptr));
}
extern "C" int call_record_epochs(int blocks, int threads, unsigned long long* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(record_epochs, dim3(blocks), dim3(threads), args, 0, nullptr));
}
