"""The built-in ``ccompiler`` codegen: a partitioned function as one C loop, an ember kernel.

A function with ``Compiler="ccompiler"`` (PartitionGraph's output) computes elementwise ops
(``add``, ``subtract``, ``multiply``, ``nn.relu``; composite functions of them are inlined) on
float32 tensors of one static shape, with scalars (``Tensor[()]`` parameters or constants)
broadcast. Its C is a single loop over the elements with one local per op, rendered from a
table, e.g. for ``subtract(multiply(%a, %b), %c)``::

    for (int64_t i = 0; i < 6; ++i) {
      float v0 = a[i] * b[i];
      float v1 = v0 - c[i];
      out0[i] = v1;
    }

inside ``int32_t <global_symbol>_unpacked(const float* a, ..., float* out0)``, plus the
packed wrapper every ember kernel has (``tir.codegen_packed``: argument count, dtype, shape
and alignment checks with messages naming the function and argument). So the function joins
the model's own C module and every executor, export path and Model Library Format calls it
like any fused kernel. Tensor constants become ``static const float`` arrays.

Anything else (another op, dtype or shape, a let, a tuple inside) is refused with a message
naming the node and the function.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....ir.expr import Call, Constant, Function, RelayExpr, Tuple, Var
from ....ir.op import Op
from ....ir.printer import short_text
from ....ir.types import TensorType
from ....ir.visitor import ExprMutator, bind, post_order
from ....runtime.errors import TVMError
from ....tir.codegen import FunctionC
from ....tir.codegen_c import render_float
from ....tir.codegen_packed import c_ident, packed_wrapper
from ....tir.stmt import Buffer, Evaluate, PrimFunc
from ....tir.expr import IntImm
from ...transform.type_infer import infer_type

_BINARY = {"add": "+", "subtract": "-", "multiply": "*"}
_UNARY: dict[str, Callable[[str], str]] = {"nn.relu": lambda x: f"({x} > 0.0f ? {x} : 0.0f)"}
SUPPORTED = tuple(_BINARY) + tuple(_UNARY)


class CcompilerError(TVMError, ValueError):
    """A function the ccompiler cannot emit; the message names the node and the function."""


@dataclass(frozen=True)
class ExternKernel:
    """The C of one external function in ember's kernel ABI, and its argument shapes."""

    code: FunctionC
    inputs: list[tuple[str, tuple[int, ...], str]]   # (name, shape, dtype) per parameter
    outputs: list[tuple[str, tuple[int, ...], str]]
    prim_func: PrimFunc  # the signature (buffers) the packed wrapper checks


class _InlineComposites(ExprMutator):
    """Calls of composite functions replaced by their bodies on the call's arguments."""

    def skip(self, expr: RelayExpr) -> bool:
        return isinstance(expr, Function)

    def visit_call(self, e: Call) -> RelayExpr:
        new = super().visit_call(e)
        if isinstance(e.op, Function) and e.op.get_attr("Composite") is not None:
            return bind(e.op.body, dict(zip(e.op.params, new.args)))  # type: ignore[attr-defined]
        return new


def _tensor_type(node: RelayExpr, where: str) -> TensorType:
    ty = node.checked_type_
    if not isinstance(ty, TensorType) or ty.dtype != "float32" or not all(
            isinstance(d, int) for d in ty.shape):
        raise CcompilerError(f"ccompiler: {where}: {short_text(node)} has type {ty}; the "
                             "ccompiler takes float32 tensors of static shape only")
    return ty


