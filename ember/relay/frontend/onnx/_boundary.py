"""Graph inputs and outputs that are not tensors: sequences and optionals.

- A graph input of ``sequence_type`` is a Prelude ``List`` (callers pass a Python list of
  arrays; its length is known only at run time), one of ``optional_type`` a Prelude
  ``Option`` (callers pass None or the value: an array, or a list for an optional
  sequence). Element sizes are the model's, ``?`` where it writes none. A sequence whose
  element type has no shape at all (not even a rank) gets its element type from its uses:
  its variable is left unannotated and type inference finds it (``relay.transform.
  InferType``), so ``SequenceInsert(seq, x)`` makes it a list of ``x``'s rank. A sequence
  element declared with rank 0 (an empty shape: what ``onnx.helper`` writes for
  ``shape=[]``, and what several of ONNX's own tests declare for sequences of vectors) is
  taken the same way, rank 0 when no use says otherwise: onnxruntime does not hold a
  sequence's elements to their declared shape either.
- A graph output of sequence type leaves as a ``List`` (a Python list for callers, whatever
  the length was at import), an optional as an ``Option`` (None or the value), except that
  an optional the model declares as a plain tensor or sequence output (a ``Loop`` that
  carried an optional input) leaves as its value.

Both need the VM, which ``ember.compile`` picks for such a module. ``ember.api.model`` turns
callers' lists and Nones into these values and back.
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import RelayExpr, Var
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, TypeCall
from ....runtime.errors import FrontendError, OpNotImplemented
from ._options import content_fit, some_value, to_option, value_of
from ._proto import NARROW, interface_dtype, type_name
from ._sequences import OptType, SeqType, ir_type, to_list

STRUCTURED = ("sequence_type", "optional_type")
RANK_NOT_GIVEN: list[Any] = []  # a sequence element's declared rank 0, taken as not given


def import_type(tp: Any, where: str, optional_ok: bool = True,
                dims: list[Any] | None = None) -> Any:
    """The import-time type of an ONNX TypeProto that is a tensor (a TensorType, None when
    not even its rank is given), a sequence of tensors (a SeqType of run-time length) or an
    optional of either (an OptType known at run time); ``dims``: the sizes of the (element)
    tensor instead of the model's (None or a string: ``?``). FrontendError /
    OpNotImplemented naming ``where`` for anything else."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return _tensor(tp.tensor_type, where, dims)[1]
    if kind == "sequence_type":
        elem = tp.sequence_type.elem_type
        if elem.WhichOneof("value") != "tensor_type":
            raise OpNotImplemented(f"{where}: a sequence of {_kind(elem)}s; ember imports "
                                   "sequences of tensors")
        if dims is None and model_dims(elem.tensor_type) == []:
            dims = RANK_NOT_GIVEN  # (see the module docstring)
        dtype, ty = _tensor(elem.tensor_type, where, dims)
        return SeqType(dtype, ty)
    if kind == "optional_type" and optional_ok:
        inner = import_type(tp.optional_type.elem_type, f"{where} (its element)", False, dims)
        if inner is None:
            raise FrontendError(f"{where}: an optional tensor needs at least a rank in the "
                                "model")
        return OptType(inner, " ".join(str(tp).split()), runtime=True)
    raise OpNotImplemented(f"{where} is {_kind(tp)}; ember imports tensors, sequences of "
                           "tensors and optionals of either")


def _kind(tp: Any) -> str:
    kind = tp.WhichOneof("value")
    return "an untyped value" if kind is None else f"a {kind.replace('_type', '')}"


def _tensor(tt: Any, where: str, dims: list[Any] | None = None
            ) -> tuple[str, TensorType | None]:
    """(dtype, type) of a TensorTypeProto in a sequence or optional (``dims``: its sizes,
    else the model's): unknown sizes are ``?``; the type is None without a shape."""
    if tt.elem_type in NARROW:
        raise OpNotImplemented(f"{where}: sequences and optionals of {type_name(tt.elem_type)} "
                               "are not supported (only tensors of it)")
    dtype = interface_dtype(tt.elem_type, where)
    if dims is None:
        dims = model_dims(tt)
    if dims is None or dims is RANK_NOT_GIVEN:
        return dtype, None
    return dtype, TensorType(tuple(d if isinstance(d, int) else AnyDim() for d in dims), dtype)


def model_dims(tt: Any) -> list[int | None] | None:
    """The sizes a TensorTypeProto gives (None for each unknown one: ``dim_param``, none, a
    value <= 0); None without a shape."""
    if not tt.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
            for d in tt.shape.dim]


def declared_dims(tp: Any) -> list[int | None] | None:
    """The sizes the model gives a sequence's or optional's (element) tensor; None when it
    gives no shape, or rank 0 for a sequence's elements (taken as not given)."""
    tt = element_tensor(tp)
    dims = None if tt is None else model_dims(tt)
    return None if dims == [] and _holds_sequence(tp) else dims


