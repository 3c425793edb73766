/*!
 * \file codegen_musa.h
 * \brief The MUSA C printer for one device PrimFunc.
 *
 * Two dispatch tables keyed by IR type index (statements in print_stmt.cc, expressions in print_expr.cc) call
 * one small handler per node type; calls go through the operator-name table of call_rules.h. A node type with
 * no handler is an error naming its type key.
 *
 * Names: every variable and buffer gets a unique identifier (name_table.h), so all declarations can live in
 * whatever C++ block the statement lands in. Thread variables print as the built-ins (`((int)threadIdx.x)`).
 */
#ifndef TILELANG_MUSA_CODEGEN_CODEGEN_MUSA_H_
#define TILELANG_MUSA_CODEGEN_CODEGEN_MUSA_H_

#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/call_rules.h"
#include "codegen/dependence_depth.h"
#include "codegen/ir_view.h"
#include "codegen/launch_info.h"
#include "codegen/name_table.h"

namespace tilelang_musa {
namespace codegen {

/*! \brief Parses the `options` map: "arch" (str), "warp_size" and "min_blocks_per_sm" (ints), "sim_checks" (bool),
 *         "tme_descriptors" and "non_restrict_params" (lists of str); others are ignored. */
CodegenOptions ParseCodegenOptions(const Map<String, Any>& options);

/*! \brief A user's source line: (file, line). */
using UserLine = std::pair<std::string, int64_t>;

/*! \brief The user's line a statement's or a function's span names: a `Span`'s own, or the innermost (last) element
 *         of a `SequentialSpan` (a statement nested in a macro or a compound statement); none without one. */
std::optional<UserLine> UserLineOf(const ObjectRef& node);

/*! \brief How a buffer variable is reached in the printed code. */
struct BufferInfo {
  std::string data;         //!< C identifier of the element pointer or array
  std::string name;         //!< for messages
  DataType elem;            //!< element dtype (may itself be a vector type)
  Array<ObjectRef> shape;   //!< extents (only used to linearise N-D accesses)
  Array<ObjectRef> strides; //!< element strides; empty = compact row-major
  ObjectRef elem_offset;    //!< element offset added to every access; undefined or IntImm 0 for none
  bool is_volatile = false;
  std::string scalar;       //!< set for a one-element T.alloc_var printed as a C scalar (`data` is then `(&x)`)
  std::string scope;        //!< storage scope ("global", "shared", "shared.dyn", "local", ...)
  /*! \brief sim_checks only: the valid element offsets from `data`, [lo, hi), as C; hi empty when not printable. */
  std::string check_lo, check_hi;
  /*! \brief sim_checks only: the C identifier of an integer fragment/local array's defined bytes (`N__def`,
   *         uninit_reads.h); empty when the buffer has none. */
  std::string defined;
};

/*! \brief True when `s` is one parenthesised group, e.g. "(a + b)" but not "(a) + (b)". */
bool IsWrapped(const std::string& s);
/*! \brief `s` without its outer parentheses when IsWrapped(s). */
std::string StripParentheses(const std::string& s);

/*! \brief The C conjunction of `conditions` ("1" for none). */
std::string AllOf(const std::vector<std::string>& conditions);

/*!
 * \brief sim_checks: whether the tracked (integer, bool, FNUZ float8) fragment/local elements a stored value is
 *        computed from are defined (uninit_reads.h), as C conditions: `all`, of every lane; and for a vector value
 *        of `lanes` lanes, `lane`, of lane `tl_sim_lane` (a loop variable the store's mark declares), so that a
 *        store sets each lane's defined byte from the elements that lane was computed from.
 */
struct CarriedDefined {
  std::string all;
  std::string lane;  // empty: the same for every lane (a scalar's)
  int lanes = 1;
};
/*! \brief The conjunction of the entries' `all` conditions ("1" for none). */
std::string AllOf(const std::vector<CarriedDefined>& carried);
/*! \brief The conjunction for lane `tl_sim_lane` of a value of `lanes` lanes: an entry of those lanes gives its
 *         `lane` condition, any other its `all`. */
std::string AllOfLane(const std::vector<CarriedDefined>& carried, int lanes);
/*! \brief Whether some entry has a condition of its own per lane of a `lanes`-lane value. */
bool HasLaneConditions(const std::vector<CarriedDefined>& carried, int lanes);

/*! \brief How PrintAccess reached the elements. */
enum class AccessForm { kScalar, kContiguous, kGather };

struct AccessText {
  AccessForm form;
  std::string text;     //!< kScalar/kContiguous: an lvalue (load or store); kGather: the gathering load
  std::string pointer;  //!< kGather only: the base pointer
  std::string index;    //!< kGather only: the index vector
  /*! \brief sim_checks, a checked store of kScalar/kContiguous form: the statement is `store_open + value +
   *         store_close` (tl_sim::CheckedStore, which checks, tells the race detector whether the value changes
   *         memory, and stores). Empty otherwise. */
  std::string store_open, store_close;
  /*! \brief sim_checks, a store to an integer fragment/local array (BufferInfo::defined): the element offset and
   *         lanes whose defined bytes the store sets; lanes 0: every element (a scattered store). */
  std::string defined_offset;
  int defined_lanes = 0;
};

class MusaPrinter : public CallContext {
 public:
  MusaPrinter(std::string kernel_name, CodegenOptions options);

