/*!
 * \file ir_view.h
 * \brief A small typed view layer over the apache-tvm 0.27 IR, read through tvm-ffi reflection.
 *
 * The wheel ships no compiler headers, so the printer cannot use TVM's node classes. Every IR node is an
 * `ffi::ObjectRef` whose fields are reached by name through reflection. The views below give those fields
 * C++ names and types (`ForView(stmt).loop_var()`), so the printer reads like an ordinary visitor.
 *
 * Rules the views follow (see docs/TVM_IR_REFERENCE.md):
 *  - type indices are dynamic: they are resolved from type keys at first use, never hard-coded;
 *  - a field may be declared on an ancestor (`ty` on `ir.Expr`), so lookups walk the ancestors;
 *  - a view checks the node's type on construction and fails with the type key it expected.
 */
#ifndef TILELANG_MUSA_CODEGEN_IR_VIEW_H_
#define TILELANG_MUSA_CODEGEN_IR_VIEW_H_

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/object.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tilelang_musa {
namespace codegen {

namespace ffi = ::tvm::ffi;
using ffi::Any;
using ffi::Array;
using ffi::Map;
using ffi::ObjectRef;
using ffi::String;
using AnnotationMap = Map<String, Any>;

/*! \brief The type index registered for `type_key`, or nullopt when no loaded library registered it. */
std::optional<int32_t> FindTypeIndex(std::string_view type_key);
/*! \brief The type index registered for `type_key`; throws if no loaded library registered it. */
int32_t LookupTypeIndex(std::string_view type_key);

/*! \brief A type key whose index is resolved once, on first use. Declare instances as statics. */
class TypeKey {
 public:
  explicit TypeKey(const char* key) : key_(key) {}
  const char* key() const { return key_; }
  int32_t index() const;

 private:
  const char* key_;
  mutable std::atomic<int32_t> index_{-1};  // printers may run on several threads
};

/*! \brief The type key of a node ("none" for a null reference). */
std::string TypeKeyOf(const ObjectRef& node);

/*! \brief True when `node` is exactly of the given type (the IR node types used here are final). */
bool IsA(const ObjectRef& node, const TypeKey& key);

/*!
 * \brief Reads field `name` of `node`, declared on its type or on an ancestor.
 * `name` must be a string literal: the per-thread lookup cache keys on its address.
 */
Any GetField(const ObjectRef& node, const char* name);

/*! \brief A scalar or vector element type, as `ir.PrimType.dtype` stores it. */
class DataType {
 public:
  static constexpr int kFloat8E4M3FN = 10;  // DLPack's kDLFloat8_e4m3fn
  static constexpr int kFloat8E4M3FNUZ = 11;  // DLPack's kDLFloat8_e4m3fnuz
  static constexpr int kFloat8E5M2 = 12;    // DLPack's kDLFloat8_e5m2
  static constexpr int kFloat8E5M2FNUZ = 13;  // DLPack's kDLFloat8_e5m2fnuz
  static constexpr int kFloat8E8M0FNU = 14;  // DLPack's kDLFloat8_e8m0fnu
  DataType() : dt_{kDLOpaqueHandle, 0, 0} {}
  explicit DataType(DLDataType dt) : dt_(dt) {}
  static DataType Make(int code, int bits, int lanes) {
    return DataType(DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bits),
                               static_cast<uint16_t>(lanes)});
  }
  static DataType Int(int bits, int lanes = 1) { return Make(kDLInt, bits, lanes); }
  static DataType Float(int bits, int lanes = 1) { return Make(kDLFloat, bits, lanes); }
  static DataType Bool(int lanes = 1) { return Make(kDLBool, 8, lanes); }

  int code() const { return dt_.code; }
  int bits() const { return dt_.bits; }
  int lanes() const { return static_cast<int16_t>(dt_.lanes); }
  bool is_scalar() const { return lanes() == 1; }
  bool is_vector() const { return lanes() > 1; }
  bool is_int() const { return dt_.code == kDLInt; }
  bool is_uint() const { return dt_.code == kDLUInt; }
  bool is_bool() const { return dt_.code == kDLBool || (dt_.code == kDLUInt && dt_.bits == 1); }
  bool is_integer() const { return (is_int() || is_uint()) && !is_bool(); }
  bool is_float() const { return dt_.code == kDLFloat; }
  bool is_bfloat16() const { return dt_.code == kDLBfloat && dt_.bits == 16; }
  bool is_float16() const { return is_float() && dt_.bits == 16; }
  /*! \brief The 8-bit floats with a MUSA C type: OCP E4M3 (finite, "fn"), E5M2 and the E8M0 scale format. */
  bool is_float8() const {
    return (dt_.code == kFloat8E4M3FN || dt_.code == kFloat8E4M3FNUZ || dt_.code == kFloat8E5M2 ||
            dt_.code == kFloat8E5M2FNUZ || dt_.code == kFloat8E8M0FNU) && dt_.bits == 8;
  }
  /*! \brief A float type narrower than float that the device stores as a class and converts through float. */
  bool is_half_like() const { return is_float16() || is_bfloat16() || is_float8(); }
  bool is_floating() const { return is_float() || is_bfloat16() || is_float8(); }
  bool is_handle() const { return dt_.code == kDLOpaqueHandle; }
  int bytes() const { return (bits() * lanes() + 7) / 8; }
  DataType element() const { return Make(dt_.code, dt_.bits, 1); }
  DataType with_lanes(int lanes) const { return Make(dt_.code, dt_.bits, lanes); }
  bool operator==(const DataType& o) const {
    return dt_.code == o.dt_.code && dt_.bits == o.dt_.bits && dt_.lanes == o.dt_.lanes;
  }
  bool operator!=(const DataType& o) const { return !(*this == o); }
  std::string str() const { return std::string(ffi::DLDataTypeToString(dt_)); }

 private:
  DLDataType dt_;
};

