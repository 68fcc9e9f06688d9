"""ember.te: tensor expressions (placeholder, compute, reductions, extern) and schedules."""
from __future__ import annotations

from ..tir.expr import Var  # noqa: F401
from ..tir.op import (  # noqa: F401
    abs,
    ceil,
    const,
    cos,
    erf,
    exp,
    exp2,
    fabs,
    floor,
    floordiv,
    floormod,
    if_then_else,
    isnan,
    log,
    log2,
    log10,
    max_value,
    min_value,
    pow,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from .lower import lower  # noqa: F401
from .scan import ScanOp, scan  # noqa: F401
from .schedule import Schedule, Stage, create_schedule, thread_axis  # noqa: F401
from .tensor import (  # noqa: F401
    ComputeOp,
    ExternOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Range,
    Tensor,
    comm_reducer,
    compute,
    extern,
    max,
    min,
    placeholder,
    prod,
    reduce_axis,
    size_var,
    sum,
    var,
)


def build(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Same as ``ember.tir.build``."""
    from ..tir.build_module import build as _build

    return _build(*args, **kwargs)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    from .unsupported import TE, refuse

    err = refuse(TE, "te", name)
    if err is not None:
        raise err
    raise AttributeError(f"module 'ember.te' has no attribute {name!r}")
