"""A VM model's call at any input shape as one C call: the shape phase and its checks in C.

``plan_arrays`` serves a compiled model's call per input signature: a signature seen before is
one native call, a new one runs the plan's shape phase and checks in Python first (tens of
microseconds: more than a small model's kernels). A :class:`DynamicCall` is made once per
:class:`~.plan_arrays.ArrayCalls` and hands every signature to ``EmberDynamicModelCall``
(``csrc/dynamic_call.h``), which checks each input dimension against its rule, writes the
dimensions into the plan's arena, runs the shape functions, runs the plan's checks as a flat
integer program, sizes the inputs and outputs, and makes the kernel calls. Everything it
reads that does not depend on the concrete sizes is laid out here, once:

- per input dimension, its rule (a declared extent, any size, or equal to an earlier
  dimension of the same name) and its arena slot;
- the check program (``SIZE``/``FIT``/``COUNT``/``SUM``, from the Python form of the checks,
  ``plan_checks.VectorChecks``, which stays the checked fallback);
- the alias program: the DLTensors of the parts of concatenations made in place
  (``plan_concat``), which C points at their offsets in the output for each signature
  (``alias_program``, read again by ``refresh``: the output's block may have moved);
- per output dimension, a declared extent or the arena slot the shape phase writes;
- the buffers (inputs, results, intermediates) and what each holds;
- the in-place sites: the kernels' tensors in the input and output buffers, whose data C
  points into the caller's arrays for a call where this signature allows it (no copy in or
  out, as ``model_call``'s static call; ``in_place_sites``);
- the shape functions as direct calls of their unpacked entries on arena and constant
  pointers (no per-call argument checks: neither moves, and the layout is the one the packed
  entries checked), where each one's arguments are tensors of at most one dimension there;
  the other kernels of the shape phase as packed entries of the same table
  (``_direct_calls``).

C keeps up to ``KEPT_SIGNATURES`` signatures besides the last one's: a call at one of them
copies back what its shape phase and checks wrote (``DynamicCall.keep``).

A plan whose kernels compute a size from data (its segments, ``static_plan``) gets a check
program per segment as well (``programs``), run by C before the segment's calls
(``ember_segmented_call``); its outputs, whose shapes are known only once the calls ran, are
copied out of their buffers by the host at the dimensions C wrote (``DynamicCall._segmented``),
and take no in-place sites (its inputs do, as any plan's).

C answers 1 when a signature needs what only Python does (a buffer to grow, a check that
fails and must be reported, an input of another kind): the caller's checked path then runs the
call through ``plan_arrays`` (which grows the buffers; :meth:`DynamicCall.refresh` reads them
again) or the interpreter (which raises the error naming the input).
"""
from __future__ import annotations

import array
import ctypes
import functools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._abi import ArgTypeCode, DLTensor, TVMValue
from ..ndarray import NDArray
from ..model_call import _DirectPlan, _Plan, _Site, _Tensor, object_layout, planned_tensors
from .plan_arrays import ArrayCalls
from .plan_checks import VectorChecks
from .static_plan import StaticPlan

# Opcodes of the check program (csrc/dynamic_call.h).
SIZE, FIT, COUNT, SUM = 1, 2, 3, 4
# Inputs' shapes whose outputs' shapes a DynamicCall keeps (all forgotten when full).
KNOWN_SHAPES = 64
# Signatures whose shape phase C keeps besides the last one's (``DynamicCall.keep``): a call
# at one of them restores what its shape phase and checks wrote, a copy of the plan's arena
# (0.1-3 us less per call than running them again, on a cold cache, for mlp to segformer).
KEPT_SIGNATURES = 8
_P = ctypes.c_void_p


class _DynamicPlan(ctypes.Structure):
    _fields_ = [("call", _DirectPlan), ("arena", _P), ("shape_calls", _P), ("dim_rule", _P),
                ("dim_slot", _P), ("dims", _P), ("last", _P), ("in_capacity", _P),
                ("in_item", _P), ("program", _P), ("sizes", _P), ("out_rule", _P),
                ("out_dims", _P), ("out_capacity", _P), ("out_item", _P), ("direct", _P),
                ("may_direct", _P), ("site_written", _P), ("in_place", _P),
                ("value_calls", _P), ("value_runs", ctypes.c_int64),
                ("num_shape_calls", ctypes.c_int32), ("num_dims", ctypes.c_int32),
                ("program_size", ctypes.c_int32), ("have_last", ctypes.c_int32),
                ("kept_dims", _P), ("kept", _P), ("arena_size", ctypes.c_int64),
                ("record_words", ctypes.c_int64), ("kept_capacity", ctypes.c_int32),
                ("kept_count", ctypes.c_int32), ("kept_next", ctypes.c_int32),
                ("num_value_calls", ctypes.c_int32), ("segments", _P),
                ("num_segments", ctypes.c_int32), ("num_aliases", ctypes.c_int32),
                ("aliases", _P)]


