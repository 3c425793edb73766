// mp_31 SQMMA: the block copies an image of its dynamic shared memory (operands placed by the test with the
// addressing and swizzle of MUSA_LAYOUTS.md section 3), loads every thread's C registers, builds the descriptors
// from __cvta_generic_to_shared, issues one or more SQMMAs (walking K by advancing the descriptors' start
// addresses), and stores D both before and after waiting. Each squad of the block works on its own operands.
// Built for arch 310; building it for 220 must fail (SQMMA is mp_31's).
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

enum Param {
  kShape, kWords, kTnspA, kTnspB, kScaleA, kScaleB, kScaleD, kSat, kK, kType,
  kNumOps, kWaitMode, kAlias,
  kAOffset, kAStrideCode, kASwizzle, kAStep, kAExtraBits,  // A's descriptor: start offset, codes, per-op step
  kBOffset, kBStrideCode, kBSwizzle, kBStep, kBExtraBits,
  kSquadStride,                                            // bytes between the operands of consecutive squads
  kOddThread, kOddScaleD, kExitingThread, kWaitGroupN, kNumParams
};

// How the kernel waits (params[kWaitMode]); "early" is D as read right after the issues, or between two waits.
enum WaitMode {
  kSqmmaWait = 0,        // issue all, early, __musa_sqmma_wait
  kCommitWaitAll = 1,    // issue all, early, commit, wait_group(0)
  kTwoGroups = 2,        // op 0, commit, op 1, commit, wait_group(1), early, wait_group(0)
  kUncommitted = 3,      // op 0, commit, op 1, wait_group(0), early, __musa_sqmma_wait
  kOverwriteFirst = 4,   // issue all, barrier, overwrite shared memory, barrier, early, __musa_sqmma_wait
  kWaitGroupArg = 5,     // issue all, commit, wait_group(params[kWaitGroupN])
};

__device__ void issue(int shape, int32_t* d, const int32_t* da, const int32_t* db, const int32_t* c, const int* p,
                      int scale_d) {
  const int ta = p[kTnspA], tb = p[kTnspB], sa = p[kScaleA], sb = p[kScaleB], sat = p[kSat], k = p[kK];
  const int type = p[kType];
  switch (shape) {
    case 0: __musa_sqmma_m16n64_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 1: __musa_sqmma_m32n32_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 2: __musa_sqmma_m32n64_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 3: __musa_sqmma_m32n128_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 4: __musa_sqmma_m64n16_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 5: __musa_sqmma_m64n32_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 6: __musa_sqmma_m64n64_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 7: __musa_sqmma_m64n128_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 8: __musa_sqmma_m128n32_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 9: __musa_sqmma_m128n64_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
    case 10: __musa_sqmma_m128n128_mma(d, da, db, c, ta, tb, sa, sb, scale_d, sat, k, type); break;
  }
}

extern "C" __global__ void sqmma_kernel(const unsigned char* __restrict__ smem_img, int smem_bytes,
                                        const unsigned char* __restrict__ overwrite_img,
                                        const int* __restrict__ c_img, int* __restrict__ d_img,
                                        int* __restrict__ early_img, const int* __restrict__ p) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  const int t = threadIdx.x, words = p[kWords];
  for (int i = t; i < smem_bytes; i += blockDim.x) buf_dyn_shmem[i] = smem_img[i];
  __syncthreads();
  if (t == p[kExitingThread]) return;
  int32_t c[128], d[128];
  for (int i = 0; i < words; ++i) {
    c[i] = c_img[t * words + i];
    d[i] = 0x7fc0dead;  // a NaN that no result equals
  }
  int32_t* out = p[kAlias] ? c : d;
  const int squad_offset = (t / 128) * p[kSquadStride];
  const uint32_t a_start = static_cast<uint32_t>(__cvta_generic_to_shared(buf_dyn_shmem + p[kAOffset] + squad_offset));
  const uint32_t b_start = static_cast<uint32_t>(__cvta_generic_to_shared(buf_dyn_shmem + p[kBOffset] + squad_offset));
  const int32_t desc_a = static_cast<int32_t>(a_start | p[kAStrideCode] << 18 | p[kASwizzle] << 21 | p[kAExtraBits]);
  const int32_t desc_b = static_cast<int32_t>(b_start | p[kBStrideCode] << 18 | p[kBSwizzle] << 21 | p[kBExtraBits]);
  const int scale_d = t == p[kOddThread] ? p[kOddScaleD] : p[kScaleD];
  const int mode = p[kWaitMode];
  for (int op = 0; op < p[kNumOps]; ++op) {
    const int32_t da = desc_a + op * p[kAStep], db = desc_b + op * p[kBStep];  // K walk: add unswizzled bytes
    issue(p[kShape], out, &da, &db, op == 0 ? c : out, p, scale_d);  // later ops chain on D
    if (mode == kTwoGroups || (mode == kUncommitted && op == 0)) __musa_tce_commit_group();
  }
  int32_t* early = early_img + t * words;
  switch (mode) {
    case kSqmmaWait:
      for (int i = 0; i < words; ++i) early[i] = out[i];
      __musa_sqmma_wait();
      break;
    case kCommitWaitAll:
      for (int i = 0; i < words; ++i) early[i] = out[i];
      __musa_tce_commit_group();
      __musa_tce_wait_group(0);
      break;
    case kTwoGroups:
      __musa_tce_wait_group(1);
      for (int i = 0; i < words; ++i) early[i] = out[i];
      __musa_tce_wait_group(0);
      break;
    case kUncommitted:
      __musa_tce_wait_group(0);
      for (int i = 0; i < words; ++i) early[i] = out[i];
      __musa_sqmma_wait();
      break;
    case kOverwriteFirst:
      __syncthreads();
      for (int i = t; i < smem_bytes; i += blockDim.x) buf_dyn_shmem[i] = overwrite_img[i];
      __syncthreads();
      for (int i = 0; i < words; ++i) early[i] = out[i];
      __musa_sqmma_wait();
      break;
    case kWaitGroupArg:
      __musa_tce_commit_group();
      __musa_tce_wait_group(p[kWaitGroupN]);
      break;
  }
  for (int i = 0; i < words; ++i) d_img[t * words + i] = out[i];
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// Returns 0, or the failing musaError_t with its message in get_last_error().
extern "C" int run(const unsigned char* smem_img, int smem_bytes, const unsigned char* overwrite_img, const int* c,
                   int* d, int* early, const int* params, int threads) {
  musaError_t err = musaFuncSetAttribute(sqmma_kernel, musaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err == musaSuccess) {
    void* args[] = {&smem_img, &smem_bytes, &overwrite_img, &c, &d, &early, &params};
    err = musaLaunchKernel(sqmma_kernel, dim3(1), dim3(threads), args, static_cast<size_t>(smem_bytes), nullptr);
  }
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

// The shared address of a pointer outside the dynamic buffer: must fail the launch.
extern "C" __global__ void static_smem_address(int* out) {
  __shared__ int scratch[4];
  out[threadIdx.x] = static_cast<int>(__cvta_generic_to_shared(scratch));
}
extern "C" int run_static_smem_address(int* out) {
  void* args[] = {&out};
  musaError_t err = musaLaunchKernel(static_smem_address, dim3(1), dim3(1), args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
