/*!
 * \file tl_templates/sim/sim/uninit_reads.h
 * \brief Checked mode's detector of uninitialised reads: a load of a shared, fragment or local element that
 *        nothing wrote in this block (shared) or this thread (fragment, local) ends the launch naming the buffer,
 *        the element, the line of the generated source and the thread.
 *
 * The simulator already fills shared memory with poison (kPoisonByte) at the start of every block and every local
 * array at its declaration, so an unwritten element holds the poison pattern. The pattern alone is not proof:
 * an int32 -1 or an int8 -1 is the same bytes. So:
 *
 * - shared memory has a shadow: per byte, the serial of the block that last wrote it (WrittenShadow). Every store
 *   path of checked mode marks it: the generated code's stores and address-taking accesses (access_checks.h: an
 *   address handed to a template, e.g. an atomic, may be written through), asynchronous copies and TME loads as
 *   they land (async_copy.h, tme.h). A load of an element that holds the poison pattern and none of whose bytes
 *   this block wrote is the error. A template may write any element of a buffer whose address it was handed
 *   through a pointer it derives (T.cumsum, reductions), with the poison's bytes (an int32 -1): so handing out an
 *   address marks the whole buffer *handed out* for the block (NoteBuffer), which the generated code's loads count
 *   as written; a template's own read (CheckModelRead) counts it only when calls at two lines of the generated
 *   source or more handed the buffer out in this block (T.cumsum writing D, then a TME store of D), not when
 *   every hand-out was at one line, the reading call's (a GEMM fed a tile nothing wrote, element 0 included).
 *   (The reading call's line cannot tell them apart: a device model may read after its thread was switched out.)
 * - the device models and templates that read shared memory themselves (a GEMM's operands: load_pair of the
 *   MMA/WMMA templates, SQMMA's operand fetch; a TME store's tile) check each element they read the same way,
 *   naming the buffer whose address the kernel handed to them (its address-taking access registers it here) and
 *   the line of the generated source that last made a checked access (the call's).
 * - fragments and locals live in the simulated thread's C arrays, written through references by templates (GEMM
 *   accumulators, reductions) that no shadow could follow. Integer, bool and FNUZ float8 ones get a defined byte
 *   per element (see "integer fragments and locals" below). A GEMM template that reads a float fragment handed to
 *   it (its accumulator without ClearAccum, a register operand) checks it for the poison and names the array
 *   (HandOutLocal, CheckAccumulatorRead). For float ones the code generator checks their loads for element
 *   types whose all-ones bytes are a NaN (float16/32/64, bfloat16, float8 e4m3fn/e5m2/e8m0): arithmetic never
 *   produces that NaN from a value, it only carries the poison one along, so such a load reads an element never
 *   written by this thread, or written with a value computed from one. Generated code legitimately makes such
 *   loads whose value dies (threads outside a fragment's layout combining their unwritten slot with an all-reduce
 *   result they never store), so the load is only recorded (the thread's first); the error is the thread's next
 *   checked store to shared or global memory of a NaN, which names both the load and the store.
 *
 * A shared read is reported when the block ends, not at once: the first one is kept (Deferred) and the block runs
 * on, so that when another thread stores the element later with no barrier in between, the race detector's report
 * (which names both threads and the missing barrier) wins. Any other error of the block wins too.
 *
 * Checked mode only (TILELANG_SIM_CHECK=1): default mode pays one thread-local load per checked local load.
 */
#pragma once

#include <sys/mman.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "config.h"
#include "scheduler.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief True when the `bytes` bytes at `p` are all the poison byte. */
inline bool IsPoison(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(const_cast<const void*>(p));
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != kPoisonByte) return false;
  return true;
}

/*! \brief Report a load of an element that holds poison and was never written. */
[[noreturn]] inline void UninitialisedRead(const char* space, const char* why, const char* name, int64_t element,
                                           int line) {
  BlockRunner& block = CurrentBlock("an uninitialised-read check");
  block.Fail(musaErrorLaunchFailure,
             "uninitialised read: %s load of `%s` at element %lld, %s (line %d of the kernel source)", space, name,
             static_cast<long long>(element), why, line);
}

