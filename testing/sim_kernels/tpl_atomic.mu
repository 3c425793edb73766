// tl::Atomic* (tl_templates/musa/atomic.h) from every thread of many blocks onto a few shared counters.
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

#include "tl_templates/musa/atomic.h"

// kind: 0 AtomicAddRet, 1 AtomicAdd, 2 AtomicMaxRet, 3 AtomicMax, 4 AtomicMinRet, 5 AtomicMin. Thread g updates
// counters[g % m] with vals[g]; the Ret forms store the returned old value in rets[g].
template <int Kind, class T>
__global__ void atomic_scalar(T* counters, int m, const T* __restrict__ vals, T* __restrict__ rets) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  T* counter = counters + g % m;
  switch (Kind) {
    case 0: rets[g] = tl::AtomicAddRet(counter, vals[g]); break;
    case 1: tl::AtomicAdd(counter, vals[g]); break;
    case 2: rets[g] = tl::AtomicMaxRet(counter, vals[g]); break;
    case 3: tl::AtomicMax(counter, vals[g]); break;
    case 4: rets[g] = tl::AtomicMinRet(counter, vals[g]); break;
    case 5: tl::AtomicMin(counter, vals[g]); break;
  }
}

// A float value added to a counter of another type: the template converts it (tl::cast) first.
template <class T>
__global__ void atomic_add_converted(T* counters, int m, const float* __restrict__ vals) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  tl::AtomicAdd(counters + g % m, vals[g]);
}

// Thread g adds the N lanes vals[g * N ..] to the N-lane counter g % m; odd threads pass a tl::vec, even ones a
// pointer (both overloads). With Ret, the old lanes go to rets[g * N ..].
template <int N, bool Ret, class T>
__global__ void atomic_vector(T* counters, int m, const T* __restrict__ vals, T* __restrict__ rets) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  T* counter = counters + (g % m) * N;
  const T* v = vals + g * N;
  tl::vec<T, N> lanes;
  for (int i = 0; i < N; ++i) lanes[i] = v[i];
  tl::vec<T, N> old;
  if constexpr (N == 2) {
    if constexpr (Ret) {
      old = (g & 1) ? tl::AtomicAddx2Ret(counter, lanes) : tl::AtomicAddx2Ret(counter, v);
    } else if (g & 1) {
      tl::AtomicAddx2(counter, lanes);
    } else {
      tl::AtomicAddx2(counter, v);
    }
  } else {
    if constexpr (Ret) {
      old = (g & 1) ? tl::AtomicAddx4Ret(counter, lanes) : tl::AtomicAddx4Ret(counter, v);
    } else if (g & 1) {
      tl::AtomicAddx4(counter, lanes);
    } else {
      tl::AtomicAddx4(counter, v);
    }
  }
  if constexpr (Ret) {
    for (int i = 0; i < N; ++i) rets[g * N + i] = old[i];
  }
}

// Block-local counters in shared memory: zeroed, hammered by the block, then copied out per block.
template <class T>
__global__ void atomic_shared(int m, const T* __restrict__ vals, T* __restrict__ out) {
  __shared__ T counters[64];
  for (int i = threadIdx.x; i < m; i += blockDim.x) counters[i] = tl::cast<T>(0);
  __syncthreads();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  tl::AtomicAdd(&counters[threadIdx.x % m], vals[g]);
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += blockDim.x) out[blockIdx.x * m + i] = counters[i];
}

// The CAS retry path, made deterministic: atomic_update calls its functor between reading the word and the
// compare-and-swap, so a functor that plays a racing thread on its first call (an atomic write to the same word:
// the neighbouring 16-bit element, or the element itself) makes exactly the first CAS fail.
template <class T>
struct RacingAdd {
  T* element;
  T operand;
  T racer;  // for 4/8-byte T, the value the racer stores into the element
  int* calls;
  __device__ T operator()(T old) const {
    if ((*calls)++ == 0) {
      if constexpr (sizeof(T) == 2) {
        // Add 1 to the bits of the other half of the word, through the word's own type.
        const uintptr_t address = reinterpret_cast<uintptr_t>(element);
        unsigned int* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
        atomicAdd(word, (address & 2u) ? 1u : (1u << 16));
      } else {
        using W = typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type;
        atomicExch(reinterpret_cast<W*>(element), tl::bit_cast<W>(racer));
      }
    }
    return tl::SumOp()(old, operand);
  }
};