  /*! \brief The `extern "C" __global__` definition of `func`. */
  std::string PrintKernel(const ObjectRef& func);

  // CallContext
  std::string PrintExpr(const ObjectRef& expr) override;
  std::string PrintBare(const ObjectRef& expr) override;
  std::string PrintBufferPointer(const ObjectRef& buffer) override;
  std::string PrintLoadLValue(const ObjectRef& load) override;
  std::string PrintLoadLValueUnchecked(const ObjectRef& load) override;
  std::string PrintNibbleAccess(const ObjectRef& load, const ObjectRef& odd, bool address,
                                bool store = false) override;
  std::string PrintConditional(const ObjectRef& cond, const ObjectRef& a, const ObjectRef& b) override;
  const CodegenOptions& options() const override { return options_; }
  const std::string& kernel_name() const override { return kernel_name_; }
  using CallContext::Fail;
  /*! \brief Throws a ValueError prefixed with the kernel name. */
  [[noreturn]] void Fail(const std::string& message) const;

 private:
  using StmtHandler = void (MusaPrinter::*)(const ObjectRef&);
  using ExprHandler = std::string (MusaPrinter::*)(const ObjectRef&);
  static const std::unordered_map<int32_t, StmtHandler>& StmtTable();
  static const std::unordered_map<int32_t, ExprHandler>& ExprTable();

  // ---- signature and output (codegen_musa.cc)
  std::string PrintParam(const ObjectRef& param);
  void Line(const std::string& text);  //!< one line at the current indentation

  // ---- tl.emit_line_directives (line_directives.cc)
  void BeginFunctionLines(const ObjectRef& func);  //!< the directive of the function's `def` line
  void DirectiveBefore(const std::string& text);   //!< the directive, if any, before a line of code
  void WriteDirective(const UserLine& line);

  // ---- statements (print_stmt.cc)
  void PrintStmt(const ObjectRef& stmt);
  void VisitSeqStmt(const ObjectRef& op);
  void VisitBind(const ObjectRef& op);
  void VisitAttrStmt(const ObjectRef& op);
  void VisitBufferStore(const ObjectRef& op);
  void VisitDeclBuffer(const ObjectRef& op);
  void VisitAllocBuffer(const ObjectRef& op);
  void VisitEvaluate(const ObjectRef& op);
  void VisitIfThenElse(const ObjectRef& op);
  void VisitFor(const ObjectRef& op);
  void VisitWhile(const ObjectRef& op);
  void VisitBreak(const ObjectRef& op);
  void VisitContinue(const ObjectRef& op);
  void RejectStmt(const ObjectRef& op);
  void PrintIfChain(const IfThenElseView& op, bool is_else_if);

  // ---- expressions (print_expr.cc)
  std::string VisitVar(const ObjectRef& op);
  std::string VisitIntImm(const ObjectRef& op);
  std::string VisitFloatImm(const ObjectRef& op);
  std::string VisitStringImm(const ObjectRef& op);
  std::string VisitTensorLoad(const ObjectRef& op);
  /*! \brief A stored (or bound) vector load or variable of a built-in vector type without its tl::vec_of:
   *         `*(float4*)(B + i) = *(float4*)(A + i)` copies in the built-in type. `text` is `value` printed. */
  std::string UnwrapBuiltinVectorLoad(const ObjectRef& value, const std::string& text);
  std::string VisitCall(const ObjectRef& op);
  std::string VisitRamp(const ObjectRef& op);
  std::string VisitBroadcast(const ObjectRef& op);
  std::string VisitShuffle(const ObjectRef& op);
  std::string VisitCast(const ObjectRef& op);
  std::string VisitSelect(const ObjectRef& op);
  std::string PrintLaneSelect(const SelectView& select);
  std::string VisitLet(const ObjectRef& op);
  std::string VisitNot(const ObjectRef& op);
  std::string VisitBitwiseNot(const ObjectRef& op);
  std::string VisitBinaryOperator(const ObjectRef& op);  //!< a + b, a < b, a && b, ...
  std::string VisitBinaryHelper(const ObjectRef& op);    //!< tl::min, tl::floordiv, ...
  std::string PrintCall(const CallView& call, bool as_statement);

