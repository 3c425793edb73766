// tools/silicon/driver.cpp: runs the bundle's kernels on an NVIDIA GPU (docs/SIM_VS_SILICON.md).
//
//   silicon_driver BUNDLE LIBDIR OUTDIR [NAME...]
//
// Reads BUNDLE/manifest.txt (written by prepare.py):
//   kernel NAME NARGS
//   arg ARG BYTES OUT INIT          (NARGS lines; OUT: 1 for an output; INIT: 1 when BUNDLE/data/NAME.ARG.bin holds
//                                   the argument's initial bytes, 0 for an output whose start is filled with 0xFF)
// For each kernel: dlopen LIBDIR/NAME.so (the generated source built by nvcc against cuda_musa/), cudaMalloc every
// argument, copy the initial bytes in, call the host wrapper's `call_packed(args, nargs, stream)` exactly as the
// package's launcher does, synchronise, and write each output to OUTDIR/NAME.ARG.bin. A kernel that fails (build
// missing, launch error, fault) is reported in OUTDIR/status.txt and the rest still run; after a sticky device
// fault the driver stops. No Python is needed.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ArgSpec {
  std::string name;
  size_t bytes = 0;
  bool out = false, init = false;
};
struct KernelSpec {
  std::string name;
  std::vector<ArgSpec> args;
};

std::vector<KernelSpec> ReadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<KernelSpec> kernels;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string tag;
    s >> tag;
    if (tag == "kernel") {
      KernelSpec k;
      size_t n;
      s >> k.name >> n;
      kernels.push_back(k);
    } else if (tag == "arg") {
      ArgSpec a;
      int out, init;
      s >> a.name >> a.bytes >> out >> init;
      a.out = out != 0;
      a.init = init != 0;
      kernels.back().args.push_back(a);
    }
  }
  return kernels;
}

bool ReadFile(const std::string& path, std::vector<char>& data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<size_t>(in.gcount()) == data.size();
}

using CallPacked = int (*)(void**, int, void*);
using LastError = const char* (*)();

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s BUNDLE LIBDIR OUTDIR [NAME...]\n", argv[0]);
    return 2;
  }
  const std::string bundle = argv[1], libdir = argv[2], outdir = argv[3];
  std::set<std::string> only(argv + 4, argv + argc);
  std::FILE* status = std::fopen((outdir + "/status.txt").c_str(), "w");
  if (status == nullptr) {
    std::fprintf(stderr, "cannot write %s/status.txt\n", outdir.c_str());
    return 2;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::fprintf(status, "device %s sm_%d%d runtime %d driver %d\n", prop.name, prop.major, prop.minor, runtime, driver);

  int failed = 0, ran = 0;
  for (const KernelSpec& k : ReadManifest(bundle + "/manifest.txt")) {
    if (!only.empty() && !only.count(k.name)) continue;
    const std::string lib = libdir + "/" + k.name + ".so";
    void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(status, "kernel %s FAIL dlopen: %s\n", k.name.c_str(), dlerror());
      ++failed;
      continue;
    }
    auto call = reinterpret_cast<CallPacked>(dlsym(handle, "call_packed"));
    auto last_error = reinterpret_cast<LastError>(dlsym(handle, "get_last_error"));
    std::vector<void*> device(k.args.size(), nullptr);
    std::vector<void*> slots(k.args.size(), nullptr);
    std::string problem;
    for (size_t i = 0; i < k.args.size() && problem.empty(); ++i) {
      const ArgSpec& a = k.args[i];
      std::vector<char> host(a.bytes, static_cast<char>(0xFF));
      if (a.init && !ReadFile(bundle + "/data/" + k.name + "." + a.name + ".bin", host)) problem = "missing data " + a.name;
      if (cudaMalloc(&device[i], a.bytes) != cudaSuccess) problem = "cudaMalloc " + a.name;
      else cudaMemcpy(device[i], host.data(), a.bytes, cudaMemcpyHostToDevice);
      slots[i] = &device[i];
    }
    if (problem.empty() && call == nullptr) problem = "no call_packed";
    if (problem.empty()) {
      const int rc = call(slots.data(), static_cast<int>(slots.size()), nullptr);
      const cudaError_t sync = cudaDeviceSynchronize();
      if (rc != 0) problem = std::string("call: ") + (last_error ? last_error() : "?");
      else if (sync != cudaSuccess) problem = std::string("kernel: ") + cudaGetErrorString(sync);
    }
    for (size_t i = 0; i < k.args.size() && problem.empty(); ++i) {
      const ArgSpec& a = k.args[i];
      if (!a.out) continue;
      std::vector<char> host(a.bytes);
      if (cudaMemcpy(host.data(), device[i], a.bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        problem = "copy back " + a.name;
        break;
      }
      std::ofstream o(outdir + "/" + k.name + "." + a.name + ".bin", std::ios::binary);
      o.write(host.data(), static_cast<std::streamsize>(a.bytes));
    }
    for (void* p : device) cudaFree(p);
    ++ran;
    if (!problem.empty()) {
      ++failed;
      std::fprintf(status, "kernel %s FAIL %s\n", k.name.c_str(), problem.c_str());
      std::fprintf(stderr, "kernel %s FAIL %s\n", k.name.c_str(), problem.c_str());
      if (cudaGetLastError() != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess) break;  // sticky fault
    } else {
      std::fprintf(status, "kernel %s ok\n", k.name.c_str());
    }
    std::fflush(status);
  }
  std::fprintf(status, "ran %d failed %d\n", ran, failed);
  std::fclose(status);
  std::printf("ran %d kernels, %d failed\n", ran, failed);
  return failed ? 1 : 0;
}
