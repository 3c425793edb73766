/*!
 * \file tl_templates/sim/runtime/sim_runtime.cc
 * \brief The simulator runtime of one arch: the launch path, scheduler, fibers, watchdog and signal guard, race
 *        detector set-up and profiler, compiled once (jit/sim_runtime.py builds it with the kernels' flags and
 *        -DTL_SIM_BUILD_RUNTIME) and linked by every kernel library of that arch built with -DTL_SIM_LINK_RUNTIME.
 *
 * It compiles the same headers kernel libraries include; what it exports is the narrow ABI of sim/launch.h and
 * sim/thread_state.h (symbols named tl_sim_rt<arch>_*, so runtimes of several archs coexist): the launch, the
 * per-kernel attributes, the state kernel code and the runtime share (the thread state, the count of profiled
 * launches), and the profiler's last-launch JSON (tl_sim_last_profile, tl_sim_last_trace). docs/SIMULATOR.md
 * describes the design.
 */
#ifndef TL_SIM_BUILD_RUNTIME
#error "compile the simulator runtime with -DTL_SIM_BUILD_RUNTIME=1"
#endif

#include "musa_runtime.h"

namespace tl_sim {

// initial-exec here too: a definition without the model would make every access of the runtime's own code a
// __tls_get_addr call (the declaration's model does not carry over to it)
TL_SIM_CONSTINIT thread_local OsThreadState g_thread __attribute__((tls_model("initial-exec")));
namespace profile {
std::atomic<int> g_profiled_launches{0};
}  // namespace profile

void* RuntimeKernelAttributes() { return &GlobalKernelAttributes(); }
void* RuntimeStackPool() { return &GlobalStackPool(); }

musaError_t RuntimeLaunch(uint64_t abi, const void* fn, const void* call, dim3 grid, dim3 block,
                          size_t dynamic_smem) {
  if (abi != kRuntimeAbi)
    return LaunchError(fn, "", musaErrorInvalidDeviceFunction,
                       "the kernel library was built against other simulator headers than its runtime (ABI %llx, "
                       "runtime %llx): rebuild it",
                       static_cast<unsigned long long>(abi), static_cast<unsigned long long>(kRuntimeAbi));
  return Launch(fn, *static_cast<const KernelCall*>(call), grid, block, dynamic_smem);
}

}  // namespace tl_sim