/*! \brief Format the report of UninitialisedRead, prefixed with the running block and thread, into `out`. */
inline void FormatUninitialisedRead(char* out, size_t size, const char* space, const char* why, const char* name,
                                    int64_t element, int line) {
  BlockRunner& block = CurrentBlock("an uninitialised-read check");
  const uint3 b = g_thread.block_idx, t = block.current().idx;
  std::snprintf(out, size,
                "block (%u,%u,%u), thread (%u,%u,%u): uninitialised read: %s load of `%s` at element %lld, %s (line "
                "%d of the kernel source)",
                b.x, b.y, b.z, t.x, t.y, t.z, space, name, static_cast<long long>(element), why, line);
}

/*! \brief True when `v`, an element of a floating type (float, double, half_t, bfloat16_t, ...), is a NaN. */
template <typename E>
inline bool IsNaNElement(const E& v) {
  using T = typename std::remove_cv<E>::type;
  if constexpr (std::is_floating_point<T>::value) {
    return std::isnan(v);
  } else if constexpr (!std::is_integral<T>::value && std::is_convertible<T, float>::value) {
    return std::isnan(static_cast<float>(const_cast<const T&>(v)));
  } else {
    return false;
  }
}

/*! \brief Per byte of the worker's shared memory, the serial of the block that last wrote it (0: none). */
class WrittenShadow {
 public:
  WrittenShadow() = default;
  WrittenShadow(const WrittenShadow&) = delete;
  WrittenShadow& operator=(const WrittenShadow&) = delete;
  // Defined in uninit_reads_outlined.h: its members' destructors would instantiate their containers in every
  // kernel's build; only the launch path (the runtime's, or a self-contained library's) destroys a shadow.
  ~WrittenShadow();

  /*! \brief Shadow [base, base + bytes), the OS thread's shared memory; false when the shadow cannot be mapped
   *         (then shared loads go unchecked, and fragments and locals are still checked). */
  TL_SIM_OUTLINED bool Cover(const unsigned char* base, size_t bytes) TL_SIM_OUTLINED_AS("written_shadow_cover");

  /*! \brief A block starts on this worker: nothing of its shared memory is written yet (poisoned afresh). */
  void StartBlock() {
    serial_ = (serial_ + 1) & ~kHandedOut;
    if (serial_ == 0) serial_ = 1;
    deferred_[0] = '\0';
  }

  /*! \brief The block's first unwritten shared read, to report when it ends without another error ("" if none). */
  const char* Deferred() const { return deferred_; }

  /*! \brief Thread `thread` loaded an unwritten element `element` of fragment/local `name` (`space`) at `line`:
   *         kept (its first) until the thread stores a NaN to memory (CheckStoredValue). */
  TL_SIM_OUTLINED void NoteLocalRead(uint32_t thread, const char* space, const char* name, int64_t element, int line)
      TL_SIM_OUTLINED_AS("written_shadow_note_local_read");

  /*!
   * \brief Thread `thread` stores `lanes` elements (`values`) to `target` at element `offset`, line `line`: the
   *        error when one is a NaN and the thread loaded an unwritten fragment/local element before.
   */
  template <typename E>
  void CheckStoredValue(uint32_t thread, const E* values, int lanes, const char* target, int64_t offset, int line) {
    if (thread >= local_reads_.size() || local_reads_[thread].serial != serial_) return;
    for (int lane = 0; lane < lanes; ++lane) {
      if (!IsNaNElement(values[lane])) continue;
      const LocalRead& r = local_reads_[thread];
      char why[256];
      std::snprintf(why, sizeof(why),
                    "which this thread has not written (it holds the poison: never stored, or stored from a value "
                    "computed from unwritten memory); a NaN computed from it reaches the store of `%s` at element "
                    "%lld at line %d",
                    target, static_cast<long long>(offset + lane), line);
      UninitialisedRead(r.space, why, r.name, r.element, r.line);
    }
  }

  /*! \brief Thread `thread` hands the address of its fragment/local `name` (`space`; `bytes` bytes at `base`) to a
   *         template at line `line`: remembered (the thread's hand-outs at its latest such line) to name the array
   *         when the template reads an element of it that holds the poison (CheckAccumulatorRead). */
  TL_SIM_OUTLINED void NoteLocalHandOut(uint32_t thread, const void* base, size_t bytes, const char* space,
                                        const char* name, int line) TL_SIM_OUTLINED_AS("written_shadow_note_local_hand_out");

