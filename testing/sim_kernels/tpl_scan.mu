// tl::Scan1D / tl::Scan2D (tl_templates/musa/scan.h) with tl::SumOp and tl::MaxOp over dynamic shared memory, in
// place and out of place; built for mp_22 (128-lane warps) and mp_31 (32-lane warps).
#include <musa_runtime.h>

#include <cstdio>

#include "tl_templates/musa/scan.h"

// Each block scans its own H x W slice of `in` (H == 1 for 1D). out holds dst, then src as the block left it.
// Out of place, dst starts as the simulator's NaN poison, so an element the scan skips shows up.
template <class Op, int Threads, int Dims, int Axis, bool Reverse, bool InPlace, class T>
__global__ void scan_kernel(const T* __restrict__ in, T* __restrict__ out, int H, int W) {
  const int n = H * W;
  T* src = reinterpret_cast<T*>(buf_dyn_shmem);
  T* dst = InPlace ? src : src + n;
  const T* block_in = in + blockIdx.x * n;
  T* block_out = out + blockIdx.x * 2 * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) src[i] = block_in[i];
  __syncthreads();
  if constexpr (Dims == 1) {
    tl::Scan1D<Threads, Op, Reverse>::run(src, dst, W);
  } else {
    tl::Scan2D<Threads, Axis, Op, Reverse>::run(src, dst, H, W);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    block_out[i] = dst[i];
    block_out[n + i] = src[i];
  }
}

using LaunchFn = musaError_t (*)(const void*, void*, int, int, int, int);

template <class Op, int Threads, int Dims, int Axis, bool Reverse, bool InPlace, class T>
musaError_t Launch(const void* in, void* out, int H, int W, int blocks, int block_threads) {
  auto kernel = scan_kernel<Op, Threads, Dims, Axis, Reverse, InPlace, T>;
  const int smem = static_cast<int>((InPlace ? 1 : 2) * H * W * sizeof(T));
  musaError_t err = musaFuncSetAttribute(kernel, musaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != musaSuccess) return err;
  const T* pin = static_cast<const T*>(in);
  T* pout = static_cast<T*>(out);
  void* args[] = {&pin, &pout, &H, &W};
  return musaLaunchKernel(kernel, dim3(blocks), dim3(block_threads), args, static_cast<size_t>(smem), nullptr);
}

template <class Op, int Threads, int Dims, int Axis, class T>
LaunchFn FindDirection(bool reverse, bool in_place) {
  if (reverse) {
    return in_place ? &Launch<Op, Threads, Dims, Axis, true, true, T>
                    : &Launch<Op, Threads, Dims, Axis, true, false, T>;
  }
  return in_place ? &Launch<Op, Threads, Dims, Axis, false, true, T>
                  : &Launch<Op, Threads, Dims, Axis, false, false, T>;
}

// kind: 0 = 1D, 1 = 2D along axis 0, 2 = 2D along axis 1.
template <class Op, int Threads, class T>
LaunchFn FindVariant(int kind, bool reverse, bool in_place) {
  switch (kind) {
    case 0: return FindDirection<Op, Threads, 1, 0, T>(reverse, in_place);
    case 1: return FindDirection<Op, Threads, 2, 0, T>(reverse, in_place);
    case 2: return FindDirection<Op, Threads, 2, 1, T>(reverse, in_place);
  }
  return nullptr;
}

// Sums: every element type at Threads = 128; float alone at the other thread counts (1, 64, 96, 256 and 1024).
// Maxima: every element type at Threads = 128, float at 1024 (groups spanning several 32-thread slices).
template <class T>
LaunchFn FindThreads(int op, int threads, int kind, bool reverse, bool in_place) {
  if (op == 1) {
    if (threads == 128) return FindVariant<tl::MaxOp, 128, T>(kind, reverse, in_place);
    if constexpr (std::is_same<T, float>::value) {
      if (threads == 1024) return FindVariant<tl::MaxOp, 1024, T>(kind, reverse, in_place);
    }
    return nullptr;
  }
  if (threads == 128) return FindVariant<tl::SumOp, 128, T>(kind, reverse, in_place);
  if constexpr (std::is_same<T, float>::value) {
    switch (threads) {
      case 1: return FindVariant<tl::SumOp, 1, T>(kind, reverse, in_place);
      case 64: return FindVariant<tl::SumOp, 64, T>(kind, reverse, in_place);
      case 96: return FindVariant<tl::SumOp, 96, T>(kind, reverse, in_place);
      case 256: return FindVariant<tl::SumOp, 256, T>(kind, reverse, in_place);
      case 1024: return FindVariant<tl::SumOp, 1024, T>(kind, reverse, in_place);
    }
  }
  return nullptr;
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// dtype codes follow testing/test_templates_reduce.py: 0 float, 1 half, 2 bfloat16, 3 int; op: 0 sum, 1 max.
extern "C" int call_scan(int op, int dtype, int threads, int kind, int reverse, int in_place, const void* in, void* out,
                           int H, int W, int blocks, int block_threads) {
  LaunchFn fn = nullptr;
  switch (dtype) {
    case 0: fn = FindThreads<float>(op, threads, kind, reverse != 0, in_place != 0); break;
    case 1: fn = FindThreads<half_t>(op, threads, kind, reverse != 0, in_place != 0); break;
    case 2: fn = FindThreads<bfloat16_t>(op, threads, kind, reverse != 0, in_place != 0); break;
    case 3: fn = FindThreads<int>(op, threads, kind, reverse != 0, in_place != 0); break;
  }
  if (fn == nullptr) {
    snprintf(tl_error_buf, sizeof(tl_error_buf), "no instantiation for op %d, dtype %d, Threads %d, kind %d", op,
             dtype, threads, kind);
    return -1;
  }
  musaError_t err = fn(in, out, H, W, blocks, block_threads);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
