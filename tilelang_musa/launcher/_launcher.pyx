# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Calls a compiled kernel library: checks the caller's tensors, allocates outputs, packs the arguments.

A kernel library (built by `mcc` for a MUSA GPU, or by the host compiler for the CPU simulator) exports with C
linkage `int call_packed(void** args, int num_args, void* stream)` and `const char* get_last_error(void)`.
`args[i]` points to the i-th parameter's value: a `void*` data pointer for a tensor or a `T.ptr`, a C scalar of the parameter's
dtype for a scalar (bool -> 1-byte bool, intN/uintN -> intN_t/uintN_t, float16/bfloat16 -> their 16 bits,
float32 -> float, float64 -> double).

    Launcher(lib_path, params, device, kernel_name="kernel", scalar_bindings=(), assumes=())
        lib_path         the kernel library, opened once with dlopen(RTLD_NOW | RTLD_LOCAL)
        params           Sequence[ParamSpec] in `call_packed` order
        device           "cpu" (simulator: CPU torch tensors, NULL stream) or
                         "musa" (torch_musa tensors, the current torch_musa stream)
        kernel_name      named in every error message
        scalar_bindings  integer scalar parameters whose value is the same-named symbolic dim of the input tensors
                         rather than a caller argument (the kernel takes `int N` and N is also a tensor dim)
        assumes          Sequence[HostAssume]: the kernel's `T.assume`s over scalar parameters and size symbols,
                         checked once the arguments are bound (assume.py); none: nothing is evaluated
    launcher(*args) -> Tensor | tuple[Tensor, ...] | None
        `args` are the parameters that are neither outputs, workspaces nor bound scalars, in order: torch.Tensors for
        tensor parameters, Python numbers for scalars, a torch.Tensor (its data pointer; device checked, nothing
        else) or a nonzero int address for a pointer parameter (`T.ptr`). Each tensor is checked for dtype, device, rank, static dims,
        consistent symbolic dims and contiguity (or the given strides); each scalar for type and range. A symbol
        that appears only inside expression dims (`m * 4`) is solved from a dim linear in it (spec.solve_dim);
        then every expression dim is checked against the tensor. float4_e2m1fn tensors are bytes (uint8, int8
        or torch.float4_e2m1fn_x2) holding two values each: the last dim counts 2 per byte, other strides 2x. Outputs
        are allocated with torch.empty on the inputs' device, and so are workspaces (`T.alloc_global`; never
        returned); on the simulator both are filled with 0xFF bytes so a read before a write, or an element the
        kernel never writes, shows (NaN, -1). The kernel runs, and the outputs
        are returned (one -> the tensor, several -> a tuple in parameter order, none -> None).
        Errors: TypeError (argument count, not a tensor, dtype, scalar type), ValueError (device, shape,
        symbol conflict, layout, scalar range), UnboundSizeError (a ValueError and a RuntimeError: a size the
        kernel reads that only tensors left out as None give; one given by a single dim of a single tensor is 0
        instead), AssumeViolation (a ValueError and a RuntimeError: the call breaks a `T.assume`),
        KernelLaunchError (call_packed returned non-zero).
    launcher.bind_shapes(*args) -> dict[str, int]   the symbol values the arguments imply, without launching
    launcher.params, .lib_path, .kernel_name, .device, .scalar_bindings, .assumes, .arg_names (read-only)
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libcpp cimport bool as cbool
from posix.dlfcn cimport dlopen, dlsym, dlclose, dlerror, RTLD_NOW, RTLD_LOCAL

import math
import numbers
import operator
import os

import numpy
import torch

from .assume import HostAssume, check_assumes, compile_checks
from . import carried_poison
from .poison_hint import hint_if_poison
from .spec import (KernelLaunchError, ParamSpec, UnboundSizeError, accepted_torch_dtypes, solve_dim,
                   unsolvable_symbols)

ctypedef int (*CallPacked)(void** args, int num_args, void* stream) noexcept nogil
ctypedef const char* (*GetLastError)() noexcept nogil
# The simulator's (optional): the ranges the launcher poisoned for the coming call, checked mode's uninitialised
# global-read check (src/tl_templates/sim/sim/poisoned_globals.h), with, for a tensor an earlier call returned,
# the bytes it left unwritten and the text naming that call; n = 0 clears them after the call. After the call,
# before the clearing, PoisonedUnwritten reads back range i's bytes still unwritten (-1: the call ran unchecked).
ctypedef void (*RegisterPoisoned)(void** begins, const uint64_t* nbytes, const unsigned char** unwritten,
                                  const char** origins, int n) noexcept nogil
ctypedef int64_t (*PoisonedUnwritten)(int i, unsigned char* out) noexcept nogil

# One argument value; args[i] points at slots[i].
cdef union Slot:
    void* ptr
    cbool b
    int8_t i8
    int16_t i16
    int32_t i32
    int64_t i64
    uint8_t u8
    uint16_t u16
    uint32_t u32
    uint64_t u64
    float f32
    double f64

cdef enum ScalarCode:
    S_BOOL, S_I8, S_I16, S_I32, S_I64, S_U8, S_U16, S_U32, S_U64, S_F16, S_BF16, S_F32, S_F64

_SCALAR_CODES = {
    "bool": S_BOOL, "int8": S_I8, "int16": S_I16, "int32": S_I32, "int64": S_I64,
    "uint8": S_U8, "uint16": S_U16, "uint32": S_U32, "uint64": S_U64,
    "float16": S_F16, "bfloat16": S_BF16, "float32": S_F32, "float64": S_F64,
}
# Indexed by ScalarCode; None for the non-integer codes.
_INT_BOUNDS = (None, (-2**7, 2**7 - 1), (-2**15, 2**15 - 1), (-2**31, 2**31 - 1), (-2**63, 2**63 - 1),
               (0, 2**8 - 1), (0, 2**16 - 1), (0, 2**32 - 1), (0, 2**64 - 1), None, None, None, None)
_INT64_MAX = 2**63 - 1
# Finite doubles at or beyond the float32 rounding boundary become inf: reject them instead.
_F32_OVERFLOW = 2.0**128 - 2.0**103

