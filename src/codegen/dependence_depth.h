/*!
 * \file dependence_depth.h
 * \brief How much of a statement's arithmetic is one dependent chain, for the performance model.
 *
 * The simulator's cycle model charges a statement's arithmetic one issue cycle per instruction
 * (arithmetic_count.h); the performance model adds each instruction's dependent latency on top of that, which is
 * right for a chain and wrong for independent work, which a warp overlaps. So the sanitizer build also gives each
 * charge the statement's dependence depth (the longest chain of operators through its value: the lanes of a
 * vector run side by side) and the iterations of the enclosing loops it runs beside (loops in which it neither
 * stores to nor reads an element another iteration writes: a T.Parallel loop's statements). The simulator sums
 * depth / iterations per warp (`tl_sim::Compute(n, depth, iterations)`, profile.h): over such a loop its chain
 * is one iteration's, not the sum of them. Statements in sequence are taken as dependent (straight-line
 * independent work is still charged as a chain), and so is every statement of a loop whose independence is not
 * evident (a call, a barrier, an index through a division).
 */
#pragma once

#include <unordered_set>
#include <vector>

#include "codegen/ir_view.h"

namespace tilelang_musa {
namespace codegen {

/*! \brief The longest chain of the instructions CountArithmetic counts through `expr` (0 for none). */
int64_t ArithmeticDepth(const ObjectRef& expr);

/*! \brief What a loop's iterations share, for the statements inside it. A buffer its body stores to is private
 *         to an iteration when every store and load of it in the body has the same indices, one of which moves
 *         one-to-one with the loop variable (no division, modulo, shift, min/max or select on its way); any other
 *         stored buffer is carried from iteration to iteration. A call (barrier, shuffle, template, atomic), a
 *         while loop, a buffer view or a break in the body makes the whole loop opaque. */
struct LoopDependence {
  int64_t trips = 0;  // the constant trip count; 0 when it is not a constant
  bool opaque = true;
  std::unordered_set<const ffi::Object*> carried;  // buffer Vars
};
LoopDependence AnalyzeLoop(const ForView& loop);

/*! \brief The dependent chain a statement puts on its thread: `depth` instructions in sequence, shared by the
 *         `iterations` of the enclosing loops it runs beside. */
struct StatementChain {
  int64_t depth = 0;
  int64_t iterations = 1;
};
/*!
 * \brief The chain of `value`, stored to `buffer` at `indices` (a null `buffer`: a bound variable), inside
 *        `loops` (outermost first). It runs beside the other iterations of each loop that is not opaque in which
 *        it neither stores to nor reads a carried buffer. A store that accumulates into a buffer a loop carries
 *        (`s[0] = s[0] + a[i] * b[i]`) chains only through the path from its own element to the store (the add:
 *        the product of the next iteration does not wait for it).
 */
StatementChain ChainOf(const ObjectRef& value, const ObjectRef& buffer, const Array<ObjectRef>* indices,
                       const std::vector<LoopDependence>& loops);

}  // namespace codegen
}  // namespace tilelang_musa
