"""C code generation for PrimFuncs: expressions from a table of C templates, statements as loops.

Every PrimFunc becomes ``<name>_unpacked`` (plain pointers, then one int32 per symbolic
dimension and scalar parameter; returns 0 or -1) and ``<name>``, the packed wrapper with the
PackedFunc signature (see :mod:`ember.tir.codegen_packed`). Output is deterministic: variables
are named after their IR names, made unique in order of first definition.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..runtime.errors import InternalError
from .c_names import C_KEYWORDS, PACKED_SIGNATURE_NAMES
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
)
from .functor import children, post_order, walk
from .hoist_division import DIVISIONS, body_divisions, invariant_divisions
from .kernel_objects import is_entry_point
from .op import is_float
from .simd_reduce import EXTREME_LANES, row_extreme, row_sum
from .simplify import simplify
from .stmt import (
    Allocate,
    AssertStmt,
    Buffer,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

C_TYPE = {"float32": "float", "float64": "double", "float16": "float", "int8": "int8_t",
          "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
          "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t", "bool": "uint8_t",
          "handle": "void*"}
STORAGE_TYPE = {**C_TYPE, "float16": "uint16_t"}
_INFIX = {Add: "+", Sub: "-", Mul: "*", EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">",
          GE: ">=", And: "&&", Or: "||"}
# intrinsic -> C template per float width ({0}, {1} are the rendered arguments)
_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
         "sqrt": "sqrt", "tanh": "tanh", "erf": "erf", "sin": "sin", "cos": "cos", "tan": "tan",
         "floor": "floor", "ceil": "ceil", "round": "round", "trunc": "trunc", "abs": "fabs",
         "atan": "atan", "asin": "asin", "acos": "acos", "sinh": "sinh", "cosh": "cosh",
         "log1p": "log1p", "expm1": "expm1", "pow": "pow", "fmod": "fmod"}
VMATH_HEADER = "ember/kernels/vmath.h"  # float32 functions a loop vectorizes
_VMATH = {"exp": "ember_expf", "sigmoid": "ember_sigmoidf", "tanh": "ember_tanhf",
          "erf": "ember_erff", "log": "ember_logf", "log2": "ember_log2f",
          "log10": "ember_log10f"}
STACK_LIMIT = 16384  # bytes: larger (or dynamic) allocations use TVMBackendAllocWorkspace
SCRATCH_ALIGNMENT = 64  # bytes between the starts of a kernel's scratch buffers (as on the stack)
HOIST_LENGTH = 80  # a shared subexpression whose C text is longer goes into a const local
Then = list  # what a statement handler leaves to do: (statement, indent) pairs and actions


def _suffix(dtype: str) -> str:
    return "" if dtype == "float64" else "f"


def c_string(text: str) -> str:
    """``text`` as a C string literal (ASCII; everything else escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127 and ch != "?":  # '?' escaped: no trigraphs
            out.append(ch)
        else:
            out += [f"\\{b:03o}" for b in ch.encode()]
    return '"' + "".join(out) + '"'


def render_float(v: float, dtype: str) -> str:
    """A C literal for ``v`` (shortest form that round-trips at that width)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = repr(float(v)) if dtype == "float64" else str(np.float32(v))
    if "." not in text and "e" not in text and "inf" not in text:
        text += ".0"
    return f"{text}{_suffix(dtype)}"


def render_int(v: int, dtype: str) -> str:
    """A C literal for ``v`` as ``dtype``. A value too big for any C integer (a long chain of
    additions folds to huge coefficients) is reduced modulo 2**64, which keeps it congruent
    modulo 2**bits: the result wraps as the C arithmetic and numpy do."""
    if not -(2**63) <= v < 2**64:
        v &= 2**64 - 1
        if not dtype.startswith("u") and v >= 2**63:
            v -= 2**64
    if dtype in ("int64", "uint64"):
        if dtype == "int64" and v == -(2**63):
            return "(-9223372036854775807LL - 1)"
        return f"{v}{'ULL' if dtype == 'uint64' else 'LL'}"
    if v == -(2**31):
        return "(-2147483647 - 1)"
    if dtype.startswith("uint"):
        return f"{v}U"
    return f"({v})" if v < 0 else str(v)


class FunctionWriter:
    """Renders one PrimFunc body; ``helpers`` collects the prelude helpers it needs."""

    def __init__(self, func: PrimFunc, helpers: set[str]) -> None:
        self.func, self.helpers = func, helpers
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self._next_suffix: dict[str, int] = {}  # base name -> next suffix to try
        self.nonneg: set[int] = set()
        # C text of a division hoisted before the innermost loop -> its local (hoist_division)
        self.divisions: dict[str, str] = {}
        self.in_parallel = 0
        self.in_simd = 0  # OpenMP simd loops open around the current statement (no nesting)
        self.vmath_calls = 0  # vmath.h calls rendered (EMBER_VMATH_WIDE on the function)
        self.needs_err = False
        self.stdio = True  # False: messages are constant strings (firmware has no stdio)
        self.workspaces: list[str] = []  # live TVMBackendAllocWorkspace blocks, outermost first
        # Parallel loops become task functions for TVMBackendParallelLaunch (hosted builds);
        # False: they run serially (the C runtime). See codegen_parallel.
        self.outline_parallel = True
        self.outlined: list[str] = []  # task functions, emitted before this function
        self.num_outlined = 0
        self.decl_types: dict[int, str] = {}  # id(var) -> C type a task function copies it as
        self.loops: list[For] = []  # the loops open around the current statement, innermost last
        # id(loop) -> (id(data var) of the buffers it stores, id(expr) -> reads one of them)
        self._stored: dict[int, tuple[set[int], dict[int, bool]]] = {}
        # USMP: id(Allocate) -> byte offset in the caller's scratch (``scratch_base``, the last
        # parameter), for the allocations that would otherwise use TVMBackendAllocWorkspace
        self.scratch: dict[int, int] = {}
        self.scratch_base = ""

    # -- names ------------------------------------------------------------------------------
    def bind(self, v: Any, hint: str, ctype: str | None = None) -> str:
        """A new unique local name for variable ``v`` (its later uses print it); ``ctype`` is
        how an outlined parallel loop copies it (None: by its dtype)."""
        name = self.fresh(hint)
        self.names[id(v)] = name
        dtype = getattr(v, "dtype", None)
        if ctype is None and dtype in C_TYPE and dtype != "handle":
            ctype = C_TYPE[dtype]
        if ctype is not None:
            self.decl_types[id(v)] = ctype
        return name

    def fresh(self, hint: str) -> str:
        """A new local name, unique in the function, based on ``hint``."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        name, k = base, self._next_suffix.get(base, 1)  # suffixes below k are taken already
        while name in self.used or name in _RESERVED:
            name, k = f"{base}_{k}", k + 1
        self._next_suffix[base] = k
        self.used.add(name)
        return name

    def name(self, v: Any) -> str:
        n = self.names.get(id(v))
        if n is None:
            raise InternalError(f"codegen: variable {getattr(v, 'name', v)} used before it is "
                                f"defined in {self.func.name}")
        return n

    # -- expressions ------------------------------------------------------------------------
    def expr(self, e: PrimExpr) -> str:
        """C text of ``e`` (children first, so any depth renders without recursion)."""
        return self._render(e, None)

    def value(self, e: PrimExpr, ind: int) -> str:
        """C text of a statement's value: a long subexpression used more than once is first
        computed into a ``const`` local at indent ``ind`` (the tree of a DAG such as
        ``y = y + z; z = y`` repeated would be exponentially long)."""
        return self._render(e, ind)

    def _render(self, root: PrimExpr, ind: int | None) -> str:
        hoist = _hoistable(root) if ind is not None else set()
        text: dict[int, str] = {}
        stack: list[tuple[Any, int]] = [(root, 0)]
        while stack:
            e, state = stack.pop()
            if state == 1:
                t = self._text(e, [text[id(c)] for c in _kids(e)])
                if self.divisions and isinstance(e, DIVISIONS):
                    t = self.divisions.get(t, t)
                if id(e) in hoist and len(t) > HOIST_LENGTH:
                    name = self.fresh("cse")
                    self.emit(f"const {C_TYPE[e.dtype]} {name} = {t};", ind or 0)
                    t = name
                text[id(e)] = t
            elif state == 2:  # C99 has no let expression: the (pure) value is substituted
                self.names[id(e.var)] = f"({text[id(e.value)]})"
            elif state == 3:
                text[id(e)] = text[id(e.body)]
            elif id(e) not in text:
                if isinstance(e, Let):  # the value, then the binding, then the body
                    stack += [(e, 3), (e.body, 0), (e, 2), (e.value, 0)]
                    continue
                stack.append((e, 1))
                stack.extend((c, 0) for c in reversed(_kids(e)) if id(c) not in text)
        return text[id(root)]

    def _text(self, e: PrimExpr, k: list[str]) -> str:
        """C text of ``e`` given the texts of its children."""
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, IntImm):
            return render_int(e.value, e.dtype)
        if isinstance(e, FloatImm):
            return render_float(e.value, e.dtype)
        if isinstance(e, StringImm):
            return c_string(e.value)
        op = _INFIX.get(type(e))
        if op is not None:
            return f"({k[0]} {op} {k[1]})"
        fn = getattr(self, "expr_" + type(e).__name__, None)
        if fn is None:
            raise InternalError(f"codegen: no C rendering for {type(e).__name__} ({e})")
        text: str = fn(e, k)
        return text

    def _lower_bound(self, e: PrimExpr) -> int | None:
        from .simplify import bound

        ranges = {v: (0, None) for v in post_order(e) if isinstance(v, Var) and id(v) in
                  self.nonneg}
        return bound(e, ranges)[0]

    def _nonneg(self, e: PrimExpr) -> bool:
        lo = self._lower_bound(e)
        return lo is not None and lo >= 0

    def _hoist_divisions(self, s: For, ind: int) -> dict[str, str]:
        """Compute the innermost loop's invariant divisions into locals before it
        (``hoist_division``); returns the mapping to restore after the loop."""
        return self._emit_divisions(invariant_divisions(s, self._worth_hoisting), ind)

    def hoist_body_divisions(self, s: For, ind: int) -> dict[str, str]:
        """At the top of the body of ``s``, a loop with inner loops: its divisions by
        run-time sizes that depend on nothing bound inside it (``body_divisions``); returns
        the mapping to restore after the body."""
        return self._emit_divisions(body_divisions(
            s, lambda e: not isinstance(e.b, IntImm)), ind)

    def _emit_divisions(self, found: list[PrimExpr], ind: int) -> dict[str, str]:
        saved = self.divisions
        if found:
            self.divisions = dict(saved)
        for e in found:  # inner ones first: an outer one's text then names the inner local
            key = self.expr(e)
            if key in self.divisions.values():
                continue
            value = key
            if (self._lower_bound(e.b) or 0) < 1 and not isinstance(e.b, IntImm):
                value = f"({self.expr(e.b)} != 0 ? {key} : 0)"  # the loop may never divide
            name = self.fresh("ember_q")
            self.emit(f"const {C_TYPE[e.dtype]} {name} = {value};", ind)
            self.divisions[key] = name
        return saved

    def _worth_hoisting(self, e: PrimExpr) -> bool:
        """A division the C compiler keeps in the loop: by a run-time value (it may trap), or
        a floor division whose helper branches (a dividend that may be negative)."""
        if not isinstance(e.b, IntImm):
            return True
        return isinstance(e, (FloorDiv, FloorMod)) and not self._nonneg(e.a)

    def expr_Div(self, e: Div, k: list[str]) -> str:
        return f"({k[0]} / {k[1]})"

    def expr_Mod(self, e: Mod, k: list[str]) -> str:
        if is_float(e.dtype):
            return f"fmod{_suffix(e.dtype)}({k[0]}, {k[1]})"
        return f"({k[0]} % {k[1]})"

    def expr_FloorDiv(self, e: FloorDiv, k: list[str]) -> str:
        a, b = k
        if is_float(e.dtype):
            return f"floor{_suffix(e.dtype)}({a} / {b})"
        if self._nonneg(e.a) and self._nonneg(e.b):
            return f"({a} / {b})"
        return self._helper_call("floordiv", e.dtype, a, b)

    def expr_FloorMod(self, e: FloorMod, k: list[str]) -> str:
        a, b = k
        if is_float(e.dtype):
            return f"({a} - floor{_suffix(e.dtype)}({a} / {b}) * {b})"
        if self._nonneg(e.a) and self._nonneg(e.b):
            return f"({a} % {b})"
        return self._helper_call("floormod", e.dtype, a, b)

    def expr_Min(self, e: Min, k: list[str]) -> str:
        return self._helper_call(self._min_max("min", e), e.dtype, *k)

    def expr_Max(self, e: Max, k: list[str]) -> str:
        return self._helper_call(self._min_max("max", e), e.dtype, *k)

    def _min_max(self, kind: str, e: Min | Max) -> str:
        """The float helper: bitwise (vectorises), or with a branch where the value is carried
        from trip to trip (a max reduction's ``acc = max(acc, x)``: see ``_carried``)."""
        return f"{kind}_carried" if _bit_selectable(e.dtype) and self._carried(e) else kind

    def _carried(self, e: PrimExpr) -> bool:
        """Whether ``e`` reads a buffer that the innermost open loop also stores: a value
        carried from one trip to the next (a reduction's ``acc = c ? v : acc``, argmax). Such
        a select stays ``?:``: its branch is predicted (the running best rarely changes) and
        runs ahead, where a bitwise select chains every trip on the last (argmax over 4096
        columns: 0.5 ms with the branch, 4.3 ms bitwise)."""
        if not self.loops:
            return False
        loop = self.loops[-1]
        if id(loop) not in self._stored:
            self._stored[id(loop)] = ({id(n.buffer.data) for n in post_order(loop.body)
                                       if isinstance(n, BufferStore)}, {})
        stored, memo = self._stored[id(loop)]
        if stored:  # each node judged once per loop: min/max chains render in linear time
            for n in walk(e, lambda m: [] if id(m) in memo else children(m)):
                if id(n) not in memo:
                    memo[id(n)] = (isinstance(n, BufferLoad) and id(n.buffer.data) in stored
                                   ) or any(memo[id(c)] for c in children(n))
        return bool(stored) and memo[id(e)]

    def _helper_call(self, kind: str, dtype: str, *args: str) -> str:
        self.helpers.add(f"{kind}:{dtype}")
        return f"ember_{kind}_{dtype}({', '.join(args)})"

    def expr_Not(self, e: Not, k: list[str]) -> str:
        return f"(!{k[0]})"

    def expr_Select(self, e: Select, k: list[str]) -> str:
        # TIR's Select evaluates both sides: on floats a bitwise select keeps the loop vector
        if _bit_selectable(e.dtype) and not self._carried(e):
            return self._helper_call("select", e.dtype, *k)
        return f"({k[0]} ? {k[1]} : {k[2]})"

    def expr_Cast(self, e: Cast, k: list[str]) -> str:
        v = k[0]
        if e.dtype == "bool":
            return f"((uint8_t)({v} != 0))"
        if e.dtype == "float16":
            self.helpers.add("f16")
            return f"ember_h2f(ember_f2h((float)({v})))"
        return f"(({C_TYPE[e.dtype]})({v}))"

    def expr_BufferLoad(self, e: BufferLoad, k: list[str]) -> str:
        ref = f"{self.name(e.buffer.data)}[{self.flat(e.buffer, e.indices)}]"
        if e.buffer.dtype == "float16":
            self.helpers.add("f16")
            return f"ember_h2f({ref})"
        return ref

    def expr_Call(self, e: Call, args: list[str]) -> str:
        op = e.op
        if op == "if_then_else":
            # it guards its branches (a load out of bounds): a bitwise select evaluates both,
            # so only where neither can fault or read what the condition guards
            if (_bit_selectable(e.dtype) and all(_safe_anywhere(b) for b in e.args[1:])
                    and not self._carried(e)):
                return self._helper_call("select", e.dtype, *args)
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if op == "tir.call_packed":
            raise InternalError("codegen: call_packed must be the whole of an Evaluate")
        if op == "tir.call_extern":
            name, header = e.args[0].value, e.args[1].value
            if header:
                self.helpers.add(f"include:{header}")
                if is_entry_point(header, name):  # linked from a kernel object when hosted
                    self.helpers.add(f"kernel:{header}:{name}")
            return f"{name}({', '.join(args[2:])})"
        if op == "tir.address_of":
            return f"(&{args[0]})"
        if op == "isnan" or op == "isinf":
            return f"((uint8_t){op}({args[0]}))"
        if op == "abs" and not is_float(e.dtype):
            return self._helper_call("abs", e.dtype, args[0])
        sfx = _suffix(e.dtype)
        if op in _VMATH and e.dtype == "float32":  # libm calls do not vectorize
            self.helpers.add(f"include:{VMATH_HEADER}")
            self.vmath_calls += 1
            return f"{_VMATH[op]}({args[0]})"
        if op == "sigmoid":
            one = "1.0" + sfx
            return f"({one} / ({one} + exp{sfx}(-({args[0]}))))"
        if op == "rsqrt":
            return f"(1.0{sfx} / sqrt{sfx}({args[0]}))"
        if op in _MATH:
            return f"{_MATH[op]}{sfx}({', '.join(args)})"
        raise InternalError(f"codegen: unknown intrinsic {op!r}")

    def flat(self, buf: Buffer, indices: tuple) -> str:
        """Row-major (or strided) flat index of ``indices`` into ``buf``, simplified."""
        return self.expr(self.flat_expr(buf, indices))

    @staticmethod
    def flat_expr(buf: Buffer, indices: tuple) -> PrimExpr:
        """The flat index of ``flat`` as an expression."""
        if len(indices) == 0:
            return IntImm("int32", 0)
        if buf.strides:
            total: PrimExpr = sum((i * s for i, s in zip(indices, buf.strides)), start=0)  # type: ignore
        else:
            total = indices[0]
            for i, s in zip(indices[1:], buf.shape[1:]):
                total = total * s + i
        if buf.elem_offset is not None:
            total = total + buf.elem_offset
        return simplify(total)

    # -- statements -------------------------------------------------------------------------
    def emit(self, line: str, ind: int) -> None:
        self.lines.append("  " * ind + line)

    def fail_return(self, cond: str, ret: str, ind: int) -> None:
        """``if (cond) return ret;``, first freeing the live workspace blocks, innermost first
        (the C runtime's arena is LIFO, and a failed call must not leak its blocks)."""
        if not self.workspaces:
            self.emit(f"if ({cond}) return {ret};", ind)
            return
        self.emit(f"if ({cond}) {{", ind)
        for name in reversed(self.workspaces):
            self.emit(f"(void)TVMBackendFreeWorkspace(1, 0, {name});", ind + 1)
        self.emit(f"return {ret};", ind + 1)
        self.emit("}", ind)

    def stmt(self, s: Stmt, ind: int) -> None:
        """Emit ``s``. A handler emits the statement's own lines and returns what follows, in
        order: nested statements (with their indent) and closing actions. A work list runs
        them, so deep nesting (one Allocate per temporary buffer) needs no recursion."""
        todo: list[Any] = [(s, ind)]
        while todo:
            item = todo.pop()
            if callable(item):
                item()
                continue
            node, i = item
            then = getattr(self, "stmt_" + type(node).__name__)(node, i)
            todo.extend(reversed(then))

    def closing(self, line: str, ind: int) -> Callable[[], None]:
        """An action that emits ``line`` (a closing brace) once the nested statements are done."""
        return lambda: self.emit(line, ind)

    def stmt_SeqStmt(self, s: SeqStmt, ind: int) -> Then:
        return [(x, ind) for x in s.seq]

    def stmt_For(self, s: For, ind: int) -> Then:
        ext = self.expr(s.extent)
        mn = self.expr(s.min)
        v = self.bind(s.loop_var, s.loop_var.name)
        if self._nonneg(s.min):
            self.nonneg.add(id(s.loop_var))
        parallel = s.kind == ForKind.PARALLEL and not self.in_parallel
        self.loops.append(s)  # popped once its body is written (here when that is at once)
        # (a serial loop whose body is a parallel loop may go into its launch: collapsed_nest)
        holds_parallel = s.kind == ForKind.SERIAL and isinstance(s.body, For) and \
            s.body.kind == ForKind.PARALLEL and not self.in_parallel
        if (parallel or holds_parallel) and self.outline_parallel:
            from .codegen_parallel import outline_parallel_loop

            if outline_parallel_loop(self, s, ind):
                self.loops.pop()
                return []
        header = f"for (int32_t {v} = {mn}; {v} < {ext if mn == '0' else f'{mn} + {ext}'}; ++{v}) {{"
        outer_divisions = self._hoist_divisions(s, ind) if not parallel else self.divisions
        summed = row_sum(s, self.flat_expr) if not (parallel or self.in_simd) else None
        extreme = row_extreme(s, self.flat_expr) if not (
            parallel or self.in_simd or summed is not None) else None
        if summed is not None or extreme is not None:
            then = self._row_sum(header, ind, *summed) if summed is not None else \
                self._row_extreme(v, mn, ext, ind, *extreme)
            self.loops.pop()
            self.divisions = outer_divisions
            return then
        # Loop hints go through macros (the "pragmas" helper) that expand to nothing where the
        # compiler lacks the feature: plain -Wall -Werror builds without OpenMP stay clean.
        if s.kind == ForKind.VECTORIZED:
            self.helpers.add("pragmas")
            self.emit("EMBER_SIMD", ind)
        elif s.kind == ForKind.UNROLLED:
            n = s.extent.value if isinstance(s.extent, IntImm) and s.extent.value <= 32 else 8
            self.helpers.add("pragmas")
            self.emit(f"EMBER_UNROLL({n})", ind)
        self.emit(header, ind)
        simd = s.kind == ForKind.VECTORIZED
        self.in_parallel += parallel
        self.in_simd += simd
        self.hoist_body_divisions(s, ind + 1)  # restored to outer_divisions by close

        def close() -> None:
            self.in_parallel -= parallel
            self.in_simd -= simd
            self.loops.pop()
            self.divisions = outer_divisions
            self.emit("}", ind)

        return [(s.body, ind + 1), close]

    def _row_sum(self, header: str, ind: int, store: BufferStore, summand: PrimExpr) -> Then:
        """``for k: B[i] = B[i] + e`` as a sum in a local under an OpenMP simd reduction
        (``simd_reduce``): vector partial sums instead of one dependent add per element."""
        self.helpers.add("pragmas")
        ctype, target = C_TYPE[store.buffer.dtype], \
            f"{self.name(store.buffer.data)}[{self.flat(store.buffer, store.indices)}]"
        acc = self.fresh("ember_sum")
        self.emit("{", ind)
        self.emit(f"{ctype} {acc} = {target};", ind + 1)
        self.emit(f"EMBER_SIMD_SUM({acc})", ind + 1)
        self.emit(header, ind + 1)
        self.emit(f"{acc} = {acc} + {self.value(summand, ind + 2)};", ind + 2)
        self.emit("}", ind + 1)
        self.emit(f"{target} = {acc};", ind + 1)
        self.emit("}", ind)
        return []

    def _row_extreme(self, v: str, mn: str, ext: str, ind: int, store: BufferStore,
                     operand: PrimExpr, kind: str) -> Then:
        """``for k: B[i] = max(B[i], e)`` (or min) with ``EXTREME_LANES`` running values
        updated in a vector loop, the rest of the row into the first, all folded at the end
        (``simd_reduce.row_extreme``)."""
        self.helpers.add("pragmas")
        dtype = store.buffer.dtype
        ctype, target = C_TYPE[dtype], \
            f"{self.name(store.buffer.data)}[{self.flat(store.buffer, store.indices)}]"
        self.helpers.add(f"{kind}:{dtype}")  # the bitwise NaN-keeping form: it vectorizes
        fn = f"ember_{kind}_{dtype}"
        lanes, base, lane = self.fresh("ember_lanes"), self.fresh("ember_k"), self.fresh("ember_l")
        rest = self.fresh(f"{v}_rest")
        end = ext if mn == "0" else f"{mn} + {ext}"
        n = EXTREME_LANES
        self.emit("{", ind)
        self.emit(f"{ctype} {lanes}[{n}];", ind + 1)
        self.emit(f"for (int32_t {lane} = 0; {lane} < {n}; ++{lane}) {lanes}[{lane}] = {target};",
                  ind + 1)
        self.emit(f"int32_t {base} = {mn};", ind + 1)
        self.emit(f"for (; {base} + {n} <= {end}; {base} += {n}) {{", ind + 1)
        self.emit("EMBER_SIMD", ind + 2)
        self.emit(f"for (int32_t {lane} = 0; {lane} < {n}; ++{lane}) {{", ind + 2)
        self.emit(f"const int32_t {v} = {base} + {lane};", ind + 3)
        value = self.value(operand, ind + 3)
        self.emit(f"{lanes}[{lane}] = {fn}({lanes}[{lane}], {value});", ind + 3)
        self.emit("}", ind + 2)
        self.emit("}", ind + 1)
        self.emit(f"for (int32_t {rest} = {base}; {rest} < {end}; ++{rest}) {{", ind + 1)
        self.emit(f"const int32_t {v} = {rest};", ind + 2)
        value = self.value(operand, ind + 2)
        self.emit(f"{lanes}[0] = {fn}({lanes}[0], {value});", ind + 2)
        self.emit("}", ind + 1)
        self.emit(f"for (int32_t {lane} = 1; {lane} < {n}; ++{lane}) "
                  f"{lanes}[0] = {fn}({lanes}[0], {lanes}[{lane}]);", ind + 1)
        self.emit(f"{target} = {lanes}[0];", ind + 1)
        self.emit("}", ind)
        return []

    def stmt_BufferStore(self, s: BufferStore, ind: int) -> Then:
        value = self.value(s.value, ind)
        if s.buffer.dtype == "float16":
            self.helpers.add("f16")
            value = f"ember_f2h({value})"
        elif s.buffer.dtype == "bool":
            value = f"(uint8_t)({value})"
        self.emit(f"{self.name(s.buffer.data)}[{self.flat(s.buffer, s.indices)}] = {value};", ind)
        return []

    def stmt_IfThenElse(self, s: IfThenElse, ind: int) -> Then:
        self.emit(f"if ({self.expr(s.condition)}) {{", ind)
        if s.else_case is None:
            return [(s.then_case, ind + 1), self.closing("}", ind)]
        return [(s.then_case, ind + 1), self.closing("} else {", ind), (s.else_case, ind + 1),
                self.closing("}", ind)]

    def stmt_LetStmt(self, s: LetStmt, ind: int) -> Then:
        value = self.value(s.value, ind)
        v = self.bind(s.var, s.var.name)
        self.emit(f"const {C_TYPE[s.var.dtype]} {v} = {value};", ind)
        return [(s.body, ind)]

    def stmt_Allocate(self, s: Allocate, ind: int) -> Then:
        from .codegen_packed import emit_allocate

        return emit_allocate(self, s, ind)

    def stmt_Evaluate(self, s: Evaluate, ind: int) -> Then:
        if isinstance(s.value, Call) and s.value.op == "tir.call_packed":
            from .codegen_packed import emit_call_packed

            emit_call_packed(self, s.value, ind)
        else:
            self.emit(f"(void)({self.value(s.value, ind)});", ind)
        return []

    def stmt_AssertStmt(self, s: AssertStmt, ind: int) -> Then:
        self.emit(f"if (!({self.expr(s.condition)})) {{", ind)
        if not (isinstance(s.message, StringImm) and not s.message.value):
            self.emit(f"TVMPackedFuncSetLastError({self.expr(s.message)});", ind + 1)
        for name in reversed(self.workspaces):
            self.emit(f"(void)TVMBackendFreeWorkspace(1, 0, {name});", ind + 1)
        self.emit("return -1;", ind + 1)
        self.emit("}", ind)
        return [(s.body, ind)]