def dim_rules(plan: StaticPlan, patterns: Sequence[Any] | None) -> list[int] | None:
    """Per input dimension (inputs in order): its extent (declared by the function or the
    model), -1 (any size) or -2 - j (the size of dimension j, an earlier one of the same
    name: the model's check that inputs sharing a dimension agree). ``patterns``: the model's
    input shapes (per axis an int, None or a dimension's name), None if unknown. None where a
    rule cannot be told (an argument without a declared shape, a pattern of another rank)."""
    rules: list[int] = []
    first: dict[str, int] = {}
    for i, (_, ndim, shape) in enumerate(plan._arg_types):
        declared = shape if shape is not None else plan._declared[i]
        pattern = patterns[i] if patterns is not None and i < len(patterns) else None
        if declared is None or len(declared) != ndim or \
                pattern is not None and len(pattern) != ndim:
            return None
        for k, extent in enumerate(declared):
            name = pattern[k] if pattern is not None else None
            if type(name) is str and name in first:
                rules.append(-2 - first[name])
                continue
            if type(name) is str:
                first[name] = len(rules)
            rules.append(extent if extent >= 0 else name if type(name) is int else -1)
    return rules


def _int64s(values: Sequence[int]) -> np.ndarray:
    return np.array(list(values) or [0], dtype=np.int64)


def _address(arr: np.ndarray | array.array) -> int:
    """Where an int64 array's items start (an ``array.array`` is never resized here)."""
    return arr.buffer_info()[0] if type(arr) is array.array else arr.ctypes.data


