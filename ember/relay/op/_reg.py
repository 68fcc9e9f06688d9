"""Define an operator in one block: ``defop`` registers its rules, ``call`` builds a Call.

``defop`` wraps the type relation and the numpy reference with the checks every op shares
(argument count, tensor-vs-tuple arguments, default attrs, numpy conversion), so each op's own
rules only state what is particular to it. The compute rule (``compute=``) is registered in
the same call; its contract and helpers are in ``_compute_common.py``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...ir.attrs import Attrs
from ...ir.expr import Call, RelayExpr
from ...ir.op import Op, OpDef, OpPattern, register_op
from ...ir.types import TensorType, TupleType, Type
from ...runtime.errors import OpAttributeInvalid, OpAttributeRequired
from ._compute_common import Compute
from ._shape import fail, fmt_type

Rel = Callable[[list[Any], Any], Type]
Ref = Callable[..., Any]

ELEMWISE = OpPattern.ELEMWISE
BROADCAST = OpPattern.BROADCAST
INJECTIVE = OpPattern.INJECTIVE
COMM_REDUCE = OpPattern.COMM_REDUCE
OUT_ELEMWISE_FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE
OPAQUE = OpPattern.OPAQUE


def resolve_attrs(name: str, attrs_type: type[Attrs] | None, attrs: Any) -> Any:
    """The attrs record to use: defaults when absent, built from a mapping when given one."""
    if attrs_type is None or isinstance(attrs, attrs_type):
        return attrs
    if attrs is not None and not isinstance(attrs, Mapping):
        raise OpAttributeInvalid(f"{name}: expected attrs of type {attrs_type.__name__}, "
                                 f"got {type(attrs).__name__}")
    if isinstance(attrs, Mapping):
        fields = [f.name for f in dataclasses.fields(attrs_type)]  # type: ignore[arg-type]
        unknown = sorted(set(attrs) - set(fields))
        if unknown:
            raise OpAttributeInvalid(f"{name}: unknown attribute(s) {', '.join(unknown)}; "
                                     f"{attrs_type.__name__} has {', '.join(fields)}")
    try:
        return attrs_type() if attrs is None else attrs_type(**dict(attrs))
    except TypeError as err:
        raise OpAttributeRequired(f"{name}: {err}") from None


def _check_args(name: str, arg_types: Sequence[Any], arg_names: Sequence[str],
                tuple_input: bool) -> None:
    if len(arg_types) != len(arg_names):
        raise fail(name, f"expected {len(arg_names)} argument(s) ({', '.join(arg_names)}), "
                         f"got {len(arg_types)}")
    want, kind = (TupleType, "a tuple of tensors") if tuple_input else (TensorType, "a tensor")
    for ty, arg in zip(arg_types, arg_names):
        ok = isinstance(ty, want)
        if ok and tuple_input:
            ok = all(isinstance(f, TensorType) for f in ty.fields)
        if not ok:
            raise fail(name, f"argument {arg} must be {kind}, got {fmt_type(ty)}")


def _wrap_rel(name: str, rel: Rel, arg_names: tuple[str, ...], attrs_type: type[Attrs] | None,
              tuple_input: bool) -> Rel:
    def type_rel(arg_types: Sequence[Any], attrs: Any = None) -> Type:
        _check_args(name, arg_types, arg_names, tuple_input)
        return rel(list(arg_types), resolve_attrs(name, attrs_type, attrs))

    type_rel.__name__ = f"{name}_rel"
    type_rel.__wrapped__ = rel  # type: ignore[attr-defined]
    return type_rel


def to_numpy(value: Any) -> Any:
    """NDArray / list / tuple-of-arrays to numpy (tuples stay tuples for tuple inputs)."""
    if isinstance(value, (tuple, list)) and value and not np.isscalar(value[0]):
        return tuple(to_numpy(v) for v in value)
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return value.numpy()
    return np.asarray(value)


def _wrap_ref(name: str, ref: Ref, attrs_type: type[Attrs] | None) -> Ref:
    def reference(*args: Any, attrs: Any = None) -> Any:
        with np.errstate(all="ignore"):  # C kernels do not warn on overflow or x/0 either
            out = ref(*(to_numpy(a) for a in args), attrs=resolve_attrs(name, attrs_type, attrs))
        if isinstance(out, tuple):
            return tuple(np.asarray(o) for o in out)
        return np.asarray(out)

    reference.__name__ = f"{name}_ref"
    reference.__wrapped__ = ref  # type: ignore[attr-defined]
    return reference


def _wrap_infer_args(name: str, fn: Callable[..., list[Any]],
                     attrs_type: type[Attrs] | None) -> Callable[..., list[Any]]:
    def infer_args(arg_types: Sequence[Any], attrs: Any = None) -> list[Any]:
        known = [t if isinstance(t, (TensorType, TupleType)) else None for t in arg_types]
        try:
            out = fn(known, resolve_attrs(name, attrs_type, attrs))
        except (IndexError, ValueError):  # not enough is known yet
            return [None] * len(arg_types)
        return [o if k is None else None for o, k in zip(out, known)]

    infer_args.__name__ = f"{name}_infer_args"
    return infer_args


def defop(name: str, rel: Rel, ref: Ref, pattern: OpPattern, *, args: tuple[str, ...] = ("data",),
          attrs: type[Attrs] | None = None, tuple_input: bool = False, doc: str = "",
          level: int = 1, infer_args: Callable[..., list[Any]] | None = None,
          compute: Compute | None = None, shape_data: tuple[str, ...] = ()) -> OpDef:
    """Register operator ``name`` with all of its rules.

    rel(arg_types, attrs) receives checked argument types (tensors, or for ``tuple_input`` one
    tuple of tensors) and the attrs record (defaults filled in); ref(*arrays, attrs=...) is the
    numpy oracle. infer_args(arg_types, attrs), stored as ``op_def.extra["infer_args"]``,
    deduces the types of unannotated arguments (a conv2d weight from ``channels`` and
    ``kernel_size``): it gets None for each unknown argument and returns a list with a type
    for each argument it can deduce, None elsewhere (and None for the known ones).
    compute(attrs, inputs, out_type) is the tensor expression the op lowers to (see
    ``_compute_common.Compute``); an op without one has no lowering to C. shape_data names
    the arguments whose *values* fix the output shape (dyn.reshape's newshape, arange's
    bounds): the VM's shape function reads them (``op/_value_dims.py``), stored as
    ``op_def.extra["shape_data"]``.
    """
    extra: dict[str, Any] = {} if infer_args is None else {
        "infer_args": _wrap_infer_args(name, infer_args, attrs)}
    unknown = [a for a in shape_data if a not in args]
    if unknown:
        raise ValueError(f"defop {name}: shape_data names {unknown}, which are not among its "
                         f"arguments {args}")
    if shape_data:
        extra["shape_data"] = tuple(shape_data)
    return register_op(OpDef(
        name=name, num_inputs=len(args), attrs_type=attrs,
        type_rel=_wrap_rel(name, rel, args, attrs, tuple_input), pattern=pattern,
        reference=_wrap_ref(name, ref, attrs), arg_names=args, description=doc,
        support_level=level, extra=extra, compute=compute,
        shape_func_data_dependent=bool(shape_data)))


def call(name: str, *args: Any, attrs: Attrs | None = None) -> Call:
    """``Call(Op.get(name), args, attrs)``; Python scalars become constants."""
    return Call(Op.get(name), args, attrs)


def as_tuple_expr(data: Any) -> RelayExpr:
    """A list/tuple of expressions as a relay Tuple; an expression (tuple-typed) as is."""
    from ...ir.expr import Tuple

    if isinstance(data, RelayExpr):
        return data
    if isinstance(data, (list, tuple)):
        return Tuple(tuple(data))
    raise TypeError(f"expected a list of relay expressions or a tuple expression, got {data!r}")
