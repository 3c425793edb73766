/*!
 * \file target/musa_archs.h
 * \brief The MUSA architectures, as the C++ side needs them: what the `musa` target's canonicalizer derives from
 *        `arch` (warp size, shared memory per block) and what the device printer asks of an arch (whether it has
 *        asynchronous barriers).
 *
 * The full table lives in tilelang_musa/target.py (`ArchInfo`); these fields mirror it, and testing/test_target.py
 * compares the two through `tilelang_musa.target.list_archs`. Source: docs/MUSA_FACTS.md, "Architectures".
 */
#ifndef TILELANG_MUSA_TARGET_MUSA_ARCHS_H_
#define TILELANG_MUSA_TARGET_MUSA_ARCHS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <sstream>
#include <string>

namespace tilelang_musa {

struct MusaArch {
  const char* name;                     //!< the `arch` target option, e.g. "mp_31"
  int64_t thread_warp_size;             //!< threads per warp
  int64_t max_shared_memory_per_block;  //!< bytes
  bool has_async_barriers;              //!< asynchronous barriers (integer ids 1..63, docs/ASYNC_MODEL.md)
};

inline constexpr MusaArch kArchs[] = {
    // Inferred: no source states mp_21's limit; 28 KiB is what deviceProperties reports on an
    // MTT S70 (github.com/quadpixels/musa_practice), a QY1 part like the S80.
    {"mp_21", 128, 28672, false},
    {"mp_22", 128, 73728, false},
    {"mp_31", 32, 196608, true},
    // Inferred: mp_32 (PH1S) is documented only as "like mp_31".
    {"mp_32", 32, 196608, true},
};
inline constexpr const char* kDefaultArch = "mp_31";

/*! \brief The arch named `name`, or nullptr. */
inline const MusaArch* FindArch(const std::string& name) {
  for (const MusaArch& arch : kArchs) {
    if (name == arch.name) return &arch;
  }
  return nullptr;
}

/*! \brief The oldest arch with a capability (e.g. &MusaArch::has_async_barriers), for messages such as
 *         "they need mp_31 or newer"; nullptr when none has it. */
inline const char* OldestArchWith(bool MusaArch::*capability) {
  for (const MusaArch& arch : kArchs) {
    if (arch.*capability) return arch.name;
  }
  return nullptr;
}

/*! \brief The arch names, quoted and comma-separated: "mp_21", "mp_22", ... */
inline std::string AcceptedArchList() {
  std::ostringstream os;
  for (size_t i = 0; i < std::size(kArchs); ++i) {
    os << (i ? ", " : "") << '"' << kArchs[i].name << '"';
  }
  return os.str();
}

}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_TARGET_MUSA_ARCHS_H_
