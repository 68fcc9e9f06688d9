"""The operator library: one registry entry per op (attrs, type relation, fusion pattern,
numpy reference; compute and shape function arrive with lowering) and the Python API
functions that build calls (``relay.add``, ``relay.nn.conv2d``, ...).

``from ember.relay.op import *`` (done by ``ember.relay``) exports every API function plus the
``nn`` and ``annotation`` namespaces and ``TupleWrapper``.
"""
from __future__ import annotations

from ...ir.op import Op, OpDef, OpPattern, list_op_names, register_op  # noqa: F401
from . import annotation, attrs, creation, indexing, reduce, tensor, transform  # noqa: F401
from . import nn  # noqa: F401  (after tensor: nn.rearrange loads the compute rules)
from ._tuple import TupleWrapper
from .creation import *
from .reduce import *
from .tensor import *
from .transform import *

get = Op.get

__all__ = ["TupleWrapper", "annotation", "image", "nn"]
__all__ += creation.__all__ + reduce.__all__ + tensor.__all__ + transform.__all__

from . import _compute  # noqa: E402,F401  (registers every op's compute rule)
# Op families whose compute rules sit next to their other rules (after _compute: they use it).
from . import algorithm, image, scatter_gather  # noqa: E402
from .algorithm import *  # noqa: E402
from .scatter_gather import *  # noqa: E402

__all__ += algorithm.__all__ + scatter_gather.__all__
