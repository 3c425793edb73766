// Atomics from every thread of several blocks onto shared counters in global memory.
#include <musa_runtime.h>

#include <cstdio>

struct Counters {
  int count;
  unsigned int bits_or;
  float sum;
  int max_i;
  int min_i;
  float max_f;
  float min_f;
  int cas_count;
  int exch;
};

// tickets[gid] receives the value atomicAdd returned, so the tickets must be a permutation of 0..N-1.
extern "C" __global__ void hammer(Counters* __restrict__ c, int* __restrict__ tickets) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  tickets[gid] = atomicAdd(&c->count, 1);
  atomicOr(&c->bits_or, 1u << (gid % 32));
  atomicAdd(&c->sum, static_cast<float>(gid % 7));
  atomicMax(&c->max_i, (gid * 37) % 1001);
  atomicMin(&c->min_i, 500 - (gid * 37) % 1001);
  atomicMax(&c->max_f, static_cast<float>((gid * 13) % 997) * 0.5f);
  atomicMin(&c->min_f, -static_cast<float>((gid * 13) % 997) * 0.25f);
  int seen = c->cas_count;
  for (;;) {  // increment through a compare-and-swap loop
    const int prev = atomicCAS(&c->cas_count, seen, seen + 1);
    if (prev == seen) break;
    seen = prev;
  }
  atomicExch(&c->exch, gid);
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

extern "C" int call(Counters* c, int* tickets, int blocks, int threads) {
  void* args[] = {&c, &tickets};
  musaError_t err = musaLaunchKernel(hammer, dim3(blocks), dim3(threads), args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
