// Async barriers (mp_31): a producer/consumer ping-pong over two stages, the warp-level counting of arrivals, and
// planted misuse. Shared accesses go through the sanitizer's hooks, as generated kernels' do, so checked mode's race
// detector sees them.
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

#define SH_STORE(buf, i, v) tl_sim::CheckedStore<true, float>(buf, i, v, 1, 0, 64, #buf, __LINE__)
#define SH_LOAD(buf, i) buf[tl_sim::CheckShared<tl_sim::kLoad>(buf, i, 1, 0, 64, #buf, __LINE__)]

enum Barrier : uint32_t { kFull0 = 1, kFull1 = 2, kEmpty0 = 3, kEmpty1 = 4 };

// Warp 0 produces `iters` rows of 32 floats into a 2-stage ring, warp 1 consumes them (out = 2 * in). Stage s has
// a `full` barrier (producer -> consumer) and an `empty` one (consumer -> producer), one warp each. With `elected`
// only lane 0 of each warp arrives (one arrival per warp either way); with `elected` 2 lane 0 also waits alone and
// a __syncwarp passes the wait on to the other lanes.
extern "C" __global__ void ping_pong(int iters, int elected, const float* in, float* out) {
  __shared__ float ring[64];
  __musa_async_bar_record(4);
  if (threadIdx.x == 0) {
    for (uint32_t id = 1; id <= 4; ++id) __musa_async_init_arrival(id, 1, 0);
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const bool arrives = !elected || lane == 0, waits = elected < 2 || lane == 0;
  for (int i = 0; i < iters; ++i) {
    const int s = i % 2;
    const uint32_t parity = (i / 2) & 1;
    if (threadIdx.x < 32) {
      if (waits) __musa_async_wait(kEmpty0 + s, parity ^ 1);  // a fresh barrier's parity-1 wait returns at once
      if (elected == 2) __syncwarp();
      SH_STORE(ring, s * 32 + lane, in[i * 32 + lane]);
      if (arrives) __musa_async_arrive(kFull0 + s);
    } else {
      if (waits) __musa_async_wait(kFull0 + s, parity);
      if (elected == 2) __syncwarp();
      out[i * 32 + lane] = 2.0f * SH_LOAD(ring, s * 32 + lane);
      if (arrives) __musa_async_arrive(kEmpty0 + s);
    }
  }
}

// Arrival counting: barrier 1 expects 2 warps; warp 0 arrives with all lanes, warp 1 with lane 0 only: one phase.
// Barrier 2 expects 1 warp; warp 0 arrives twice: the second arrival is the next phase's, so two phases complete.
// out[t] = (phase returned by the arrive on 1) | (phase of the first arrive on 2) << 1 | (second) << 2 (7 where the
// thread does not arrive); the waits return once phase 0 of barrier 1 and phase 1 of barrier 2 completed.
extern "C" __global__ void count_arrivals(int* out) {
  __musa_async_bar_record(2);
  if (threadIdx.x == 0) {
    __musa_async_init_arrival(1, 2, 0);
    __musa_async_init_arrival(2, 1, 0);
  }
  __syncthreads();
  uint32_t p1 = 1, p2a = 1, p2b = 1;
  if (threadIdx.x < 32 || threadIdx.x == 32) p1 = __musa_async_arrive(1);
  if (threadIdx.x < 32) {
    p2a = __musa_async_arrive(2);
    p2b = __musa_async_arrive(2);
  }
  __musa_async_wait(1, 0);
  __musa_async_wait(2, 1);  // phase 1 of barrier 2 completed too
  out[threadIdx.x] = static_cast<int>(p1 | (p2a << 1) | (p2b << 2));
}

// Planted misuse, by `mode`:
//   0 wrong parity: warp 0 completes phase 0 of barrier 1, warp 1 then waits for parity 1 (phase 1, never comes)
//   1 too few arrivals: barrier 1 expects 2 warps, only warp 0 arrives; everyone waits
//   2 an id beyond __musa_async_bar_record(2): barrier 3
//   3 id 0
//   4 a barrier used without __musa_async_init_arrival
//   5 a barrier used by another thread with only a warp barrier after its initialisation (checked mode)
//   6 the consumer reads the producer's data without waiting (checked mode: a data race)
extern "C" __global__ void misuse(int mode, float* out) {
  __shared__ float data[64];
  __musa_async_bar_record(2);
  if (mode == 2 && threadIdx.x == 0) __musa_async_init_arrival(3, 1, 0);
  if (mode == 3 && threadIdx.x == 0) __musa_async_init_arrival(0, 1, 0);
  if (mode == 4) __musa_async_arrive(2);
  if (threadIdx.x == 0) __musa_async_init_arrival(1, mode == 1 ? 2 : 1, 0);
  if (mode == 5 && threadIdx.x < 32) {
    __syncwarp();
    if (threadIdx.x == 1) __musa_async_arrive(1);
  }
  __syncthreads();
  if (mode == 0) {
    if (threadIdx.x < 32) __musa_async_arrive(1);
    else __musa_async_wait(1, 1);
  }
  if (mode == 1) {
    if (threadIdx.x < 32) __musa_async_arrive(1);
    __musa_async_wait(1, 0);  // never returns: warp 1 does not arrive
  }
  if (mode == 6) {
    if (threadIdx.x < 32) {
      SH_STORE(data, threadIdx.x, 1.0f);
      __musa_async_arrive(1);
    } else {
      out[threadIdx.x] = SH_LOAD(data, threadIdx.x - 32);  // missing __musa_async_wait(1, 0)
    }
  }
}

extern "C" const char* get_last_error() { return musaGetErrorString(musaPeekAtLastError()); }

static int finish(musaError_t err) {
  if (err == musaSuccess) (void)musaGetLastError();
  return err;
}

extern "C" int call_ping_pong(int iters, int elected, const float* in, float* out) {
  void* args[] = {&iters, &elected, &in, &out};
  return finish(musaLaunchKernel(ping_pong, dim3(1), dim3(64), args, 0, nullptr));
}
extern "C" int call_count_arrivals(int* out) {
  void* args[] = {&out};
  return finish(musaLaunchKernel(count_arrivals, dim3(1), dim3(64), args, 0, nullptr));
}
extern "C" int call_misuse(int mode, float* out) {
  void* args[] = {&mode, &out};
  return finish(musaLaunchKernel(misuse, dim3(1), dim3(64), args, 0, nullptr));
}