class DynamicCall:
    """``run(args)``: a model call at any input shape (the outputs, or None when the
    caller's checked path must run it), as ``ModelCall.run``. Valid while the plan's tensors
    point at ``calls``' buffers: the holder calls :meth:`forget` before running the plan in
    Python and :meth:`refresh` after. (C rewrites the plan's arena behind the plan's back:
    the holder, ``execution_pool.VMContext``, owns its VM, and every other run of the plan
    goes through its ``call``, which forgets first.)"""

    __slots__ = ("_keep", "_plan", "calls", "lead", "plan", "programs", "retries", "run")

    def __init__(self, calls: ArrayCalls, rules: list[int], entry: Any, threads: int) -> None:
        plan = self.plan = calls.plan
        self.calls = calls
        self.programs = checks = programs(plan, calls.segmented)
        program, out_rules = checks.words, _out_rules(plan)
        slots = dict(plan._arg_slots)
        dim_slot = [slots[i] + k if i in slots else -1
                    for i, (_, ndim, _) in enumerate(plan._arg_types) for k in range(ndim)]
        self._keep: dict[str, Any] = {
            "dim_rule": _int64s(rules), "dim_slot": _int64s(dim_slot),
            "dims": _int64s([0] * len(rules)), "last": _int64s([-1] * len(rules)),
            "in_capacity": _int64s([0] * len(plan._arg_types)),
            "in_item": _int64s([dt.numpy_dtype.itemsize for dt, _, _ in plan._arg_types]),
            "program": _int64s(program), "sizes": _int64s([0] * checks.sized),
            "segments": _int64s(checks.segments),
            "out_rule": _int64s(out_rules), "out_dims": array.array("q", [0] * len(out_rules)),
            "out_capacity": _int64s([0] * len(plan._fields)),
            "out_item": _int64s([plan._typed_info[k][2] for k in plan._fields])}
        self._plan = p = _DynamicPlan()
        for name, arr in list(self._keep.items()):
            setattr(p, name, _address(arr))
        p.arena = plan._arena_i64.ctypes.data
        shape_cplan, cplan = plan._shape_cplan, calls.cplan
        assert cplan is not None, "dynamic_call checked this"
        if shape_cplan is not None:
            p.shape_calls, p.num_shape_calls = ctypes.addressof(shape_cplan._table), \
                shape_cplan._count
            direct = _direct_calls(shape_cplan, plan._arena_i64, _constant_ranges(plan))
            if direct is not None:
                self._keep["direct"] = direct
                p.direct = direct.ctypes.data
        value_cplan = plan._value_cplan
        if value_cplan is not None:  # the value phase, run by C at each new signature
            p.value_calls, p.num_value_calls = ctypes.addressof(value_cplan._table), \
                value_cplan._count
        p.num_dims, p.program_size = len(rules), checks.early
        p.num_segments = len(checks.segments) // 4
        c = p.call.call
        c.layout = ctypes.addressof(object_layout())  # type: ignore[arg-type]
        c.calls, c.num_calls = ctypes.addressof(cplan._table), cplan._count
        c.num_inputs, c.num_outputs = len(plan._arg_types), len(plan._fields)
        c.num_threads, c.failed_at = threads, -1
        self._keep["plans"] = (shape_cplan, cplan, value_cplan)  # the tables C reads
        self.retries = 0  # calls that C ran a second time, with outputs of its shapes
        self.lead: int | None = None  # the input whose shape keys a signature (_runner)
        p.arena_size = plan._arena_i64.size
        self.keep(KEPT_SIGNATURES)
        self.refresh()
        entry.argtypes, entry.restype = None, ctypes.c_int
        call = functools.partial(entry, ctypes.byref(p))
        self.run = self._segmented(call) if calls.segmented else self._runner(call)

    def _runner(self, call: Any) -> Any:
        """``run``: the call with outputs of the shapes ``OutputShapes`` predicts for these
        inputs (those of the last signature while the inputs' shapes stay), and again with
        C's own when it answers that they are not this signature's (2: about 1 us more, a
        second call and outputs made twice)."""
        slots = (ctypes.c_int64 * 2).from_address(
            ctypes.addressof(self._plan) + _DynamicPlan.call.offset + _DirectPlan.call.offset
            + _Plan.args.offset)
        plan, out_dims, empty = self.plan, self._keep["out_dims"], np.empty
        ends = [0]
        for k in plan._fields:
            ends.append(ends[-1] + plan._typed_info[k][5])
        dtypes = [plan._typed_info[k][1] for k in plan._fields]
        shapes = [(0,) * (b - a) for a, b in zip(ends, ends[1:])]  # the last signature's
        rules = self._keep["dim_rule"].tolist()
        guess = OutputShapes(ends, [k for k, r in enumerate(rules) if r == -1 or r <= -2])
        last: list[Any] = [None]  # the inputs' shapes that ``shapes`` are for
        # the outputs' shapes per inputs' shapes met before (guessed, or C's answer where the
        # guess was wrong): a shape met again costs a dict lookup, not a guess (a third of a
        # microsecond less per call at a shape other than the last: 3-4% of mlp's call)
        known: dict[Any, Any] = {}

        one_input = len(plan._arg_types) == 1
        # The input whose shape alone tells the signature: the only one with dimensions of
        # any size (the others' are constants or equal to earlier ones, which C checks: a
        # voice-activity model's state (1, batch, 64) beside its (batch, samples) input).
        # Its shape is the key of a repeated signature: no tuple of every input's shape per
        # call (~0.25 us of a 15 us model's call), the full key only when it changes.
        free, start = [], 0
        for i, (_, ndim, _) in enumerate(plan._arg_types):
            if -1 in rules[start:start + ndim]:
                free.append(i)
            start += ndim
        lead = self.lead = free[0] if len(free) == 1 else None

        def full_key(args: tuple[Any, ...]) -> Any:
            return args[0].shape if one_input else tuple([a.shape for a in args])

        def remember(key: Any, outs: Any) -> None:
            if len(known) >= KNOWN_SHAPES:
                known.clear()
            known[key] = outs

        def new_inputs(key: Any) -> None:
            """Inputs of other shapes than the last call's: the outputs' shapes guessed."""
            seen = known.get(key)
            if seen is None:
                seen = guess.predict(_flat(key, one_input)) or list(shapes)
                remember(key, seen)
            shapes[:] = seen

        if len(dtypes) == 1:
            dtype = dtypes[0]

            def run(args: tuple[Any, ...]) -> Any:
                try:  # (not an array: the checked path converts it)
                    short = (args[lead].shape if lead is not None else args[0].shape
                             if one_input else tuple([a.shape for a in args]))  # inline: per call
                except (AttributeError, IndexError):
                    return None
                if short != last[0]:
                    try:
                        key = short if one_input else full_key(args)
                    except AttributeError:
                        return None
                    last[0] = short
                    shape = known.get(key)
                    if shape is None:
                        # one input, one output: the guess without the lists of the general
                        # case (a third of a microsecond less per new shape: 3% of mlp's call)
                        single = guess.single if one_input else None
                        if single is None:
                            got = guess.predict(_flat(key, one_input))
                            shape = got[0] if got else shapes[0]
                        else:
                            shape = single(key) or shapes[0]
                        remember(key, shape)
                    shapes[0] = shape
                outs = empty(shapes[0], dtype)
                slots[0] = id(args)
                slots[1] = id(outs)
                rc = call()
                if rc == 2:
                    self.retries += 1
                    key = full_key(args)
                    shapes[0] = shape = tuple(out_dims)
                    guess.learn(_flat(key, one_input), shape)
                    remember(key, shape)
                    outs = empty(shape, dtype)
                    slots[1] = id(outs)
                    rc = call()
                return outs if rc == 0 else None
            return run

        def run_several(args: tuple[Any, ...]) -> Any:
            try:
                short = (args[lead].shape if lead is not None else args[0].shape
                         if one_input else tuple([a.shape for a in args]))  # inline: per call
            except (AttributeError, IndexError):
                return None
            if short != last[0]:
                try:
                    new_inputs(short if one_input else full_key(args))
                except AttributeError:
                    return None
                last[0] = short
            outs = [empty(s, dt) for s, dt in zip(shapes, dtypes)]
            slots[0] = id(args)
            slots[1] = id(outs)
            rc = call()
            if rc == 2:
                self.retries += 1
                key = full_key(args)
                dims = out_dims.tolist()
                guess.learn(_flat(key, one_input), dims)
                shapes[:] = [tuple(dims[a:b]) for a, b in zip(ends, ends[1:])]
                remember(key, list(shapes))
                outs = [empty(s, dt) for s, dt in zip(shapes, dtypes)]
                slots[1] = id(outs)
                rc = call()
            return outs if rc == 0 else None
        return run_several

    def _segmented(self, call: Any) -> Any:
        """``run`` for a plan whose kernels compute a size from data: one C call (the
        segments, their checks between), then the outputs copied out of their buffers at
        the shapes C says (``out_dims``): arrays of the caller's, as every call returns."""
        plan, calls, out_dims = self.plan, self.calls, self._keep["out_dims"]
        slots = (ctypes.c_int64 * 2).from_address(
            ctypes.addressof(self._plan) + _DynamicPlan.call.offset + _DirectPlan.call.offset
            + _Plan.args.offset)
        # per output: its result buffer (read per call: a Python run may grow it), its
        # offset there, dtype, and where its dimensions lie in out_dims
        outputs, start = [], 0
        for k in plan._fields:
            offset, np_dtype, _, _, _, ndim = plan._typed_info[k]
            outputs.append((calls.results[plan._result_tensors[k].base.index], offset,
                            np_dtype, start, start + ndim))
            start += ndim
        ndarray = np.ndarray
        single = len(outputs) == 1

        def run(args: tuple[Any, ...]) -> Any:
            slots[0] = id(args)
            if call() != 0:
                return None
            dims = out_dims.tolist()
            outs = [ndarray(tuple(dims[a:b]), dtype, grown.buf, offset).copy()
                    for grown, offset, dtype, a, b in outputs]
            return outs[0] if single else outs
        return run

    def keep(self, signatures: int) -> None:
        """Keep the shape phase of up to ``signatures`` signatures besides the last one's
        (0: none; a call at any shape other than the last then runs it again), none kept
        yet."""
        p, c = self._plan, self._plan.call.call
        out_dims = len(self._keep["out_dims"])
        words = 2 * (c.num_inputs + c.num_outputs) + out_dims + p.arena_size
        kept_dims = _int64s([0] * (max(signatures, 0) * p.num_dims))
        kept = _int64s([0] * (max(signatures, 0) * words))
        self._keep["kept"] = (kept_dims, kept)
        p.kept_dims, p.kept = kept_dims.ctypes.data, kept.ctypes.data
        p.record_words, p.kept_capacity = words, max(signatures, 0)
        p.kept_count = p.kept_next = 0

    def forget(self) -> None:
        """Before the plan runs in Python: the arena will not hold C's last signature, and
        C's writes to it made the plan's own record of its arena stale."""
        self._plan.have_last = self._plan.kept_count = self._plan.kept_next = 0
        self.plan.applied = None
        self.plan._last = None
        self.plan.forget_values()  # C wrote the value phase's blocks for its last signature
        self.plan.forget_parts()  # and pointed the parts of concatenations for it

    @property
    def value_runs(self) -> int:
        """How many times C ran the plan's value phase."""
        return int(self._plan.value_runs)

    def refresh(self) -> None:
        """Read the buffers again (a Python run may have grown or moved them)."""
        calls, plan, p, keep = self.calls, self.plan, self._plan, self._keep
        in_table = (_Tensor * max(len(calls.inputs), 1))()
        dims, start = keep["dims"].ctypes.data, 0
        for t, grown, (dt, ndim, _) in zip(in_table, calls.inputs, plan._arg_types):
            t.shape, t.descr, t.buffer, t.ndim = dims + 8 * start, id(dt.numpy_dtype), \
                grown.ptr, ndim
            start += ndim
        keep["in_capacity"][:len(calls.inputs)] = [g.capacity for g in calls.inputs]
        out_table = (_Tensor * max(len(plan._fields), 1))()
        dims, start = _address(keep["out_dims"]), 0
        for j, (t, k) in enumerate(zip(out_table, plan._fields)):
            offset, np_dtype, _, _, _, ndim = plan._typed_info[k]
            grown = calls.results[plan._result_tensors[k].base.index]
            keep["out_capacity"][j] = grown.capacity - offset
            t.shape, t.descr, t.buffer, t.ndim = dims + 8 * start, id(np_dtype), \
                grown.ptr + offset, ndim
            start += ndim
        for at, index in self.programs.maxima:
            keep["program"][at] = self._most(index)
        keep["aliases"], p.num_aliases = alias_program(plan)
        p.aliases = keep["aliases"].ctypes.data
        p.call.call.inputs = ctypes.addressof(in_table)
        p.call.call.outputs = ctypes.addressof(out_table)
        keep["tables"] = (in_table, out_table)
        self._sites([(t.buffer or 0, g.capacity) for t, g in zip(in_table, calls.inputs)] +
                    [(t.buffer or 0, int(c)) for t, c in zip(out_table, keep["out_capacity"])])
        p.have_last = 0
        p.kept_count = p.kept_next = 0  # (kept against the buffers as they were)

    def _sites(self, spans: list[tuple[int, int]]) -> None:
        """Lay out the in-place sites of the buffers at ``spans`` (address, capacity; inputs
        then outputs) for C, which decides per signature which of them take the caller's
        arrays (``in_place_sites``)."""
        p, plan, calls = self._plan, self.plan, self.calls
        shape_cplan = plan._shape_cplan
        sites, written, may = in_place_sites(
            calls.cplan, shape_cplan, spans, len(calls.inputs), plan._written)
        if calls.segmented:  # inputs only: the outputs are copied out by the host
            inputs = len(calls.inputs)
            kept = [i for i, (_, _, buffer) in enumerate(sites) if buffer < inputs]
            sites, written = [sites[i] for i in kept], [written[i] for i in kept]
            may = may[:inputs] + [False] * (len(spans) - inputs)
        site_table = (_Site * max(len(sites), 1))(*(_Site(*site) for site in sites))
        flags = (ctypes.c_int8 * max(len(spans), 1))(*may)
        in_place = (ctypes.c_int8 * max(len(spans), 1))()
        written_flags = (ctypes.c_int8 * max(len(sites), 1))(*written)
        p.call.sites, p.call.num_sites = ctypes.addressof(site_table), len(sites)
        p.call.direct = p.in_place = ctypes.addressof(in_place)
        p.may_direct, p.site_written = ctypes.addressof(flags), ctypes.addressof(written_flags)
        self._keep["sites"] = (site_table, flags, in_place, written_flags)

    def _most(self, index: int) -> int:
        """The largest size block ``index`` may have without growing."""
        calls, plan = self.calls, self.plan
        if index in plan._roots:  # a part of a concatenation, in its output (checked there)
            return plan._allocator.max_block_bytes
        held = calls.results[index].capacity if index in calls.results else \
            plan._capacity.get(index, -1)
        return min(held, plan._allocator.max_block_bytes)


