"""``ember.tune``: find a model's GEMM and conv kernel calls, measure tiles for each, and
write the winners to the tuning records that later builds read (``topi/tile_records.py``).

Task extraction optimises the model as ``relay.build`` does (the same passes, under the
caller's PassContext, for the same target), then builds the tensor expressions of every fused
function while :func:`tile_records.recording` is on: each ``gemm_tiles``/``conv_tiles``
question asked is a task, with the cost model's answer. Nothing is lowered or compiled but
the one harness library (``harness.py``).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir.expr import Call, Function
from ..ir.visitor import is_primitive, post_order
from ..relay.backend._lower_te import to_te
from ..relay.backend.pipeline import canon_target, optimize
from ..runtime.errors import TVMError
from ..runtime.threads import check_num_threads, default_num_threads
from ..target.simd import cpu_choice
from ..topi import tile_records
from ..topi.tile_records import Query, Record
from .harness import Harness, workload
from .search import Outcome, search

# Called as each task starts: (index, count, query).
Progress = Callable[[int, int, Query], None]


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` measured (one Outcome per distinct kernel call, in model order),
    the record file it wrote and the thread count it tuned for."""

    outcomes: list[Outcome]
    path: Path
    threads: int
    level: str


def extract_tasks(mod: Any, params: Mapping[str, Any] | None = None,
                  target: Any = None) -> list[Query]:
    """The distinct GEMM and conv kernel calls ``relay.build(mod, target, params=params)``
    would make, in the order the model makes them (each with the cost model's tiles)."""
    fused, _ = optimize(mod, target, params=params)
    with canon_target(target, None, "ember.tune"), tile_records.recording() as queries:
        for func in fused.functions.values():
            if not isinstance(func, Function) or is_primitive(func):
                continue
            for node in post_order(func):  # a call comes after its arguments: model order
                if isinstance(node, Call) and is_primitive(node.op):
                    to_te(node.op)
    distinct: dict[tuple[Any, ...], Query] = {}
    for q in queries:
        distinct.setdefault((q.kernel, q.geometry, q.level.name), q)
    return list(distinct.values())


def tune(mod: Any, params: Mapping[str, Any] | None = None, target: Any = None,
         threads: int | None = None, budget: float = 30.0,
         records: str | Path | None = None, progress: Progress | None = None) -> TuneResult:
    """Measure tiles for every GEMM, conv and depthwise conv call of ``mod`` on this machine
    and merge the best into the record file ``records`` (default: the file builds read,
    ``tile_records.records_path()``). Run it under the PassContext you build with, as
    ``relay.build``: the calls depend on the passes (``ember.compile`` and ``ember compile``
    build at opt_level 3, where convolutions get the blocked layouts of the kernels).

    ``threads``: the thread count to tune for (default: what a build looks up,
    ``EMBER_NUM_THREADS`` or the cores). ``budget``: seconds of measuring in all, shared by
    the tasks (each measures at least the cost model's tiles). Raises TVMError when records
    are off and no file is given, or the target's kernels cannot run on this CPU."""
    path = Path(records) if records is not None else tile_records.records_path()
    if path is None:
        raise TVMError(f"ember.tune: tuning records are off ({tile_records.ENV_VAR}=off); "
                       "pass a record file to write")
    if not budget > 0:
        raise TVMError(f"ember.tune: budget must be a positive number of seconds, got {budget}")
    threads = default_num_threads() if threads is None else check_num_threads(threads)
    # a broken, unwritable or other CPU's file fails now rather than after the measuring
    tile_records.save(path, [])
    choice = cpu_choice(canon_target(target, None, "ember.tune"))
    harness = Harness(choice)
    queries = extract_tasks(mod, params, target)
    harness.set_threads(threads)
    outcomes = []
    deadline = time.perf_counter() + budget
    for index, query in enumerate(queries):
        if progress is not None:
            progress(index, len(queries), query)
        share = max(0.0, deadline - time.perf_counter()) / (len(queries) - index)
        outcomes.append(search(workload(query, harness), share, threads))
    tile_records.save(path, [_record(o, choice.level.name, threads) for o in outcomes])
    return TuneResult(outcomes, path, threads, choice.level.name)


def _record(outcome: Outcome, level: str, threads: int) -> Record:
    tiles = tuple(sorted((k, int(v)) for k, v in dataclasses.asdict(outcome.tiles).items()))
    return Record(outcome.kernel, level, threads, outcome.geometry, tiles, outcome.seconds,
                  outcome.model_seconds)
