/*!
 * \file testing/device_compilers/clang_musa/cooperative_groups.h
 * \brief <cooperative_groups.h> for clang's syntax check: the grid group that T.sync_grid prints
 *        (`cooperative_groups::this_grid().sync()`), declarations only, as the SDK's CUDA-compatible header has it.
 */
#pragma once

namespace cooperative_groups {
class grid_group {
 public:
  __device__ void sync() const;
  __device__ bool is_valid() const;
};
__device__ grid_group this_grid();
}  // namespace cooperative_groups
