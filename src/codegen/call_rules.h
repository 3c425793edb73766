/*!
 * \file call_rules.h
 * \brief The table of print rules for `ir.Call`s, keyed by operator name (STYLE.md section 5).
 *
 * A new intrinsic is one registered rule, in the `call_rules_*.cc` file of its family:
 * \code
 *   TVM_FFI_STATIC_INIT_BLOCK() {
 *     RegisterCallRule("tl.sync_threads", CallPosition::kStatement,
 *                      [](CallContext&, const CallView&) { return std::string("__syncthreads_lm()"); });
 *   }
 * \endcode
 * A rule returns the C text of the call without a trailing `;`. The printer adds `;` when the call is the value
 * of an `Evaluate` statement, and refuses a `kStatement` rule anywhere else.
 */
#ifndef TILELANG_MUSA_CODEGEN_CALL_RULES_H_
#define TILELANG_MUSA_CODEGEN_CALL_RULES_H_

#include <functional>
#include <string>
#include <vector>

#include "codegen/ir_view.h"

namespace tilelang_musa {
namespace codegen {

/*! \brief Codegen options from the `options` map (unknown keys are ignored). */
struct CodegenOptions {
  std::string arch = "mp_31";     //!< a name of target/musa_archs.h's table
  int warp_size = 32;             //!< the `warp_size` option, else the arch's
  bool has_async_barriers = true;  //!< the arch's, from the table
  int min_blocks_per_sm = 1;   //!< the second argument of __launch_bounds__ (T.annotate_min_blocks_per_sm)
  /*! \brief Print the simulator's sanitizer build: global and shared accesses checked against their buffer's
   *         extent (and recorded for the race detector), local arrays poisoned. Never changes the line count. */
  bool sim_checks = false;
  /*! \brief `tl.emit_line_directives`: a `#line N "file.py"` before the first line of code of every statement (its
   *         span's line, else its enclosing statement's) and one at the entry naming the `def` line, as upstream. */
  bool line_directives = false;
  /*! \brief TME descriptor parameters (`tl.tme_descriptors`), printed after the function's own parameters as
   *         `__grid_constant__ const MUtensorDescriptor <name>`; the TME rules name them. */
  std::vector<std::string> tme_descriptors;
  /*! \brief Pointer parameters printed without `__restrict__`: tensors that may alias (T.annotate_restrict_buffers). */
  std::vector<std::string> non_restrict_params;
};

/*! \brief What a rule may ask of the printer. */
class CallContext {
 public:
  virtual ~CallContext() = default;
  /*! \brief An expression as C, parenthesised when compound: safe as an operand of any operator. */
  virtual std::string PrintExpr(const ObjectRef& expr) = 0;
  /*! \brief An expression as C without outer parentheses: for function arguments and initialisers. */
  virtual std::string PrintBare(const ObjectRef& expr) = 0;
  /*! \brief The C pointer expression of a buffer variable (`ir.Var` with a `tirx.BufferType`). */
  virtual std::string PrintBufferPointer(const ObjectRef& buffer) = 0;
  /*! \brief The element a scalar `ir.TensorLoad` reads, as an lvalue (`A[i]`), e.g. for `address_of`. */
  virtual std::string PrintLoadLValue(const ObjectRef& load) = 0;
  /*! \brief PrintLoadLValue without the simulator's bounds check (sim_checks): for an element whose address may
   *         lie outside its tensor by design (a robust copy's source: its descriptor bounds the bytes read). */
  virtual std::string PrintLoadLValueUnchecked(const ObjectRef& load) = 0;
  /*! \brief A scalar `ir.TensorLoad` of a byte of packed 4-bit values of which only nibble `odd` (0: low, 1: high) is
   *         used: as a value, or (`address`) as the lvalue whose address a nibble store takes. The simulator's
   *         checked print tracks the nibble, not the byte (tl_sim::CheckSharedNibble). */
  virtual std::string PrintNibbleAccess(const ObjectRef& load, const ObjectRef& odd, bool address,
                                        bool store = false) = 0;
  /*! \brief `(cond ? a : b)` for a scalar condition (TIR's Select and if_then_else alike): in the checked print
   *         of a store to an integer fragment/local, only the chosen branch's defined-ness is carried. */
  virtual std::string PrintConditional(const ObjectRef& cond, const ObjectRef& a, const ObjectRef& b) = 0;
  virtual const CodegenOptions& options() const = 0;
  virtual const std::string& kernel_name() const = 0;
  /*! \brief Throws a ValueError that names the kernel and the call's operator. */
  [[noreturn]] void Fail(const CallView& call, const std::string& message) const;
};

/*! \brief Where a call may appear. */
enum class CallPosition {
  kExpression,  //!< a value: anywhere, including as an Evaluate statement
  kStatement,   //!< an action with no value (a barrier, `break`): only as the value of an Evaluate
};

using CallPrinter = std::function<std::string(CallContext& ctx, const CallView& call)>;

struct CallRule {
  CallPosition position;
  CallPrinter print;
};

/*!
 * \brief Registers the rule for `op_name`. A second rule for the same name from another source file is a
 * programming error (throws); from the same file it is a second copy of this library being loaded, and the
 * first rule stays. `origin` defaults to the calling file.
 */
void RegisterCallRule(const std::string& op_name, CallPosition position, CallPrinter print,
                      const char* origin = __builtin_FILE());

/*! \brief The rule for `op_name`, or nullptr when none is registered. */
const CallRule* FindCallRule(const std::string& op_name);

/*! \brief All registered operator names, sorted (for diagnostics and tests). */
std::vector<std::string> ListCallRules();

/*! \brief Fails through `ctx` unless the call has exactly `count` arguments. */
void CheckArgCount(CallContext& ctx, const CallView& call, size_t count);

/*! \brief The string value of argument `index`, which must be an `ir.StringImm`. */
std::string StringArg(CallContext& ctx, const CallView& call, size_t index);

/*! \brief `name(arg0, arg1, ...)` with the arguments in [first, end) printed through `ctx`. */
std::string PrintFunctionCall(CallContext& ctx, const std::string& name, const Array<ObjectRef>& args,
                              size_t first = 0);

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_CALL_RULES_H_