  // ---- buffers (print_expr.cc)
  const BufferInfo& LookupBuffer(const ObjectRef& buffer_var) const;
  /*! \brief Registers a buffer Var whose elements live at `data` (a C identifier). */
  void DefineBuffer(const ObjectRef& buffer_var, const std::string& data, bool is_volatile = false);
  /*!
   * \brief The element(s) `indices` select: `A[i]` (kScalar), `(*reinterpret_cast<tl::vec<T, N>*>(A + i))` for a
   * unit-stride Ramp (kContiguous), or `tl::gather(A, idx)` for any other vector index (kGather: a value only).
   * `what` ("load", "store", ...) prefixes error messages.
   */
  AccessText PrintAccess(const ObjectRef& buffer_var, const Array<ObjectRef>& indices, DataType value_type,
                         const std::string& what);
  /*! \brief sim_checks: `index` (element offset from the buffer's data, `lanes` elements) wrapped in the simulator's
   *         bounds check of a global or shared buffer; `index` unchanged for other scopes or without sim_checks. */
  /*! \brief sim_checks: the checked index of a byte of packed 4-bit values of which nibble `odd` is used (a load)
   *         or written (`what` "address_of": a nibble store's address): tl_sim::CheckSharedNibble/CheckGlobalNibble. */
  std::string NibbleIndex(const BufferInfo& info, const std::string& index, const std::string& odd,
                          const std::string& what) const;
  std::string CheckedIndex(const BufferInfo& info, const std::string& index, int lanes, const std::string& what,
                           std::vector<CarriedDefined>* carried = nullptr, const std::string& guard = "");
  /*! \brief sim_checks: loads of this fragment or local array are checked for poison (CheckedIndex wraps them in
   *         tl_sim::CheckLocalRead, uninit_reads.h): a float type whose poison is a NaN. */
  bool ChecksLocalReads(const BufferInfo& info) const;
  /*! \brief sim_checks: whether a fragment/local array of `elem` gets defined bytes (an integer, bool or FNUZ
   *         float8, whose poison is a value: uninit_reads.h). */
  bool TracksDefined(const std::string& scope, DataType elem, bool is_volatile) const;
  /*! \brief sim_checks: `data` (a tracked buffer's array), with its whole array counted defined when evaluated:
   *         its address is handed to a template that may write any element. */
  std::string HandOut(const BufferInfo& info) const;
  /*! \brief sim_checks: `tl_sim::Compute(n, depth, iterations); ` charging a statement's arithmetic instructions
   *         (arithmetic_count.h) to the simulator's cycle model, with the dependent chain of its `value`, stored to
   *         `buffer` at `indices` (null: a bound variable), among the enclosing loops (dependence_depth.h); empty
   *         without sim_checks or for none. */
  std::string ComputeCharge(const ObjectRef& value, const ObjectRef& buffer = ObjectRef(),
                            const Array<ObjectRef>* indices = nullptr) const;
  /*! \brief sim_checks: fills BufferInfo::check_lo/check_hi from the buffer's shape, strides and elem_offset. */
  void SetCheckBounds(BufferInfo* info);
  /*! \brief Element stride of each dimension as C text ("1" for unit); empty when the rank does not match. */
  std::vector<std::string> ElementStrides(const BufferInfo& info, size_t rank);
  /*! \brief Defines a scalar variable's C name (its type is printed by the caller). */
  std::string DefineVar(const ObjectRef& var, const std::string& fallback = "v");

  std::string kernel_name_;
  CodegenOptions options_;
  // sim_checks: what each enclosing loop's iterations share, outermost first (dependence_depth.h)
  std::vector<LoopDependence> loops_;
  NameTable names_;
  std::unordered_map<const ffi::Object*, std::string> var_names_;
  std::unordered_map<const ffi::Object*, BufferInfo> buffers_;
  LaunchInfo launch_;
  std::ostringstream out_;
  int indent_ = 0;
  bool unchecked_ = false;  // PrintLoadLValueUnchecked in progress: CheckedIndex leaves indices alone
  // PrintNibbleAccess in progress: the C text of the nibble (0 or 1) the access uses, taken by the next
  // PrintAccess (its own indices print with it empty); empty elsewhere.
  std::string nibble_odd_;
  bool nibble_store_ = false;  // ... and whether it is a store the race detector sees (a packed int4 nibble's)
  // sim_checks, printing the value of a store to an integer fragment/local: the defined-ness of each tracked
  // element the value carries (C conditions). Loads collected here are not checked (uninit_reads.h). Null
  // elsewhere, where a tracked load is a use and checked (indices, conditions, other stores, calls' statements).
  std::vector<CarriedDefined>* carried_defined_ = nullptr;
  // sim_checks, printing a branch of a lane-wise select (tl::select) whose value is used: a tl_sim::LaneMask of the
  // lanes that take the branch, so that its tracked loads are checked in those lanes only; empty elsewhere.
  std::string lane_guard_;
  int lane_selects_ = 0;  // lane-wise selects being printed with a guard (names their lambdas' parameters)
  // line_directives: the user's (file, line) of the statement being printed (its own span's, else the innermost
  // enclosing statement's); and the line the C compiler numbers the next printed line, after the last #line.
  // statement_began_: a statement began and has printed no line yet (its first line gets a directive);
  // directive_end_: where in out_ the last directive ends; def_line_: the function's `def` line.
  const UserLine* user_line_ = nullptr;
  std::string presumed_file_;
  int64_t presumed_line_ = 0;
  bool statement_began_ = false;
  int64_t directive_end_ = -1;
  std::optional<UserLine> def_line_;
};

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_CODEGEN_MUSA_H_
