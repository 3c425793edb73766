/*!
 * \file tl_templates/sim/sim/warp_mma.h
 * \brief The engine of the warp-synchronous matrix built-ins (mp_31 WMMA on 32-lane warps, mp_22 MMA on 128-lane
 *        warps): one rendezvous of the whole warp, where the last lane to arrive gathers A, B and C from every
 *        lane's registers through the instruction's lane/value maps, computes D (mma_numerics.h) and writes every
 *        lane's D registers.
 *
 * Everything is read before anything is written, so `d` may alias `c` (or any other operand). A lane missing from
 * the warp (exited, waiting at another collective, or absent from a partial last warp) fails the launch through the
 * scheduler's divergence and deadlock reports; lanes that disagree on a scalar argument fail it here.
 */
#pragma once

#include <cstdint>

#include "config.h"
#include "mma_numerics.h"
#include "profile.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "warp.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

/*!
 * \brief (lane t, value v) -> (row, column) in the instruction's matrix: (r, k) for an R x K operand (A with R = M,
 *        B with R = N), (m, n) for the accumulator. `bits` is the element width.
 */
using FragmentMap = void (*)(uint32_t t, uint32_t v, uint32_t rows, uint32_t cols, uint32_t bits, uint32_t* row,
                             uint32_t* col);

/*! \brief One warp MMA instruction, resolved from a lane's arguments. */
struct WarpMmaForm {
  uint32_t m = 0, n = 0, k = 0;
  OperandTypes types;
  FragmentMap a_map = nullptr, b_map = nullptr, c_map = nullptr;
};

inline constexpr int kMaxScalarArgs = 7;

/*! \brief What one lane passes to the built-in; it lives in the lane's frame while the lane waits. */
struct WarpMmaCall {
  int32_t* d = nullptr;
  const int32_t* a = nullptr;
  const int32_t* b = nullptr;
  const int32_t* c = nullptr;
  int args[kMaxScalarArgs] = {};  // the scalar arguments as passed (5th onwards), compared across lanes
  int num_args = 0;
  WarpMmaForm form;
  const char* file = "";
  int line = 0;
};

inline const WarpMmaCall& CallOf(BlockRunner& block, const Rendezvous& rv, uint32_t lane) {
  return *reinterpret_cast<const WarpMmaCall*>(block.fiber(rv.base + lane).slot.in);
}

/*! \brief The rendezvous exchange: check agreement, gather, compute, scatter (warp_mma_outlined.h). */
TL_SIM_OUTLINED void ExchangeWarpMma(BlockRunner& block, Rendezvous& rv) TL_SIM_OUTLINED_AS("warp_mma_exchange");

/*!
 * \brief Run a warp MMA for the calling lane: check that its warp is whole and the register pointers are set,
 *        arrive, and return once every lane's D is written. `op` names the built-in and must use ExchangeWarpMma.
 */
inline void RunWarpMma(const Collective& op, WarpMmaCall& call) {
  BlockRunner& block = CurrentBlock(op.name);
  const uint32_t warp = block.GroupIndex(Group::kWarp, block.current().linear);
  const uint32_t extent = block.GroupExtent(Group::kWarp, warp);
  if (extent != kWarpSize)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d) needs all %u lanes of warp %u, but the block's last warp has only %u threads", op.name,
               SourceName(call.file), call.line, kWarpSize, warp, extent);
  if (call.d == nullptr || call.a == nullptr || call.b == nullptr || call.c == nullptr)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): a register pointer (d, a, b or c) is null", op.name,
               SourceName(call.file), call.line);
  if (g_thread.profile != nullptr && block.current().linear % kWarpSize == 0) {  // one instruction per warp
    g_thread.profile->Add(profile::k_warp_mma, 1);
    g_thread.profile->Add(profile::k_warp_mma_flops, 2ull * call.form.m * call.form.n * call.form.k);
    g_thread.profile->AddMmaShape(false, call.form.m, call.form.n, call.form.k);
  }
  CollectiveSlot slot;
  slot.in = reinterpret_cast<uint64_t>(&call);
  block.Arrive(op, Group::kWarp, WarpLanes(block, warp, 0xffffffffu), slot, call.file, call.line);
}

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "warp_mma_outlined.h"
#endif
