"""Operator versions: which version of an operator a node uses, from ``onnx.defs``.

An ONNX model declares an opset (``opset_import``); each operator it uses then has the
version of the newest definition at or below that opset, its *since-version*: at opset 9,
Relu is Relu-6 and Conv is Conv-1. ember judges every node by that version (``_table.py``
says from which version on each operator is imported), never the model by its opset alone:
an opset-9 model of operators whose meaning has not changed since imports like an opset-17
one.

Definitions newer than ``REVIEWED_OPSET`` (from a newer ``onnx`` package than the one the
support table was checked against) are imported when they keep the inputs, outputs and
attributes (with their defaults) of the version before: such versions only add element types,
which the importer checks on its own.
"""
from __future__ import annotations

import functools
from typing import Any

from ._proto import require_onnx

# The newest opset whose operator definitions the support table was checked against.
REVIEWED_OPSET = 28


@functools.cache
def newest_opset() -> int:
    """The newest default-domain opset the installed ``onnx`` package defines."""
    return int(require_onnx().defs.onnx_opset_version())


@functools.cache
def _schema(op_type: str, opset: int) -> Any:
    onnx = require_onnx()
    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain="")
    except onnx.defs.SchemaError:
        return None


@functools.cache
def versions(op_type: str) -> tuple[int, ...]:
    """Every since-version of ``op_type`` in the default domain, oldest first (empty for a
    name that is no ONNX operator)."""
    out: list[int] = []
    opset = newest_opset()
    while opset >= 1 and (schema := _schema(op_type, opset)) is not None:
        out.append(int(schema.since_version))
        opset = schema.since_version - 1
    return tuple(reversed(out))


def op_version(op_type: str, opset: int) -> tuple[int | None, str | None]:
    """(the version of ``op_type`` a model of ``opset`` uses, None) or (None, why there is
    none: not an operator, not yet defined, or deprecated)."""
    schema = _schema(op_type, opset)
    if schema is None:
        known = versions(op_type)
        if not known:
            return None, "not an operator of the default ONNX domain"
        return None, f"not defined at opset {opset} (ONNX defines it from opset {known[0]})"
    if schema.deprecated:
        return None, (f"deprecated since opset {schema.since_version}, so not defined at "
                      f"opset {opset}")
    return int(schema.since_version), None


def _signature(schema: Any) -> tuple[Any, ...]:
    """What a converter reads of a definition: input and output names and arities, attribute
    names, whether required, and defaults."""
    def params(ps: Any) -> tuple[Any, ...]:
        return tuple((p.name, int(p.option)) for p in ps)

    attrs = tuple(sorted((name, a.required, a.default_value.SerializeToString())
                         for name, a in schema.attributes.items()))
    return params(schema.inputs), params(schema.outputs), attrs


def same_as_previous(op_type: str, version: int) -> bool:
    """Whether ``op_type``-``version`` keeps the signature of the version before it."""
    known = versions(op_type)
    k = known.index(version)
    if k == 0:
        return False
    new, old = _schema(op_type, version), _schema(op_type, known[k - 1])
    return _signature(new) == _signature(old)


@functools.cache
def attribute_type(op_type: str, version: int, name: str) -> int | None:
    """The AttributeProto type code attribute ``name`` has in ``op_type``-``version``, or
    None when the definition does not list it."""
    schema = _schema(op_type, version)
    attr = schema.attributes.get(name) if schema is not None else None
    return None if attr is None else int(attr.type)
