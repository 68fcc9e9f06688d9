"""``register_mixed_precision_conversion``: the per-op rule ToMixedPrecision reads.

The rule of an op is ``func(call, mixed_precision_type) -> [category, accumulation_dtype,
output_dtype]`` (category 0 ALWAYS, 1 FOLLOW, 2 NEVER; see
``ember.relay.transform.mixed_precision``), kept in the op's registry record under
``FTVMMixedPrecisionConversionType``, TVM's attribute name. Rules carry a priority ``level``:
the defaults are registered at level 10, and a user overrides one by registering at a higher
level (``level=11``); registering again at the same level is an error, at a lower level a no-op.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.op import Op

__all__ = ["get_mixed_precision_conversion", "register_mixed_precision_conversion"]

KEY = "FTVMMixedPrecisionConversionType"
Rule = Callable[[Any, str], Any]


def register_mixed_precision_conversion(op_name: str, func: Rule | None = None,
                                        level: int = 10) -> Any:
    """Register ``func`` as the mixed-precision rule of ``op_name``; without ``func``, return
    a decorator that registers the function it decorates."""
    def register(f: Rule) -> Rule:
        if not callable(f):
            raise TypeError(f"register_mixed_precision_conversion({op_name!r}): expected a "
                            f"function (call, mixed_precision_type) -> list, got {f!r}")
        extra = Op.get(op_name).op_def.extra
        old = extra.get(KEY)
        if old is not None and old[1] == level:
            raise ValueError(f"register_mixed_precision_conversion: {op_name} already has a "
                             f"rule at level {level}; register with a higher level to "
                             "override it")
        if old is None or level > old[1]:
            extra[KEY] = (f, level)
        return f

    return register if func is None else register(func)


def get_mixed_precision_conversion(op_name: str) -> Rule | None:
    """The registered rule of ``op_name`` (None if it has none)."""
    entry = Op.get(op_name).op_def.extra.get(KEY)
    return None if entry is None else entry[0]
