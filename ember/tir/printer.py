"""A readable printer for the loop IR: one line per expression, indented statements."""
from __future__ import annotations

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
    """One-line text of an expression."""
    fn = _EXPR.get(type(e))
    if fn is not None:
        return fn(e)
    if isinstance(e, BinaryOp):
        if isinstance(e, (Min, Max, FloorDiv, FloorMod)):
            name = {Min: "min", Max: "max", FloorDiv: "floordiv", FloorMod: "floormod"}[type(e)]
            return f"{name}({expr_str(e.a)}, {expr_str(e.b)})"
        return f"({expr_str(e.a)} {e.sym} {expr_str(e.b)})"
    return repr(e) if not hasattr(e, "dtype") else f"<{type(e).__name__}>"


def _float(e: FloatImm) -> str:
    return f"{e.value!r}f" if e.dtype == "float32" else f"{e.dtype}({e.value!r})"


def _int(e: IntImm) -> str:
    if e.dtype == "bool":
        return "True" if e.value else "False"
    return str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})"


def _indices(idx: Any) -> str:
    return ", ".join(expr_str(i) for i in idx)


def _call(e: Call) -> str:
    # Buffers (call_packed arguments) have a dtype too, but print by name
    args = ", ".join(expr_str(a) if isinstance(a, PrimExpr) else getattr(a, "name", str(a))
                     for a in e.args)
    return f"{e.op}({args})"


_EXPR = {
    Var: lambda e: e.name,
    IntImm: _int,
    FloatImm: _float,
    StringImm: lambda e: repr(e.value),
    Not: lambda e: f"!{expr_str(e.a)}",
    Select: lambda e: (f"select({expr_str(e.condition)}, {expr_str(e.true_value)}, "
                       f"{expr_str(e.false_value)})"),
    Cast: lambda e: f"{e.dtype}({expr_str(e.value)})",
    Call: _call,
    Let: lambda e: f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})",
    BufferLoad: lambda e: f"{e.buffer.name}[{_indices(e.indices)}]",
    ProducerLoad: lambda e: f"{e.producer.name}[{_indices(e.indices)}]",
    Reduce: lambda e: (f"reduce_{e.combiner.name}({_indices(e.source)}, axis=["
                       f"{', '.join(a.var.name for a in e.axis)}], "
                       f"where={expr_str(e.condition)})[{e.value_index}]"),
}
_EXPR[SizeVar] = _EXPR[Var]


def _lines(s: Any, ind: str, out: list[str]) -> None:
    if isinstance(s, SeqStmt):
        for x in s.seq:
            _lines(x, ind, out)
    elif isinstance(s, For):
        kind = "" if s.kind == ForKind.SERIAL else f" {s.kind.name.lower()}"
        out.append(f"{ind}for{kind} ({s.loop_var.name}, {expr_str(s.min)}, "
                   f"{expr_str(s.extent)}) {{")
        _lines(s.body, ind + "  ", out)
        out.append(ind + "}")
    elif isinstance(s, BufferStore):
        out.append(f"{ind}{s.buffer.name}[{_indices(s.indices)}] = {expr_str(s.value)}")
    elif isinstance(s, Allocate):
        shape = ", ".join(expr_str(x) for x in s.buffer.shape)
        out.append(f"{ind}allocate {s.buffer.name}: {s.buffer.dtype}[{shape}] ({s.buffer.scope})")
        _lines(s.body, ind, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{ind}if ({expr_str(s.condition)}) {{")
        _lines(s.then_case, ind + "  ", out)
        if s.else_case is not None:
            out.append(ind + "} else {")
            _lines(s.else_case, ind + "  ", out)
        out.append(ind + "}")
    elif isinstance(s, LetStmt):
        out.append(f"{ind}let {s.var.name}: {s.var.dtype} = {expr_str(s.value)}")
        _lines(s.body, ind, out)
    elif isinstance(s, Evaluate):
        out.append(f"{ind}{expr_str(s.value)}")
    elif isinstance(s, AssertStmt):
        out.append(f"{ind}assert({expr_str(s.condition)}, {expr_str(s.message)})")
        _lines(s.body, ind, out)
    else:
        out.append(f"{ind}<{type(s).__name__}>")


def stmt_str(s: Any) -> str:
    """Indented text of a statement."""
    out: list[str] = []
    _lines(s, "", out)
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
    _lines(f.body, "  ", out)
    out.append("}")
    return "\n".join(out)
