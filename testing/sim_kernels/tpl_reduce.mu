// tl::AllReduce (tl_templates/musa/reduce.h) for every combine functor, element type and a grid of
// (Threads, Scale); built for mp_22 (128-lane warps) and mp_31 (32-lane warps).
#include <musa_runtime.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <utility>

#include "tl_templates/musa/reduce.h"

constexpr int kWarpSize = __MUSA_ARCH__ < 300 ? 128 : 32;

// Two reductions back to back through one red_buf: the second must not read the first one's partials.
template <class Op, int Threads, int Scale, class T>
__global__ void all_reduce_twice(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out_a,
                                 T* __restrict__ out_b) {
  __shared__ T red_buf[1024];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out_a[i] = tl::AllReduce<Op, Threads, Scale, kWarpSize>(a[i], red_buf);
  out_b[i] = tl::AllReduce<Op, Threads, Scale, kWarpSize>(b[i], red_buf);
}

// ---- host side: (op, dtype, Threads, Scale) -> the launcher of that instantiation -------------------------------

struct Config {
  int threads, scale;
};

// Every power-of-two pair with Threads * Scale <= 1024.
constexpr std::array<Config, 66> MakeFullGrid() {
  std::array<Config, 66> grid{};
  std::size_t n = 0;
  for (int t = 1; t <= 1024; t *= 2)
    for (int s = 1; t * s <= 1024; s *= 2) grid[n++] = Config{t, s};
  return grid;
}

// Shuffles only (span 2 and 32), shuffles then shared memory (span 128 and 1024), shared memory only (Scale 64).
struct MixedGrid {
  static constexpr std::array<Config, 5> kList{{{2, 1}, {16, 2}, {8, 16}, {256, 4}, {4, 64}}};
};
struct FullGrid {
  static constexpr std::array<Config, 66> kList = MakeFullGrid();
};

using LaunchFn = musaError_t (*)(const void*, const void*, void*, void*, int, int);

template <class Op, class T, int Threads, int Scale>
musaError_t Launch(const void* a, const void* b, void* out_a, void* out_b, int blocks, int threads) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  T* poa = static_cast<T*>(out_a);
  T* pob = static_cast<T*>(out_b);
  void* args[] = {&pa, &pb, &poa, &pob};
  return musaLaunchKernel(all_reduce_twice<Op, Threads, Scale, T>, dim3(blocks), dim3(threads), args, 0, nullptr);
}

template <class Op, class T, class Grid, std::size_t... I>
LaunchFn FindIn(int threads, int scale, std::index_sequence<I...>) {
  LaunchFn fn = nullptr;
  ((Grid::kList[I].threads == threads && Grid::kList[I].scale == scale
        ? (fn = &Launch<Op, T, Grid::kList[I].threads, Grid::kList[I].scale>, 0)
        : 0),
   ...);
  return fn;
}

// The full grid (the template's index arithmetic, which no functor or type changes) is instantiated for the exact
// float sum; every (op, type) pair walks the three paths of the mixed grid.
template <class Op, class T>
constexpr bool kOnFullGrid = std::is_same<Op, tl::SumOp>::value && std::is_same<T, float>::value;

template <class Op, class T>
LaunchFn Find(int threads, int scale) {
  if constexpr (kOnFullGrid<Op, T>) {
    return FindIn<Op, T, FullGrid>(threads, scale, std::make_index_sequence<FullGrid::kList.size()>());
  } else {
    return FindIn<Op, T, MixedGrid>(threads, scale, std::make_index_sequence<MixedGrid::kList.size()>());
  }
}

// Op and dtype codes follow testing/test_templates_reduce.py.
template <class T>
LaunchFn FindOp(int op, int threads, int scale) {
  switch (op) {
    case 0: return Find<tl::SumOp, T>(threads, scale);
    case 1: return Find<tl::MaxOp, T>(threads, scale);
    case 2: return Find<tl::MinOp, T>(threads, scale);
    case 3: return Find<tl::AbsSumOp, T>(threads, scale);
    case 4: return Find<tl::AbsMaxOp, T>(threads, scale);
    case 5: return Find<tl::BitAndOp, T>(threads, scale);
    case 6: return Find<tl::BitOrOp, T>(threads, scale);
    case 7: return Find<tl::BitXorOp, T>(threads, scale);
  }
  return nullptr;
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }
extern "C" int warp_size() { return kWarpSize; }

extern "C" int call_all_reduce(int op, int dtype, int threads, int scale, const void* a, const void* b, void* out_a,
                               void* out_b, int blocks, int block_threads) {
  LaunchFn fn = nullptr;
  switch (dtype) {
    case 0: fn = FindOp<float>(op, threads, scale); break;
    case 1: fn = FindOp<half_t>(op, threads, scale); break;
    case 2: fn = FindOp<bfloat16_t>(op, threads, scale); break;
    case 3: fn = FindOp<int>(op, threads, scale); break;
  }
  if (fn == nullptr) {
    snprintf(tl_error_buf, sizeof(tl_error_buf), "no instantiation for op %d, dtype %d, Threads %d, Scale %d", op,
             dtype, threads, scale);
    return -1;
  }
  musaError_t err = fn(a, b, out_a, out_b, blocks, block_threads);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