class _Emitter:
    """The loop body of one function: a local per op, in post order."""

    def __init__(self, func: Function, symbol: str) -> None:
        self.symbol, self.where = symbol, f"@{symbol}"
        self.size = 1
        self.lines: list[str] = []
        self.statics: list[str] = []
        self.value: dict[RelayExpr, str] = {}
        self.params = [c_ident(p.name_hint) for p in func.params]
        for p, name in zip(func.params, self.params):
            self.value[p] = self._read(name, _tensor_type(p, self.where))

    def _read(self, name: str, ty: TensorType) -> str:
        numel = int(np.prod(ty.shape))
        if numel == 1:  # a scalar or a one-element tensor (shape (1,)): broadcast, read [0]
            return f"{name}[0]"
        if self.size not in (1, numel):
            raise CcompilerError(f"ccompiler: {self.where}: tensors of {self.size} and "
                                 f"{numel} elements; the ccompiler computes one shape "
                                 "(scalars broadcast)")
        self.size = numel
        return f"{name}[i]"

    def _constant(self, c: Constant) -> str:
        ty = _tensor_type(c, self.where)
        data = c.data.numpy().astype("float32").ravel()
        if tuple(ty.shape) == ():
            return render_float(float(data[0]), "float32")
        name = f"const{len(self.statics)}"
        values = ", ".join(render_float(float(v), "float32") for v in data)
        self.statics.append(f"static const float {name}[{data.size}] = {{{values}}};")
        return self._read(name, ty)

    def _call(self, e: Call) -> str:
        name = e.op.name if isinstance(e.op, Op) else None
        if name not in SUPPORTED:
            raise CcompilerError(f"ccompiler: {self.where}: cannot emit {short_text(e)}; the "
                                 f"ccompiler supports {', '.join(SUPPORTED)}")
        _tensor_type(e, self.where)
        args = [self.value[a] for a in e.args]
        text = (f"{args[0]} {_BINARY[name]} {args[1]}" if name in _BINARY
                else _UNARY[name](args[0]))
        local = f"v{len(self.lines)}"
        self.lines.append(f"    float {local} = {text};")
        return local

    def emit(self, body: RelayExpr) -> list[RelayExpr]:
        outputs = list(body.fields) if isinstance(body, Tuple) else [body]
        for node in post_order(body, skip=lambda n: isinstance(n, Function)):
            if node in self.value or isinstance(node, Op) or (
                    isinstance(node, Tuple) and node is body):
                continue
            if isinstance(node, Constant):
                self.value[node] = self._constant(node)
            elif isinstance(node, Call):
                self.value[node] = self._call(node)
            else:
                what = "a free variable" if isinstance(node, Var) else type(node).__name__
                raise CcompilerError(f"ccompiler: {self.where}: cannot emit {what} "
                                     f"({short_text(node)}); the ccompiler takes a dataflow "
                                     "of elementwise ops")
        return outputs


def _signature(symbol: str, inputs: list[tuple[str, tuple[int, ...], str]],
               outputs: list[tuple[str, tuple[int, ...], str]]) -> PrimFunc:
    buffers = [Buffer(name, tuple(IntImm("int64", d) for d in shape), dtype)
               for name, shape, dtype in inputs + outputs]
    return PrimFunc(tuple(b.data for b in buffers), {b.data: b for b in buffers},
                    Evaluate(IntImm("int32", 0)), attrs={"global_symbol": symbol})


def ccompiler_kernel(func: Function, symbol: str) -> ExternKernel:
    """The C kernel ``symbol`` of ``func`` (typed, ``Compiler="ccompiler"``)."""
    flat = _InlineComposites().visit(func.body)
    if flat is not func.body:  # the inlined bodies are new nodes: type them
        func = infer_type(Function(func.params, flat, attrs=func.attrs))  # type: ignore
    emitter = _Emitter(func, symbol)
    outputs = emitter.emit(func.body)
    in_info = [(name, tuple(p.checked_type_.shape), "float32")
               for name, p in zip(emitter.params, func.params)]
    out_types = [_tensor_type(o, emitter.where) for o in outputs]
    out_info = [(f"out{k}", tuple(t.shape), "float32") for k, t in enumerate(out_types)]
    stores = []
    for k, (o, t) in enumerate(zip(outputs, out_types)):
        if int(np.prod(t.shape)) not in (1, emitter.size):
            raise CcompilerError(f"ccompiler: @{symbol}: output {k} has shape {t.shape}, the "
                                 f"loop computes {emitter.size} elements")
        index = "i" if tuple(t.shape) != () else "0"
        stores.append(f"    out{k}[{index}] = {emitter.value[o]};")
    params = [f"const float* restrict {n}" for n, _, _ in in_info]
    params += [f"float* restrict {n}" for n, _, _ in out_info]
    text = "\n".join([
        f"/* ccompiler: {symbol} */", *emitter.statics,
        f"TVM_DLL int32_t {symbol}_unpacked({', '.join(params)}) {{",
        f"  for (int64_t i = 0; i < {emitter.size}; ++i) {{",
        *emitter.lines, *stores, "  }", "  return 0;", "}"])
    prim = _signature(symbol, in_info, out_info)
    names = [n for n, _, _ in in_info + out_info]
    code = FunctionC(symbol, text, packed_wrapper(prim, names, True),
                     packed_wrapper(prim, names, False), frozenset(), False)
    return ExternKernel(code, in_info, out_info, prim)