def in_place_sites(cplan: Any, shape_cplan: Any, spans: Sequence[tuple[int, int]],
                   num_inputs: int, written: frozenset[int]
                   ) -> tuple[list[tuple[int, int, int]], list[bool], list[bool]]:
    """The sites of a dynamic call's in-place IO: (data field's address, offset from its
    buffer's start, buffer index) per kernel tensor whose data lies in one of the buffers at
    ``spans`` (address, bytes held; the inputs, then the outputs), whether a kernel writes
    it, and per buffer whether its sites may ever take the caller's array.

    The rule of ``model_call.direct_sites``, split in two: what holds at every shape is
    decided here (no buffer overlaps another, no kernel writes an input, no shape-phase call
    reads or writes a buffer: it runs before C points the sites; an output has a written
    tensor; every tensor plain, without strides); what depends on the shape (each tensor's
    extent within its buffer, an output written whole) C decides per signature from the
    arena (``ember_decide_in_place``)."""
    ok = [bool(size > 0 and lo != 0) for lo, size in spans]
    bounds = [(lo, lo + max(size, 0)) for lo, size in spans]
    for i, (lo, hi) in enumerate(bounds):
        if any(i != j and lo < hi2 and lo2 < hi for j, (lo2, hi2) in enumerate(bounds)):
            ok[i] = False

    def buffer_of(data: int, start: int) -> int | None:
        return next((i for i, (lo, hi) in enumerate(bounds)
                     if lo <= data < hi or lo <= start < hi), None)

    if shape_cplan is not None:
        for data, start, _ in planned_tensors(shape_cplan._table, shape_cplan._count).values():
            i = buffer_of(data, start)
            if i is not None:
                ok[i] = False
    sites: list[tuple[int, int, int]] = []
    wrote: list[bool] = []
    for address, (data, start, nbytes) in planned_tensors(cplan._table, cplan._count).items():
        i = buffer_of(data, start)
        if i is None:
            continue
        lo, hi = bounds[i]
        if nbytes < 0 or not lo <= data < hi or i < num_inputs and address in written:
            ok[i] = False
        sites.append((address + DLTensor.data.offset, data - lo, i))
        wrote.append(address in written)
    used = {i for _, _, i in sites}
    covered = {i for (_, _, i), w in zip(sites, wrote) if w}
    ok = [flag and i in used and (i < num_inputs or i in covered) for i, flag in enumerate(ok)]
    keep = [ok[i] for _, _, i in sites]
    return ([s for s, k in zip(sites, keep) if k], [w for w, k in zip(wrote, keep) if k], ok)