  /*!
   * \brief The fragment/local array of thread `thread` that holds the element at `p`, as NoteLocalHandOut named it
   *        at `*line`; nullptr when none does (then `*line` is untouched).
   */
  TL_SIM_OUTLINED const char* FindLocal(uint32_t thread, const void* p, const char** space, int64_t* byte_offset,
                                        int* line) const TL_SIM_OUTLINED_AS("written_shadow_find_local");

  /*! \brief The running block wrote [address, address + bytes), or, `handed_out`, handed its address to a template
   *         that may write it: the generated code's later loads count it written, a template's own reads
   *         (CheckModelRead: a GEMM's operand fetch of the tile whose element 0 the kernel handed over) do not. */
  TL_SIM_OUTLINED void MarkWritten(const volatile void* address, size_t bytes, bool handed_out = false)
      TL_SIM_OUTLINED_AS("written_shadow_mark_written");

  /*!
   * \brief The kernel handed an address of shared buffer `name` (elements of `elem_bytes` at `data`, [lo, hi)) to
   *        a template or device model: remember it, to name the buffer when that code reads an unwritten element,
   *        and count the whole buffer handed out in this block: a template may write any element of it through a
   *        pointer it derives (T.cumsum's, a reduction's), which the generated code may then load, and which may
   *        hold the poison's bytes (an int32 sum of -1). `line`: the handing call's (CheckModelRead).
   */
  TL_SIM_OUTLINED void NoteBuffer(const volatile void* data, size_t elem_bytes, int64_t lo, int64_t hi,
                                  const char* name, int line)
      TL_SIM_OUTLINED_AS("written_shadow_note_buffer");

  /*!
   * \brief A template or device model (`reader`, e.g. "a GEMM operand fetch") reads `bytes` bytes of shared memory
   *        at `address`, an element of that many bytes: the error when it holds poison and nothing wrote it.
   */
  TL_SIM_OUTLINED void CheckModelRead(const void* address, size_t bytes, const char* reader)
      TL_SIM_OUTLINED_AS("written_shadow_check_model_read");

  /*! \brief A load of `lanes` elements of shared buffer `name` at element `offset` (its address `address`). */
  template <typename T>
  void CheckLoad(const volatile T* address, int lanes, const char* name, int64_t offset, int line) {
    const auto* a = reinterpret_cast<const unsigned char*>(const_cast<const T*>(address));
    if (serials_ == nullptr || a < base_ || a + sizeof(T) * lanes > base_ + bytes_) return;
    for (int lane = 0; lane < lanes; ++lane) {
      const unsigned char* element = a + sizeof(T) * lane;
      if (nibbles_ != nullptr) CheckHalfWritten(element, sizeof(T), name, offset + lane, line);
      if (!IsPoison(element, sizeof(T)) || Written(element, sizeof(T)) || deferred_[0] != '\0') continue;
      Defer("which no thread of this block has written", name, offset + lane, line);
    }
  }

  // ---- 4-bit elements (packed FP4: two a byte, the even one low; tl::fp4_e2m1_store writes one nibble) ----------
  // A byte counts written once both its nibbles are (or a byte store wrote it). A load of one nibble (an fp4
  // decode) needs that nibble written; a load of the whole byte, or a device model's read of it (a TME store), of
  // a byte only one of whose nibbles was written is the error when the other still holds the poison's 0xF.

  /*! \brief A nibble store wrote nibble `odd` (0: low, 1: high) of the byte at `byte`. */
  TL_SIM_OUTLINED void MarkNibbleWritten(const volatile void* byte, int odd)
      TL_SIM_OUTLINED_AS("written_shadow_mark_nibble_written");

  /*! \brief A load of nibble `odd` of byte `offset` (at `byte`) of shared buffer `name`, at `line`. */
  TL_SIM_OUTLINED void CheckNibbleLoad(const volatile void* byte, int odd, const char* name, int64_t offset, int line)
      TL_SIM_OUTLINED_AS("written_shadow_check_nibble_load");

  /*! \brief Whether [address, address + bytes) lies in the shadowed shared memory. */
  bool Covers(const void* address, size_t bytes) const {
    const auto* a = static_cast<const unsigned char*>(address);
    return serials_ != nullptr && a >= base_ && a + bytes <= base_ + bytes_;
  }

 private:
  void Defer(const char* why, const char* name, int64_t element, int line) {
    FormatUninitialisedRead(deferred_, sizeof(deferred_), "shared", why, name, element, line);
  }

