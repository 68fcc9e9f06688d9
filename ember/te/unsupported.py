"""TVM schedule names ember does not have, each with why and what to write instead.

Relay-era scripts reach for these on GPU schedules; a plain AttributeError would say nothing.
The error is both an OpError (as ember's other refusals) and an AttributeError, so
``hasattr(stage, "double_buffer")`` stays False.
"""
from __future__ import annotations

from ..runtime.errors import OpError

_CPU_ONLY = "ember compiles for the host CPU only (targets 'c', 'llvm')"

STAGE: dict[str, str] = {
    "double_buffer": f"double buffering overlaps GPU shared-memory loads; {_CPU_ONLY}: "
                     "use cache_read(..., 'local') with compute_at instead",
    "env_threads": f"env_threads binds GPU thread axes; {_CPU_ONLY}: use parallel()",
    "set_store_predicate": f"store predicates guard GPU thread writes; {_CPU_ONLY}",
    "tensorize": "tensorize replaces a loop nest with a hardware intrinsic, which ember does not "
                 "model; for a C kernel write the stage as te.extern calling tir.call_extern",
    "prefetch": "prefetch is not supported in ember; order the loops so that the innermost "
                "one reads contiguous memory",
}

SCHEDULE: dict[str, str] = {
    "create_group": "create_group is not supported; place stages with compute_at instead",
}

TE: dict[str, str] = {
    "hybrid": "te.hybrid is not supported in ember; write the loops as te.compute / te.extern "
              "stages",
}


class UnsupportedScheduleError(OpError, AttributeError):
    """A TVM schedule name ember does not provide: '<where>.<name>: <why and what instead>'."""


def refuse(table: dict[str, str], where: str, name: str) -> UnsupportedScheduleError | None:
    """The error for ``name`` if ``table`` lists it."""
    why = table.get(name)
    return None if why is None else UnsupportedScheduleError(f"{where}.{name}: {why}")