cdef enum ParamKind:
    TENSOR_IN, TENSOR_OUT, TENSOR_WORKSPACE, SCALAR_ARG, SCALAR_BOUND, POINTER_ARG

cdef struct ParamInfo:
    int kind
    int scalar       # ScalarCode, scalars only
    int ndim
    int dims_at      # offset of the shape in Launcher._dims
    int strides_at   # offset of the strides in Launcher._dims; -1: contiguous required
    int symbol       # scalars: index of the same-named symbol, or -1
    int align        # tensors: bytes the data pointer must be a multiple of
    bint unused      # tensors: the kernel never accesses it (None is accepted)
    int pack         # tensors: logical elements per byte of the tensor passed (2 for float4_e2m1fn, else 1)
    bint zeroed      # workspaces: zero bytes at each call (inter-block flags), not the simulator's poison

# Per-call scratch, one malloc: the argument slots, the args array, and the symbol table. Where a symbol was
# bound is kept only to name both sides of a conflict: sym_where >= 0 is shape[d], -1 a scalar argument,
# <= -2 stride(-where - 2).
cdef struct CallState:
    Slot* slots
    void** argv
    int64_t* sym_values
    int* sym_param    # -1: unbound
    int* sym_where
    void** poisoned          # the simulator: the outputs and workspaces filled with poison, then the inputs an
    uint64_t* poisoned_bytes  # ... earlier checked call left poison unwritten in (carried_poison.py); their sizes,
    const unsigned char** unwritten  # ... the carried bytes still unwritten (null: allocated for this call) ...
    const char** origins     # ... and the text naming the kernel that allocated a carried one
    int num_poisoned

_Tensor = torch.Tensor
_CPU = torch.device("cpu")
_MUSA_RUNTIME = None


def _musa_runtime():
    """(raw_stream(index) -> int, current_device() -> int, device(index) context), importing torch_musa once."""
    global _MUSA_RUNTIME
    if _MUSA_RUNTIME is None:
        try:
            import torch_musa
        except ImportError as err:
            raise RuntimeError("the musa backend needs torch_musa, which is not installed; "
                               "use the simulator backend (device 'cpu') on machines without a MUSA GPU") from err
        raw = getattr(getattr(torch_musa, "_MUSAC", None), "_musa_getCurrentRawStream", None)
        if raw is None:
            def raw(index):
                return torch.musa.current_stream(index).musa_stream
        _MUSA_RUNTIME = (raw, torch.musa.current_device, torch.musa.device)
    return _MUSA_RUNTIME