// params = {operand, racer}; out = {returned old}; calls[0] = how often the functor ran.
template <class T>
__global__ void cas_retry(T* data, int index, const T* __restrict__ params, T* __restrict__ out, int* calls) {
  *calls = 0;
  out[0] = tl::detail::atomic_update(data + index, RacingAdd<T>{data + index, params[0], params[1], calls});
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

static int Finish(musaError_t err) {
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

template <class Kernel>
static int Run(Kernel kernel, void** args, int blocks, int threads) {
  return Finish(musaLaunchKernel(kernel, dim3(blocks), dim3(threads), args, 0, nullptr));
}

template <class T>
int ScalarFor(int kind, void* counters, int m, const void* vals, void* rets, int blocks, int threads) {
  T* c = static_cast<T*>(counters);
  const T* v = static_cast<const T*>(vals);
  T* r = static_cast<T*>(rets);
  void* args[] = {&c, &m, &v, &r};
  switch (kind) {
    case 0: return Run(atomic_scalar<0, T>, args, blocks, threads);
    case 1: return Run(atomic_scalar<1, T>, args, blocks, threads);
    case 2: return Run(atomic_scalar<2, T>, args, blocks, threads);
    case 3: return Run(atomic_scalar<3, T>, args, blocks, threads);
    case 4: return Run(atomic_scalar<4, T>, args, blocks, threads);
    case 5: return Run(atomic_scalar<5, T>, args, blocks, threads);
  }
  return -1;
}

template <class T>
int VectorFor(int lanes, int ret, void* counters, int m, const void* vals, void* rets, int blocks, int threads) {
  T* c = static_cast<T*>(counters);
  const T* v = static_cast<const T*>(vals);
  T* r = static_cast<T*>(rets);
  void* args[] = {&c, &m, &v, &r};
  if (lanes == 2) return ret ? Run(atomic_vector<2, true, T>, args, blocks, threads)
                             : Run(atomic_vector<2, false, T>, args, blocks, threads);
  if (lanes == 4) return ret ? Run(atomic_vector<4, true, T>, args, blocks, threads)
                             : Run(atomic_vector<4, false, T>, args, blocks, threads);
  return -1;
}

// dtype codes: 0 float, 1 half, 2 bfloat16, 3 int32, 4 double, 5 int64.
extern "C" int call_scalar(int dtype, int kind, void* counters, int m, const void* vals, void* rets, int blocks,
                           int threads) {
  switch (dtype) {
    case 0: return ScalarFor<float>(kind, counters, m, vals, rets, blocks, threads);
    case 1: return ScalarFor<half_t>(kind, counters, m, vals, rets, blocks, threads);
    case 2: return ScalarFor<bfloat16_t>(kind, counters, m, vals, rets, blocks, threads);
    case 3: return ScalarFor<int>(kind, counters, m, vals, rets, blocks, threads);
    case 4: return ScalarFor<double>(kind, counters, m, vals, rets, blocks, threads);
    case 5: return ScalarFor<int64_t>(kind, counters, m, vals, rets, blocks, threads);
  }
  return -1;
}

extern "C" int call_vector(int dtype, int lanes, int ret, void* counters, int m, const void* vals, void* rets,
                           int blocks, int threads) {
  switch (dtype) {
    case 0: return VectorFor<float>(lanes, ret, counters, m, vals, rets, blocks, threads);
    case 1: return VectorFor<half_t>(lanes, ret, counters, m, vals, rets, blocks, threads);
    case 2: return VectorFor<bfloat16_t>(lanes, ret, counters, m, vals, rets, blocks, threads);
  }
  return -1;
}

template <class T>
int AddConvertedFor(void* counters, int m, const float* vals, int blocks, int threads) {
  T* c = static_cast<T*>(counters);
  void* args[] = {&c, &m, &vals};
  return Run(atomic_add_converted<T>, args, blocks, threads);
}

template <class T>
int SharedFor(int m, const void* vals, void* out, int blocks, int threads) {
  const T* v = static_cast<const T*>(vals);
  T* o = static_cast<T*>(out);
  void* args[] = {&m, &v, &o};
  return Run(atomic_shared<T>, args, blocks, threads);
}

extern "C" int call_add_converted(int dtype, void* counters, int m, const float* vals, int blocks, int threads) {
  switch (dtype) {
    case 1: return AddConvertedFor<half_t>(counters, m, vals, blocks, threads);
    case 3: return AddConvertedFor<int>(counters, m, vals, blocks, threads);
  }
  return -1;
}

extern "C" int call_shared(int dtype, int m, const void* vals, void* out, int blocks, int threads) {
  switch (dtype) {
    case 0: return SharedFor<float>(m, vals, out, blocks, threads);
    case 1: return SharedFor<half_t>(m, vals, out, blocks, threads);
    case 2: return SharedFor<bfloat16_t>(m, vals, out, blocks, threads);
  }
  return -1;
}

template <class T>
int CasRetryFor(void* data, int index, const void* params, void* out, int* calls) {
  T* d = static_cast<T*>(data);
  const T* p = static_cast<const T*>(params);
  T* o = static_cast<T*>(out);
  void* args[] = {&d, &index, &p, &o, &calls};
  return Run(cas_retry<T>, args, 1, 1);
}

extern "C" int call_cas_retry(int dtype, void* data, int index, const void* params, void* out, int* calls) {
  switch (dtype) {
    case 0: return CasRetryFor<float>(data, index, params, out, calls);
    case 1: return CasRetryFor<half_t>(data, index, params, out, calls);
    case 2: return CasRetryFor<bfloat16_t>(data, index, params, out, calls);
    case 4: return CasRetryFor<double>(data, index, params, out, calls);
  }
  return -1;
}