  /*! \brief Whether a byte of [a, a + bytes) was written in this block (`or_handed_out`: or handed out). */
  bool Written(const unsigned char* a, size_t bytes, bool or_handed_out = true) const {
    const uint32_t* s = serials_ + (a - base_);
    for (size_t i = 0; i < bytes; ++i)
      if (s[i] == serial_ || (or_handed_out && s[i] == (serial_ | kHandedOut))) return true;
    return false;
  }

  /*! \brief The nibble (0, 1) of the byte at `a` that this block left unwritten while writing the other, when it
   *         still holds the poison's 0xF and the byte was not written whole (`or_handed_out`: nor handed out); else
   *         -1. */
  int UnwrittenHalf(const unsigned char* a, bool or_handed_out) const {
    const uint32_t* n = nibbles_ + 2 * (a - base_);
    const bool low = n[0] == serial_, high = n[1] == serial_;
    if (low == high || Written(a, 1, or_handed_out)) return -1;
    const int missing = low ? 1 : 0;
    return ((*a >> (4 * missing)) & 0xFu) == 0xFu ? missing : -1;
  }

  /*! \brief A generated load of the `bytes` bytes at `a` (element `element` of `name`, at `line`): deferred as the
   *         error when one of them is half written (a handed-out byte counts written). */
  TL_SIM_OUTLINED void CheckHalfWritten(const unsigned char* a, size_t bytes, const char* name, int64_t element,
                                        int line) TL_SIM_OUTLINED_AS("written_shadow_check_half_written");

  static constexpr uint32_t kHandedOut = 0x80000000u;  // a serial's flag: the address was handed out (MarkWritten)

  struct Buffer {
    const unsigned char* base;  // element 0
    const unsigned char* begin;
    const unsigned char* end;
    size_t elem;
    const char* name;
    uint32_t handed;  // the serial of the last block that handed its address out
    int handed_line;  // the line of that block's first hand-out
    bool handed_elsewhere;  // and whether it was handed out at another line too
  };
  std::vector<Buffer> buffers_;  // shared buffers whose addresses the kernel handed out (NoteBuffer)
  struct LocalRead {
    uint32_t serial = 0;  // the block that made it; other serials are stale
    const char* space = "";
    const char* name = "";
    int64_t element = 0;
    int line = 0;
  };
  std::vector<LocalRead> local_reads_;  // per thread of the running block, its first unwritten fragment/local load
  static constexpr int kHandOutsPerLine = 4;  // a GEMM call hands out at most three
  struct LocalArray {
    const unsigned char* base;
    size_t bytes;
    const char* space;
    const char* name;
  };
  struct HandOuts {
    uint32_t serial = 0;  // the block that made them; other serials are stale
    int line = 0;
    int count = 0;
    LocalArray arrays[kHandOutsPerLine];
  };
  std::vector<HandOuts> hand_outs_;  // per thread of the running block, its fragment/local hand-outs at one line
  uint32_t* serials_ = nullptr;
  uint32_t* nibbles_ = nullptr;  // per byte, the serials of the blocks that last wrote its low and high nibbles
  const unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t serial_ = 0;  // the running block's; grows with every block the worker runs (31 bits: kHandedOut)
  char deferred_[512] = {};
};

/*! \brief CheckLocalRead's report (checked mode only): out of line, so that the check inlined at every load stays
 *         a load of the thread state and a branch, and no local array's address escapes into a call. */
[[gnu::noinline, gnu::cold]] inline void NoteLocalRead(WrittenShadow* shadow, const char* space, const char* name,
                                                       int64_t element, int line) {
  shadow->NoteLocalRead(CurrentBlock("a fragment/local load").current().linear, space, name, element, line);
}

/*!
 * \brief The code generator's check of a fragment or local load (checked build, float element types only):
 *        `data[index]` .. `data[index + lanes)`; returns `index`. `space` is "fragment" or "local". Always inlined:
 *        the default mode pays a load of the thread state and a branch (as a call, -O1 kept it out of line, and
 *        every float local of a kernel lived in memory).
 */
template <typename T, typename I>
[[gnu::always_inline]] inline I CheckLocalRead(const T* data, I index, int lanes, const char* space,
                                               const char* name, int line) {
  WrittenShadow* shadow = g_thread.uninit_shadow;
  if (__builtin_expect(shadow == nullptr, 1)) return index;  // default mode
  const int64_t offset = static_cast<int64_t>(index);
  for (int lane = 0; lane < lanes; ++lane) {
    if (IsPoison(data + offset + lane, sizeof(T))) {
      NoteLocalRead(shadow, space, name, offset + lane, line);
      break;
    }
  }
  return index;
}

