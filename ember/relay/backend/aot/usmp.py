"""The unified static memory planner (USMP): an AOT model's buffers placed in memory pools.

Enabled by the PassContext config ``tir.usmp.enable``; ``tir.usmp.algorithm`` chooses the
order in which buffers are placed, ``tir.usmp.use_workspace_io`` puts the inputs and outputs
in the pools too, ``tir.disable_storage_rewrite`` gives every buffer bytes of its own (no
reuse). The pools come from ``relay.build(..., workspace_memory_pools=...)``; without any, the
build uses one unbounded pool named ``global_workspace``. The buffers are the intermediates
and the kernels' scratch (one block per call, alive during that call: ``scratch.py``).

Placement (``usmp_placement.py``): buffers in the algorithm's order; each goes to the first
pool, in candidate order, where it fits at the lowest byte offset that overlaps no buffer of
that pool alive at the same time and stays within the pool's ``size_hint_bytes``. Candidate
order (:func:`candidate_order`): pools with known access costs (bandwidths, latencies, the
target's burst) cheapest first, then the others as given. The algorithms differ in the buffer
order only:

- ``greedy_by_size``: largest first (ties: earliest first);
- ``greedy_by_conflicts``: most conflicts (buffers alive at the same time) first, then largest;
- ``hill_climb``: the better of the two greedy orders, then seeded swaps of two buffers kept
  when the pools do not grow, until the plan reaches the liveness lower bound.

A plan that does not fit raises :class:`~ember.ir.memory_pools.PoolError` naming the buffer,
the pools, and the bytes the model needs (its lower bound: no plan needs less).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....ir.memory_pools import (
    ConstantMemoryPools,
    ConstantPoolInfo,
    PoolError,
    WorkspaceMemoryPools,
    WorkspacePoolInfo,
)
from .._liveness import CONST, INPUT, INTERMEDIATE, Dataflow
from ..memory_plan import _align, lower_bound
from .usmp_placement import Placement, conflict_lists, hill_climb

ALGORITHMS = ("greedy_by_size", "greedy_by_conflicts", "hill_climb")
DEFAULT_ALGORITHM = "greedy_by_conflicts"  # TVM's default
DEFAULT_POOL = "global_workspace"
IMPROVE_MAX_BUFFERS = 500  # a default plan above the bound is improved up to this many buffers


@dataclass(frozen=True)
class UsmpSettings:
    """What the build asked of USMP: the algorithm, I/O in the pools, the pools."""

    algorithm: str
    use_workspace_io: bool
    pools: tuple[WorkspacePoolInfo, ...]
    no_reuse: bool = False  # tir.disable_storage_rewrite: no two buffers share bytes
    target: Any = None  # the build's target (pool access costs depend on its bursts)
    # No algorithm configured: the default's plan, improved by hill_climb where it is above
    # the liveness bound (see plan_pools).
    improve: bool = False


def usmp_settings(config: Mapping[str, Any], pools: Any, target: Any,
                  interface_api: str) -> UsmpSettings | None:
    """The USMP settings of a build (None when ``tir.usmp.enable`` is off); PoolError for an
    unknown algorithm, a pool no target can use, or I/O in the pools with the packed API."""
    if not config.get("tir.usmp.enable", False):
        if pools is not None and not isinstance(pools, WorkspaceMemoryPools):
            raise PoolError(f"relay.build: workspace_memory_pools must be WorkspaceMemoryPools, "
                            f"got {type(pools).__name__}")
        if pools is not None:
            raise PoolError("relay.build: workspace_memory_pools need the USMP: build with "
                            'PassContext(config={"tir.usmp.enable": True})')
        return None
    algorithm = config.get("tir.usmp.algorithm", DEFAULT_ALGORITHM)
    if algorithm not in ALGORITHMS:
        raise PoolError(f"tir.usmp.algorithm must be one of {', '.join(map(repr, ALGORITHMS))}, "
                        f"got {algorithm!r}")
    io = bool(config.get("tir.usmp.use_workspace_io", False))
    if io and interface_api != "c":
        raise PoolError("tir.usmp.use_workspace_io needs Executor('aot', {'interface-api': 'c'}): "
                        "the inputs and outputs live in the pools and are found with "
                        "tvmgen_<mod>_map_inputs/map_outputs, which the packed interface lacks")
    if pools is None:
        chosen: tuple[WorkspacePoolInfo, ...] = (WorkspacePoolInfo(DEFAULT_POOL, [target]),)
    elif isinstance(pools, WorkspaceMemoryPools):
        _check_served("workspace", pools.pools, target)
        chosen = pools.pools
        if not chosen:
            raise PoolError("relay.build: workspace_memory_pools holds no pool")
    else:
        raise PoolError(f"relay.build: workspace_memory_pools must be WorkspaceMemoryPools, "
                        f"got {type(pools).__name__}")
    return UsmpSettings(algorithm, io, chosen,
                        bool(config.get("tir.disable_storage_rewrite", False)), target,
                        "tir.usmp.algorithm" not in config)


def output_roots(df: Dataflow, roots: Sequence[int]) -> dict[int, int]:
    """Root -> output index, for outputs an operator writes straight into the output's buffer
    (the first output of each intermediate group; the others are copies)."""
    out: dict[int, int] = {}
    for j, t in enumerate(df.outputs):
        r = roots[t]
        if df.tensors[r].kind not in (INPUT, CONST) and r not in out:
            out[r] = j
    return out


def plan_dataflow_pools(df: Dataflow, settings: UsmpSettings, alignment: int = 16,
                        scratch: Mapping[int, tuple[str, int]] | None = None
                        ) -> tuple[list[Any], PoolPlan]:
    """The USMP plan of ``df`` (a fused ``main``'s dataflow): ``(keys, plan)``, keys as
    :func:`dataflow_buffers` returns them, then ``("scratch", i)`` for the scratch of step
    ``i`` (``scratch``: step index -> (kernel name, bytes); alive during that step only)."""
    roots = df.alias_roots()
    keys, sizes, intervals, names = dataflow_buffers(df, roots, output_roots(df, roots),
                                                     settings.use_workspace_io)
    all_keys: list[Any] = list(keys)
    for i, (kernel, nbytes) in sorted((scratch or {}).items()):
        all_keys.append(("scratch", i))
        sizes.append(nbytes)
        intervals.append((i, i))
        names.append(f"the scratch of {kernel} (step {i})")
    if settings.no_reuse:  # tir.disable_storage_rewrite: every buffer alive all the time
        intervals = [(-1, len(df.steps))] * len(intervals)
    return all_keys, plan_pools(sizes, intervals, settings.pools, settings.algorithm, alignment,
                                names, settings.target, settings.improve)


def dataflow_buffers(df: Dataflow, roots: Sequence[int], output_of: Mapping[int, int],
                     use_workspace_io: bool
                     ) -> tuple[list[int], list[int], list[tuple[int, int]], list[str]]:
    """The buffers USMP places for ``df``: ``(keys, sizes, intervals, names)``.

    A key is the root tensor of an alias group (its members at their byte offsets in the
    buffer: ``Dataflow.alias_places``); ``output_of`` (root -> output index) names
    the groups an operator writes straight into an output. Without ``use_workspace_io`` the
    buffers are the other intermediates; with it also the inputs, those outputs, and key
    ``-1 - j`` for output ``j`` when it is a copy (of an input, a constant or an earlier
    output: its own buffer, written after the last step).
    """
    end = len(df.steps)
    groups = df.groups()
    keys = [r for r, g in groups.items() if r not in output_of
            and all(df.tensors[t].kind == INTERMEDIATE for t in g.members)]
    if use_workspace_io:
        keys += sorted({roots[tid] for _, tid in df.params})
        keys += [r for r in output_of if r not in keys]
        keys += [-1 - j for j, t in enumerate(df.outputs) if output_of.get(roots[t]) != j]
    sizes, intervals, names = [], [], []
    for k in keys:
        if k < 0:
            sizes.append(df.tensors[df.outputs[-1 - k]].nbytes)
            intervals.append((end, end))
            names.append(f"output {-1 - k}")
            continue
        sizes.append(groups[k].nbytes)
        intervals.append(groups[k].interval)
        names.append(f"tensor {k} ({df.tensors[k].dtype}{list(df.tensors[k].shape)})")
    return keys, sizes, intervals, names


def constant_pool_settings(pools: Any, target: Any, link_params: bool
                           ) -> tuple[ConstantPoolInfo, ...] | None:
    """The constant pools of a build (None without any); PoolError for a pool no target can
    use, or pools without link-params (unlinked constants come from the caller's pool)."""
    if pools is None:
        return None
    if not isinstance(pools, ConstantMemoryPools):
        raise PoolError(f"relay.build: constant_memory_pools must be ConstantMemoryPools, got "
                        f"{type(pools).__name__}")
    if not link_params:
        raise PoolError("relay.build: constant_memory_pools hold linked constants: build with "
                        "Executor('aot', {'link-params': True})")
    _check_served("constant", pools.pools, target)
    return pools.pools


def _check_served(kind: str, pools: Sequence[Any], target: Any) -> None:
    for p in pools:
        if not p.serves(target):
            raise PoolError(f"{kind} pool {p.pool_name!r} serves targets "
                            f"{[str(t) for t in p.targets]}, none of which is the build's "
                            f"target {str(target)!r}: no buffer could be placed in it")


def candidate_order(pools: Sequence[Any], target: Any) -> list[int]:
    """The order in which buffers try the pools (indices into ``pools``): the pools whose
    access cost is known (read and write bandwidth given; ``access_cycles_per_byte`` with
    latencies and the target's burst, in seconds when every such pool gives its clock) come
    first, cheapest first; the others follow in the order given. TVM's greedy planners take
    the pool candidates in order and leave that order to whoever builds the candidates
    ("schedulers are welcome to change the order for performance reasons"); with no
    properties set this is the order the user wrote."""
    costs = [p.pool_info_properties.access_cycles_per_byte(target) for p in pools]
    known = [k for k, c in enumerate(costs) if c is not None]
    clocks = [pools[k].pool_info_properties.clock_frequency_hz for k in known]
    if known and all(hz > 0 for hz in clocks):
        costs = [None if c is None else c / p.pool_info_properties.clock_frequency_hz
                 for c, p in zip(costs, pools, strict=True)]
    fast = sorted(known, key=lambda k: (costs[k], k))
    return fast + [k for k in range(len(pools)) if costs[k] is None]


@dataclass(frozen=True)
class PoolUsage:
    """One pool after planning: its name, limit (-1: none), planned bytes, lower bound."""

    name: str
    size_hint_bytes: int
    planned_bytes: int
    lower_bound: int

    def as_dict(self) -> dict[str, Any]:
        return {"pool_name": self.name, "size_hint_bytes": self.size_hint_bytes,
                "planned_bytes": self.planned_bytes, "lower_bound": self.lower_bound}


@dataclass(frozen=True)
class PoolPlan:
    """Per buffer its pool (index) and byte offset; per pool its usage."""

    pool_of: tuple[int, ...]
    offsets: tuple[int, ...]
    pools: tuple[PoolUsage, ...]
    lower_bound: int  # of all buffers together

    @property
    def total(self) -> int:
        return sum(p.planned_bytes for p in self.pools)


def conflicts(intervals: Sequence[tuple[int, int]]) -> list[int]:
    """Per buffer, how many others are alive at some same step (a sweep, not all pairs)."""
    starts = sorted(s for s, _ in intervals)
    ends = sorted(e for _, e in intervals)
    # others that start at or before e, minus those that end before s, minus itself
    return [bisect_right(starts, e) - bisect_left(ends, s) - 1 for s, e in intervals]


def _order(algorithm: str, sizes: Sequence[int], intervals: Sequence[tuple[int, int]]
           ) -> list[int]:
    idx = range(len(sizes))
    if algorithm == "greedy_by_size":
        return sorted(idx, key=lambda i: (-sizes[i], intervals[i][0], i))
    n_conf = conflicts(intervals)
    return sorted(idx, key=lambda i: (-n_conf[i], -sizes[i], intervals[i][0], i))


def plan_pools(sizes: Sequence[int], intervals: Sequence[tuple[int, int]],
               pools: Sequence[WorkspacePoolInfo], algorithm: str, alignment: int,
               names: Sequence[str] | None = None, target: Any = None,
               improve: bool = False) -> PoolPlan:
    """Place buffers (``sizes`` in bytes, alive over inclusive step ``intervals``) in
    ``pools`` with ``algorithm`` (see the module doc), pools tried fastest first for
    ``target`` (:func:`candidate_order`). ``names`` label buffers in errors. ``improve``
    (the build named no algorithm): a greedy plan above the liveness bound is handed to
    hill_climb (up to IMPROVE_MAX_BUFFERS buffers, whose steps stay within about a second),
    so the default reaches the bound where the greedy orders miss it (resnet50: 1.33x)."""
    if algorithm not in ALGORITHMS:
        raise PoolError(f"usmp: unknown algorithm {algorithm!r} (one of {ALGORITHMS})")
    padded = [_align(s, alignment) for s in sizes]
    rank = candidate_order(pools, target)
    limits = [pools[k].size_hint_bytes for k in rank]
    bound = lower_bound(padded, intervals)
    table = conflict_lists(intervals)
    if algorithm == "hill_climb":
        tries = [Placement(_order(a, padded, intervals), padded, intervals, limits, alignment,
                           table) for a in ALGORITHMS[:2]]
        best = hill_climb(min(tries, key=lambda t: t.cost), _align(bound, alignment))
    else:
        best = Placement(_order(algorithm, padded, intervals), padded, intervals, limits,
                         alignment, table)
        target_bytes = _align(bound, alignment)
        if (improve and best.failed is None and best.cost > target_bytes
                and len(sizes) <= IMPROVE_MAX_BUFFERS):
            best = hill_climb(best, target_bytes)
    if best.failed is not None:
        one = Placement(best.order, padded, intervals, [-1], alignment, table)
        raise _too_small(best.failed, padded, pools, (bound, int(one.cost)), names)
    pool_of = [rank[k] for k in best.pool_of]  # candidate position -> the pool as given
    used = [0] * len(pools)
    for k, nbytes in zip(rank, best.used, strict=True):
        used[k] = nbytes
    usage = tuple(PoolUsage(p.pool_name, p.size_hint_bytes, used[k],
                            lower_bound([padded[i] for i in range(len(sizes)) if pool_of[i] == k],
                                        [intervals[i] for i in range(len(sizes))
                                         if pool_of[i] == k]))
                  for k, p in enumerate(pools))
    return PoolPlan(tuple(pool_of), tuple(best.offsets), usage, bound)


def _too_small(i: int, sizes: Sequence[int], pools: Sequence[WorkspacePoolInfo],
               need: tuple[int, int], names: Sequence[str] | None) -> PoolError:
    """``need``: the lower bound, and the size of one pool holding this algorithm's plan."""
    what = names[i] if names is not None else f"buffer {i}"
    listed = ", ".join(f"{p.pool_name} ({p.size_hint_bytes} bytes)" for p in pools)
    return PoolError(f"usmp: the workspace pools are too small: {what} ({sizes[i]} bytes) fits "
                     f"in none of {listed}; the model needs at least {need[0]} bytes of "
                     f"workspace (the largest total alive at one time); a single pool of "
                     f"{need[1]} bytes holds this plan, or add a pool without a size_hint_bytes")
