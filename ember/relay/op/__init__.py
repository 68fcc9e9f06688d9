"""The operator library: one registry entry per op (attrs, type relation, fusion pattern,
numpy reference; compute and shape function arrive with lowering) and the Python API
functions that build calls (``relay.add``, ``relay.nn.conv2d``, ...)."""
from __future__ import annotations

from ...ir.op import Op, OpPattern, list_op_names  # noqa: F401

get = Op.get
__all__: list[str] = []
