// TME (mp_31): tile loads of rank 1..5 through a tensor descriptor completing on an async barrier, with tails
// past the tensor's edges; a swizzled tile read back through the SQMMA model's operand addressing; tile stores;
// and planted misuse. Shared reads go through the sanitizer's hook, as generated kernels' do.
#include <musa_runtime.h>

#include <cstdint>
#include <cstring>

#define SH_LOAD(buf, i, n) buf[tl_sim::CheckShared<tl_sim::kLoad>(buf, i, 1, 0, n, #buf, __LINE__)]
#define SH_STORE(buf, i, v, n) tl_sim::CheckedStore<true, float>(buf, i, v, 1, 0, n, #buf, __LINE__)

// Issue the rank-`rank` TME load of box `box` at `coord` into `smem` on barrier `bar`.
__device__ void load_tile(int rank, uint32_t bar, void* smem, uint64_t d, const int* box, const int* coord, int sg,
                          int ss, int sl) {
  switch (rank) {
    case 1:
      __musa_tme_ld_tile_1d(bar, smem, d, box[0], coord[0], sg, ss, sl, 0, 2, 2, 0);
      break;
    case 2:
      __musa_tme_ld_tile_2d(bar, smem, d, v2i32_t{box[0], box[1]}, v2i32_t{coord[0], coord[1]}, sg, ss, sl, 0, 2, 2,
                            0);
      break;
    case 3:
      __musa_tme_ld_tile_3d(bar, smem, d, v3i32_t{box[0], box[1], box[2]}, v3i32_t{coord[0], coord[1], coord[2]}, sg,
                            ss, sl, 0, 2, 2, 0);
      break;
    case 4:
      __musa_tme_ld_tile_4d(bar, smem, d, v4i32_t{box[0], box[1], box[2], box[3]},
                            v4i32_t{coord[0], coord[1], coord[2], coord[3]}, sg, ss, sl, 0, 1, 3, 0);
      break;
    default:  // the older mcc form, without the cache hints
      __musa_tme_ld_tile_5d(bar, smem, d, v5i32_t{box[0], box[1], box[2], box[3], box[4]},
                            v5i32_t{coord[0], coord[1], coord[2], coord[3], coord[4]}, sg, ss, sl, 0);
      break;
  }
}

// Thread 0 expects the tile's bytes on barrier 1 and loads it; every warp arrives and waits; then the tile (float32,
// `elems` elements, dense) is copied to out. `mode`: 0 as described; 1 thread 0 also reads tile[0] into out[elems]
// right after issuing (before the wait: poison, or in checked mode a named error); 2 expects 64 bytes more than the
// tile; 3 expects 16 bytes less; 4 loads the tile twice (two copies in flight to the same bytes: checked mode's
// error); 5 thread 0 expects the bytes and arrives in one call (__musa_async_arrive_add_trans) before the load;
// 6 an invalid swizzle (granularity 64 B on a 32 B stride); 7 `out` passed as the descriptor.
extern "C" __global__ void tme_load(__grid_constant__ const MUtensorDescriptor desc, int rank, const int* box,
                                    const int* coord, float* out, int elems, int mode) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  float* tile = reinterpret_cast<float*>(buf_dyn_shmem);
  __musa_async_bar_record(1);
  if (threadIdx.x == 0) __musa_async_init_arrival(1, blockDim.x / 32, 0);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int extra = mode == 2 ? 64 : mode == 3 ? -16 : mode == 4 ? elems * 4 : 0;
    if (mode == 5) __musa_async_arrive_add_trans(1, static_cast<uint32_t>(elems * 4));
    else __musa_async_add_trans(1, static_cast<uint32_t>(elems * 4 + extra));
    const uint64_t d = reinterpret_cast<uint64_t>(mode == 7 ? static_cast<const void*>(out) : &desc);
    load_tile(rank, 1, tile, d, box, coord, mode == 6 ? 3 : 0, mode == 6 ? 0 : 3, 1);
    if (mode == 4) load_tile(rank, 1, tile, reinterpret_cast<uint64_t>(&desc), box, coord, 0, 3, 1);  // again
    if (mode == 1) out[elems] = SH_LOAD(tile, 0, elems);  // missing __musa_async_wait(1, 0)
  }
  if (mode != 5 || threadIdx.x != 0) __musa_async_arrive(1);
  __musa_async_wait(1, 0);
  for (int i = threadIdx.x; i < elems; i += blockDim.x) out[i] = SH_LOAD(tile, i, elems);
}

// A 2-D float16 tile of `rows` x 64 (128-byte rows) loaded with swizzle codes `sg`, `ss`, `sl`; raw = the shared
// bytes as they lie, and out[r][k] = element (r, k) read through an SQMMA K-major operand descriptor of swizzle
// granularity `sg` (whose stride and line are 256 B: ss = 3, sl = 1).
extern "C" __global__ void tme_swizzle(__grid_constant__ const MUtensorDescriptor desc, int rows, int sg, int ss,
                                       int sl, uint16_t* raw, uint16_t* out) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  __musa_async_bar_record(1);
  if (threadIdx.x == 0) __musa_async_init_arrival(1, blockDim.x / 32, 0);
  __syncthreads();
  if (threadIdx.x == 0) {
    __musa_async_add_trans(1, static_cast<uint32_t>(rows * 128));
    __musa_tme_ld_tile_2d(1, buf_dyn_shmem, reinterpret_cast<uint64_t>(&desc), v2i32_t{64, rows}, v2i32_t{0, 0}, sg,
                          ss, sl, 0, 2, 2, 0);
  }
  __musa_async_arrive(1);
  __musa_async_wait(1, 0);
  const uint32_t code = (5u << 18) | (static_cast<uint32_t>(sg) << 21);  // start 0, leading stride 128 B
  tl_sim::sqmma::OperandPlan plan;
  char why[160];
  if (!tl_sim::sqmma::DecodeDescriptor(code, &plan.desc, why, sizeof(why))) __trap();
  plan.k_major = true;
  plan.elem_bytes = 2;
  for (int i = threadIdx.x; i < rows * 64; i += blockDim.x) {
    std::memcpy(&raw[i], buf_dyn_shmem + 2 * i, 2);
    std::memcpy(&out[i], buf_dyn_shmem + plan.Address(i / 64, i % 64), 2);
  }
}

