/*!
 * \file call_rules_tme.cc
 * \brief Print rules for the TME intrinsics (tileop/tme_copy.py), which call the `tl::` wrappers of tme.h:
 *
 *   tl.tme_load(desc, bar, smem, sg, ss, sl, inner, outer, blocks, block_bytes, box..., coord...)
 *     -> tl::tma_load<sg, ss, sl, CacheHint::I, CacheHint::O[, blocks, block_bytes]>(desc, bar, smem, box, coord)
 *   tl.tme_store(desc, smem, sg, ss, sl, inner, outer, blocks, block_bytes, box..., coord...)
 *     -> tl::tma_store<sg, ss, sl, CacheHint::I, CacheHint::O[, blocks, block_bytes]>(desc, smem, box, coord)
 *   tl.tme_store_arrive() -> tl::tma_store_arrive()      tl.tme_store_wait() -> tl::tma_store_wait<0>()
 * (Moore Threads' port prints these names; its tests look for them.)
 *
 * `desc` is the name of the kernel's descriptor parameter (a string). For rank N >= 2 the box and coordinates are
 * `vNi32_t{...}` values, innermost dimension first; rank 1 takes plain ints.
 */
#include <string>

#include "codegen/call_rules.h"

namespace tilelang_musa {
namespace codegen {
namespace {

constexpr size_t kConstants = 7;  // sg, ss, sl, inner, outer, blocks, block_bytes

int64_t ConstArg(CallContext& ctx, const CallView& call, size_t index, const char* what) {
  auto value = AsConstInt(call.args()[index]);
  if (!value) ctx.Fail(call, std::string(what) + " must be an integer constant");
  return *value;
}

// `first` is the index of sg; box and coordinates follow the seven constants. blocks and block_bytes are printed
// only when there is more than one block.
std::string PrintTmeTile(CallContext& ctx, const CallView& call, const std::string& op, size_t first,
                         const std::string& leading_args) {
  size_t count = call.args().size();
  size_t dims2 = count - first - kConstants;
  if (count < first + kConstants + 2 || dims2 % 2 || dims2 / 2 > 5) {
    ctx.Fail(call, "expects the descriptor, the operands, 7 constants, then rank 1..5 box extents and coordinates");
  }
  size_t rank = dims2 / 2;
  static const char* const kWhat[] = {"sg", "ss", "sl", "inner_hint", "outer_hint", "blocks", "block_bytes"};
  std::string tmpl;
  bool one_block = ConstArg(ctx, call, first + 5, kWhat[5]) == 1;
  static const char* const kHints[] = {"CACHE_NONE", "CACHE_ONCE", "CACHE_NORMAL", "CACHE_PERSIST"};
  for (size_t i = 0; i < (one_block ? 5 : kConstants); ++i) {
    int64_t value = ConstArg(ctx, call, first + i, kWhat[i]);
    std::string text = std::to_string(value);
    if (i == 3 || i == 4) {  // the cache hints, by name
      if (value < 0 || value > 3) ctx.Fail(call, std::string(kWhat[i]) + " must be 0..3");
      text = std::string("CacheHint::") + kHints[value];
    }
    tmpl += (i ? ", " : "") + text;
  }
  auto vec = [&](size_t begin) {
    std::string items;
    for (size_t i = 0; i < rank; ++i) items += (i ? ", " : "") + ctx.PrintBare(call.args()[begin + i]);
    return rank == 1 ? items : "v" + std::to_string(rank) + "i32_t{" + items + "}";
  };
  size_t box = first + kConstants;
  return "tl::" + op + "<" + tmpl + ">(" + leading_args + ", " + vec(box) + ", " + vec(box + rank) + ")";
}

std::string PrintTmeLoad(CallContext& ctx, const CallView& call) {
  Array<ObjectRef> args = call.args();
  std::string desc = StringArg(ctx, call, 0);
  std::string leading = desc + ", " + ctx.PrintBare(args[1]) + ", " + ctx.PrintBare(args[2]);
  return PrintTmeTile(ctx, call, "tma_load", 3, leading);
}

std::string PrintTmeStore(CallContext& ctx, const CallView& call) {
  std::string desc = StringArg(ctx, call, 0);
  return PrintTmeTile(ctx, call, "tma_store", 2, desc + ", " + ctx.PrintBare(call.args()[1]));
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  const auto kStmt = CallPosition::kStatement;
  RegisterCallRule("tl.tme_load", kStmt, PrintTmeLoad);
  RegisterCallRule("tl.tme_store", kStmt, PrintTmeStore);
  RegisterCallRule("tl.tme_store_arrive", kStmt, [](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, 0);
    return std::string("tl::tma_store_arrive()");
  });
  RegisterCallRule("tl.tme_store_wait", kStmt, [](CallContext& ctx, const CallView& call) {
    CheckArgCount(ctx, call, 0);
    return std::string("tl::tma_store_wait<0>()");
  });
}

}  // namespace codegen
}  // namespace tilelang_musa
