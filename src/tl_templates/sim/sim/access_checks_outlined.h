/*!
 * \file tl_templates/sim/sim/access_checks_outlined.h
 * \brief The body of access_checks.h's checked-mode check of poisoned global outputs, compiled once into the
 *        simulator runtime (and into a kernel library that carries its own simulator), never in a kernel library
 *        that links the runtime (visibility.h, TL_SIM_OUTLINED). Included by access_checks.h only.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "access_checks.h"
#include "grid_flags.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

TL_SIM_OUTLINED_DEF void CheckGlobalInit(PoisonedGlobals& globals, AccessKind kind, const volatile void* first,
                                         size_t elem_bytes, int64_t offset, int lanes, const char* name, int line) {
  const auto* element = static_cast<const volatile unsigned char*>(first);
  GridFlags* flags = g_thread.grid_flags;
  const bool published = flags != nullptr && flags->checked();  // inter-block publication (grid_flags.h)
  if (kind != kLoad) {
    globals.MarkWritten(element, elem_bytes * static_cast<size_t>(lanes));
    if (published) globals.MarkWriter(element, elem_bytes * static_cast<size_t>(lanes), flags->Stamp());
    return;
  }
  for (int lane = 0; lane < lanes; ++lane, element += elem_bytes) {
    if (published) flags->CheckRead(globals.Writer(element), name, offset + lane, line);
    if (const char* why = globals.Unwritten(element, elem_bytes)) UninitialisedRead("global", why, name, offset + lane, line);
  }
}

}  // namespace tl_sim
#pragma GCC visibility pop
