"""A readable printer for the loop IR: one line per expression, indented statements."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expr import (
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Not,
    PrimExpr,
    ProducerLoad,
    Reduce,
    Select,
    SizeVar,
    StringImm,
    Var,
)
from .functor import children, fold
from .stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
)


def expr_str(e: Any) -> str:
    """One-line text of an expression (children first, so any depth prints)."""
    if not isinstance(e, PrimExpr):
        return repr(e) if not hasattr(e, "dtype") else f"<{type(e).__name__}>"
    return fold(e, _expr_text, _text_kids)


def _text_kids(e: Any) -> list[Any]:
    # What the text of ``e`` is made of: its expression fields (a call's buffer arguments
    # and a reduction's axes print by name).
    if isinstance(e, Reduce):
        return [*e.source, e.condition]
    return [c for c in children(e) if isinstance(c, PrimExpr)]


def _expr_text(e: Any, k: list[str]) -> str:
    fn = _EXPR.get(type(e))
    if fn is not None:
        return fn(e, k)
    if isinstance(e, BinaryOp):
        if isinstance(e, (Min, Max, FloorDiv, FloorMod)):
            name = {Min: "min", Max: "max", FloorDiv: "floordiv", FloorMod: "floormod"}[type(e)]
            return f"{name}({k[0]}, {k[1]})"
        return f"({k[0]} {e.sym} {k[1]})"
    return f"<{type(e).__name__}>"


def _float(e: FloatImm, k: list[str]) -> str:
    return f"{e.value!r}f" if e.dtype == "float32" else f"{e.dtype}({e.value!r})"


def _int(e: IntImm, k: list[str]) -> str:
    if e.dtype == "bool":
        return "True" if e.value else "False"
    return str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})"


def _indices(idx: Any) -> str:
    return ", ".join(expr_str(i) for i in idx)


def _call(e: Call, k: list[str]) -> str:
    # Buffers (call_packed arguments) have a dtype too, but print by name
    texts = iter(k)
    args = ", ".join(next(texts) if isinstance(a, PrimExpr) else getattr(a, "name", str(a))
                     for a in e.args)
    return f"{e.op}({args})"


def _reduce(e: Reduce, k: list[str]) -> str:
    axes = ", ".join(a.var.name for a in e.axis)
    return (f"reduce_{e.combiner.name}({', '.join(k[:-1])}, axis=[{axes}], "
            f"where={k[-1]})[{e.value_index}]")


_EXPR: dict[type, Callable[[Any, list[str]], str]] = {
    Var: lambda e, k: e.name,
    IntImm: _int,
    FloatImm: _float,
    StringImm: lambda e, k: repr(e.value),
    Not: lambda e, k: f"!{k[0]}",
    Select: lambda e, k: f"select({k[0]}, {k[1]}, {k[2]})",
    Cast: lambda e, k: f"{e.dtype}({k[0]})",
    Call: _call,
    Let: lambda e, k: f"(let {e.var.name} = {k[0]} in {k[1]})",
    BufferLoad: lambda e, k: f"{e.buffer.name}[{', '.join(k)}]",
    ProducerLoad: lambda e, k: f"{e.producer.name}[{', '.join(k)}]",
    Reduce: _reduce,
}
_EXPR[SizeVar] = _EXPR[Var]


def _lines(root: Any, out: list[str]) -> None:
    # An explicit stack of (statement or closing text, indent): nesting depth is unbounded.
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        s, ind = stack.pop()
        if isinstance(s, str):
            out.append(s)
            continue
        todo = _stmt_lines(s, ind, out)
        stack.extend(reversed(todo))


def _stmt_lines(s: Any, ind: str, out: list[str]) -> list[tuple[Any, str]]:
    """Append the lines of ``s`` itself; return what follows: (statement, indent) pairs and
    closing lines (as (text, ignored)) in order."""
    inner = ind + "  "
    if isinstance(s, SeqStmt):
        return [(x, ind) for x in s.seq]
    if isinstance(s, For):
        kind = "" if s.kind == ForKind.SERIAL else f" {s.kind.name.lower()}"
        notes = "".join(f" // {k}" + ("" if v is None else f" = {v}")
                        for k, v in s.annotations.items())
        out.append(f"{ind}for{kind} ({s.loop_var.name}, {expr_str(s.min)}, "
                   f"{expr_str(s.extent)}) {{{notes}")
        return [(s.body, inner), (ind + "}", "")]
    if isinstance(s, BufferStore):
        out.append(f"{ind}{s.buffer.name}[{_indices(s.indices)}] = {expr_str(s.value)}")
    elif isinstance(s, Allocate):
        shape = ", ".join(expr_str(x) for x in s.buffer.shape)
        strides = (f" strides [{', '.join(expr_str(x) for x in s.buffer.strides)}]"
                   if s.buffer.strides else "")
        out.append(f"{ind}allocate {s.buffer.name}: {s.buffer.dtype}[{shape}]{strides} "
                   f"({s.buffer.scope})")
        return [(s.body, ind)]
    elif isinstance(s, IfThenElse):
        out.append(f"{ind}if ({expr_str(s.condition)}) {{")
        if s.else_case is None:
            return [(s.then_case, inner), (ind + "}", "")]
        return [(s.then_case, inner), (ind + "} else {", ""), (s.else_case, inner),
                (ind + "}", "")]
    elif isinstance(s, LetStmt):
        out.append(f"{ind}let {s.var.name}: {s.var.dtype} = {expr_str(s.value)}")
        return [(s.body, ind)]
    elif isinstance(s, Evaluate):
        out.append(f"{ind}{expr_str(s.value)}")
    elif isinstance(s, AssertStmt):
        out.append(f"{ind}assert({expr_str(s.condition)}, {expr_str(s.message)})")
        return [(s.body, ind)]
    else:
        out.append(f"{ind}<{type(s).__name__}>")
    return []


def stmt_str(s: Any) -> str:
    """Indented text of a statement."""
    out: list[str] = []
    _lines(s, out)
    return "\n".join(out)


def func_str(f: PrimFunc) -> str:
    """Text of a PrimFunc: signature with buffer shapes, attrs, body."""
    params = []
    for p in f.params:
        buf = f.buffer_map.get(p)
        if buf is None:
            params.append(f"{p.name}: {p.dtype}")
        else:
            params.append(f"{buf.name}: {buf.dtype}[{', '.join(expr_str(x) for x in buf.shape)}]")
    head = f"@{f.name}({', '.join(params)})"
    if "from_relay" in f.attrs:
        head = f"# from: {f.attrs['from_relay']}\n{head}"
    out: list[str] = [head + " {"]
    body: list[str] = []
    _lines(f.body, body)
    out += ["  " + line for line in body]
    out.append("}")
    return "\n".join(out)
