"""Sequence and optional inputs and outputs of a compiled model (ONNX ``sequence_type`` and
``optional_type``), as callers pass and get them, following onnxruntime::

    out = model(seq=[a, b, c])      # a sequence input: a Python list (or tuple) of arrays
    out = model(opt=None)           # an optional input: None, or its value (array or list)
    parts = model(x)                # a sequence output: a list of arrays
    maybe = model(x)                # an optional output: None, or its value

Such a value is a Relay ``List[...]`` / ``Option[...]`` of tensors in the model (the ONNX
importer makes them, ``relay/frontend/onnx/_boundary.py``), recorded in the model's
``TensorSpec`` as that type's text (``List[Tensor[(?, 3), float32]]``, shape None); the VM
runs it. Here a caller's list becomes the Prelude's Cons/Nil chain and None/value its
``None``/``Some``, each tensor checked against the element type (dtype, rank, static sizes;
``ModelInputError`` naming the input and the element), and the results go back the other
way. This module imports the runtime only, as ``ember.api.model`` does.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.container import ADT
from ..runtime.errors import ArgumentError, ArgumentTypeError
from ..runtime.executor_common import input_array
from ..runtime.model_record import ModelRecord, TensorSpec
from ..runtime.module import Module
from ..runtime.ndarray import NDArray, array
from ..runtime.vm.executor import VMModule
from ..runtime.vm.interpreter import VirtualMachine

# The constructor tags of the Prelude's types (their index in ``prelude.rly``'s definitions;
# tests/api/test_model_values.py checks them against the Prelude).
CONS, NIL = 0, 1  # type List[A] { Cons(A, List[A]), Nil }
SOME, NONE = 0, 1  # type Option[A] { Some(A), None }
_WRAPPERS = {"List[": "list", "Option[": "option"}
_TENSOR = re.compile(r"Tensor\[\(([^()]*)\),(\w+)\]")  # (spaces removed)


@dataclass(frozen=True)
class ValueKind:
    """A sequence / optional type: ``wrappers`` outermost first ("list", "option") around
    tensors of ``dtype`` and ``shape`` (None for a dynamic size)."""

    wrappers: tuple[str, ...]
    dtype: str
    shape: tuple[int | None, ...]

    def describe(self, level: int = 0) -> str:
        """``a list of float32[?, 3]``, ``None or float32[3]``: the value expected at
        ``level`` of the wrappers."""
        text = f"{self.dtype}[{', '.join('?' if d is None else str(d) for d in self.shape)}]"
        for w in reversed(self.wrappers[level:]):
            text = f"a list of {text}" if w == "list" else f"None or {text}"
        return text


def value_kind(spec: TensorSpec) -> ValueKind | None:
    """The ValueKind of a non-tensor spec whose type is a List / Option of tensors, else
    None (a tensor, or a type this module does not convert)."""
    if spec.shape is not None:
        return None
    rest, wrappers = spec.dtype.replace(" ", ""), []
    while (head := next((w for w in _WRAPPERS if rest.startswith(w)), None)) is not None:
        wrappers.append(_WRAPPERS[head])
        rest = rest[len(head):]
    if not wrappers or not rest.endswith("]" * len(wrappers)):
        return None
    m = _TENSOR.fullmatch(rest[:len(rest) - len(wrappers)])
    if m is None:
        return None
    dims = [d for d in m.group(1).split(",") if d]
    if any(d != "?" and not d.isdigit() for d in dims):
        return None
    return ValueKind(tuple(wrappers), m.group(2),
                     tuple(None if d == "?" else int(d) for d in dims))


def has_values(record: ModelRecord) -> bool:
    """Whether a model has a sequence or optional input or output."""
    return any(value_kind(s) is not None for s in (*record.inputs, *record.outputs))


def _error(msg: str) -> Exception:
    from .model import ModelInputError  # (model.py imports this module)

    return ModelInputError(msg)


# ---------------------------------------------------------------- inputs
def to_vm_value(spec: TensorSpec, kind: ValueKind, value: Any) -> Any:
    """A caller's value for input ``spec`` as the VM's value (ADTs of NDArrays).
    ModelInputError naming the input (and the element) for a wrong one."""
    return _to_vm(kind, 0, value, f"input {spec.name!r}")


def _to_vm(kind: ValueKind, level: int, value: Any, where: str) -> Any:
    if level == len(kind.wrappers):
        return _tensor(kind, value, where)
    if kind.wrappers[level] == "option":
        if value is None:
            return ADT(NONE, [])
        return ADT(SOME, [_to_vm(kind, level + 1, value, where)])
    if not isinstance(value, (list, tuple)):
        raise _error(f"{where}: expected {kind.describe(level)} (a sequence: a Python list of "
                     f"arrays), got {type(value).__name__}")
    items = [_to_vm(kind, level + 1, v, f"{where} element {k}") for k, v in enumerate(value)]
    out = ADT(NIL, [])
    for item in reversed(items):
        out = ADT(CONS, [item, out])
    return out


def _tensor(kind: ValueKind, value: Any, where: str) -> NDArray:
    """One tensor, checked as the VM checks a tensor argument (``input_array``: exact dtype
    for arrays, a lossless conversion for Python numbers and lists), copied into a new
    NDArray."""
    if value is None:
        raise _error(f"{where}: expected {kind.describe(len(kind.wrappers))}, got None")
    shape = [-1 if d is None else d for d in kind.shape]
    try:
        src = input_array(value, kind.dtype, shape, where)
    except (ArgumentError, ArgumentTypeError) as err:
        raise _error(str(err)) from None
    return array(np.array(src, dtype=kind.dtype))


# ---------------------------------------------------------------- outputs
def from_vm_value(kind: ValueKind | None, value: Any) -> Any:
    """A VM result as callers get it: lists for Lists, None or the value for Options,
    numpy arrays (copies) for tensors."""
    return _from_vm(kind, 0, value)


def _from_vm(kind: ValueKind | None, level: int, value: Any) -> Any:
    if kind is None or level == len(kind.wrappers):
        return value.numpy() if isinstance(value, NDArray) else value
    if kind.wrappers[level] == "option":  # Some(x) holds one field, None none
        return _from_vm(kind, level + 1, value.fields[0]) if value.fields else None
    items = []
    while len(value.fields) == 2:  # Cons(head, tail) ... Nil
        items.append(_from_vm(kind, level + 1, value.fields[0]))
        value = value.fields[1]
    return items


def split_results(result: Any, kinds: Sequence[ValueKind | None]) -> list[Any]:
    """``main``'s result as one value per output: a tuple's fields (nested tuples flattened
    where the outputs are tensors, as every executor returns them)."""
    if len(kinds) == 1:
        return [result]
    out: list[Any] = []
    stack = list(reversed(result.fields))
    while stack:
        v = stack.pop()
        if type(v) is ADT and kinds[len(out)] is None:
            stack.extend(reversed(v.fields))
        else:
            out.append(v)
    return out


class ValuesContext:
    """An execution context (see ``ember.runtime.execution_pool``) for a model with sequence
    or optional inputs or outputs: a VirtualMachine of its own that takes the converted
    inputs (``to_vm_value``) and returns the outputs as callers get them."""

    native = None  # no one-C-call form (see execution_pool.BufferContext)

    def __init__(self, vm: VirtualMachine, kinds: Sequence[ValueKind | None]) -> None:
        self.vm, self.kinds = vm, list(kinds)

    def call(self, values: Sequence[Any]) -> list[Any]:
        result = self.vm.invoke("main", *values)
        return [from_vm_value(k, v) for k, v in zip(self.kinds, split_results(result,
                                                                              self.kinds))]

    def prepare(self, values: Sequence[Any]) -> Callable[[], Any]:
        """A whole call on ``values``, to time (``CompiledModel.benchmark``)."""
        return lambda: self.call(values)


def values_context_maker(factory: Module, dev: Any, record: ModelRecord
                         ) -> Callable[[], ValuesContext]:
    """``make()`` for a pool of ``factory``'s model, which must run on the VM (a List or
    Option needs it); TypeError otherwise."""
    first = factory["default"](dev)
    if not isinstance(first, VMModule):
        raise TypeError(f"ember model: sequence and optional values need the VM executor, "
                        f"this model runs on {record.executor!r}")
    kinds = [value_kind(s) for s in record.outputs]
    vms = iter([first.vm])
    return lambda: ValuesContext(next(vms, None) or VirtualMachine(first.vm.exe, dev), kinds)
