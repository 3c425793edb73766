// Shared harness of the block-GEMM template kernels (tpl_gemm_mp22.mu, tpl_gemm_wmma.mu, tpl_gemm_sqmma.mu, which
// include it; it is not built on its own). Every header of the three paths is included, so each build also checks
// that the others compile away cleanly on its arch.
//
// One launch of gemm_kernel<Path, M, N, K, GM, GN, TransA, TransB, T> on exactly GM * GN * Path::kGroup threads:
// the block copies A (stored M x K, or K x M if TransA) and B (K x N, or N x K if TransB) from global memory into
// the dynamic shared buffer (B right after A), and each thread loads its operand fragments (for the register-
// operand forms; M*K/(GM*G) and N*K/(GN*G) values) from a_frag[thread][...] and b_frag[thread][...]. Path::run
// picks the operands its form reads. The kernel then runs three GEMMs into the thread's accumulator `c` of
// Slots = M * N / threads floats and stores `c` after each, as out[phase][thread][slot]:
//   phase 0: c poisoned with NaN, ClearAccum = true              -> A @ B
//   phase 1: the same c again, ClearAccum = false                -> 2 A @ B
//   phase 2: c loaded from c0[thread][slot], ClearAccum = false  -> c0 + A @ B
#include <musa_runtime.h>

#include <cmath>
#include <cstdio>

#include "tl_templates/musa/gemm_mp22_mma.h"
#include "tl_templates/musa/gemm_mp31_sqmma.h"
#include "tl_templates/musa/gemm_mp31_wmma.h"

// At namespace scope: g++ (the simulator) mis-binds this thread_local buffer when a function template redeclares it.
extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];

template <class Path, int M, int N, int K, int GM, int GN, bool TransA, bool TransB, class T>
__global__ void gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ a_frag,
                            const T* __restrict__ b_frag, const float* __restrict__ c0, float* __restrict__ out) {
  constexpr int kThreads = GM * GN * Path::kGroup;
  constexpr int kSlots = M * N / kThreads;
  constexpr int kAFrag = M * K / (GM * Path::kGroup), kBFrag = N * K / (GN * Path::kGroup);
  T* sa = reinterpret_cast<T*>(buf_dyn_shmem);
  T* sb = sa + M * K;
  const int tid = threadIdx.x;
  for (int i = tid; i < M * K; i += kThreads) sa[i] = a[i];
  for (int i = tid; i < K * N; i += kThreads) sb[i] = b[i];
  alignas(16) T af[kAFrag];
  alignas(16) T bf[kBFrag];
  for (int i = 0; i < kAFrag; ++i) af[i] = a_frag[tid * kAFrag + i];
  for (int i = 0; i < kBFrag; ++i) bf[i] = b_frag[tid * kBFrag + i];
  __syncthreads();
  float c[kSlots];
  for (int s = 0; s < kSlots; ++s) c[s] = NAN;
  Path::template run<M, N, K, GM, GN, TransA, TransB, true>(sa, sb, af, bf, c);
  for (int s = 0; s < kSlots; ++s) out[(0 * kThreads + tid) * kSlots + s] = c[s];
  Path::template run<M, N, K, GM, GN, TransA, TransB, false>(sa, sb, af, bf, c);
  for (int s = 0; s < kSlots; ++s) out[(1 * kThreads + tid) * kSlots + s] = c[s];
  for (int s = 0; s < kSlots; ++s) c[s] = c0[tid * kSlots + s];
  Path::template run<M, N, K, GM, GN, TransA, TransB, false>(sa, sb, af, bf, c);
  for (int s = 0; s < kSlots; ++s) out[(2 * kThreads + tid) * kSlots + s] = c[s];
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

static int report(musaError_t err) {
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

template <class Path, int M, int N, int K, int GM, int GN, bool TransA, bool TransB, class T>
int launch_gemm(const void* a, const void* b, const void* a_frag, const void* b_frag, const float* c0, float* out) {
  auto* kernel = &gemm_kernel<Path, M, N, K, GM, GN, TransA, TransB, T>;
  const int smem = (M * K + K * N) * static_cast<int>(sizeof(T));
  musaError_t err =
      musaFuncSetAttribute(reinterpret_cast<const void*>(kernel), musaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != musaSuccess) return report(err);
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  const T* pfa = static_cast<const T*>(a_frag);
  const T* pfb = static_cast<const T*>(b_frag);
  void* args[] = {&pa, &pb, &pfa, &pfb, &c0, &out};
  return report(musaLaunchKernel(kernel, dim3(1), dim3(GM * GN * Path::kGroup), args, smem, nullptr));
}

struct GemmCase {
  int variant, m, n, k, gm, gn, trans_a, trans_b, dtype;  // variant: Path::kVariant; dtype 0 float16, 1 bfloat16
  int (*launch)(const void*, const void*, const void*, const void*, const float*, float*);
};

// Both element types of one (M, N, K, GM, GN, TransA, TransB) instantiation of PATH.
#define TPL_GEMM_CASE(PATH, M, N, K, GM, GN, TA, TB)                                                        \
  GemmCase{PATH::kVariant, M, N, K, GM, GN, TA, TB, 0, &launch_gemm<PATH, M, N, K, GM, GN, TA, TB, half_t>}, \
      GemmCase{PATH::kVariant, M, N, K, GM, GN, TA, TB, 1, &launch_gemm<PATH, M, N, K, GM, GN, TA, TB, bfloat16_t>}

// Runs the instantiated case with these parameters; -1 if the file does not instantiate it.
template <size_t Count>
int run_case(const GemmCase (&cases)[Count], int variant, int m, int n, int k, int gm, int gn, int trans_a,
             int trans_b, int dtype, const void* a, const void* b, const void* a_frag, const void* b_frag,
             const float* c0, float* out) {
  for (const GemmCase& c : cases)
    if (c.variant == variant && c.m == m && c.n == n && c.k == k && c.gm == gm && c.gn == gn &&
        c.trans_a == trans_a && c.trans_b == trans_b && c.dtype == dtype)
      return c.launch(a, b, a_frag, b_frag, c0, out);
  snprintf(tl_error_buf, sizeof(tl_error_buf),
           "no instantiation for variant=%d M=%d N=%d K=%d GM=%d GN=%d TA=%d TB=%d dtype=%d", variant, m, n, k, gm, gn,
           trans_a, trans_b, dtype);
  return -1;
}