def _flat(key: Any, one_input: bool) -> Sequence[int]:
    """The input dimensions of a signature, in order."""
    return key if one_input else [d for shape in key for d in shape]


class OutputShapes:
    """The outputs' shapes of a call at input shapes not seen before, predicted, so that the
    call is one C call and not two (C answers 2 when the outputs it was given have other
    shapes; the host makes them again and calls once more).

    Learnt from the signatures seen so far (``learn``, with each new signature's input and
    output dimensions, flattened): each output dimension is a constant, or equal to some
    input dimension, in every one of them. ``predict`` takes, per output dimension, the first
    symbolic input dimension (``dynamic``: input dimensions of any size, in order) still
    consistent, else any other one, else the constant; None when a dimension follows no rule
    (a height divided by a stride: the host then makes the outputs twice, as without a
    guess). A wrong guess costs what no guess does: C checks every output's shape."""

    __slots__ = ("candidates", "dynamic", "ends", "getters", "inputs", "literals", "single")

    def __init__(self, ends: Sequence[int], dynamic: Sequence[int]) -> None:
        self.ends, self.dynamic = list(ends), set(dynamic)
        # per output dimension: (the constant or None, input dimensions equal to it so far)
        self.candidates: list[tuple[int | None, list[int]]] | None = None
        # the rules as one itemgetter per output over (input dimensions + literals), made by
        # ``learn``: a guess costs a few tenths of a microsecond, not a Python loop per
        # dimension (more than the second C call it saves, on a small model)
        self.getters: list[Any] | None = None
        # for one output: its shape from the input dimensions (a tuple), None for another
        # count of them; None where there is no guess or several outputs
        self.single: Any = None
        self.inputs, self.literals = 0, ()

    def learn(self, ins: Sequence[int], outs: Sequence[int]) -> None:
        if self.candidates is not None and self.getters is None:
            return  # a dimension followed no rule: rules only ever drop out, none comes back
        if self.candidates is None or len(self.candidates) != len(outs):
            order = sorted(range(len(ins)), key=lambda j: j not in self.dynamic)
            self.candidates = [(o, [j for j in order if ins[j] == o]) for o in outs]
        else:
            self.candidates = [(c if c == o else None, [j for j in js if j < len(ins) and
                                                        ins[j] == o])
                               for (c, js), o in zip(self.candidates, outs)]
        self._compile(len(ins))

    def _compile(self, inputs: int) -> None:
        at, literals = [], []
        for c, js in self.candidates or ():
            if js:
                at.append(js[0])
            elif c is not None:
                at.append(inputs + len(literals))
                literals.append(c)
            else:  # no rule: no guess
                self.getters = self.single = None
                return
        self.inputs, self.literals = inputs, tuple(literals)
        self.getters = [_getter(at[a:b]) for a, b in zip(self.ends, self.ends[1:])]
        self.single = _single(self.getters[0], inputs, self.literals) \
            if len(self.getters) == 1 else None

    def predict(self, ins: Sequence[int]) -> list[tuple[int, ...]] | None:
        getters = self.getters
        if getters is None or len(ins) != self.inputs:
            return None
        dims = ins if type(ins) is tuple else tuple(ins)
        if self.literals:
            dims += self.literals
        if len(getters) == 1:
            return [getters[0](dims)]
        return [get(dims) for get in getters]


