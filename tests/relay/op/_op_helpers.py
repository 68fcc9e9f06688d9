"""Helpers for the operator tests: call an op's type relation and reference directly."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.ir.op import Op
from ember.ir.types import TensorType, TupleType, Type


def attrs_of(name: str, **kw: Any) -> Any:
    return Op.get(name).make_attrs(**kw)


def ttype(value: Any) -> Type:
    """The TensorType (or TupleType for a tuple of arrays) of a numpy value."""
    if isinstance(value, (tuple, list)):
        return TupleType(tuple(ttype(v) for v in value))
    arr = np.asarray(value)
    return TensorType(arr.shape, str(arr.dtype))


def infer(name: str, *types: Type, **kw: Any) -> Type:
    """The op's type relation on ``types`` with attrs built from ``kw``."""
    return Op.get(name).op_def.type_rel(list(types), attrs_of(name, **kw))


def ref(name: str, *arrays: Any, **kw: Any) -> Any:
    return Op.get(name).op_def.reference(*arrays, attrs=attrs_of(name, **kw))


def check(name: str, *arrays: Any, **kw: Any) -> Any:
    """Run the reference and assert it agrees with the type relation; return its output."""
    ty = infer(name, *(ttype(a) for a in arrays), **kw)
    out = ref(name, *arrays, **kw)
    assert ttype(out) == ty, f"{name}: relation says {ty}, reference gave {ttype(out)}"
    return out
