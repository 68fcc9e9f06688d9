"""``register_mixed_precision_conversion``: the per-op rule ToMixedPrecision reads.

The rule of an op is ``func(call, mixed_precision_type) -> [category, accumulation_dtype,
output_dtype]`` (category 0 ALWAYS, 1 FOLLOW, 2 NEVER; see
``ember.relay.transform.mixed_precision``), kept in the op's registry record under
``FTVMMixedPrecisionConversionType``, TVM's attribute name, with a priority level
(``_op_attr``: the defaults are level 10; override with ``level=11``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._op_attr import get_rule, register_rule

__all__ = ["get_mixed_precision_conversion", "register_mixed_precision_conversion"]

KEY = "FTVMMixedPrecisionConversionType"
Rule = Callable[[Any, str], Any]


def register_mixed_precision_conversion(op_name: str, func: Rule | None = None,
                                        level: int = 10) -> Any:
    """Register ``func`` as the mixed-precision rule of ``op_name``; without ``func``, return
    a decorator that registers the function it decorates."""
    return register_rule("register_mixed_precision_conversion", op_name, KEY, func, level,
                         "(call, mixed_precision_type) -> list")


def get_mixed_precision_conversion(op_name: str) -> Rule | None:
    """The registered rule of ``op_name`` (None if it has none)."""
    return get_rule(op_name, KEY)