/*! \brief The checked print of `&data[index]`, a float fragment/local's address handed to a template (a GEMM's
 *         accumulator or register operand): remembered, to name the array if the template reads poison from it.
 *         Returns `index`. */
template <typename T, typename I>
[[gnu::always_inline]] inline I HandOutLocal(const T* data, size_t elements, I index, const char* space,
                                             const char* name, int line) {
  WrittenShadow* shadow = g_thread.uninit_shadow;
  if (__builtin_expect(shadow == nullptr, 1)) return index;  // default mode
  shadow->NoteLocalHandOut(CurrentBlock("a fragment/local hand-out").current().linear, data, elements * sizeof(T),
                           space, name, line);
  return index;
}

/*! \brief A template (`reader`) read the element of `bytes` bytes at `p`, in the thread's fragment/local, that
 *         holds the poison: the error, naming the array the kernel handed it (HandOutLocal) where known. */
[[noreturn, gnu::noinline, gnu::cold]] inline void TemplateReadPoison(WrittenShadow* shadow, const void* p,
                                                                      size_t bytes, const char* reader,
                                                                      const char* unnamed) {
  const char* space = "fragment";
  int64_t byte_offset = 0;
  int line = g_thread.last_access_line;
  const char* name = shadow->FindLocal(CurrentBlock("a template's read").current().linear, p, &space,
                                       &byte_offset, &line);
  char why[256];
  std::snprintf(why, sizeof(why),
                "read by %s, which this thread has not written (it holds the poison: never stored, or stored from a "
                "value computed from unwritten memory)",
                reader);
  UninitialisedRead(space, why, name != nullptr ? name : unnamed,
                    name != nullptr ? byte_offset / static_cast<int64_t>(bytes) : 0, line);
}

/*! \brief CheckOperandRead's checks (checked mode only), out of line as NoteLocalRead is. */
[[gnu::noinline, gnu::cold]] inline void CheckOperandElements(WrittenShadow* shadow, const void* p, size_t bytes,
                                                              int count) {
  for (int i = 0; i < count; ++i) {
    const void* element = static_cast<const unsigned char*>(p) + bytes * i;
    if (shadow->Covers(element, bytes)) {
      shadow->CheckModelRead(element, bytes, "a GEMM operand fetch");
    } else if (IsPoison(element, bytes)) {
      TemplateReadPoison(shadow, element, bytes, "a GEMM operand fetch", "(a register operand of the GEMM)");
    }
  }
}

/*!
 * \brief A GEMM template without ClearAccum reads its `count` accumulator elements at `c` (the thread's fragment)
 *        before adding to them: one that holds the poison was never written (T.gemm without clear_accum and no
 *        T.clear or T.fill before it), and the error names it at the GEMM's line.
 */
template <typename C>
[[gnu::always_inline]] inline void CheckAccumulatorRead(const C* c, int count) {
  WrittenShadow* shadow = g_thread.uninit_shadow;
  if (__builtin_expect(shadow == nullptr, 1)) return;  // default mode
  for (int i = 0; i < count; ++i)
    if (IsPoison(c + i, sizeof(C)))
      TemplateReadPoison(shadow, c + i, sizeof(C), "the GEMM as its accumulator (T.gemm adds to it: clear_accum is "
                         "off)", "(the GEMM's accumulator)");
}

/*!
 * \brief A GEMM template reads `count` float16/bfloat16 operand elements of `bytes` bytes at `p`, in shared memory
 *        or in the thread's fragment (where, as for CheckLocalRead, the poison NaN is the sign).
 */
[[gnu::always_inline]] inline void CheckOperandRead(const void* p, size_t bytes, int count) {
  WrittenShadow* shadow = g_thread.uninit_shadow;
  if (__builtin_expect(shadow == nullptr, 1)) return;  // default mode
  CheckOperandElements(shadow, p, bytes, count);
}

