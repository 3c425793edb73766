/*!
 * \file launch_info.h
 * \brief What a device PrimFunc needs at launch: grid and block extents and dynamic shared memory.
 *
 * Collected from the statement tree before printing: `thread_extent` AttrStmts give the extents, and
 * `AllocBuffer`s of scope "shared.dyn" carve the one dynamic shared-memory buffer of the kernel.
 */
#ifndef TILELANG_MUSA_CODEGEN_LAUNCH_INFO_H_
#define TILELANG_MUSA_CODEGEN_LAUNCH_INFO_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "codegen/ir_view.h"

namespace tilelang_musa {
namespace codegen {

/*!
 * \brief Annotation on a "shared.dyn" AllocBuffer: its byte offset (int or integer expression) inside the
 * kernel's dynamic shared memory. Without it the buffer starts at byte 0, which is only allowed when the kernel
 * has a single "shared.dyn" allocation.
 */
constexpr const char* kDynSmemOffsetAttr = "tl.dyn_smem_offset";

/*! \brief One "shared.dyn" allocation. */
struct DynSmemAlloc {
  ObjectRef buffer;  //!< the AllocBuffer's buffer Var
  Any offset;        //!< byte offset: an int, or an integer expression
  Any bytes;         //!< byte size: an int, or an integer expression
};

struct LaunchInfo {
  std::array<ObjectRef, 3> grid;     //!< blockIdx.x/y/z extents; undefined when the axis is not bound (= 1)
  std::array<ObjectRef, 3> threads;  //!< threadIdx.x/y/z extents; undefined when not bound (= 1)
  std::vector<DynSmemAlloc> dyn_smem;

  /*! \brief Product of the threadIdx extents when all are constants (1 when none is bound). */
  std::optional<int64_t> StaticThreadsPerBlock() const;
};

/*! \brief Walks `body`; throws (naming `kernel_name`) on inconsistent extents or ambiguous dynamic smem. */
LaunchInfo CollectLaunchInfo(const ObjectRef& body, const std::string& kernel_name);

/*! \brief The byte offset annotated on a "shared.dyn" AllocBuffer (an int or an expression), or int 0. */
Any DynSmemOffset(const ObjectRef& alloc_buffer_stmt);

/*!
 * \brief `{"threads": [x, y, z], "grid_vars": [x, y, z], "dynamic_smem_bytes": n}`: block and grid extents
 * (1 for an unbound axis) and the dynamic shared-memory bytes, each an int when constant, else an IR expression.
 */
Map<String, Any> KernelLaunchInfoMap(const ObjectRef& func);

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_LAUNCH_INFO_H_