def _holds_sequence(tp: Any) -> bool:
    return tp.HasField("sequence_type") or (
        tp.HasField("optional_type") and tp.optional_type.elem_type.HasField("sequence_type"))


def element_tensor(tp: Any) -> Any:
    """The TensorTypeProto of a sequence's or optional's (element) tensor, else None."""
    while tp.WhichOneof("value") in STRUCTURED:
        tp = tp.sequence_type.elem_type if tp.HasField("sequence_type") else \
            tp.optional_type.elem_type
    return tp.tensor_type if tp.HasField("tensor_type") else None


def _fully_typed(ty: Any) -> bool:
    """Whether ``ty`` says every element's rank (else type inference must find it)."""
    if isinstance(ty, OptType):
        return _fully_typed(ty.value)
    return not isinstance(ty, SeqType) or ty.elem is not None


def structured_input(imp: Any, vi: Any, where: str, dims: list[Any] | None) -> Var:
    """The variable of a sequence or optional graph input; ``dims``: the sizes of its
    (element) tensor, if known."""
    ty = import_type(vi.type, where, dims=dims)
    var = Var(vi.name, ir_type(imp, ty) if _fully_typed(ty) else None)
    imp.typer.declare(var, ty)
    return var


class Place:
    """What the sequence and optional helpers need of a ``Node``, for a graph output."""

    def __init__(self, scope: Any, label: str) -> None:
        self.scope, self.label = scope, label

    def type_of(self, expr: RelayExpr) -> Any:
        return self.scope.importer.typer.type_of(expr)

    def declare(self, expr: RelayExpr, ty: Any) -> None:
        self.scope.importer.typer.declare(expr, ty)

    def finish(self, expr: RelayExpr) -> RelayExpr:
        return self.scope.importer.typer.finish(expr)

    def fail(self, msg: str) -> FrontendError:
        return FrontendError(f"{self.label}: {msg}")

    def unsupported(self, msg: str) -> OpNotImplemented:
        return OpNotImplemented(f"{self.label}: {msg}")


def graph_output(scope: Any, expr: RelayExpr, vi: Any) -> RelayExpr:
    """Output ``vi`` (computed as ``expr``) as callers get it: a sequence as a List, an
    optional as an Option, or its value where the model declares a plain value."""
    place = Place(scope, f"graph output {vi.name!r}")
    ty = place.type_of(expr)
    declared = vi.type.WhichOneof("value")
    if isinstance(ty, SeqType):
        return to_list(place, expr)  # type: ignore[arg-type]
    if not isinstance(ty, OptType):
        return expr
    if declared in ("tensor_type", "sequence_type"):
        return _unwrap(place, expr, ty)
    content = ty.content
    if content is None and declared == "optional_type":
        content = import_type(vi.type, place.label).value
    if content is None:
        raise place.fail(f"it is {ty}, and the model declares no type for it")
    return to_option(place, expr, content_fit(place, content, None))  # type: ignore[arg-type]


def _unwrap(place: Place, expr: RelayExpr, ty: OptType) -> RelayExpr:
    """The value of an optional output that the model declares as a plain value."""
    if ty.runtime:
        value = some_value(place, expr, ty)  # type: ignore[arg-type]
    elif ty.present:
        value = value_of(place, expr)  # type: ignore[arg-type]
    else:
        raise place.fail(f"the model declares a value, but it is {ty}")
    return to_list(place, value) if isinstance(place.type_of(value), SeqType) else value  # type: ignore[arg-type]


def element_ranks(mod: Any, graph: Any, names: list[str]) -> dict[str, tuple[None, ...]]:
    """For inputs ``names`` of typed ``mod`` (sequences whose element rank ``graph`` leaves
    out): ``shape=`` entries giving their elements that rank, every size ``?``.
    FrontendError naming the input when no use of it fixed the rank."""
    out = {}
    declared = {vi.name: element_tensor(vi.type) for vi in graph.input}
    for p in mod["main"].params:
        if p.name_hint not in names:
            continue
        ty = p.checked_type_
        while isinstance(ty, TypeCall) and ty.args:
            ty = ty.args[0]
        tt = declared.get(p.name_hint)
        if not isinstance(ty, TensorType) and tt is not None and model_dims(tt) == []:
            ty = TensorType((), "float32")  # declared rank 0 and nothing says otherwise
        if not isinstance(ty, TensorType):
            raise FrontendError(f"graph input {p.name_hint!r}: the model gives no shape for "
                                "the tensors of this sequence and no use of it fixes their "
                                f"rank; give it with shape={{{p.name_hint!r}: (None, ...)}} "
                                "(one entry per axis of its tensors)")
        out[p.name_hint] = (None,) * len(ty.shape)
    return out
