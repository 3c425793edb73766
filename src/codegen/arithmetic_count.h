/*!
 * \file arithmetic_count.h
 * \brief The arithmetic instructions an expression costs a thread, for the simulator's cycle model.
 *
 * The simulator times memory accesses and matrix instructions where they happen; a statement's arithmetic it cannot
 * see, so the sanitizer build charges it on the statement's line (`tl_sim::Compute(n, depth, iterations);`,
 * profile.h; the depth and iterations: dependence_depth.h). The count is the expression's operators, casts
 * between types, selects and calls (one each, times the value's lanes); the indices of the loads inside are
 * address arithmetic, which compilers hoist and strength-reduce, and are not counted.
 */
#pragma once

#include "codegen/ir_view.h"

namespace tilelang_musa {
namespace codegen {

int64_t CountArithmetic(const ObjectRef& expr);

// Whether `expr` is one of the two-operand `prim.*` nodes (Add ... Or): one instruction each.
bool IsBinaryOperator(const ObjectRef& expr);

}  // namespace codegen
}  // namespace tilelang_musa
