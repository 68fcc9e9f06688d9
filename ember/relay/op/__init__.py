"""The operator library: one registry entry per op (attrs, type relation, fusion pattern,
numpy reference, compute rule) and the Python API functions that build calls (``relay.add``,
``relay.nn.conv2d``, ...). Each family's module registers its ops with all of their rules in
one ``defop`` call (``_reg.py``); the attrs records are in ``attrs.py`` (``nn/_attrs.py`` for
nn), the helpers the compute rules share in ``_compute_common.py``.

``from ember.relay.op import *`` (done by ``ember.relay``) exports every API function plus the
``nn`` and ``annotation`` namespaces and ``TupleWrapper``.
"""
from __future__ import annotations

from ...ir.op import Op, OpDef, OpPattern, list_op_names, register_op  # noqa: F401
from . import (  # noqa: F401
    algorithm,
    annotation,
    attrs,
    bitcast,
    collapse,
    creation,
    dyn,
    fast_math,
    image,
    index_check,
    indexing,
    nd_scatter,
    nn,
    nonzero,
    random,
    reduce,
    rounding,
    scatter_gather,
    signal,
    tensor,
    transform,
    unique_op,
    vision,
)
from . import contrib  # noqa: F401,E402 (after the ops it marks)
from ._tensor_grad import get_gradient, register_gradient  # noqa: F401 (after the ops it covers)
from ._tuple import TupleWrapper
from .algorithm import *
from .bitcast import *
from .collapse import *
from .creation import *
from .fast_math import *
from .index_check import *
from .mixed_precision import (get_mixed_precision_conversion,  # noqa: F401
                              register_mixed_precision_conversion)
from .nd_scatter import *
from .nonzero import *
from .reduce import *
from .rounding import *
from .scatter_gather import *
from .tensor import *
from .transform import *
from .unique_op import *

get = Op.get

__all__ = ["TupleWrapper", "annotation", "dyn", "image", "nn", "random", "signal", "vision",
           "register_gradient", "register_mixed_precision_conversion"]
__all__ += (algorithm.__all__ + bitcast.__all__ + collapse.__all__ + creation.__all__
            + fast_math.__all__ + index_check.__all__ + nd_scatter.__all__ + nonzero.__all__ + reduce.__all__ + rounding.__all__ + scatter_gather.__all__
            + tensor.__all__ + transform.__all__ + unique_op.__all__)
