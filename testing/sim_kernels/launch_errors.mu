// Launch-time validation and the runtime API's error bookkeeping and memory functions.
#include <musa_runtime.h>

#include <cstdio>

extern "C" __global__ void fill(int* out, int value) { out[threadIdx.x] = value; }

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

static int finish(musaError_t err) {
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}

extern "C" int call_dims(int* out, const unsigned* grid3, const unsigned* block3) {
  int value = 7;
  void* args[] = {&out, &value};
  const dim3 grid(grid3[0], grid3[1], grid3[2]), block(block3[0], block3[1], block3[2]);
  return finish(musaLaunchKernel(fill, grid, block, args, 0, nullptr));
}

// The untyped C form: the simulator cannot unpack the arguments, and says so.
extern "C" int call_untyped(int* out) {
  int value = 7;
  void* args[] = {&out, &value};
  return finish(musaLaunchKernel(reinterpret_cast<const void*>(fill), dim3(1), dim3(1), args, 0, nullptr));
}

extern "C" int call_null_args() { return finish(musaLaunchKernel(fill, dim3(1), dim3(1), nullptr, 0, nullptr)); }

extern "C" int last_error() { return musaGetLastError(); }
extern "C" int peek_error() { return musaPeekAtLastError(); }
extern "C" const char* error_string(int code) { return musaGetErrorString(static_cast<musaError_t>(code)); }
extern "C" const char* error_name(int code) { return musaGetErrorName(static_cast<musaError_t>(code)); }

// musaMalloc / musaMemcpy / musaMemset / musaFree round trip through a kernel on a stream.
extern "C" int device_roundtrip(const int* host_in, int* host_out, int n) {
  int* dev = nullptr;
  musaStream_t stream = nullptr;
  musaError_t err = musaMalloc(reinterpret_cast<void**>(&dev), n * sizeof(int));
  if (err == musaSuccess) err = musaStreamCreate(&stream);
  if (err == musaSuccess) err = musaMemcpy(dev, host_in, n * sizeof(int), musaMemcpyHostToDevice);
  if (err == musaSuccess) {
    int value = host_in[0] + 1;
    void* args[] = {&dev, &value};
    err = musaLaunchKernel(fill, dim3(1), dim3(n / 2), args, 0, stream);  // overwrite the first half
  }
  if (err == musaSuccess) err = musaStreamSynchronize(stream);
  if (err == musaSuccess) err = musaMemcpy(host_out, dev, n * sizeof(int), musaMemcpyDeviceToHost);
  if (stream != nullptr) musaStreamDestroy(stream);
  musaFree(dev);
  return finish(err);
}