def _single(getter: Any, inputs: int, literals: tuple[int, ...]) -> Any:
    """``predict`` for one output and a tuple of input dimensions, as one function."""
    def single(dims: tuple[int, ...]) -> tuple[int, ...] | None:
        return getter(dims + literals) if len(dims) == inputs else None
    return single


def _getter(at: Sequence[int]) -> Any:
    """The shape at positions ``at`` of a tuple, as a tuple (itemgetter gives a bare item for
    one position and needs at least one)."""
    if len(at) > 1:
        return operator.itemgetter(*at)
    if len(at) == 1:
        k = at[0]
        return lambda dims: (dims[k],)
    return lambda dims: ()


# Arguments a direct call may have in a library that does not say (built before
# ``EmberDirectMaxArgs``: csrc/dynamic_call.h's EMBER_DIRECT_MAX_ARGS was 6).
_DIRECT_MAX_ARGS = 6
_TENSOR_CODES = (ArgTypeCode.DLTENSOR_HANDLE, ArgTypeCode.NDARRAY_HANDLE)


def _direct_calls(cplan: Any, arena: np.ndarray,
                  constants: Sequence[tuple[int, int]] = ()) -> np.ndarray | None:
    """The shape calls of ``cplan`` as C's direct-call table, in order: "fn n p_1..p_n" for
    each that can be called so, "0 -1 k" (the k-th planned call, through its packed entry)
    for the others; None where none can (C then makes the planned calls as they are), or
    where one cannot and the library predates packed entries in the table (it says
    ``EmberDirectMaxArgs`` since it takes them).

    A call is direct when it is a shape function (its unpacked entry takes one pointer per
    argument: shape tensors of static length, no size arguments) of at most the library's
    number of arguments, each a tensor of at most one dimension in ``arena`` or in one of the
    ``constants`` (byte ranges of the plan's constants, such as a slice's begin that its
    shape function reads: neither moves, and the plan set their DLTensors' pointers once, as
    the packed call reads them). Any other kernel (a ``take`` of a shape in the shape phase: its unpacked
    signature is not known here) or an argument elsewhere (a data tensor's pointer can change
    between calls) stays packed, where its packed entry checks its arguments."""
    fixed = [(arena.ctypes.data, arena.ctypes.data + arena.nbytes), *constants]
    most, mixed = direct_max_args(cplan.lib), _packed_entries(cplan.lib)
    words: list[int] = []
    direct = 0
    for k, (func, call) in enumerate(zip(cplan._funcs, cplan._calls)):
        entry = _direct_entry(cplan.lib, func, call, fixed, most)
        if entry is None and not mixed:
            return None
        words += entry if entry is not None else [0, -1, k]
        direct += entry is not None
    return np.array(words, dtype=np.int64) if direct else None