// ---- integer fragments and locals: a defined byte per element ------------------------------------------------
//
// An integer's poison is a value (-1), so the load alone proves nothing; so is a FNUZ float8's (0xFF: -240 in
// e4m3fnuz, -57344 in e5m2fnuz) and a bool's (0xFF, read as true). The checked print declares beside each
// integer fragment/local array `N` a byte array `N__def` (1: this thread stored a defined value there), cleared at
// the declaration in checked mode. A store to `N` sets its bytes to whether every integer fragment/local element
// its value was computed from was defined (the value carries the poison along, as a NaN does); an address of `N`
// handed to a template (a GEMM accumulator, T.cumsum) counts the whole array defined. A load is checked only where
// its value is used: an index or address, a condition, a store to shared/global memory or to a float local, a
// template's argument, a bound variable. A load whose value only flows into another integer fragment/local
// element is not checked (threads outside a fragment's layout legitimately combine their unwritten slot with an
// all-reduce result they never use). Default mode never reads `N__def`; every access is behind UninitChecked().

/*! \brief Whether the running launch is in checked mode (the detector of uninitialised reads is on). */
[[gnu::always_inline]] inline bool UninitChecked() { return __builtin_expect(g_thread.uninit_shadow != nullptr, 0); }

/*! \brief The array's declaration (checked mode): no element is defined yet. */
template <size_t n>
[[gnu::always_inline]] inline void Undefine(unsigned char (&defined)[n]) {
  if (UninitChecked()) std::memset(defined, 0, n);
}

/*! \brief The array's address is handed out (checked mode): a template may write any element. */
template <size_t n>
[[gnu::always_inline]] inline void DefineAll(unsigned char (&defined)[n]) {
  if (UninitChecked()) std::memset(defined, 1, n);
}

/*! \brief DefineAll, for `&N[index]` handed out: returns `index`. */
template <size_t n, typename I>
[[gnu::always_inline]] inline I HandedOut(unsigned char (&defined)[n], I index) {
  DefineAll(defined);
  return index;
}

/*! \brief Whether `lanes` elements from `defined` are all defined (checked mode only: a store's carried state). */
[[gnu::always_inline]] inline bool AllDefined(const unsigned char* defined, int lanes) {
  for (int lane = 0; lane < lanes; ++lane)
    if (defined[lane] == 0) return false;
  return true;
}

/*! \brief A store of `lanes` elements from `defined` (checked mode only), `value`: computed from defined elements. */
[[gnu::always_inline]] inline void SetDefined(unsigned char* defined, int lanes, bool value) {
  for (int lane = 0; lane < lanes; ++lane) defined[lane] = value ? 1 : 0;
}

/*! \brief UseLocal's report, out of line (the check inlined at every use stays a load, a test and a branch). */
[[noreturn, gnu::noinline, gnu::cold]] inline void UndefinedLocalUse(const char* space, const char* name,
                                                                     int64_t element, int line) {
  UninitialisedRead(space,
                    "which this thread has not written (never stored, or stored from a value computed from an "
                    "unwritten element), where its value is used",
                    name, element, line);
}

/*!
 * \brief The checked print of a load of `lanes` integer fragment/local elements at `index` whose value is used
 *        (not merely carried into another such element): in checked mode, an element not defined is the error.
 *        Returns `index`.
 */
template <typename I>
[[gnu::always_inline]] inline I UseLocal(const unsigned char* defined, I index, int lanes, const char* space,
                                         const char* name, int line) {
  if (UninitChecked()) {
    const int64_t offset = static_cast<int64_t>(index);
    for (int lane = 0; lane < lanes; ++lane)
      if (defined[offset + lane] == 0) UndefinedLocalUse(space, name, offset + lane, line);
  }
  return index;
}

// ---- vector forms: gathered loads and lane-wise selects (checked print only) ----------------------------------
//
// A gathered load of an integer fragment/local reads `defined[index[l]]` per lane. A lane-wise select (tl::select)
// evaluates both branches in every lane: a branch's loads are checked, where used, in the lanes that take that
// branch (a LaneMask). A vector store sets each lane's defined byte from that lane's carried elements (the checked
// print's loop over `tl_sim_lane`): a contiguous load's lane l, a gather's index[l], a select's chosen branch.

/*! \brief The lane count of a tl::vec (any type with a `data` array). */
template <typename V>
inline constexpr int kLanesOf = static_cast<int>(std::extent<decltype(V::data)>::value);

/*! \brief The lanes of a lane-wise select that take one of its branches (and every enclosing select's). */
template <int N>
struct LaneMask {
  bool take[N];
};

