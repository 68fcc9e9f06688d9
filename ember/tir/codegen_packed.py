"""The C translation unit: prelude, helpers, unpacked functions and their packed wrappers.

The packed wrapper ``<name>`` checks every argument (count, type code, device, ndim, dtype,
shape with symbolic dimensions bound consistently, compactness, natural alignment of the data
pointer) and reports the first mismatch through ``TVMPackedFuncSetLastError`` as
``<name>: argument <i> (<buffer>): expected ..., got ...`` before returning -1.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .codegen_c import C_TYPE, STACK_LIMIT, STORAGE_TYPE, FunctionWriter
from .expr import Call, IntImm, PrimExpr, StringImm, Var
from .functor import post_order
from .op import bits, is_float
from .simplify import simplify
from .stmt import Allocate, Buffer, BufferStore, PrimFunc

_DL_CODE = {"int": 0, "uint": 1, "float": 2, "bool": 6}
_INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "include")


def dl_type(dtype: str) -> tuple[int, int]:
    """(DLDataTypeCode, bits) of a dtype string."""
    if dtype == "bool":
        return 6, 8
    for prefix in ("uint", "int", "float"):
        if dtype.startswith(prefix):
            return _DL_CODE[prefix], bits(dtype)
    raise ValueError(f"codegen: no DLPack type for dtype {dtype!r}")


def signature_vars(func: PrimFunc) -> list[Var]:
    """Symbolic dimensions that are not parameters, in order of first appearance."""
    params = {id(p) for p in func.params}
    out: list[Var] = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        for dim in (buf.shape if buf else ()):
            for v in post_order(dim):
                if isinstance(v, Var) and id(v) not in params and all(v is not o for o in out):
                    out.append(v)
    return out


def emit_allocate(w: FunctionWriter, s: Allocate, ind: int) -> list[Any]:
    """Declare ``s``'s buffer (on the stack, or from the workspace when large or dynamic);
    returns the body and the freeing of a workspace block, for ``FunctionWriter.stmt``."""
    buf = s.buffer
    n = simplify(_numel(buf))
    ctype = STORAGE_TYPE[buf.dtype]
    name = w.bind(buf.data, buf.name, f"{ctype}*")
    itemsize = max(1, bits(buf.dtype) // 8)
    if isinstance(n, IntImm) and (n.value * itemsize <= STACK_LIMIT or w.in_parallel):
        w.emit(f"{ctype} {name}[{max(n.value, 1)}] __attribute__((aligned(64)));", ind)
        return [(s.body, ind)]
    if id(s) in w.scratch:  # USMP: planned at build time, in the block the caller passes
        w.emit(f"{ctype}* {name} = ({ctype}*)({w.scratch_base} + {w.scratch[id(s)]});", ind)
        return [(s.body, ind)]
    code, nbits = dl_type(buf.dtype)
    w.emit(f"{ctype}* {name} = ({ctype}*)TVMBackendAllocWorkspace(1, 0, (uint64_t)({w.expr(n)}) "
           f"* sizeof({ctype}), {code}, {nbits});", ind)
    w.fail_return(f"{name} == NULL",
                  f'ember_fail("{w.func.name}: cannot allocate the workspace {buf.name}")', ind)
    w.workspaces.append(name)

    def free() -> None:
        w.workspaces.pop()
        w.fail_return(f"TVMBackendFreeWorkspace(1, 0, {name}) != 0", "-1", ind)

    return [(s.body, ind), free]


def _numel(buf: Buffer) -> PrimExpr:
    if buf.strides and buf.shape:  # padded rows (storage_align): outer stride times extent
        return buf.strides[0] * buf.shape[0]
    out: PrimExpr = IntImm("int32", 1)
    for d in buf.shape:
        out = out * d
    return out


def emit_call_packed(w: FunctionWriter, call: Call, ind: int) -> None:
    name = call.args[0].value if isinstance(call.args[0], StringImm) else str(call.args[0])
    args = call.args[1:]
    w.emit("{", ind)
    i1 = ind + 1
    n = len(args)
    w.emit(f"TVMValue cp_args[{max(n, 1)}];", i1)
    w.emit(f"int cp_codes[{max(n, 1)}];", i1)
    for i, a in enumerate(args):
        if isinstance(a, Buffer):
            shape = ", ".join(f"(int64_t)({w.expr(d)})" for d in a.shape) or "1"
            code, nbits = dl_type(a.dtype)
            w.emit(f"int64_t cp_shape{i}[] = {{{shape}}};", i1)
            w.emit(f"DLTensor cp_t{i} = {{(void*){w.name(a.data)}, {{kDLCPU, 0}}, {len(a.shape)}, "
                   f"{{{code}, {nbits}, 1}}, cp_shape{i}, NULL, 0}};", i1)
            w.emit(f"cp_args[{i}].v_handle = &cp_t{i}; cp_codes[{i}] = kTVMDLTensorHandle;", i1)
        elif isinstance(a, StringImm):
            w.emit(f"cp_args[{i}].v_str = {w.expr(a)}; cp_codes[{i}] = kTVMStr;", i1)
        elif is_float(a.dtype):
            w.emit(f"cp_args[{i}].v_float64 = (double)({w.expr(a)}); cp_codes[{i}] = kTVMArgFloat;",
                   i1)
        else:
            w.emit(f"cp_args[{i}].v_int64 = (int64_t)({w.expr(a)}); cp_codes[{i}] = kTVMArgInt;",
                   i1)
    w.emit("TVMFunctionHandle cp_func = NULL;", i1)
    w.fail_return(f'TVMBackendGetFuncFromEnv(__tvm_module_ctx, "{name}", &cp_func) != 0', "-1",
                  i1)
    w.emit("TVMValue cp_ret;", i1)
    w.emit("int cp_ret_code = kTVMNullptr;", i1)
    w.fail_return(f"TVMFuncCall(cp_func, cp_args, cp_codes, {n}, &cp_ret, &cp_ret_code) != 0",
                  "-1", i1)
    w.emit("}", ind)


def _written(body: Sequence[Any]) -> set[int]:
    # A buffer handed to a C function (tir.call_extern gets ``buf.data``) may be written by it.
    calls = [n for n in body if isinstance(n, Call)]
    return {id(n.buffer.data) for n in body if isinstance(n, BufferStore)} | {
        id(a.data) for n in calls for a in n.args if isinstance(a, Buffer)} | {
        id(a) for n in calls if n.op == "tir.call_extern" for a in n.args} | {
        id(n.args[0].buffer.data) for n in calls if n.op == "tir.address_of"}


def unpacked_function(func: PrimFunc, helpers: set[str], outline_parallel: bool = True,
                      scratch: dict[int, int] | None = None,
                      body: Sequence[Any] | None = None) -> tuple[str, list[str]]:
    """The C text of ``<name>_unpacked`` (after the task functions of its parallel loops) and
    its parameter names (for the wrapper). ``outline_parallel=False``: serial loops only.
    ``scratch`` (``kernel_scratch.scratch_layout``): those allocations become offsets in a
    last parameter ``uint8_t* ember_workspace``. ``body``: ``tuple(post_order(func.body))``
    if the caller has it (one walk serves all the questions about the body)."""
    body = tuple(post_order(func.body)) if body is None else body
    w = FunctionWriter(func, helpers)
    w.outline_parallel = outline_parallel
    written = _written(body)
    params, names = [], []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            nm = w.bind(p, p.name)
            params.append(f"{C_TYPE[p.dtype]} {nm}")
        else:
            const = "" if id(p) in written else "const "
            nm = w.bind(p, buf.name, f"{const}{STORAGE_TYPE[buf.dtype]}*")
            params.append(f"{const}{STORAGE_TYPE[buf.dtype]}* restrict {nm}")
        names.append(nm)
    for v in signature_vars(func):
        nm = w.bind(v, v.name)
        w.nonneg.add(id(v))
        params.append(f"{C_TYPE[v.dtype]} {nm}")
        names.append(nm)
    if scratch:
        w.scratch, w.scratch_base = scratch, w.fresh("ember_workspace")
        params.append(f"uint8_t* restrict {w.scratch_base}")
        names.append(w.scratch_base)
    fname = c_ident(func.name)
    unused = [names[k] for k in unused_params(func, body)]
    if unused:  # e.g. an extern kernel's operand it ignores (-Wunused-parameter)
        w.lines.append("  " + " ".join(f"(void){nm};" for nm in unused))
    w.stmt(func.body, 1)
    head = []
    if "from_relay" in func.attrs:
        # the Relay text has /* ty=... */ comments of its own: comments do not nest in C
        text = str(func.attrs["from_relay"]).replace("/*", "/ *").replace("*/", "* /")
        head.append(f"/* from: {text} */")
    if w.vmath_calls:  # its own loops or its task functions' call vmath.h
        head.append("EMBER_VMATH_WIDE")  # a line of its own: the AOT emitter reads the next
    head.append(f"TVM_DLL int32_t {fname}_unpacked({', '.join(params) or 'void'}) {{")
    text = "\n".join(head + w.lines + ["  return 0;", "}"])
    return "\n\n".join([*w.outlined, text]), names


def unused_params(func: PrimFunc, body: Sequence[Any] | None = None) -> tuple[int, ...]:
    """The positions of ``func``'s parameters its body never mentions (a kernel that takes
    a tensor only for its shape: its extents come in as arguments of their own). ``body``:
    the nodes of ``func.body``, if the caller has them."""
    used: set[int] = set()
    for n in post_order(func.body) if body is None else body:
        if isinstance(n, Var):
            used.add(id(n))
        buf = getattr(n, "buffer", None)
        if isinstance(buf, Buffer):
            used.add(id(buf.data))
    return tuple(k for k, p in enumerate(func.params) if id(p) not in used)


def c_ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"f_{out}"


def has_call_packed(func: PrimFunc, body: Sequence[Any] | None = None) -> bool:
    return any(isinstance(n, Call) and n.op == "tir.call_packed"
               for n in (post_order(func.body) if body is None else body))


def uses_workspace(func: PrimFunc) -> bool:
    return any(isinstance(n, Allocate) and not (
        isinstance(simplify(_numel(n.buffer)), IntImm)) for n in post_order(func.body)) or any(
        isinstance(n, Allocate) for n in post_order(func.body))


def backend_header_available() -> bool:
    return os.path.exists(os.path.join(_INCLUDE_DIR, "ember", "c_backend_api.h"))


def packed_wrapper(func: PrimFunc, unpacked_names: list[str], stdio: bool = True,
                   scratch_bytes: int = 0) -> str:
    """The C text of the packed entry ``<name>`` that checks arguments and calls the unpacked.

    With ``stdio=False`` every message is a constant string (no ``%d``): the prelude's
    ``ember_fail`` then does no formatting (see ``codegen.generate_c``). ``scratch_bytes`` > 0:
    one more argument, a uint8 tensor of at least that many bytes (the kernel's scratch)."""
    fname = c_ident(func.name)
    n_args = len(func.params) + (1 if scratch_bytes else 0)
    count = (f'"{fname}: expected {n_args} arguments, got %d", num_args' if stdio else
             f'"{fname}: wrong number of arguments (expected {n_args})"')
    lines = [(f"TVM_DLL int32_t {fname}(TVMValue* args, int* type_codes, int num_args, "
              "TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle) {"),
             "  (void)out_ret_value; (void)out_ret_tcode; (void)resource_handle;",
             f"  if (num_args != {n_args}) {{",
             f"    return ember_fail({count});", "  }"]
    sym = signature_vars(func)
    sym_names = {id(v): f"sym_{c_ident(v.name)}" for v in sym}
    lines += [f"  int64_t {sym_names[id(v)]} = -1;" for v in sym]
    call_args = []
    bound: set[int] = set()
    for i, p in enumerate(func.params):
        buf = func.buffer_map.get(p)
        label = f"{fname}: argument {i} ({buf.name if buf else p.name})"
        if buf is None:
            lines += _scalar_arg(i, p, label, stdio)
            call_args.append(f"arg{i}")
            continue
        lines += _tensor_checks(i, buf, label)
        call_args.append(f"({STORAGE_TYPE[buf.dtype]}*)((char*)t{i}->data + t{i}->byte_offset)")
        for d, dim in enumerate(buf.shape):
            if isinstance(dim, Var) and id(dim) in sym_names and id(dim) not in bound:
                bound.add(id(dim))
                lines.append(f"  {sym_names[id(dim)]} = t{i}->shape[{d}];")
    for i, p in enumerate(func.params):
        buf = func.buffer_map.get(p)
        if buf is not None:
            lines += _shape_check(i, buf, f"{fname}: argument {i} ({buf.name})", sym_names)
    call_args += [f"({C_TYPE[v.dtype]}){sym_names[id(v)]}" for v in sym]
    if scratch_bytes:
        k = len(func.params)
        label = f"{fname}: argument {k} (workspace)"
        lines += [f"  DLTensor* t{k} = NULL;",
                  (f'  if (ember_check_tensor("{label}", type_codes[{k}], args[{k}], 1, 1, 8, '
                   f'"uint8", 1, &t{k}) != 0) return -1;'),
                  f"  if (t{k}->shape[0] < {scratch_bytes}) {{",
                  f'    return ember_fail("{label}: expected at least {scratch_bytes} bytes");',
                  "  }"]
        call_args.append(f"(uint8_t*)t{k}->data + t{k}->byte_offset")
    lines.append(f"  return {fname}_unpacked({', '.join(call_args)});")
    lines.append("}")
    return "\n".join(lines)


def _scalar_arg(i: int, p: Var, label: str, stdio: bool = True) -> list[str]:
    def fail(what: str) -> str:
        if stdio:
            return f'    return ember_fail("{label}: expected {what}, got type code %d", ' \
                f"type_codes[{i}]);"
        return f'    return ember_fail("{label}: expected {what}");'

    if is_float(p.dtype):
        return [f"  if (type_codes[{i}] != kTVMArgFloat && type_codes[{i}] != kTVMArgInt) {{",
                fail("a float"), "  }",
                (f"  {C_TYPE[p.dtype]} arg{i} = type_codes[{i}] == kTVMArgFloat ? "
                 f"({C_TYPE[p.dtype]})args[{i}].v_float64 : "
                 f"({C_TYPE[p.dtype]})args[{i}].v_int64;")]
    return [f"  if (type_codes[{i}] != kTVMArgInt && type_codes[{i}] != kTVMArgUInt) {{",
            fail("an int"), "  }",
            f"  {C_TYPE[p.dtype]} arg{i} = ({C_TYPE[p.dtype]})args[{i}].v_int64;"]


def _tensor_checks(i: int, buf: Buffer, label: str) -> list[str]:
    code, nbits = dl_type(buf.dtype)
    align = max(1, bits(buf.dtype) // 8)
    return [f"  DLTensor* t{i} = NULL;",
            (f'  if (ember_check_tensor("{label}", type_codes[{i}], args[{i}], '
             f'{len(buf.shape)}, {code}, {nbits}, "{buf.dtype}", {align}, &t{i}) != 0) '
             "return -1;")]


def _shape_check(i: int, buf: Buffer, label: str, sym_names: dict[int, str]) -> list[str]:
    if not buf.shape:
        return []
    dims = ", ".join(f"(int64_t)({_dim_c(d, sym_names)})" for d in buf.shape)
    return [f"  {{ int64_t e[] = {{{dims}}};",
            f'    if (ember_check_shape("{label}", t{i}, e) != 0) return -1; }}']


def _dim_c(dim: PrimExpr, sym_names: dict[int, str]) -> str:
    from .codegen_c import render_int

    if isinstance(dim, IntImm):
        return render_int(dim.value, "int64")
    w = FunctionWriter(PrimFunc((), {}, None), set())  # type: ignore[arg-type]
    for v in post_order(dim):
        if isinstance(v, Var) and id(v) in sym_names:
            w.names[id(v)] = sym_names[id(v)]
            w.nonneg.add(id(v))
    return w.expr(dim)