def _direct_entry(lib: Any, func: Any, call: Any, fixed: Sequence[tuple[int, int]],
                  most: int) -> list[int] | None:
    """"fn n p_1..p_n" for one shape call (see ``_direct_calls``), None if it must stay
    packed."""
    vals, codes, n = call.args[:3]
    entry = getattr(lib, f"{func.name}_unpacked", None)
    if not func.name.endswith("_shape_func") or entry is None or n > most:
        return None
    pointers = []
    for k in range(n):
        if codes[k] not in _TENSOR_CODES:
            return None
        t = DLTensor.from_address(TVMValue.from_buffer(vals, k * ctypes.sizeof(
            TVMValue)).v_handle)
        at = (t.data or 0) + t.byte_offset
        if t.ndim > 1 or not any(lo <= at < hi for lo, hi in fixed):
            return None
        pointers.append(at)
    return [ctypes.cast(entry, ctypes.c_void_p).value, n, *pointers]


def _constant_ranges(plan: StaticPlan) -> list[tuple[int, int]]:
    """The byte ranges of the constants the plan points its DLTensors at (it keeps them)."""
    return [(c._dl.data, c._dl.data + c.nbytes) for c in plan._keep
            if type(c) is NDArray and c._dl.data]


def _packed_entries(lib: Any) -> bool:
    """Whether the library's direct-call table takes "0 -1 k" entries (one that says
    ``EmberDirectMaxArgs`` does)."""
    return getattr(lib, "EmberDirectMaxArgs", None) is not None


def direct_max_args(lib: Any) -> int:
    """How many pointer arguments the library's direct calls take at most (its
    ``EmberDirectMaxArgs``; 6 for a library built before it said: a shape function with
    three outputs, such as a split's, has 7)."""
    most = getattr(lib, "EmberDirectMaxArgs", None)
    if most is None:
        return _DIRECT_MAX_ARGS
    most.argtypes, most.restype = [], ctypes.c_int64
    return int(most())


def _program(vector: VectorChecks | None) -> list[int]:
    """Checks (their vectorised form) as a C check program (each SIZE's maximum is filled in
    by ``refresh``: it is the block's capacity)."""
    if vector is None:
        return []
    words: list[int] = []
    for slot, least in zip(vector.size_at, vector.mins):
        words += [SIZE, slot, least, -1]
    for at, offset, item, pos, room in vector.fits:
        words += [FIT, pos, room, offset, item, len(at), *at]
    for pair in vector.counts:
        words.append(COUNT)
        for side in pair:
            words += [-1, side] if type(side) is int else [len(side), *side]
    for out, parts, _ in vector.sums:
        words += [SUM, out, len(parts), *parts]
    return words