/*! \brief The lanes where `cond` is `branch` (true: the select's first branch). */
template <typename V>
inline LaneMask<kLanesOf<V>> Taking(const V& cond, bool branch) {
  LaneMask<kLanesOf<V>> mask;
  for (int l = 0; l < kLanesOf<V>; ++l) mask.take[l] = static_cast<bool>(cond.data[l]) == branch;
  return mask;
}

/*! \brief Taking, inside a branch of an enclosing select of as many lanes (its `outer` mask). */
template <int N, typename V>
inline LaneMask<N> Taking(const LaneMask<N>& outer, const V& cond, bool branch) {
  static_assert(kLanesOf<V> == N, "a nested lane-wise select has the lanes of the enclosing one");
  LaneMask<N> mask = Taking(cond, branch);
  for (int l = 0; l < N; ++l) mask.take[l] = mask.take[l] && outer.take[l];
  return mask;
}

/*! \brief UseLocal of `lanes` elements in a branch of a lane-wise select of N lanes: element l is checked where
 *         lane l takes the branch; a scalar load (or one of other lanes) where any lane does. */
template <typename I, int N>
[[gnu::always_inline]] inline I UseLocalWhere(const unsigned char* defined, I index, int lanes,
                                              const LaneMask<N>& mask, const char* space, const char* name,
                                              int line) {
  if (UninitChecked()) {
    const int64_t offset = static_cast<int64_t>(index);
    bool any = false;
    for (int l = 0; l < N; ++l) any = any || mask.take[l];
    for (int lane = 0; lane < lanes; ++lane) {
      const bool taken = lanes == N ? mask.take[lane] : any;
      if (taken && defined[offset + lane] == 0) UndefinedLocalUse(space, name, offset + lane, line);
    }
  }
  return index;
}

/*! \brief The checked print of a gathered load `tl::gather(data, index)` of an integer fragment/local whose value
 *         is used: every lane's element must be defined. Returns `index`. */
template <typename V>
[[gnu::always_inline]] inline const V& UseGathered(const unsigned char* defined, const V& index, const char* space,
                                                    const char* name, int line) {
  if (UninitChecked()) {
    for (int l = 0; l < kLanesOf<V>; ++l) {
      const int64_t element = static_cast<int64_t>(index.data[l]);
      if (defined[element] == 0) UndefinedLocalUse(space, name, element, line);
    }
  }
  return index;
}

/*! \brief UseGathered in a branch of a lane-wise select: lane l is checked where it takes the branch. */
template <typename V, int N>
[[gnu::always_inline]] inline const V& UseGathered(const unsigned char* defined, const V& index,
                                                    const LaneMask<N>& mask, const char* space, const char* name,
                                                    int line) {
  if (UninitChecked()) {
    for (int l = 0; l < kLanesOf<V>; ++l) {
      const int64_t element = static_cast<int64_t>(index.data[l]);
      if ((kLanesOf<V> != N || mask.take[l]) && defined[element] == 0)
        UndefinedLocalUse(space, name, element, line);
    }
  }
  return index;
}

/*! \brief Whether every lane's element of a gathered load is defined (checked mode only: a store's carried state). */
template <typename V>
inline bool AllDefinedAt(const unsigned char* defined, const V& index) {
  for (int l = 0; l < kLanesOf<V>; ++l)
    if (defined[static_cast<int64_t>(index.data[l])] == 0) return false;
  return true;
}

/*! \brief Whether `defined(lane)` holds for every lane of `lanes` (checked mode only: a store's carried state). */
template <typename F>
inline bool AllLanes(int lanes, const F& defined) {
  for (int lane = 0; lane < lanes; ++lane)
    if (!defined(lane)) return false;
  return true;
}

/*! \brief CheckLocalRead for a gathered load `tl::gather(data, index)` of a float fragment/local. Returns `index`. */
template <typename T, typename V>
[[gnu::always_inline]] inline const V& CheckGatheredRead(const T* data, const V& index, const char* space,
                                                          const char* name, int line) {
  WrittenShadow* shadow = g_thread.uninit_shadow;
  if (__builtin_expect(shadow == nullptr, 1)) return index;  // default mode
  for (int l = 0; l < kLanesOf<V>; ++l) {
    const int64_t element = static_cast<int64_t>(index.data[l]);
    if (IsPoison(data + element, sizeof(T))) {
      NoteLocalRead(shadow, space, name, element, line);
      break;
    }
  }
  return index;
}

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "uninit_reads_outlined.h"
#endif
