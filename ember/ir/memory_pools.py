"""Memory pools for the AOT executor's unified static memory planner (USMP), as in
``tvm.ir.memory_pools``.

A pool is a named region of memory that some targets can access: ``WorkspacePoolInfo`` for
intermediates (written at run time), ``ConstantPoolInfo`` for the linked constants. Its
``PoolInfoProperties`` give the size (``size_hint_bytes``; -1, the default, means "as large as
the plan needs") and the access costs a planner may weigh. ``relay.build(...,
workspace_memory_pools=WorkspaceMemoryPools([...]), constant_memory_pools=ConstantMemoryPools(
[...]))`` hands them to the AOT build; a pool is checked when it is made, so a bad one fails
where the caller wrote it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..runtime.errors import TVMError

UNRESTRICTED = -1  # size_hint_bytes of a pool with no size limit (TVM's kUnrestrictedPoolSizeHint)


class PoolError(TVMError, ValueError):
    """A memory pool that cannot be used; the message names the pool and the field."""


def _check_count(owner: str, key: str, value: Any, allow_unrestricted: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PoolError(f"{owner}: {key} must be an int, got {type(value).__name__} {value!r}")
    if allow_unrestricted and value == UNRESTRICTED:
        return value
    if value <= 0:
        hint = " (or -1 for no limit)" if allow_unrestricted else ""
        raise PoolError(f"{owner}: {key} must be positive{hint}, got {value}")
    return value


@dataclass(frozen=True)
class PoolInfoProperties:
    """Size and access costs of a pool. -1 means unknown (or, for the size, unlimited)."""

    size_hint_bytes: int = UNRESTRICTED
    clock_frequency_hz: int = -1
    read_bandwidth_bytes_per_cycle: int = -1
    write_bandwidth_bytes_per_cycle: int = -1
    read_latency_cycles: int = 0
    write_latency_cycles: int = 0
    target_burst_bytes: Any = None

    def __post_init__(self) -> None:
        owner = "PoolInfoProperties"
        _check_count(owner, "size_hint_bytes", self.size_hint_bytes, True)
        for key in ("clock_frequency_hz", "read_bandwidth_bytes_per_cycle",
                    "write_bandwidth_bytes_per_cycle"):
            _check_count(owner, key, getattr(self, key), True)
        for key in ("read_latency_cycles", "write_latency_cycles"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PoolError(f"{owner}: {key} must be an int >= 0, got {value!r}")
        bursts = self.target_burst_bytes
        if bursts is not None:
            if not isinstance(bursts, Mapping):
                raise PoolError(f"{owner}: target_burst_bytes must map targets to bytes, got "
                                f"{type(bursts).__name__} {bursts!r}")
            for t, n in bursts.items():
                _targets(f"{owner}: target_burst_bytes", [t])
                _check_count(owner, f"target_burst_bytes[{str(t)!r}]", n, False)

    @property
    def bounded(self) -> bool:
        return self.size_hint_bytes != UNRESTRICTED

    def burst_bytes(self, target: Any) -> int:
        """The burst of ``target`` on this pool (``target_burst_bytes``), 1 when not given."""
        for t, n in (self.target_burst_bytes or {}).items():
            if _kind_name(t) == _kind_name(target):
                return int(n)
        return 1

    def access_cycles_per_byte(self, target: Any) -> float | None:
        """Cycles to read and write one byte in bursts of ``target``: each burst costs the
        latency plus the burst over the bandwidth, each way. None when a bandwidth is unknown
        (the cost cannot be estimated)."""
        read, write = self.read_bandwidth_bytes_per_cycle, self.write_bandwidth_bytes_per_cycle
        if read <= 0 or write <= 0:
            return None
        burst = self.burst_bytes(target)
        cycles = (self.read_latency_cycles + burst / read
                  + self.write_latency_cycles + burst / write)
        return cycles / burst


@dataclass(frozen=True)
class ConstantInfo:
    """A constant placed at ``byte_offset`` of a constant pool (TVM's ``ConstantInfo``)."""

    name_hint: str
    byte_offset: int
    data: Any


def _kind_name(target: Any) -> str:
    """``"c"`` for ``Target("c -mcpu=x")`` or the string ``"c -mcpu=x"`` (the IR layer sits below
    ``ember.target``, so targets are read by duck typing)."""
    kind = getattr(target, "kind", None)
    if kind is not None:
        return str(getattr(kind, "name", kind))
    return str(target).split(maxsplit=1)[0] if str(target).strip() else ""


def _targets(owner: str, targets: Any) -> tuple[Any, ...]:
    if isinstance(targets, str) or hasattr(targets, "kind"):
        targets = [targets]
    if not isinstance(targets, Sequence) or not targets:
        raise PoolError(f"{owner}: targets must be a non-empty list of targets, got {targets!r}")
    for t in targets:
        if not (isinstance(t, str) or hasattr(t, "kind")) or not _kind_name(t):
            raise PoolError(f"{owner}: {t!r} is not a target (expected a Target or a target "
                            "string such as 'c')")
    return tuple(targets)


@dataclass(frozen=True, init=False)
class PoolInfo:
    """A named pool, the targets that can access it, and its properties."""

    pool_name: str
    targets: tuple[Any, ...]
    pool_info_properties: PoolInfoProperties

    def __init__(self, pool_name: str, targets: Any,
                 pool_info_properties: PoolInfoProperties | None = None) -> None:
        kind = type(self).__name__
        if not isinstance(pool_name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*",
                                                              pool_name):
            raise PoolError(f"{kind}: pool_name must be a C identifier (it names a member of "
                            f"the generated pools struct), got {pool_name!r}")
        props = PoolInfoProperties() if pool_info_properties is None else pool_info_properties
        if not isinstance(props, PoolInfoProperties):
            raise PoolError(f"{kind} {pool_name!r}: pool_info_properties must be "
                            f"PoolInfoProperties, got {type(props).__name__}")
        object.__setattr__(self, "pool_name", pool_name)
        object.__setattr__(self, "targets", _targets(f"{kind} {pool_name!r}", targets))
        object.__setattr__(self, "pool_info_properties", props)

    @property
    def size_hint_bytes(self) -> int:
        return self.pool_info_properties.size_hint_bytes

    def serves(self, target: Any) -> bool:
        """True when ``target`` (a Target) can access this pool (same kind of target)."""
        return any(_kind_name(t) == _kind_name(target) for t in self.targets)


class WorkspacePoolInfo(PoolInfo):
    """A pool for the intermediates (and, with ``tir.usmp.use_workspace_io``, the inputs and
    outputs) of the model."""


@dataclass(frozen=True, init=False)
class ConstantPoolInfo(PoolInfo):
    """A pool for the linked constants; ``constant_info_arr`` is filled by the build."""

    constant_info_arr: tuple[ConstantInfo, ...] = ()

    def __init__(self, pool_name: str, targets: Any,
                 constant_info_arr: Sequence[ConstantInfo] | None = None,
                 pool_info_properties: PoolInfoProperties | None = None) -> None:
        super().__init__(pool_name, targets, pool_info_properties)
        object.__setattr__(self, "constant_info_arr", tuple(constant_info_arr or ()))


@dataclass(frozen=True, init=False)
class _MemoryPools:
    """A list of pools of one kind (``member``), names unique, checked when made."""

    pools: tuple[Any, ...]
    member: ClassVar[type] = PoolInfo

    def __init__(self, pools: Sequence[Any]) -> None:
        kind, cls = type(self).__name__, self.member
        if not isinstance(pools, Sequence) or isinstance(pools, str):
            raise PoolError(f"{kind}: expected a list of {cls.__name__}, got "
                            f"{type(pools).__name__}")
        seen: set[str] = set()
        for i, p in enumerate(pools):
            if not isinstance(p, cls):
                raise PoolError(f"{kind}: pool {i} must be a {cls.__name__}, got "
                                f"{type(p).__name__}")
            if p.pool_name in seen:
                raise PoolError(f"{kind}: two pools are named {p.pool_name!r}")
            seen.add(p.pool_name)
        object.__setattr__(self, "pools", tuple(pools))


class WorkspaceMemoryPools(_MemoryPools):
    """The workspace pools of a build, in the order the planner tries them."""

    member = WorkspacePoolInfo


class ConstantMemoryPools(_MemoryPools):
    """The constant pools of a build, in the order the planner tries them."""

    member = ConstantPoolInfo


__all__ = ["ConstantInfo", "ConstantMemoryPools", "ConstantPoolInfo", "PoolError", "PoolInfo",
           "PoolInfoProperties", "WorkspaceMemoryPools", "WorkspacePoolInfo"]
