"""AOT codegen, step 2: ``run_model`` (loop IR) -> C, with the linked constants.

A small dedicated emitter rather than ``ember.tir``'s kernel printer: run_model is a sequence
of calls whose return codes must be checked, with pointers into the arena and the constants,
and none of the kernel printer's argument checking, loops or stdio. The statements it knows
are a table (``_CALLS``) from the call op of each Evaluate to a renderer:

- ``tir.call_unpacked``: ``rc = <op>_unpacked((float*)arg0, (float*)(workspace + 64), ...);``
- ``tir.call_cpacked``: DLTensors and TVMValues on the stack, ``rc = <op>(values, codes, n,
  &ret, &ret_code, NULL);``
- ``tir.call_packed``: the same arrays, the function found once by name
  (``TVMBackendGetFuncFromEnv``, handle kept in a static) and called with ``TVMFuncCall``;
- ``ember.aot.copy``: a byte copy into an output.

Every call is followed by ``if (rc != 0) return rc;``. Output is deterministic.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ....runtime.errors import InternalError
from ....tir.codegen_c import STORAGE_TYPE
from ....tir.codegen_packed import dl_type
from ....tir.expr import Call, IntImm, PrimExpr, StringImm
from ....tir.stmt import Buffer, Evaluate, SeqStmt, Stmt
from ..c_literals import rodata_array
from .calling_convention import AotOptions
from .codegen import COPY_OP, AotProgram, itemsize

MAX_CALLS_PER_FUNCTION = 256  # statements of run_model per C function (see RunModelWriter)
PACKED_SIGNATURE = ("TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, "
                    "int* out_ret_tcode, void* resource_handle")


def kernel_prototypes(program: AotProgram) -> list[str]:
    """Declarations of the kernels run_model calls (unpacked and packed), copied from their
    definitions so that this file also compiles on its own (Model Library Format)."""
    out = []
    for name, low in program.kernels.items():
        if getattr(low, "external_module", None) is not None:  # BYOC: its packed symbol only
            out.append(f"TVM_DLL int32_t {name}({PACKED_SIGNATURE});")
            continue
        m = re.search(rf"^TVM_DLL int32_t {re.escape(name)}_unpacked\((.*)\) \{{$",
                      low.c_source, re.MULTILINE)
        if m is None:
            raise InternalError(f"aot codegen: no definition of {name}_unpacked in the kernel C")
        out.append(f"TVM_DLL int32_t {name}_unpacked({m.group(1)});")
        out.append(f"TVM_DLL int32_t {name}({PACKED_SIGNATURE});")
    return out


def linked_constants(program: AotProgram, opts: AotOptions) -> list[str]:
    """``static const`` arrays in ``.rodata.tvm`` for the linked params (bytes in a string
    literal: exact, and far faster to compile than a list of numbers; +1 for its NUL)."""
    lines = constant_pool_arrays(program, opts)
    for c in program.constants:
        if c.pooled:
            continue
        data = c.value.numpy().tobytes()
        align = max(opts.constant_alignment, itemsize(c.value.dtype))
        shape = ", ".join(str(d) for d in c.value.shape)
        lines.append(f"/* {c.name}: {c.value.dtype}[{shape}] */")
        lines += rodata_array(c.var.name, data, align)
    return lines


def constant_pool_arrays(program: AotProgram, opts: AotOptions) -> list[str]:
    """One ``static const`` array per constant memory pool, its constants at their offsets."""
    lines = []
    for var in program.constant_pool_vars:
        members = [c for c in program.constants if c.var is var]
        data = np.zeros(max(c.offset + c.nbytes for c in members), np.uint8)
        for c in members:
            data[c.offset:c.offset + c.nbytes] = np.frombuffer(c.value.numpy().tobytes(),
                                                               np.uint8)
        align = max([opts.constant_alignment] + [itemsize(c.value.dtype) for c in members])
        lines.append(f"/* constant pool: {', '.join(c.name for c in members)} */")
        lines += rodata_array(var.name, data.tobytes(), align)
    return lines


def copy_helper(prefix: str) -> str:
    return (f"static void {prefix}_copy(void* dst, const void* src, uint64_t nbytes) {{\n"
            "  uint8_t* d = (uint8_t*)dst;\n  const uint8_t* s = (const uint8_t*)src;\n"
            "  uint64_t i;\n  for (i = 0; i < nbytes; ++i) d[i] = s[i];\n}")


class RunModelWriter:
    """Renders the body of run_model: one block per statement, return codes checked."""

    def __init__(self, program: AotProgram) -> None:
        self.program = program
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        func = program.run_model
        n_io = len(program.inputs) + len(program.outputs)
        by_name = {id(v) for v in program.pool_vars}  # USMP pools: named after the pool
        for i, p in enumerate(func.params):
            self.names[id(p)] = f"arg{i}" if i < n_io and id(p) not in by_name else p.name
        for c in program.constants:
            self.names.setdefault(id(c.var), c.var.name)

    def signature(self) -> str:
        params = []
        pools = {id(v) for v in self.program.pool_vars}
        for p in self.program.run_model.params:
            name = self.names[id(p)]
            if p is self.program.constant_pool:
                params.append(f"const uint8_t* {name}")
            elif p is self.program.workspace or id(p) in pools:
                params.append(f"uint8_t* {name}")
            else:
                params.append(f"void* {name}")
        return f"TVM_DLL int32_t {self.program.run_model.name}({', '.join(params) or 'void'})"

    def pointer(self, buf: Buffer) -> str:
        """``(T*)base`` or ``((T*)base + k)`` for a buffer over the memory of ``base``."""
        base = self.names.get(id(buf.data))
        if base is None:
            raise InternalError(f"aot codegen: buffer {buf.name} has an unknown base {buf.data}")
        ctype = STORAGE_TYPE[buf.dtype]
        k = buf.elem_offset.value if isinstance(buf.elem_offset, IntImm) else 0
        return f"(({ctype}*){base} + {k})" if k else f"({ctype}*){base}"

    def render(self) -> str:
        """run_model; past ``MAX_CALLS_PER_FUNCTION`` statements its body is split into
        static parts that it calls in turn (C compilers take superlinear time on one huge
        function, and a deep model has one statement per kernel call)."""
        body = self.program.run_model.body
        stmts = list(body.seq if isinstance(body, SeqStmt) else (body,))
        head = [self._header_comment(), self.signature() + " {"]
        if len(stmts) <= MAX_CALLS_PER_FUNCTION:
            return "\n".join(head + self._body(stmts, 0) + ["  return 0;", "}"])
        name = self.program.run_model.name
        args = ", ".join(self.names[id(p)] for p in self.program.run_model.params)
        params = self.signature().split("(", 1)[1]
        parts, calls = [], ["  int32_t rc;"]
        for k in range(0, len(stmts), MAX_CALLS_PER_FUNCTION):
            part = f"{name}_part{k // MAX_CALLS_PER_FUNCTION}"
            parts += [f"static int32_t {part}({params} {{",
                      *self._body(stmts[k:k + MAX_CALLS_PER_FUNCTION], k), "  return 0;", "}",
                      ""]
            calls += [f"  rc = {part}({args});", "  if (rc != 0) return rc;"]
        return "\n".join(parts + head + calls + ["  return 0;", "}"])

    def _body(self, stmts: list[Stmt], first: int) -> list[str]:
        """The lines of ``stmts`` (statement ``first`` onwards), each after its note."""
        notes = self.program.notes
        out = []
        if any(isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op != COPY_OP
               for s in stmts):
            out.append("  int32_t rc;")
        for k, s in enumerate(stmts, first):
            if k < len(notes):
                out.append(f"  /* {notes[k].replace('*/', '* /')} */")
            self.lines = []
            self._stmt(s)
            out += self.lines
        return out

    def _header_comment(self) -> str:
        p = self.program
        where = "arena" if p.pool_plan is None else "workspace pools"
        sig = [f"arg{i}: {q.tir_name_hint} {q.dtype}{list(q.shape)}"
               for i, q in enumerate(p.inputs + p.outputs)]
        return (f"/* run_model: {len(p.inputs)} inputs, {len(p.outputs)} outputs "
                f"({'; '.join(sig)}); {where} {p.arena.total} bytes "
                f"(lower bound {p.arena.lower_bound}) */")

    def _stmt(self, s: Stmt) -> None:
        if not (isinstance(s, Evaluate) and isinstance(s.value, Call)):
            raise InternalError(f"aot codegen: run_model holds only calls, got {s}")
        render = _CALLS.get(s.value.op)
        if render is None:
            raise InternalError(f"aot codegen: no C rendering for {s.value.op}")
        render(self, s.value)

    def emit(self, line: str, ind: int = 1) -> None:
        self.lines.append("  " * ind + line)

    def checked(self, call: str, ind: int = 1) -> None:
        self.emit(f"rc = {call};", ind)
        self.emit("if (rc != 0) return rc;", ind)

    # -- the call kinds -----------------------------------------------------------------------
    def unpacked(self, call: Call) -> None:
        name, bufs = _callee(call)
        self.checked(f"{name}_unpacked({', '.join(self.pointer(b) for b in bufs)})")

    def _pack(self, bufs: list[Buffer]) -> None:
        n = len(bufs)
        for i, b in enumerate(bufs):
            dims = ", ".join(f"{_int(d)}LL" for d in b.shape) or "0"
            self.emit(f"int64_t shape{i}[] = {{{dims}}};", 2)
        self.emit(f"DLTensor tensors[{n}] = {{", 2)
        for i, b in enumerate(bufs):
            code, bits = dl_type(b.dtype)
            comma = "," if i + 1 < n else ""
            self.emit(f"{{(void*){self.pointer(b)}, {{kDLCPU, 0}}, {len(b.shape)}, "
                      f"{{{code}, {bits}, 1}}, shape{i}, NULL, 0}}{comma}", 3)
        self.emit("};", 2)
        self.emit(f"TVMValue values[{n}];", 2)
        self.emit(f"int codes[{n}];", 2)
        self.emit("TVMValue ret;", 2)
        self.emit("int ret_code = kTVMNullptr;", 2)
        for i in range(n):
            self.emit(f"values[{i}].v_handle = &tensors[{i}]; codes[{i}] = kTVMDLTensorHandle;",
                      2)

    def cpacked(self, call: Call) -> None:
        name, bufs = _callee(call)
        self.emit("{")
        self._pack(bufs)
        self.emit(f"rc = {name}(values, codes, {len(bufs)}, &ret, &ret_code, NULL);", 2)
        self.emit("}")
        self.emit("if (rc != 0) return rc;")

    def packed(self, call: Call) -> None:
        name, bufs = _callee(call)
        self.emit("{")
        self.emit("static TVMFunctionHandle func = NULL;  /* found once, by name */", 2)
        self._pack(bufs)
        self.emit("rc = 0;", 2)
        self.emit(f'if (func == NULL) rc = TVMBackendGetFuncFromEnv(__tvm_module_ctx, "{name}", '
                  "&func);", 2)
        self.emit(f"if (rc == 0) rc = TVMFuncCall(func, values, codes, {len(bufs)}, &ret, "
                  "&ret_code);", 2)
        self.emit("}")
        self.emit("if (rc != 0) return rc;")

    def copy(self, call: Call) -> None:
        dst, src, nbytes = call.args
        self.emit(f"{self.program.prefix}_copy({self.pointer(dst)}, {self.pointer(src)}, "
                  f"{int(nbytes)}ULL);")


def _int(e: PrimExpr) -> int:
    if not isinstance(e, IntImm):
        raise InternalError(f"aot codegen: run_model needs static shapes, got {e}")
    return int(e.value)


def _callee(call: Call) -> tuple[str, list[Buffer]]:
    name = call.args[0]
    if not isinstance(name, StringImm):
        raise InternalError(f"aot codegen: {call.op} needs the callee's name first")
    return name.value, list(call.args[1:])


_CALLS: dict[str, Callable[[RunModelWriter, Call], None]] = {
    "tir.call_unpacked": RunModelWriter.unpacked,
    "tir.call_cpacked": RunModelWriter.cpacked,
    "tir.call_packed": RunModelWriter.packed,
    COPY_OP: RunModelWriter.copy,
}


def run_model_source(program: AotProgram, opts: AotOptions) -> str:
    """Prototypes, linked constants, the copy helper (if used) and run_model, as C."""
    parts = ["/* Operators (defined with the kernels). */", *kernel_prototypes(program)]
    if opts.link_params and program.constants:
        parts += ["", "/* Linked params. */", *linked_constants(program, opts)]
    body = program.run_model.body
    if any(s.value.op == COPY_OP for s in (body.seq if isinstance(body, SeqStmt) else (body,))
           if isinstance(s, Evaluate) and isinstance(s.value, Call)):
        parts += ["", copy_helper(program.prefix)]
    parts += ["", RunModelWriter(program).render()]
    return "\n".join(parts)
