"""The older TIR surface upstream TileLang scripts are written against, on the 0.27 wheel's redesigned IR.

Only names the wheel lacks are added, each answering as the older TIR did; no behaviour of the wheel is replaced:
- `tirx.PrimExpr`: the wheel names the class `tvm.ir.Expr` (re-exported as `tirx.Expr`).
- `expr.dtype`: the wheel keeps an expression's type in `expr.ty` (a PrimType); scripts' helpers read `val.dtype`
  (`assert val.dtype == T.uint8` in upstream's dequantize examples). A `Var` already answers `dtype` for buffer
  variables and raised for scalar ones; a scalar one now answers its type too.
"""

import tvm
from tvm import ir, tirx

if not hasattr(tirx, "PrimExpr"):
    tirx.PrimExpr = tirx.Expr


def _prim_dtype(expr):
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, ir.PrimType):
        raise AttributeError(f"{type(expr).__name__} has no dtype: its type is {ty}")
    return tvm.DataType(str(ty.dtype))


if "dtype" not in vars(ir.Expr):
    ir.Expr.dtype = property(_prim_dtype)

_var_dtype = vars(ir.Var).get("dtype")
if isinstance(_var_dtype, property) and not getattr(_var_dtype.fget, "_tilelang_scalar", False):
    def _var_or_buffer_dtype(var, _buffer_dtype=_var_dtype.fget):
        return _prim_dtype(var) if isinstance(getattr(var, "ty", None), ir.PrimType) else _buffer_dtype(var)

    _var_or_buffer_dtype._tilelang_scalar = True
    ir.Var.dtype = property(_var_or_buffer_dtype)
