/*!
 * \file tl_templates/sim/sim/tme.h
 * \brief mp_31's TME (tensor memory engine): tiles of a tensor described by a MUtensorDescriptor (musa.h) copied
 *        between global and shared memory.
 *
 * Prototypes, as device code calls them (MUSA_FACTS.md, Data movement; the port's tl_templates/musa/copy_mp31.h):
 *   void __musa_tme_ld_tile_Nd(uint32_t bar, void* smem, uint64_t desc_addr, B box, B coord, int sg, int ss, int sl,
 *                              int prefetch[, int inner_hint, int outer_hint, int l2]);
 *   void __musa_tme_st_Nd(void* smem, uint64_t desc_addr, B box, B coord, int sg, int ss, int sl
 *                         [, int inner_hint, int outer_hint, int l2]);
 *   void __musa_tme_store_commit();     // the thread's stores issued so far form a group
 *   void __musa_tme_store_read_wait();  // the committed stores have read shared memory (and, here, written global)
 *   void __musa_tme_idf_l2();  void __musa_prefetch_only(const void*);   // fences and hints: no effect here
 * N = 1..5; B is int32_t for N = 1, else vNi32_t (sim/vector_i32.h), innermost dimension first. `box` is the
 * extent per dimension, `coord` the first element (negative or past the end is allowed), `desc_addr` the address of
 * the kernel's MUtensorDescriptor parameter, whose rank must be N. sg (granularity) 0 none, 1..3 = 16/32/64 B;
 * ss (stride) 0..3 = 32..256 B; sl (line) 0..1 = 128/256 B; sg < ss + 2 and ss <= sl + 2. Cache hints 0..3.
 *
 * Shared layout: the box packed densely, dimension 0 fastest, starting at `smem` (16-byte aligned [I]; the
 * innermost extent a multiple of 16 bytes [I]), then each byte moved by the swizzle of its absolute shared address
 * (swizzle.h, the same function SQMMA's operand addressing uses). `smem` must lie in the dynamic shared buffer,
 * the only shared memory with shared addresses here (shared_address.h), with the whole box inside the launch's
 * dynamic shared memory.
 *
 * Loads are issued per thread; the tile is read from global memory at issue (out-of-bounds elements take the low
 * bytes of the descriptor's oobConstantFill, normally 0), the destination is poisoned at issue, and the bytes
 * count as transaction bytes on barrier `bar` (async_barrier.h): the data lands when a thread waits for that
 * barrier's phase and the phase completes. Stores are also per thread: they read shared memory at
 * __musa_tme_store_read_wait, after a commit (the latest the engine may read it, so a kernel that overwrites the
 * tile before waiting stores the new data: stricter than reading at issue, which would hide that bug), and write
 * the in-bounds elements; out-of-bounds elements are dropped. A store never waited for is dropped with the block.
 * Checked mode: an access to bytes a load has not landed, or a write to bytes a store has not read, is an error
 * naming the copy; so is a thread exiting with stores not waited for, or a block ending with loads that never
 * landed.
 *
 * A kernel library that links the simulator runtime sees only the built-ins, which pass the rank and the library's
 * dynamic shared memory to the model's body (tme_outlined.h), compiled once in the runtime. None of them makes the
 * thread wait (a load lands at an async-barrier wait, async_barrier.h), so none marks the library (scheduler.h,
 * TL_SIM_MAY_BLOCK).
 */
#pragma once

#include <cstdint>

#include "../musa.h"
#include "config.h"
#include "shared_memory.h"
#include "unavailable_builtin.h"
#include "vector_i32.h"
#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace tme {

// The model's body, compiled once in the runtime (tme_outlined.h; visibility.h, TL_SIM_OUTLINED). `rank` is the
// built-in's; `arena` is the calling library's dynamic shared memory (this OS thread's instance), where the tile
// lies: the runtime has its own buf_dyn_shmem.
/*! \brief Issue a load of a tile into shared memory, landing on async barrier `bar`. */
TL_SIM_OUTLINED void Load(uint32_t rank, const unsigned char* arena, uint32_t bar, void* smem, uint64_t desc_addr,
                          const int32_t* box, const int32_t* coord, int sg, int ss, int sl, int prefetch, int inner,
                          int outer, int l2, const char* what, const char* file, int line)
    TL_SIM_OUTLINED_AS("tme_load");
/*! \brief Issue a store of a tile from shared memory; it reads shared memory at the thread's ReadWait. */
TL_SIM_OUTLINED void StoreTile(uint32_t rank, const unsigned char* arena, void* smem, uint64_t desc_addr,
                               const int32_t* box, const int32_t* coord, int sg, int ss, int sl, int inner, int outer,
                               int l2, const char* what, const char* file, int line) TL_SIM_OUTLINED_AS("tme_store");