def _bit_selectable(dtype: str) -> bool:
    """Whether a select of ``dtype`` values is written as the bitwise ``select`` helper."""
    return is_float(dtype) and C_TYPE.get(dtype) in ("float", "double")


_PURE_CALLS = frozenset(_MATH) | frozenset(_VMATH) | {"sigmoid", "rsqrt", "isnan", "isinf",
                                                      "abs", "if_then_else"}


def _safe_anywhere(e: PrimExpr) -> bool:
    """Whether ``e`` may be evaluated where its guard does not hold: no load (its index may
    be out of bounds there), no call but pure math, no integer division by anything but a
    constant other than 0 and -1, no float-to-integer cast (undefined out of range)."""
    for n in post_order(e):
        if isinstance(n, BufferLoad):
            return False
        if isinstance(n, Call) and n.op not in _PURE_CALLS:
            return False
        if isinstance(n, (Div, Mod, FloorDiv, FloorMod)) and not is_float(n.dtype) and not (
                isinstance(n.b, IntImm) and n.b.value not in (0, -1)):
            return False
        if isinstance(n, Cast) and not is_float(n.dtype) and is_float(n.value.dtype):
            return False
    return True


def _kids(e: PrimExpr) -> list[PrimExpr]:
    # The children a rendering reads (a load renders its flattened index afresh).
    if isinstance(e, BufferLoad):
        return []
    return [c for c in children(e) if isinstance(c, PrimExpr)]


def _conditional(e: PrimExpr, i: int) -> bool:
    """Whether child ``i`` of ``e`` is evaluated only on some paths (C's ``?:``, ``&&``)."""
    if isinstance(e, Select) or (isinstance(e, Call) and e.op == "if_then_else"):
        return i > 0
    return isinstance(e, (And, Or)) and i == 1


def _hoistable(root: PrimExpr) -> set[int]:
    """Compound subexpressions of ``root`` used more than once and evaluated on every path
    (computing one before the statement must not evaluate what a condition guards)."""
    order = list(walk(root, _kids))
    uses: dict[int, int] = {}
    for n in order:
        for c in _kids(n):
            uses[id(c)] = uses.get(id(c), 0) + 1
    always = {id(root)}
    for n in reversed(order):  # parents before children
        if id(n) in always:
            always.update(id(c) for i, c in enumerate(_kids(n)) if not _conditional(n, i))
    return {id(n) for n in order
            if uses.get(id(n), 0) > 1 and id(n) in always and _kids(n)}


_RESERVED = C_KEYWORDS | PACKED_SIGNATURE_NAMES