/*! \brief Base of all views: holds the node and reads its fields by name. */
class View {
 public:
  const ObjectRef& ref() const { return ref_; }
  const ffi::Object* get() const { return ref_.get(); }

 protected:
  View(ObjectRef ref, const TypeKey& key);
  template <typename T>
  T Field(const char* name) const {
    if constexpr (std::is_same_v<T, Any>) {
      return GetField(ref_, name);
    } else {
      return GetField(ref_, name).cast<T>();
    }
  }
  ObjectRef ref_;
};

// One accessor per reflected field; the method name is the reflection field name.
#define TLM_VIEW(Class, type_key)                                   \
  static const TypeKey& Key() {                                     \
    static const TypeKey key(type_key);                             \
    return key;                                                     \
  }                                                                 \
  explicit Class(ObjectRef ref) : View(std::move(ref), Key()) {}
#define TLM_FIELD(Type, name) \
  Type name() const { return Field<Type>(#name); }

// ---- types --------------------------------------------------------------------------------------
struct PrimTypeView : View {
  TLM_VIEW(PrimTypeView, "ir.PrimType")
  DataType dtype() const { return DataType(Field<DLDataType>("dtype")); }
};
struct PointerTypeView : View {
  TLM_VIEW(PointerTypeView, "ir.PointerType")
  TLM_FIELD(ObjectRef, element_type)
  TLM_FIELD(String, storage_scope)
};
struct BufferTypeView : View {
  TLM_VIEW(BufferTypeView, "tirx.BufferType")
  DataType dtype() const { return PrimTypeView(Field<ObjectRef>("dtype")).dtype(); }
  TLM_FIELD(String, storage_scope)
  TLM_FIELD(Array<ObjectRef>, shape)
  TLM_FIELD(Array<ObjectRef>, strides)
  TLM_FIELD(ObjectRef, elem_offset)
};

// ---- expressions --------------------------------------------------------------------------------
/*! \brief The `ty` of any expression. */
inline ObjectRef TypeOf(const ObjectRef& expr) { return GetField(expr, "ty").cast<ObjectRef>(); }
/*! \brief True when the expression's `ty` is an `ir.PrimType`. */
bool HasPrimType(const ObjectRef& expr);
/*! \brief The dtype of a scalar/vector expression; throws naming the node when its `ty` is not a PrimType. */
DataType DTypeOf(const ObjectRef& expr);

struct VarView : View {
  TLM_VIEW(VarView, "ir.Var")
  TLM_FIELD(ObjectRef, ty)
  TLM_FIELD(String, name)
};
/*! \brief A variable's TIR name for messages, "<unnamed>" when empty. */
inline std::string DisplayName(const ObjectRef& var) {
  std::string name(VarView(var).name());
  return name.empty() ? "<unnamed>" : name;
}

struct IntImmView : View {
  TLM_VIEW(IntImmView, "ir.IntImm")
  TLM_FIELD(int64_t, value)
};
struct FloatImmView : View {
  TLM_VIEW(FloatImmView, "ir.FloatImm")
  TLM_FIELD(double, value)
};
struct StringImmView : View {
  TLM_VIEW(StringImmView, "ir.StringImm")
  TLM_FIELD(String, value)
};
struct TensorLoadView : View {
  TLM_VIEW(TensorLoadView, "ir.TensorLoad")
  TLM_FIELD(ObjectRef, source)
  TLM_FIELD(Array<ObjectRef>, indices)
};
struct OpView : View {
  TLM_VIEW(OpView, "ir.Op")
  TLM_FIELD(String, name)
};
struct GlobalVarView : View {
  TLM_VIEW(GlobalVarView, "ir.GlobalVar")
  TLM_FIELD(String, name_hint)
};
struct CallView : View {
  TLM_VIEW(CallView, "ir.Call")
  TLM_FIELD(ObjectRef, op)
  TLM_FIELD(Array<ObjectRef>, args)
  /*! \brief "tirx.call_extern" for an `ir.Op`, or "@name" for a call of an `ir.GlobalVar`. */
  std::string op_name() const;
  DataType dtype() const { return DTypeOf(ref_); }
};
struct RampView : View {
  TLM_VIEW(RampView, "prim.Ramp")
  TLM_FIELD(ObjectRef, base)
  TLM_FIELD(ObjectRef, stride)
  TLM_FIELD(ObjectRef, lanes)
};
struct BroadcastView : View {
  TLM_VIEW(BroadcastView, "prim.Broadcast")
  TLM_FIELD(ObjectRef, value)
  TLM_FIELD(ObjectRef, lanes)
};
struct ShuffleView : View {
  TLM_VIEW(ShuffleView, "prim.Shuffle")
  TLM_FIELD(Array<ObjectRef>, vectors)
  TLM_FIELD(Array<ObjectRef>, indices)
};
struct CastView : View {
  TLM_VIEW(CastView, "prim.Cast")
  TLM_FIELD(ObjectRef, value)
};
struct SelectView : View {
  TLM_VIEW(SelectView, "prim.Select")
  TLM_FIELD(ObjectRef, condition)
  TLM_FIELD(ObjectRef, true_value)
  TLM_FIELD(ObjectRef, false_value)
};
struct LetView : View {
  TLM_VIEW(LetView, "prim.Let")
  TLM_FIELD(ObjectRef, var)
  TLM_FIELD(ObjectRef, value)
  TLM_FIELD(ObjectRef, body)
};

/*! \brief Operands of the `prim.*` operator nodes: fields `a` and `b` (Add ... GE, And, Or), `a` (Not, BitwiseNot). */
inline ObjectRef OperandA(const ObjectRef& e) { return GetField(e, "a").cast<ObjectRef>(); }
inline ObjectRef OperandB(const ObjectRef& e) { return GetField(e, "b").cast<ObjectRef>(); }

/*! \brief The value of an `ir.IntImm`, or nullopt for any other node. */
std::optional<int64_t> AsConstInt(const ObjectRef& expr);

// ---- statements ---------------------------------------------------------------------------------
struct SeqStmtView : View {
  TLM_VIEW(SeqStmtView, "tirx.SeqStmt")
  TLM_FIELD(Array<ObjectRef>, seq)
};
struct BindView : View {
  TLM_VIEW(BindView, "tirx.Bind")
  TLM_FIELD(ObjectRef, var)
  TLM_FIELD(ObjectRef, value)
};
struct AttrStmtView : View {
  TLM_VIEW(AttrStmtView, "tirx.AttrStmt")
  TLM_FIELD(Any, node)
  TLM_FIELD(String, attr_key)
  TLM_FIELD(ObjectRef, value)
  TLM_FIELD(ObjectRef, body)
};
struct IterVarView : View {
  TLM_VIEW(IterVarView, "tirx.IterVar")
  TLM_FIELD(ObjectRef, var)
  TLM_FIELD(String, thread_tag)
};
struct BufferStoreView : View {
  TLM_VIEW(BufferStoreView, "tirx.BufferStore")
  TLM_FIELD(ObjectRef, buffer)
  TLM_FIELD(ObjectRef, value)
  TLM_FIELD(Array<ObjectRef>, indices)
};
struct DeclBufferView : View {
  TLM_VIEW(DeclBufferView, "tirx.DeclBuffer")
  TLM_FIELD(ObjectRef, buffer)
  TLM_FIELD(ObjectRef, data)
};
struct AllocBufferView : View {
  TLM_VIEW(AllocBufferView, "tirx.AllocBuffer")
  TLM_FIELD(ObjectRef, buffer)
  TLM_FIELD(AnnotationMap, annotations)
};
struct EvaluateView : View {
  TLM_VIEW(EvaluateView, "tirx.Evaluate")
  TLM_FIELD(ObjectRef, value)
};
struct IfThenElseView : View {
  TLM_VIEW(IfThenElseView, "tirx.IfThenElse")
  TLM_FIELD(ObjectRef, condition)
  TLM_FIELD(ObjectRef, then_case)
  TLM_FIELD(ffi::Optional<ObjectRef>, else_case)
};
struct ForView : View {
  TLM_VIEW(ForView, "tirx.For")
  TLM_FIELD(ObjectRef, loop_var)
  TLM_FIELD(ObjectRef, min)
  TLM_FIELD(ObjectRef, extent)
  TLM_FIELD(int64_t, kind)
  TLM_FIELD(ObjectRef, body)
  TLM_FIELD(ffi::Optional<ObjectRef>, step)
  TLM_FIELD(AnnotationMap, annotations)
};
struct WhileView : View {
  TLM_VIEW(WhileView, "tirx.While")
  TLM_FIELD(ObjectRef, condition)
  TLM_FIELD(ObjectRef, body)
};
struct PrimFuncView : View {
  TLM_VIEW(PrimFuncView, "tirx.PrimFunc")
  TLM_FIELD(Array<ObjectRef>, params)
  TLM_FIELD(ObjectRef, body)
};

#undef TLM_FIELD
#undef TLM_VIEW

/*! \brief `For.kind` values (tvm.tirx.ForKind). */
enum class ForKind : int64_t { kSerial = 0, kParallel = 1, kVectorized = 2, kUnrolled = 3, kThreadBinding = 4 };

}  // namespace codegen
}  // namespace tilelang_musa

#endif  // TILELANG_MUSA_CODEGEN_IR_VIEW_H_