/*! \brief The calling thread's stores issued so far form a group. */
TL_SIM_OUTLINED void Commit() TL_SIM_OUTLINED_AS("tme_commit");
/*! \brief Complete the running thread's committed stores: read the tiles from shared memory, write global. */
TL_SIM_OUTLINED void ReadWait(int line) TL_SIM_OUTLINED_AS("tme_read_wait");

}  // namespace tme
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "tme_outlined.h"
#endif

#pragma GCC visibility push(hidden)
#if __MUSA_ARCH__ >= 310
// The trailing parameters capture the call site for error messages; kernels call these without them.
inline void __musa_tme_ld_tile_1d(uint32_t bar, void* smem, uint64_t desc, int32_t box, int32_t coord, int sg, int ss,
                                  int sl, int prefetch, int inner = 2, int outer = 2, int l2 = 0,
                                  const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::tme::Load(1, buf_dyn_shmem, bar, smem, desc, &box, &coord, sg, ss, sl, prefetch, inner, outer, l2, "__musa_tme_ld_tile_1d",
                       file, line);
}
inline void __musa_tme_st_1d(void* smem, uint64_t desc, int32_t box, int32_t coord, int sg, int ss, int sl,
                             int inner = 2, int outer = 2, int l2 = 0, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  tl_sim::tme::StoreTile(1, buf_dyn_shmem, smem, desc, &box, &coord, sg, ss, sl, inner, outer, l2, "__musa_tme_st_1d", file, line);
}
#define TL_SIM_TME_RANK(N)                                                                                            \
  inline void __musa_tme_ld_tile_##N##d(uint32_t bar, void* smem, uint64_t desc, v##N##i32_t box, v##N##i32_t coord,  \
                                        int sg, int ss, int sl, int prefetch, int inner = 2, int outer = 2,           \
                                        int l2 = 0, const char* file = __builtin_FILE(),                              \
                                        int line = __builtin_LINE()) {                                                \
    tl_sim::tme::Load(N, buf_dyn_shmem, bar, smem, desc, box.v, coord.v, sg, ss, sl, prefetch, inner, outer, l2,                     \
                         "__musa_tme_ld_tile_" #N "d", file, line);                                                   \
  }                                                                                                                   \
  inline void __musa_tme_st_##N##d(void* smem, uint64_t desc, v##N##i32_t box, v##N##i32_t coord, int sg, int ss,     \
                                   int sl, int inner = 2, int outer = 2, int l2 = 0,                                  \
                                   const char* file = __builtin_FILE(), int line = __builtin_LINE()) {                \
    tl_sim::tme::StoreTile(N, buf_dyn_shmem, smem, desc, box.v, coord.v, sg, ss, sl, inner, outer, l2, "__musa_tme_st_" #N "d",      \
                              file, line);                                                                            \
  }
TL_SIM_TME_RANK(2)
TL_SIM_TME_RANK(3)
TL_SIM_TME_RANK(4)
TL_SIM_TME_RANK(5)
#undef TL_SIM_TME_RANK
inline void __musa_tme_store_commit() { tl_sim::tme::Commit(); }
inline void __musa_tme_store_read_wait(int line = __builtin_LINE()) { tl_sim::tme::ReadWait(line); }
inline void __musa_tme_idf_l2() {}
inline void __musa_prefetch_only(const void*) {}
#else
#define TL_SIM_TME_UNAVAILABLE(N)                                                    \
  TL_SIM_UNAVAILABLE_BUILTIN(__musa_tme_ld_tile_##N##d, "mp_31/mp_32 (TME)")         \
  TL_SIM_UNAVAILABLE_BUILTIN(__musa_tme_st_##N##d, "mp_31/mp_32 (TME)")
TL_SIM_TME_UNAVAILABLE(1)
TL_SIM_TME_UNAVAILABLE(2)
TL_SIM_TME_UNAVAILABLE(3)
TL_SIM_TME_UNAVAILABLE(4)
TL_SIM_TME_UNAVAILABLE(5)
#undef TL_SIM_TME_UNAVAILABLE
TL_SIM_UNAVAILABLE_BUILTIN(__musa_tme_store_commit, "mp_31/mp_32 (TME)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_tme_store_read_wait, "mp_31/mp_32 (TME)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_tme_idf_l2, "mp_31/mp_32 (TME)")
#endif
#pragma GCC visibility pop