cdef class Launcher:
    cdef void* _handle
    cdef CallPacked _call
    cdef GetLastError _last_error
    cdef RegisterPoisoned _register_poisoned
    cdef PoisonedUnwritten _poisoned_unwritten
    cdef ParamInfo* _info
    cdef int64_t* _dims          # >= 0: static size; -1 - s: symbol s < _num_symbols; -1 - S - e: _exprs[e]
    cdef int _num_params
    cdef int _num_symbols
    cdef int _num_outputs
    cdef bint _musa
    cdef tuple _dtypes           # torch dtype per tensor parameter (outputs get it), None for scalars
    cdef tuple _accepted         # torch dtypes an input may have per tensor parameter, None for scalars
    cdef tuple _exprs            # DimExpr dims and strides, indexed by their code
    cdef tuple _static_shapes    # output shape tuple when all dims are static, else None
    cdef tuple _symbol_names
    cdef tuple _symbol_sources   # per symbol: (tensor name, is a plain dim) for each input dim or stride naming it
    cdef tuple _assume_args      # (argument position, parameter index) of the scalar arguments assumes read
    cdef tuple _assume_checks    # compile_checks(assumes)
    cdef readonly str lib_path
    cdef readonly tuple params
    cdef readonly str device
    cdef readonly str kernel_name
    cdef readonly tuple scalar_bindings
    cdef readonly tuple assumes
    cdef readonly tuple arg_names

    def __cinit__(self):
        self._handle = NULL
        self._info = NULL
        self._dims = NULL

    def __dealloc__(self):
        self._release()

    cdef void _release(self) noexcept:
        free(self._info)
        free(self._dims)
        self._info = NULL
        self._dims = NULL
        if self._handle != NULL:
            dlclose(self._handle)
            self._handle = NULL

    def __init__(self, lib_path, params, str device, str kernel_name not None="kernel", scalar_bindings=(),
                 assumes=()):
        self._release()
        if device not in ("cpu", "musa"):
            raise ValueError(f"kernel '{kernel_name}': device must be 'cpu' (simulator) or 'musa'; got {device!r}")
        self.kernel_name = kernel_name
        self.device = device
        self._musa = device == "musa"
        self.params = tuple(params)
        self.scalar_bindings = tuple(scalar_bindings)
        self.assumes = tuple(assumes)
        self._build_tables()
        self._build_assumes()
        # A bare file name would make dlopen search LD_LIBRARY_PATH instead of the working directory.
        self.lib_path = os.path.abspath(os.fspath(lib_path))
        self._open()

    # ---- construction ------------------------------------------------------------------------------------

    cdef _build_tables(self):
        cdef str k = self.kernel_name
        cdef ParamInfo* info
        names = {}
        for i, p in enumerate(self.params):
            if not isinstance(p, ParamSpec):
                raise TypeError(f"kernel '{k}': params[{i}] must be a ParamSpec; got {type(p).__name__}")
            if p.name in names:
                raise ValueError(f"kernel '{k}': two parameters are named {p.name}")
            names[p.name] = p
        symbols = {}
        input_symbols = set()
        for p in self.params:
            if p.kind == "tensor":
                for s in p.symbols:
                    symbols.setdefault(s, len(symbols))
                    if not p.is_output:
                        input_symbols.add(s)
        unsolvable = unsolvable_symbols(self.params, self.scalar_bindings)
        if unsolvable:
            uses = [q.describe() for q in self.params if q.kind == "tensor" and not q.is_output
                    and set(q.symbols) & set(unsolvable)]
            raise ValueError(f"kernel '{k}': {', '.join(unsolvable)} appear(s) in input tensor dims only inside "
                             f"expressions that do not determine it (not linear in it: {'; '.join(uses)}); "
                             "make one dim or stride exactly that symbol, or a linear expression of it (n * 4 + 1)")
        # A caller-given integer scalar named like a symbol sizes outputs too (and must agree with the inputs).
        resolvable = input_symbols | {p.name for p in self.params if p.kind == "scalar" and p.name in symbols
                                      and p.name not in self.scalar_bindings}
        for b in self.scalar_bindings:
            p = names.get(b) if isinstance(b, str) else None
            if p is None or p.kind != "scalar":
                scalars = [q.name for q in self.params if q.kind == "scalar"]
                raise ValueError(f"kernel '{k}': scalar_bindings names {b!r}, which is not a scalar parameter "
                                 f"(scalar parameters: {', '.join(scalars) or 'none'})")
            if _INT_BOUNDS[_SCALAR_CODES[p.dtype]] is None:
                raise ValueError(f"kernel '{k}': scalar_bindings names {b}, a {p.dtype} parameter; "
                                 "only integer scalars can take a tensor dim")
            if b not in input_symbols:
                raise ValueError(f"kernel '{k}': scalar_bindings names {b}, but no input tensor has a dim or "
                                 f"stride named {b} to take its value from")
        if len(set(self.scalar_bindings)) != len(self.scalar_bindings):
            raise ValueError(f"kernel '{k}': scalar_bindings {self.scalar_bindings} has duplicates")

        self._num_params = len(self.params)
        self._num_symbols = len(symbols)
        self._symbol_names = tuple(symbols)
        self._symbol_sources = _symbol_sources(self.params, symbols)
        self._info = <ParamInfo*>malloc(max(1, self._num_params) * sizeof(ParamInfo))
        if self._info == NULL:
            raise MemoryError()
        dims = []
        dtypes = []
        accepted = []
        exprs = []
        static_shapes = []

        arg_names = []
        self._num_outputs = 0
        for i, p in enumerate(self.params):
            info = &self._info[i]
            info.ndim = len(p.shape)
            info.dims_at = len(dims)
            info.strides_at = -1
            info.symbol = -1
            info.scalar = -1
            info.align = p.align
            info.unused = p.unused
            info.pack = p.pack
            info.zeroed = p.zeroed
            if p.kind == "pointer":
                info.kind = POINTER_ARG
                arg_names.append(p.name)
                dtypes.append(None)
                accepted.append(None)
                static_shapes.append(None)
            elif p.kind == "tensor":
                info.kind = TENSOR_OUT if p.is_output else TENSOR_WORKSPACE if p.is_workspace else TENSOR_IN
                dims.extend([_dim_code(d, symbols, exprs) for d in p.shape])
                if p.strides is not None:
                    info.strides_at = len(dims)
                    dims.extend([_dim_code(s, symbols, exprs) for s in p.strides])
                if p.pack > 1 and info.ndim == 0:
                    raise ValueError(f"kernel '{k}': {p.describe()} packs {p.pack} values a byte along its last "
                                     "dim and needs at least one dim")
                kinds = accepted_torch_dtypes(p.dtype)
                accepted.append(kinds)
                dtypes.append(kinds[0])
                allocated = p.is_output or p.is_workspace
                static = allocated and p.strides is None and all([isinstance(d, int) for d in p.shape])
                static_shapes.append(p.storage_shape({}) if static else None)
                if allocated:
                    self._num_outputs += p.is_output
                    unresolved = [s for s in p.symbols if s not in resolvable]
                    if unresolved:
                        raise ValueError(
                            f"kernel '{k}': {'output' if p.is_output else 'workspace'} {p.describe()} uses "
                            f"{', '.join(unresolved)}, which no input tensor dim or scalar argument determines; "
                            "the launcher cannot size it")
                else:
                    arg_names.append(p.name)
            else:
                info.scalar = _SCALAR_CODES[p.dtype]
                info.symbol = symbols.get(p.name, -1)
                if p.name in self.scalar_bindings:
                    info.kind = SCALAR_BOUND
                else:
                    info.kind = SCALAR_ARG
                    arg_names.append(p.name)
                if info.symbol >= 0 and _INT_BOUNDS[info.scalar] is None:
                    raise ValueError(f"kernel '{k}': scalar {p.name} is {p.dtype}, but {p.name} is also a "
                                     "symbolic tensor size, which must be an integer")
                dtypes.append(None)
                accepted.append(None)
                static_shapes.append(None)
        self._dims = <int64_t*>malloc(max(1, len(dims)) * sizeof(int64_t))
        if self._dims == NULL:
            raise MemoryError()
        for j, d in enumerate(dims):
            self._dims[j] = d
        self._dtypes = tuple(dtypes)
        self._accepted = tuple(accepted)
        self._exprs = tuple(exprs)
        self._static_shapes = tuple(static_shapes)
        self.arg_names = tuple(arg_names)

    cdef _build_assumes(self):
        """Checks that every assume reads only symbols and scalar parameters; notes the scalar arguments they read
        (symbols, bound scalars included, come from the symbol table)."""
        cdef str k = self.kernel_name
        positions = {name: a for a, name in enumerate(self.arg_names)}
        scalars = {p.name: i for i, p in enumerate(self.params) if p.kind == "scalar"}
        read = {}
        for n, assume in enumerate(self.assumes):
            if not isinstance(assume, HostAssume):
                raise TypeError(f"kernel '{k}': assumes[{n}] must be a HostAssume; got {type(assume).__name__}")
            for s in assume.symbols:
                if s in self._symbol_names:
                    continue
                if s not in scalars:
                    raise ValueError(f"kernel '{k}': the assume `{assume.text}` reads {s}, which is neither a "
                                     "scalar parameter nor a symbol of the tensors' dims or strides")
                read[s] = (positions[s], scalars[s])
        self._assume_args = tuple(read.values())
        self._assume_checks = compile_checks(self.assumes)

    cdef _open(self):
        cdef str k = self.kernel_name
        if not os.path.isfile(self.lib_path):
            raise FileNotFoundError(f"kernel '{k}': library {self.lib_path} does not exist")
        path = os.fsencode(self.lib_path)
        self._handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)
        if self._handle == NULL:
            raise OSError(f"kernel '{k}': cannot load {self.lib_path}: {_dlerror_text()}")
        self._call = <CallPacked>self._symbol(b"call_packed", "int call_packed(void** args, int num_args, void* stream)")
        self._last_error = <GetLastError>self._symbol(b"get_last_error", "const char* get_last_error(void)")
        self._register_poisoned = NULL
        self._poisoned_unwritten = NULL
        if not self._musa:
            self._register_poisoned = <RegisterPoisoned>dlsym(self._handle, b"tl_sim_register_poisoned")
            self._poisoned_unwritten = <PoisonedUnwritten>dlsym(self._handle, b"tl_sim_poisoned_unwritten")
            dlerror()
            if self._poisoned_unwritten == NULL:
                self._register_poisoned = NULL

    cdef void* _symbol(self, bytes name, str signature) except NULL:
        cdef void* sym
        dlerror()  # clear a stale error so the one below is ours
        sym = dlsym(self._handle, name)
        if sym == NULL:
            raise OSError(f"kernel '{self.kernel_name}': {self.lib_path} does not export `{signature}` "
                          f"with C linkage ({_dlerror_text()})")
        return sym

    # ---- calling -----------------------------------------------------------------------------------------

    def __call__(self, *args):
        cdef CallState st
        cdef void* stream = NULL
        cdef int rc = 0
        cdef void* mem = self._new_state(&st)
        try:
            self._check_count(args)
            pending = []
            device = self._check_inputs(args, &st, pending)
            if pending:
                self._solve_and_check(&st, pending)
            if self.assumes:
                self._check_assumes(args, &st)
            ctx = None
            if self._musa:
                raw_stream, current_device, device_ctx = _musa_runtime()
                current = current_device()
                if device is None:
                    device = torch.device("musa", current)
                stream = <void*><uintptr_t>raw_stream(device.index)
                if device.index != current:
                    ctx = device_ctx(device.index)
            else:
                device = _CPU
            workspaces = []
            fresh = []
            outputs = self._fill_derived(&st, device, workspaces, fresh)
            carried = None
            if self._register_poisoned != NULL and carried_poison.any_records():
                carried = self._carry_inputs(args, &st)
            if ctx is None:
                rc = self._launch(&st, stream)
            else:
                with ctx:
                    rc = self._launch(&st, stream)
            if st.num_poisoned > 0 and self._register_poisoned != NULL:
                try:
                    self._read_back_unwritten(&st, rc, fresh, carried)
                finally:
                    self._register_poisoned(NULL, NULL, NULL, NULL, 0)
            if rc != 0:
                raise KernelLaunchError(f"kernel '{self.kernel_name}' failed (call_packed returned {rc}): "
                                        f"{self._last_error_text()}")
        finally:
            free(mem)
        if self._num_outputs == 0:
            return None
        if not self._musa:  # the simulator poisoned them: a hint when one comes back all poison
            hint_if_poison(self.kernel_name, [p.name for p in self.params if p.is_output], outputs)
        if self._num_outputs == 1:
            return outputs[0]
        return list(outputs)  # as upstream's adapters return several outputs

    def bind_shapes(self, *args):
        """The value of every symbol (symbolic dim or stride) the arguments determine, checking them as a call would."""
        cdef CallState st
        cdef void* mem = self._new_state(&st)
        try:
            self._check_count(args)
            pending = []
            self._check_inputs(args, &st, pending)
            if pending:
                self._solve_and_check(&st, pending)
            if self.assumes:
                self._check_assumes(args, &st)
            return {name: st.sym_values[j] for j, name in enumerate(self._symbol_names) if st.sym_param[j] >= 0}
        finally:
            free(mem)

    cdef int _launch(self, CallState* st, void* stream) noexcept:
        """Registers the poisoned ranges (the caller clears them after reading them back) and runs the kernel."""
        cdef CallPacked fn = self._call
        cdef int n = self._num_params
        cdef int rc
        cdef RegisterPoisoned reg = self._register_poisoned if st.num_poisoned > 0 else NULL
        with nogil:
            if reg != NULL:
                reg(st.poisoned, st.poisoned_bytes, st.unwritten, st.origins, st.num_poisoned)
            rc = fn(st.argv, n, stream)
        return rc

    cdef list _carry_inputs(self, tuple args, CallState* st):
        """Registers each input whose storage an earlier checked call returned with poison it left unwritten
        (carried_poison.py), once per storage; returns [(range index, storage address, tensor, record)]."""
        cdef int i
        cdef int a = 0
        cdef int k
        carried = []
        seen = set()
        for i in range(self._num_params):
            kind = self._info[i].kind
            if kind == TENSOR_IN:
                t = args[a]
                if isinstance(t, _Tensor):
                    found = carried_poison.lookup(t)
                    if found is not None and found[0] not in seen:
                        address, record = found
                        seen.add(address)
                        k = st.num_poisoned
                        st.poisoned[k] = <void*><uintptr_t>address
                        st.poisoned_bytes[k] = record.nbytes
                        st.unwritten[k] = <const unsigned char*><uintptr_t>record.unwritten.data_ptr()
                        st.origins[k] = <const char*>record.origin
                        st.num_poisoned += 1
                        carried.append((k, address, t, record))
            if kind == TENSOR_IN or kind == POINTER_ARG or kind == SCALAR_ARG:
                a += 1
        return carried

    cdef int _read_back_unwritten(self, CallState* st, int rc, list fresh, object carried) except -1:
        """After the call, before the ranges are cleared: remembers each output the call left poison unwritten in
        (a successful call's: a failed one returns none), and updates (or drops) the records of the carried inputs
        (carried_poison.py)."""
        cdef int64_t count
        cdef int k
        if rc == 0:
            for k, out, name in fresh:
                count = self._poisoned_unwritten(k, NULL)
                if count < 0:
                    break  # the call ran unchecked: nothing is known
                if count > 0:
                    unwritten = torch.empty(st.poisoned_bytes[k], dtype=torch.uint8)
                    self._poisoned_unwritten(k, <unsigned char*><uintptr_t>unwritten.data_ptr())
                    carried_poison.remember(out, unwritten, self.kernel_name, name)
        if carried:
            for k, address, t, record in carried:
                count = self._poisoned_unwritten(k, NULL)  # a failed call's writes until then are known too
                unwritten = None
                if count > 0:
                    unwritten = torch.empty(st.poisoned_bytes[k], dtype=torch.uint8)
                    self._poisoned_unwritten(k, <unsigned char*><uintptr_t>unwritten.data_ptr())
                carried_poison.update(address, t, unwritten)
        return 0

    cdef void* _new_state(self, CallState* st) except NULL:
        cdef int P = self._num_params
        cdef int S = self._num_symbols
        cdef int i
        cdef size_t size = P * (sizeof(Slot) + 4 * sizeof(void*) + sizeof(uint64_t)) + \
            S * (sizeof(int64_t) + 2 * sizeof(int))
        cdef char* mem
        if self._handle == NULL:
            raise RuntimeError("Launcher is not initialised (its __init__ failed or was never called)")
        mem = <char*>malloc(size if size > 0 else 1)
        if mem == NULL:
            raise MemoryError()
        st.slots = <Slot*>mem
        st.argv = <void**>(mem + P * sizeof(Slot))
        st.sym_values = <int64_t*>(mem + P * (sizeof(Slot) + sizeof(void*)))
        st.sym_param = <int*>(mem + P * (sizeof(Slot) + sizeof(void*)) + S * sizeof(int64_t))
        st.sym_where = st.sym_param + S
        st.poisoned = <void**>(st.sym_where + S)
        st.poisoned_bytes = <uint64_t*>(st.poisoned + P)
        st.unwritten = <const unsigned char**>(st.poisoned_bytes + P)
        st.origins = <const char**>(st.unwritten + P)
        st.num_poisoned = 0
        for i in range(P):
            st.argv[i] = &st.slots[i]
        for i in range(S):
            st.sym_param[i] = -1
        return mem

    cdef _check_count(self, tuple args):
        if len(args) == len(self.arg_names):
            return
        outputs = [p.name for p in self.params if p.is_output]
        notes = ""
        if outputs:
            notes += f"; {', '.join(outputs)} {'is an output' if len(outputs) == 1 else 'are outputs'} " \
                     "allocated and returned by the launcher"
        if self.scalar_bindings:
            notes += f"; {', '.join(self.scalar_bindings)} taken from the tensor shapes"
        raise TypeError(f"kernel '{self.kernel_name}' takes {len(self.arg_names)} argument(s) "
                        f"({', '.join(self.arg_names)}), got {len(args)}{notes}")

    cdef object _check_inputs(self, tuple args, CallState* st, list pending):
        """Checks and packs the caller's arguments; returns the tensors' MUSA device (None on cpu or if none).
        Expression dims are left in `pending` as (expr code, actual value, parameter, where) for _solve_and_check."""
        cdef int i
        cdef int a = 0
        cdef ParamInfo* p
        device = None
        for i in range(self._num_params):
            p = &self._info[i]
            if p.kind == TENSOR_IN:
                if args[a] is None and p.unused:  # a tensor the kernel never touches may be left out
                    st.slots[i].ptr = NULL
                else:
                    device = self._check_tensor(i, args[a], st, device, pending)
                a += 1
            elif p.kind == POINTER_ARG:
                device = self._pack_pointer(i, args[a], &st.slots[i], device)
                a += 1
            elif p.kind == SCALAR_ARG:
                value = self._pack_scalar(i, args[a], &st.slots[i])
                if p.symbol >= 0:
                    if value > _INT64_MAX:
                        raise ValueError(f"kernel '{self.kernel_name}': scalar {self.params[i].name} = {value} "
                                         "is too large for a tensor size")
                    self._bind(st, p.symbol, value, i, -1)
                a += 1
        return device

    cdef object _pack_pointer(self, int i, object v, Slot* slot, object device):
        """A `T.ptr` argument: a tensor's data pointer (its device checked as a tensor parameter's) or an int
        address; returns the MUSA device, as _check_tensor does."""
        cdef str name = self.params[i].name
        if isinstance(v, _Tensor):
            if self._musa:
                if v.device.type != "musa":
                    raise ValueError(f"kernel '{self.kernel_name}': the musa backend runs on MUSA tensors; got a "
                                     f"{v.device.type} tensor for {name} (move it with .to('musa'))")
                if device is None:
                    device = v.device
                elif v.device != device:
                    raise ValueError(f"kernel '{self.kernel_name}': {name} is on {v.device} but the tensors before "
                                     f"it are on {device}; all tensors must share one device")
            elif not v.is_cpu:
                raise ValueError(f"kernel '{self.kernel_name}': the simulator backend runs on CPU tensors; got a "
                                 f"{v.device.type} tensor for {name}")
            address = v.data_ptr()
        else:
            address = None
            if not isinstance(v, (bool, numpy.bool_)):
                try:
                    address = operator.index(v)
                except TypeError:
                    pass
            if address is None:
                raise TypeError(f"kernel '{self.kernel_name}': pointer parameter {self.params[i].describe()} expects "
                                f"a torch.Tensor (its data pointer) or an int address; got {type(v).__name__}")
        if address == 0:
            raise ValueError(f"kernel '{self.kernel_name}': pointer parameter {name} is null (address 0"
                             f"{', an empty tensor' if isinstance(v, _Tensor) else ''})")
        if not 0 < address < 2**64:
            raise ValueError(f"kernel '{self.kernel_name}': pointer parameter {name} = {address} is not an address "
                             "(0 < address < 2**64)")
        slot.ptr = <void*><uintptr_t>address
        return device

    cdef object _check_tensor(self, int i, object t, CallState* st, object device, list pending):
        cdef ParamInfo* p = &self._info[i]
        cdef int d
        cdef int64_t want
        cdef int64_t actual
        cdef int64_t S = self._num_symbols
        cdef uintptr_t ptr
        if not isinstance(t, _Tensor):
            raise TypeError(f"kernel '{self.kernel_name}': {self.params[i].describe()} expects a torch.Tensor; "
                            f"got {type(t).__name__}")
        if t.dtype is not self._dtypes[i] and t.dtype not in self._accepted[i]:
            if p.pack > 1:
                raise TypeError(f"kernel '{self.kernel_name}': {self.params[i].name} expects dtype "
                                f"{self.params[i].dtype}, passed as bytes holding {p.pack} values each "
                                f"({' or '.join(str(x) for x in self._accepted[i])}); got {t.dtype}")
            raise TypeError(f"kernel '{self.kernel_name}': {self.params[i].name} expects dtype "
                            f"{self.params[i].dtype} ({self._dtypes[i]}); got {t.dtype}")
        if self._musa:
            dev = t.device
            if dev.type != "musa":
                raise ValueError(f"kernel '{self.kernel_name}': the musa backend runs on MUSA tensors; got a "
                                 f"{dev.type} tensor for {self.params[i].name} (move it with .to('musa'))")
            if device is None:
                device = dev
            elif dev != device:
                raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} is on {dev} but the "
                                 f"tensors before it are on {device}; all tensors must share one device")
        elif not t.is_cpu:
            raise ValueError(f"kernel '{self.kernel_name}': the simulator backend runs on CPU tensors; got a "
                             f"{t.device.type} tensor for {self.params[i].name}")
        shape = t.shape
        if len(shape) != p.ndim:
            raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].describe()} expects {p.ndim} dims; "
                             f"got {len(shape)} (shape {tuple(shape)})")
        for d in range(p.ndim):
            want = self._dims[p.dims_at + d]
            actual = shape[d] * p.pack if d == p.ndim - 1 else shape[d]
            if want >= 0:
                if actual != want:
                    raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} dim {d} must be "
                                     f"{want}; got {self._shown(i, d, actual)} (shape {tuple(shape)})")
            elif want >= -S:
                self._bind(st, -want - 1, actual, i, d)
            else:
                pending.append((want, actual, i, d))
        if p.strides_at < 0:
            if not t.is_contiguous():
                raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} must be contiguous "
                                 f"(row-major); got strides {t.stride()} for shape {tuple(shape)}; "
                                 "pass .contiguous()")
        else:
            strides = t.stride()
            if p.pack > 1 and p.ndim and strides[p.ndim - 1] != 1 and shape[p.ndim - 1] > 1:
                raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} holds {p.pack} "
                                 f"{self.params[i].dtype} values a byte along its last dim, whose stride must be 1; "
                                 f"got strides {strides}")
            for d in range(p.ndim):
                want = self._dims[p.strides_at + d]
                # Packed dtypes: a byte stride steps over `pack` logical elements (the last dim's stays 1).
                actual = strides[d] * p.pack if d < p.ndim - 1 else strides[d]
                if want >= 0:
                    # A size-1 dim is never stepped over, so its stride is irrelevant (torch leaves it arbitrary).
                    if actual != want and shape[d] != 1:
                        raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} stride of dim "
                                         f"{d} must be {want}; got {actual} (strides {strides}"
                                         f"{'' if p.pack == 1 else ' in bytes'})")
                elif want >= -S:
                    self._bind(st, -want - 1, actual, i, -d - 2)
                else:
                    pending.append((want, actual, i, -d - 2))
        ptr = <uintptr_t>t.data_ptr()
        if p.align > 1 and ptr % p.align:
            raise ValueError(f"kernel '{self.kernel_name}': {self.params[i].name} is read or written {p.align} bytes "
                             f"at a time, but its data starts {ptr % p.align} bytes past a {p.align}-byte boundary "
                             "(a view at an offset into another tensor?); pass .clone() of it")
        st.slots[i].ptr = <void*>ptr
        return device

    cdef str _shown(self, int i, int d, int64_t value):
        """A logical dim value as an error shows it: a packed last dim also in bytes."""
        cdef ParamInfo* p = &self._info[i]
        if p.pack > 1 and d == p.ndim - 1:
            return f"{value} ({value // p.pack} bytes of {p.pack} {self.params[i].dtype} values)"
        return str(value)

    cdef dict _symbol_values(self, CallState* st):
        return {name: st.sym_values[j] for j, name in enumerate(self._symbol_names) if st.sym_param[j] >= 0}

    cdef int _solve_and_check(self, CallState* st, list pending) except -1:
        """Binds the symbols only expression dims determine (each solved from a dim linear in it once its other
        symbols are known), then checks every expression dim against the tensor."""
        cdef str k = self.kernel_name
        S = self._num_symbols
        values = self._symbol_values(st)
        solved_from = {}
        progress = True
        while progress:
            progress = False
            for n, (code, actual, i, where) in enumerate(pending):
                expr = self._exprs[-code - 1 - S]
                found = solve_dim(expr, actual, values)
                if found is None:
                    continue
                symbol, value = found
                if value < 0:
                    raise ValueError(f"kernel '{k}': {self._source(i, where)} = {actual} would make {symbol} = "
                                     f"{value} in `{expr}`; sizes cannot be negative")
                values[symbol] = value
                solved_from[symbol] = n
                self._bind(st, self._symbol_names.index(symbol), value, i, where)
                progress = True
        for n, (code, actual, i, where) in enumerate(pending):
            expr = self._exprs[-code - 1 - S]
            missing = [s for s in expr.symbols if s not in values]
            if missing:
                raise UnboundSizeError(f"kernel '{k}': {self._source(i, where)} is `{expr}`, but nothing "
                                       f"determines {', '.join(missing)} (a tensor left out as None?)")
            want = expr.evaluate(values)
            if want == actual:
                continue
            shown = self._shown(i, where, actual) if where >= 0 else str(actual)
            own = [s for s in expr.symbols if solved_from.get(s) == n]
            if own:
                raise ValueError(f"kernel '{k}': {self._source(i, where)} is {shown}, which `{expr}` equals for no "
                                 f"integer {own[0]}")
            known = ", ".join(f"{s} = {values[s]}" for s in expr.symbols)
            raise ValueError(f"kernel '{k}': {self._source(i, where)} must be `{expr}` = {want} ({known}); "
                             f"got {shown}")
        return 0

    cdef int _check_assumes(self, tuple args, CallState* st) except -1:
        """Raises AssumeViolation if the bound symbols and the scalar arguments break one of the assumes."""
        values = self._symbol_values(st)
        for a, i in self._assume_args:
            code = self._info[i].scalar
            v = args[a]  # _pack_scalar has checked its type and range
            values[self.params[i].name] = (bool(v) if code == S_BOOL else operator.index(v)
                                           if _INT_BOUNDS[code] is not None else float(v))
        check_assumes(self.kernel_name, self.assumes, self._assume_checks, values)
        return 0

    cdef int _bind(self, CallState* st, int sym, int64_t value, int param, int where) except -1:
        if st.sym_param[sym] < 0:
            st.sym_values[sym] = value
            st.sym_param[sym] = param
            st.sym_where[sym] = where
        elif st.sym_values[sym] != value:
            first = self._source(st.sym_param[sym], st.sym_where[sym])
            raise ValueError(f"kernel '{self.kernel_name}': symbol {self._symbol_names[sym]} is "
                             f"{st.sym_values[sym]} from {first} but {value} from {self._source(param, where)}")
        return 0

    cdef str _source(self, int param, int where):
        name = self.params[param].name
        if where >= 0:
            return f"{name}.shape[{where}]"
        if where == -1:
            return f"the scalar argument {name}"
        return f"{name}.stride({-where - 2})"

    cdef object _pack_scalar(self, int i, object v, Slot* slot):
        """Stores `v` as parameter i's C type after checking its type and range; returns the Python value."""
        cdef int code = self._info[i].scalar
        if code == S_BOOL:
            if not (v is True or v is False or isinstance(v, numpy.bool_)):
                raise self._scalar_type_error(i, v, "a bool")
            slot.b = bool(v)
            return v
        bounds = _INT_BOUNDS[code]
        if bounds is not None:
            if type(v) is not int:
                if isinstance(v, (bool, numpy.bool_)):
                    raise self._scalar_type_error(i, v, "an int")
                try:
                    v = operator.index(v)
                except TypeError:
                    raise self._scalar_type_error(i, v, "an int") from None
            if not bounds[0] <= v <= bounds[1]:
                raise ValueError(f"kernel '{self.kernel_name}': scalar {self.params[i].name} = {v} is out of "
                                 f"range for {self.params[i].dtype} [{bounds[0]}, {bounds[1]}]")
            if code == S_I8:
                slot.i8 = v
            elif code == S_I16:
                slot.i16 = v
            elif code == S_I32:
                slot.i32 = v
            elif code == S_I64:
                slot.i64 = v
            elif code == S_U8:
                slot.u8 = v
            elif code == S_U16:
                slot.u16 = v
            elif code == S_U32:
                slot.u32 = v
            else:
                slot.u64 = v
            return v
        if type(v) is not float:
            if isinstance(v, (bool, numpy.bool_)) or not isinstance(v, numbers.Real):
                raise self._scalar_type_error(i, v, "a real number")
            v = float(v)
        if code == S_F64:
            slot.f64 = v
        elif code == S_F32:
            if abs(v) >= _F32_OVERFLOW and math.isfinite(v):
                raise self._scalar_range_error(i, v)
            slot.f32 = v
        else:
            # Rare in kernels: let torch round (its float -> half/bfloat16 conversion is the reference one).
            half = torch.tensor(v, dtype=torch.float16 if code == S_F16 else torch.bfloat16)
            if math.isinf(half.item()) and math.isfinite(v):
                raise self._scalar_range_error(i, v)
            slot.u16 = half.view(torch.int16).item() & 0xFFFF
        return v

    cdef object _scalar_type_error(self, int i, object v, str expected):
        return TypeError(f"kernel '{self.kernel_name}': scalar {self.params[i].name} ({self.params[i].dtype}) "
                         f"expects {expected}; got {type(v).__name__} {v!r}")

    cdef object _scalar_range_error(self, int i, double v):
        return ValueError(f"kernel '{self.kernel_name}': scalar {self.params[i].name} = {v!r} overflows "
                          f"{self.params[i].dtype}")

    cdef list _fill_derived(self, CallState* st, object device, list workspaces, list fresh):
        """Packs the bound scalars and allocates the outputs (returned) and the workspaces (kept in `workspaces`
        for the launch), once every input has bound its symbols. On the simulator, each output's poisoned range
        is noted in `fresh` as (range index, tensor, name)."""
        cdef int i
        cdef ParamInfo* p
        outputs = []
        for i in range(self._num_params):
            p = &self._info[i]
            if p.kind == SCALAR_BOUND:
                if st.sym_param[p.symbol] >= 0:
                    self._pack_scalar(i, st.sym_values[p.symbol], &st.slots[i])
                elif p.unused or _zero_when_absent(self._symbol_sources[p.symbol]):
                    # Only tensors left out as None determine it, and the kernel never reads it; or one dim of
                    # one tensor gives it, and that tensor is left out: 0, the size of what was not passed, as
                    # upstream binds it (None is accepted only for a tensor the kernel never accesses).
                    self._pack_scalar(i, 0, &st.slots[i])
                else:
                    carriers = ", ".join(dict.fromkeys(name for name, _ in self._symbol_sources[p.symbol]))
                    raise UnboundSizeError(f"kernel '{self.kernel_name}': nothing determines the size "
                                           f"{self.params[i].name}, which the kernel reads: it requires at least "
                                           f"one non-null buffer among: {carriers} (each was left out as None)")
            elif p.kind == TENSOR_OUT or p.kind == TENSOR_WORKSPACE:
                shape = self._static_shapes[i]
                if shape is None:
                    shape = self._storage(i, self._allocated_dims(st, i), "dim")
                if p.strides_at < 0:
                    out = torch.empty(shape, dtype=self._dtypes[i], device=device)
                else:
                    strides = self._storage(i, [self._resolve(st, p.strides_at + d) for d in range(p.ndim)],
                                            "stride")
                    out = torch.empty_strided(shape, strides, dtype=self._dtypes[i], device=device)
                st.slots[i].ptr = <void*><uintptr_t>out.data_ptr()
                if p.zeroed:  # inter-block flags count from zero at every launch
                    out.zero_()
                elif not self._musa:  # undefined contents, made visible: NaN for floats, -1 for integers
                    storage = out.untyped_storage()
                    # memset, not storage.fill_: torch's fill of a large tensor wakes its OpenMP team, whose
                    # threads then spin for a while on the cores the simulator's workers are about to use
                    memset(<void*><uintptr_t>storage.data_ptr(), 0xFF, storage.nbytes())
                    st.poisoned[st.num_poisoned] = <void*><uintptr_t>storage.data_ptr()
                    st.poisoned_bytes[st.num_poisoned] = storage.nbytes()
                    st.unwritten[st.num_poisoned] = NULL
                    st.origins[st.num_poisoned] = NULL
                    if p.kind == TENSOR_OUT:
                        fresh.append((st.num_poisoned, out, self.params[i].name))
                    st.num_poisoned += 1
                if p.kind == TENSOR_OUT:
                    outputs.append(out)
                else:
                    workspaces.append(out)
        return outputs

    cdef list _allocated_dims(self, CallState* st, int i):
        """An output's or workspace's logical dims for this call; a ValueError naming the dim, its expression and
        the sizes it read when one is negative (a scalar argument such as `n = -3` sizing `n * 2`)."""
        cdef ParamInfo* p = &self._info[i]
        dims = [self._resolve(st, p.dims_at + d) for d in range(p.ndim)]
        for d, v in enumerate(dims):
            if v < 0:
                spec = self.params[i]
                dim = spec.shape[d]
                symbols = (dim,) if isinstance(dim, str) else dim.symbols
                values = ", ".join(f"{s} = {self._symbol_values(st)[s]}" for s in symbols)
                raise ValueError(f"kernel '{self.kernel_name}': {spec.describe()} would have dim {d} = `{dim}` "
                                 f"= {v} ({values}); sizes cannot be negative")
        return dims

    cdef tuple _storage(self, int i, list logical, str what):
        """An output's logical dims (what="dim") or strides (what="stride") as its byte tensor's, for packed
        dtypes: the last dim and the other strides count `pack` values a byte; the last stride stays 1."""
        cdef ParamInfo* p = &self._info[i]
        if p.pack == 1:
            return tuple(logical)
        out = []
        for d, v in enumerate(logical):
            last = d == p.ndim - 1
            if what == "stride" and last:
                if v != 1:
                    raise ValueError(f"kernel '{self.kernel_name}': output {self.params[i].describe()} packs "
                                     f"{p.pack} values a byte along its last dim, whose stride must be 1; got {v}")
                out.append(1)
            elif (what == "dim") != last:
                out.append(v)
            elif v % p.pack:
                raise ValueError(f"kernel '{self.kernel_name}': output {self.params[i].describe()} packs {p.pack} "
                                 f"values a byte; its {what} {d} ({v}) is not a multiple of {p.pack}")
            else:
                out.append(v // p.pack)
        return tuple(out)

    cdef int64_t _resolve(self, CallState* st, int at) except? -1:
        cdef int64_t code = self._dims[at]
        if code >= 0:
            return code
        if code < -self._num_symbols:
            return self._exprs[-code - 1 - self._num_symbols].evaluate(self._symbol_values(st))
        # Construction guarantees inputs bind every symbol an output uses; keep the check against regressions.
        if st.sym_param[-code - 1] < 0:
            raise RuntimeError(f"kernel '{self.kernel_name}': symbol {self._symbol_names[-code - 1]} is unbound")
        return st.sym_values[-code - 1]

    cdef str _last_error_text(self):
        cdef const char* text = self._last_error()
        if text == NULL or text[0] == 0:
            return "(the library reported no message)"
        return text.decode("utf-8", "replace")

    # ---- Python conveniences -----------------------------------------------------------------------------

    def __reduce__(self):
        # Rebuilt from its spec (reopening the library); through a module-level function because the class's
        # compiled-in name depends on how the build invoked cython, while a function's __module__ is the real one.
        return (_rebuild_launcher, (self.lib_path, self.params, self.device, self.kernel_name, self.scalar_bindings,
                                    self.assumes))

    def __repr__(self):
        params = ", ".join([p.describe() for p in self.params])
        return f"Launcher({self.kernel_name}({params}), device={self.device!r}, lib={self.lib_path!r})"


def _dim_code(d, dict symbols, list exprs):
    """A dim's entry in Launcher._dims: itself when static, -1 - s for symbol s, -1 - S - e for expression e (which
    is appended to `exprs`)."""
    if isinstance(d, int):
        return d
    if isinstance(d, str):
        return -symbols[d] - 1
    exprs.append(d)
    return -len(symbols) - len(exprs)


def _symbol_sources(tuple params, dict symbols):
    """Per symbol, (tensor name, plain dim?) for each dim or stride of an input tensor that names it (alone or in
    an expression)."""
    sources = [[] for _ in symbols]
    for p in params:
        if p.kind != "tensor" or p.is_output or p.is_workspace:
            continue
        for d in p.shape:
            for s in ((d,) if isinstance(d, str) else () if isinstance(d, int) else d.symbols):
                sources[symbols[s]].append((p.name, isinstance(d, str)))
        for d in p.strides or ():
            for s in ((d,) if isinstance(d, str) else () if isinstance(d, int) else d.symbols):
                sources[symbols[s]].append((p.name, False))
    return tuple(tuple(found) for found in sources)


cdef bint _zero_when_absent(tuple sources):
    """A size exactly one dim of one tensor gives (no stride, no expression, no other tensor): upstream's binder
    makes it 0 when that tensor is left out as None. Given by several, all left out, it is an error there."""
    return len(sources) == 1 and sources[0][1]


def _rebuild_launcher(lib_path, params, device, kernel_name, scalar_bindings, assumes=()):
    return Launcher(lib_path, params, device, kernel_name, scalar_bindings, assumes)


_rebuild_launcher.__module__ = __name__  # the name this module was imported under, which pickle resolves


cdef str _dlerror_text():
    cdef const char* err = dlerror()
    return "unknown dlopen error" if err == NULL else err.decode("utf-8", "replace")
