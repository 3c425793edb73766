// LDLMS asynchronous global -> shared copies (mp_22 and mp_31): commit groups and their waits, robust copies and
// loads that read 0 past their descriptor, and planted misuse. Shared reads go through the sanitizer's hook, as
// generated kernels' do, so checked mode sees them.
#include <musa_runtime.h>

#include <cstdint>

#define SH_LOAD(buf, i, n) buf[tl_sim::CheckShared<tl_sim::kLoad>(buf, i, 1, 0, n, #buf, __LINE__)]
#define SH_STORE(buf, i, v, n) buf[tl_sim::CheckShared<tl_sim::kStore>(buf, i, 1, 0, n, #buf, __LINE__)] = (v)

// Each thread copies 4 floats of `in` in each of two groups: group A = in[4t..4t+4) into a, group B = in[4(T+t)..)
// into b (T = blockDim.x). out[0..4T) = a and out[4T..8T) = b read after wait_group(1) (A landed, B not: poison),
// out[8T..12T) = b after wait_group(0). With `commit_b` 0 the second copy is never committed, and
// __musa_memcpy_g2s_wait() (which waits for uncommitted copies too) replaces wait_group(0).
extern "C" __global__ void groups(const float* in, float* out, int commit_b) {
  __shared__ __align__(16) float a[4 * 128];
  __shared__ __align__(16) float b[4 * 128];
  const int t = threadIdx.x, T = blockDim.x;
  __musa_memcpy_g2s(&a[4 * t], &in[4 * t], 16, 0);
  __musa_memcpy_g2s_commit_group();
  __musa_memcpy_g2s(&b[4 * t], &in[4 * (T + t)], 16, 0);
  if (commit_b) __musa_memcpy_g2s_commit_group();
  __musa_memcpy_g2s_wait_group(1);
  for (int i = 0; i < 4; ++i) {
    out[4 * t + i] = SH_LOAD(a, 4 * t + i, 4 * T);
    if (commit_b) out[4 * (T + t) + i] = b[4 * t + i];  // not landed: reads poison (checked mode: unchecked read)
  }
  if (commit_b) __musa_memcpy_g2s_wait_group(0);
  else __musa_memcpy_g2s_wait();
  for (int i = 0; i < 4; ++i) out[4 * (2 * T + t) + i] = SH_LOAD(b, 4 * t + i, 4 * T);
}

// Robust copies: thread t copies 16 bytes from in + 4t with a descriptor covering the first `valid` bytes of `in`;
// bytes past it read 0. Then out2[t] = the synchronous robust 4-int load at the same place, out3[t] its first int.
extern "C" __global__ void robust(const int* in, int valid, int* out, int* out2, int* out3) {
  __shared__ __align__(16) int s[4 * 128];
  const int t = threadIdx.x;
  __musa::robust_ptr<const int> range(in, static_cast<uint64_t>(valid));
#if __MUSA_ARCH__ >= 310
  auto desc = range.get_v4_robust_addr();
  __musa_memcpy_g2s_robust_v4(&s[4 * t], &in[4 * t], 16, desc, 0);
  const v4i32_t v = __musa_ld_v4_robust_v4i32(&in[4 * t], desc, 0);
  const int32_t first = __musa_ld_v4_robust_i32(&in[4 * t], desc, 0);
#else
  auto desc = range.get_robust_addr();
  __musa_memcpy_g2s_robust(&s[4 * t], &in[4 * t], 16, desc, 0);
  const v4i32_t v = __musa_ld_robust_v4i32(&in[4 * t], desc);
  const int32_t first = __musa_ld_robust_i32(&in[4 * t], desc);
#endif
  __musa_memcpy_g2s_wait();
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    out[4 * t + i] = s[4 * t + i];
    out2[4 * t + i] = v[i];
  }
  out3[t] = first;
}

// Planted misuse, by `mode`:
//   0 a thread reads its copy's destination before waiting (checked mode: named error; else it reads poison)
//   1 a copy never waited for (checked mode: error when the thread exits)
//   2 a 2-byte copy
//   3 another thread reads the destination after the issuer's wait but with no block barrier (checked: a race)
//   4 each thread reads the previous thread's row, then refills its own with a copy, no barrier between the read
//     and the copy (checked: the read meets the copy in flight, or the copy's issue meets the read: a race either
//     way, a missing barrier, not a missing wait)
//   5 the copy's thread passes a barrier without waiting; another thread then reads (checked: a missing wait)
extern "C" __global__ void misuse(int mode, const float* in, float* out) {
  __shared__ __align__(16) float s[4 * 128];
  const int t = threadIdx.x, T = blockDim.x;
  if (mode == 4) {
    for (int i = 0; i < 4; ++i) SH_STORE(s, 4 * t + i, -1.0f, 4 * 128);
    __syncthreads();
    out[t] = SH_LOAD(s, 4 * ((t + T - 1) % T), 4 * 128);  // the previous thread's row, before its refill
  }
  __musa_memcpy_g2s(&s[4 * t], &in[4 * t], mode == 2 ? 2 : 16, 0);  // mode 4: missing __syncthreads() before
  if (mode == 0) out[t] = SH_LOAD(s, 4 * t, 4 * 128);  // missing __musa_memcpy_g2s_wait()
  if (mode == 1) return;
  if (mode == 4 || mode == 5) __syncthreads();
  if (mode == 5) out[t] = SH_LOAD(s, 4 * ((t + 1) % T), 4 * 128);  // the next thread never waited for its copy
  __musa_memcpy_g2s_wait();
  if (mode == 3) out[t] = SH_LOAD(s, 4 * ((t + 1) % T), 4 * 128);  // missing __syncthreads()
}

extern "C" const char* get_last_error() { return musaGetErrorString(musaPeekAtLastError()); }

static int finish(musaError_t err) {
  if (err == musaSuccess) (void)musaGetLastError();
  return err;
}

extern "C" int call_groups(int threads, const float* in, float* out, int commit_b) {
  void* args[] = {&in, &out, &commit_b};
  return finish(musaLaunchKernel(groups, dim3(1), dim3(threads), args, 0, nullptr));
}
extern "C" int call_robust(int threads, const int* in, int valid, int* out, int* out2, int* out3) {
  void* args[] = {&in, &valid, &out, &out2, &out3};
  return finish(musaLaunchKernel(robust, dim3(1), dim3(threads), args, 0, nullptr));
}
extern "C" int call_misuse(int threads, int mode, const float* in, float* out) {
  void* args[] = {&mode, &in, &out};
  return finish(musaLaunchKernel(misuse, dim3(1), dim3(threads), args, 0, nullptr));
}