// Every thread writes tile[i] = i + 0.5 (a box x rows float32 tile), then thread 0 stores it with a 2-D TME store
// at `coord`. `mode`: 0 commit and read_wait; 1 thread 0 overwrites tile[0] with -1 after the store's issue, before
// its wait (the store reads the tile at the wait: -1 lands; checked mode: a named error); 2 no wait at all.
extern "C" __global__ void tme_store(__grid_constant__ const MUtensorDescriptor desc, int box0, int box1,
                                     const int* coord, int mode) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  float* tile = reinterpret_cast<float*>(buf_dyn_shmem);
  const int elems = box0 * box1;
  for (int i = threadIdx.x; i < elems; i += blockDim.x) SH_STORE(tile, i, i + 0.5f, elems);
  __syncthreads();
  if (threadIdx.x != 0) return;
  __musa_tme_st_2d(tile, reinterpret_cast<uint64_t>(&desc), v2i32_t{box0, box1}, v2i32_t{coord[0], coord[1]}, 0, 3,
                   1, 2, 2, 1);
  __musa_tme_store_commit();
  if (mode == 1) SH_STORE(tile, 0, -1.0f, elems);  // the store may still be reading the tile
  if (mode != 2) __musa_tme_store_read_wait();
}

extern "C" const char* get_last_error() { return musaGetErrorString(musaPeekAtLastError()); }

static int finish(musaError_t err) {
  if (err == musaSuccess) (void)musaGetLastError();
  return err;
}

// muTensorDescriptorEncode's result for the given arguments (strides: rank - 1 byte strides).
extern "C" int encode(int rank, int dtype, void* base, const unsigned long long* dims,
                      const unsigned long long* strides, unsigned long long fill) {
  alignas(64) MUtensorDescriptor desc;
  return muTensorDescriptorEncode(&desc, static_cast<MUtensorDescriptorDataType>(dtype), static_cast<muuint32_t>(rank),
                                  base, reinterpret_cast<const muuint64_t*>(dims),
                                  reinterpret_cast<const muuint64_t*>(strides), MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE,
                                  fill);
}

// Returns 1000 + the encoder's error, or the launch's.
extern "C" int call_tme_load(int rank, float* base, const unsigned long long* dims, const unsigned long long* strides,
                             const int* box, const int* coord, float* out, int mode, unsigned long long fill) {
  alignas(64) MUtensorDescriptor desc;
  const MUresult r = muTensorDescriptorEncode(&desc, MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32,
                                              static_cast<muuint32_t>(rank), base,
                                              reinterpret_cast<const muuint64_t*>(dims),
                                              reinterpret_cast<const muuint64_t*>(strides),
                                              MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE, fill);
  if (r != MUSA_SUCCESS) return 1000 + r;
  int elems = 1;
  for (int i = 0; i < rank; ++i) elems *= box[i];
  void* args[] = {&desc, &rank, &box, &coord, &out, &elems, &mode};
  return finish(musaLaunchKernel(tme_load, dim3(1), dim3(128), args, static_cast<size_t>(elems) * 4, nullptr));
}

extern "C" int call_tme_swizzle(uint16_t* base, int rows, int sg, int ss, int sl, uint16_t* raw, uint16_t* out) {
  alignas(64) MUtensorDescriptor desc;
  const muuint64_t dims[2] = {64, static_cast<muuint64_t>(rows)};
  const muuint64_t strides[1] = {128};
  const MUresult r = muTensorDescriptorEncode(&desc, MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT16, 2, base, dims, strides,
                                              MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE, 0);
  if (r != MUSA_SUCCESS) return 1000 + r;
  void* args[] = {&desc, &rows, &sg, &ss, &sl, &raw, &out};
  return finish(musaLaunchKernel(tme_swizzle, dim3(1), dim3(128), args, static_cast<size_t>(rows) * 128, nullptr));
}

extern "C" int call_tme_store(float* base, int dim0, int dim1, int box0, int box1, const int* coord, int mode) {
  alignas(64) MUtensorDescriptor desc;
  const muuint64_t dims[2] = {static_cast<muuint64_t>(dim0), static_cast<muuint64_t>(dim1)};
  const muuint64_t strides[1] = {static_cast<muuint64_t>(dim0) * 4};
  const MUresult r = muTensorDescriptorEncode(&desc, MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32, 2, base, dims, strides,
                                              MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE, 0);
  if (r != MUSA_SUCCESS) return 1000 + r;
  void* args[] = {&desc, &box0, &box1, &coord, &mode};
  return finish(
      musaLaunchKernel(tme_store, dim3(1), dim3(128), args, static_cast<size_t>(box0) * box1 * 4, nullptr));
}