def alias_program(plan: StaticPlan) -> tuple[np.ndarray, int]:
    """The parts of the concatenations made in place (``plan_concat``) as C's alias program,
    and its entry count (-1 where a block holding parts has no storage yet: C then leaves
    the call to Python): per part, in ``plan._aliases``' order, "address parent k s_1..s_k m
    (field offset) x m". C writes the part's address (its parent's, an absolute address or
    -1 - the word of an earlier entry's address, plus the arena values at the k slots: the
    earlier parts' sizes) into ``address``, then each of the m DLTensor data fields at its
    offset from it."""
    words: list[int] = []
    at: dict[int, int] = {}  # part block -> the word of its address
    for part, parent, slots in plan._aliases:
        base = plan._base[parent] if parent not in at else -1 - at[parent]
        if base is None:
            return _int64s([]), -1
        fields = [(ctypes.addressof(dl) + DLTensor.data.offset, offset)
                  for dl, offset, shape in plan._block_patches.get(part, ()) if not shape]
        at[part] = len(words)
        words += [0, base, len(slots), *slots, len(fields), *(x for f in fields for x in f)]
    return _int64s(words), len(plan._aliases)


class Programs(NamedTuple):
    """A plan's check programs for C: ``words`` holds the shape phase's (the first
    ``early`` words), then each segment's; ``segments`` is C's table of them ("start end at
    size" per segment, empty for a plan of one segment without checks); ``maxima`` the word
    of each SIZE's maximum and its block's index; ``sized`` the most blocks one program
    sizes."""

    words: list[int]
    early: int
    segments: list[int]
    maxima: list[tuple[int, int]]
    sized: int


def programs(plan: StaticPlan, segmented: bool) -> Programs:
    """The check programs of ``plan``: its shape phase's, and each segment's if
    ``segmented``."""
    vectors = [plan._early.vector] + ([checks.vector if checks is not None else None
                                       for checks, _ in plan._segments] if segmented else [])
    words: list[int] = []
    starts: list[int] = []
    maxima: list[tuple[int, int]] = []
    for vector in vectors:
        starts.append(len(words))
        if vector is not None:
            maxima += [(len(words) + 4 * j + 3, index) for j, index in enumerate(vector.blocks)]
        words += _program(vector)
    starts.append(len(words))
    table: list[int] = []
    if segmented:
        for j, (start, end) in enumerate(plan._spans):
            table += [start, end, starts[j + 1], starts[j + 2] - starts[j + 1]]
    sized = max((len(v.blocks) for v in vectors if v is not None), default=0)
    return Programs(words, starts[1], table, maxima, sized)


def _out_rules(plan: StaticPlan) -> list[int]:
    """Per output dimension: its extent, or -1 - the arena index the shape phase writes."""
    rules: list[int] = []
    for k in plan._fields:
        _, _, _, shape, slot, ndim = plan._typed_info[k]
        rules += list(shape) if shape is not None else [-1 - (slot + j) for j in range(ndim)]
    return rules


def _plan_size(lib: Any) -> int:
    """The size of the library's EmberDynamicCallPlan (-1 if it does not say: one built
    before the plan had its direct calls)."""
    size = getattr(lib, "EmberDynamicCallPlanSize", None)
    if size is None:
        return -1
    size.argtypes, size.restype = [], ctypes.c_int64
    return int(size())


def dynamic_call(calls: ArrayCalls, patterns: Sequence[Any] | None, threads: int
                 ) -> DynamicCall | None:
    """The DynamicCall of ``calls``, or None where it cannot be made: a plan without
    symbolic arguments nor segments (one signature: ``ArrayCall.native_call`` serves it),
    checks that read values outside the arena, no C runner, a library that predates
    ``EmberDynamicModelCall`` or has another layout of its plan, an object layout that does
    not hold."""
    plan = calls.plan
    if not plan._arg_slots and not calls.segmented or \
            plan._early.checks and plan._early.vector is None:
        return None
    if calls.cplan is None or object_layout() is None:
        return None
    if any(shape is None and slot is None for _, _, _, shape, slot, _ in plan._typed_info):
        return None
    lib = calls.cplan.lib
    entry = getattr(lib, "EmberDynamicModelCall", None)
    rules = dim_rules(plan, patterns)
    if entry is None or rules is None or _plan_size(lib) != ctypes.sizeof(_DynamicPlan):
        return None
    if plan._shape_run is not None and plan._shape_cplan is None or \
            plan._value_run is not None and plan._value_cplan is None:
        return None
    return DynamicCall(calls, rules, entry, threads)


__all__ = ["COUNT", "FIT", "SIZE", "SUM", "DynamicCall", "OutputShapes", "alias_program",
           "dim_rules", "direct_max_args", "dynamic_call", "in_place_sites"]
