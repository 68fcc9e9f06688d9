"""Plans: a VM function without control flow, run as a few native calls, whatever its shapes.

A compiled model's ``main`` is usually straight-line code: load constants, compute the shapes
of symbolic results (shape functions, compiled kernels), allocate storage and tensors, call
kernels, return. The interpreter redoes all of it in Python on every run. A
:class:`StaticPlan` is made on the function's first call from a walk over what is known
before running (``plan_walk.py``) and keeps:

- **the shape phase**: the calls that depend only on the arguments' shapes (shape functions)
  run first, as one C call, into a small arena that also holds the arguments' run-time
  shapes; the kernels' tensors of symbolic shape point their DLTensor shapes into it;
- **the value phase**: the kernel calls that read only constants, argument shapes and blocks
  of the shape or value phase (``plan_phase.value_phase``: T5's position buckets, causal
  masks), run after the shape phase's checks, again only when the signature differs from
  the one their blocks hold (``values``);
- **the checks** a run makes before the kernels use what the shape phase computed: sizes of
  blocks, tensors that must fit in their blocks, reshapes that must keep the element count
  (vectorised over the arena), growing a block when a larger shape arrives;
- **the kernel calls**, as one C call (``EmberRunCalls``, as the graph executor does), or a
  few *segments* where a size is computed by a kernel from data (a sync point between them:
  the blocks holding such sizes and shapes live in the arena, ``late_arena``, so the checks
  between segments read the arena, in Python and in C);
- **memory**: blocks of intermediates allocated once (grown to the largest shape seen, never
  shrunk; those of run-time size that are never live together share one storage,
  ``plan_share``), and the blocks of the result taken from the allocator every run, so a result never
  shares memory with a later run (and the allocator counts what it counts for the
  interpreter).

A run with the same argument shapes as an earlier one (the last 32 signatures are kept, with
their arena) skips the shape phase and its checks: a static function, or a symbolic one at a
shape seen before, is one native call per run. Anything the walk cannot follow leaves the
function to the interpreter, with the reason kept (``VirtualMachine._plans``); so do, run by
run: arguments whose dtype, rank or declared extents differ from the plan's, a plan already
running (a call back into the VM from one of its kernels), a failed check and a kernel
failure (the interpreter then runs the call again and raises its usual VMError).

A concatenation of run-time size (each part one byte range of the output) makes no call: its
parts' producers write them inside the output, at offsets recomputed per signature
(``plan_concat``).

The parts: ``plan_walk`` (what is known before running), ``plan_phase`` (which calls form the
shape phase), ``plan_checks`` (the checks), ``plan_share`` (which blocks share storage),
``plan_concat`` (the concatenations made in place), this module (memory, DLTensors, runs on
NDArrays), ``plan_arrays`` (runs on numpy arrays, per signature) and ``plan_native`` (a
compiled model's call at any shape as one C call: the shape phase and checks in C).
"""
from __future__ import annotations

import ctypes
import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._abi import DLTensor
from .._bridge import raise_error
from ..container import ADT
from ..errors import TVMError
from ..executor_common import c_call_at, c_plan
from ..ndarray import NDArray
from ..packed_func import CPackedFunc
from .memory import Allocator, Storage, _raw_buffer, dltensor_template, fast_ndarray
from .plan_checks import Checks, slot
from .plan_concat import aliases, in_place_concats, roots, sum_checks
from .plan_phase import (
    Early,
    ShapeOnly,
    result_blocks,
    shape_only_args,
    shape_phase,
    sources_in,
    value_phase,
)
from .plan_share import lifetimes, packed_offsets, shape_tensors, shared_slots
from .plan_walk import Arg, Block, Call, Check, NotStatic, Tensor, Walk
from .program import TensorInfo, VMFunction
from .steps import DecodeContext

NOT_RUN: Any = object()  # what StaticPlan.run returns when the interpreter must run the call
SIGNATURES = 32  # argument shapes whose shape-phase results a plan keeps
_SHAPE_FIELD = DLTensor.shape.offset


class StaticPlan:
    """A function's runs as a few native calls (see the module docstring)."""

    def __init__(self, walk: Walk, func: VMFunction, args: Sequence[NDArray],
                 allocator: Allocator, kernels: Sequence[CPackedFunc],
                 value_kernels: dict[int, tuple[int, ...]] | None = None,
                 concat_kernels: dict[int, tuple[int, ...]] | None = None,
                 kernel_names: Sequence[str] = ()) -> None:
        self._allocator = allocator
        self._arg_types = [(a._dtype, len(a._np.shape),
                            None if i in walk.arg_shapes.slots else a._np.shape)
                           for i, a in enumerate(args)]
        self._arg_slots = sorted(walk.arg_shapes.slots.items())
        # each argument's declared shape (-1: any extent), None where undeclared
        self._declared = [ty.shape if isinstance(ty, TensorInfo) else None
                          for ty in (func.param_types or [None] * len(args))]
        results = result_blocks(walk.result)
        shape_calls, arena_blocks, early = shape_phase(walk.calls, walk.blocks, results)
        value_calls, self._value_blocks = value_phase(
            walk.calls, walk.blocks, results, shape_calls, early,
            {b.index for b in arena_blocks}, value_kernels or {})
        for k in value_calls:
            walk.calls[k] = shape_only_args(walk.calls[k], value_kernels[walk.calls[k].kernel])
        late = late_arena(walk, early, results, self._value_blocks | {
            b.index for b in arena_blocks})
        self._layout(walk, arena_blocks + late, results)
        self._in_place(walk, shape_calls | set(value_calls), results, early,
                       concat_kernels or {}, kernel_names)
        self._dltensors(walk.calls, kernels)
        self._phases(walk, shape_calls, early, value_calls)
        self._share(walk, shape_calls | set(value_calls), results)
        self._results_of(walk.result, results)
        # Nothing to compute from shapes: a run is the kernel calls alone.
        self._fixed = not self._arg_slots and self._shape_run is None and \
            not self._early.checks
        self._seen: OrderedDict[tuple[Any, ...], tuple[np.ndarray, dict[int, int]]] = \
            OrderedDict()
        self._last: tuple[Any, ...] | None = None
        self._args: Sequence[NDArray] = ()
        self._lock = threading.Lock()
        self.applied: Any = None  # the plan_arrays.ArrayCall whose pointers are set, if any
        self.regrew = False  # whether a block grew again since the last ``reserve``
        # the signature whose values the value phase's blocks hold (None: none), and how
        # many times the value phase ran (the tests count)
        self._values_for: tuple[Any, ...] | None = None
        self.value_runs = 0

    # -- memory ---------------------------------------------------------------------------
    def _layout(self, walk: Walk, arena_blocks: list[Block], results: dict[int, Tensor]
                ) -> None:
        """Where every block lives: the arena (argument shapes, then the blocks the shape
        phase writes and the small blocks of sizes and shapes that kernels compute from data,
        ``late_arena``), fixed blocks, blocks grown at run time, result blocks (per run)."""
        offsets, end = {}, -(-8 * walk.arg_shapes.count // 64) * 64
        for b in arena_blocks:
            align = max(b.alignment, 64)
            end = -(-end // align) * align
            offsets[id(b)] = end
            end += b.nbytes
        self._arena, _ = _raw_buffer(max(end, 64), 64)
        self._arena[:] = 0
        self._arena_i64 = self._arena[:len(self._arena) // 8 * 8].view(np.int64)
        self._where: dict[int, int] = {id(walk.arg_shapes): 0, **offsets}  # arena offsets
        self._base: list[int | None] = [None] * len(walk.blocks)
        self._size: dict[int, int] = {}  # this run's size of each dynamic block
        self._capacity: dict[int, int] = {}  # dynamic block -> bytes allocated so far
        self._grown: dict[int, Storage] = {}  # dynamic block -> its storage once grown
        self._keep: list[Any] = []
        for b in walk.blocks:
            if id(b) in offsets:
                self._base[b.index] = self._arena.ctypes.data + offsets[id(b)]
            elif b.size is None and b.index not in results:
                storage = self._allocator.alloc(b.nbytes, b.alignment, b.device, b.dtype_hint)
                self._keep.append(storage)
                self._base[b.index] = storage.ptr

    def _in_place(self, walk: Walk, hoisted: set[int], results: dict[int, Tensor],
                  early: Early, concat_kernels: dict[int, tuple[int, ...]],
                  names: Sequence[str]) -> None:
        """The concatenations made in place (``plan_concat``): their calls dropped
        (``_dropped``), a check per signature that the parts' sizes sum to the output's, and
        per part the block it lies in and the arena slots of the earlier parts' sizes
        (``_aliases``, in the order ``_realias`` places them; ``_roots``: part -> the block
        whose storage holds it)."""
        self.concats = in_place_concats(walk.calls, concat_kernels, list(names), hoisted,
                                        set(results), early, lambda t: slot(self, t) is not None)
        walk.checks.extend(sum_checks(self.concats))
        self._dropped = {c.call for c in self.concats}
        self._aliases = [(part, parent, tuple(slot(self, t) for t in sizes))
                         for part, parent, sizes in aliases(self.concats)]
        self._roots = roots(self.concats)

    def _realias(self) -> None:
        """Each concatenation's parts at their offsets in its output for the signature the
        arena holds (after its blocks were placed or moved)."""
        a, bases = self._arena_i64, self._base
        for part, parent, slots in self._aliases:
            base = bases[parent]
            if base is not None:
                address = base + sum([int(a[s]) for s in slots])
                if bases[part] != address:  # (a run at the last signature moves none)
                    self._move(part, address)

    def forget_parts(self) -> None:
        """The parts' DLTensors point elsewhere than ``_base`` says (C placed them for its
        signature): the next ``_realias`` places every one."""
        for part, _, _ in self._aliases:
            self._base[part] = None

    def _share(self, walk: Walk, shape_calls: set[int], results: dict[int, Tensor]) -> None:
        """The dynamic blocks that share one storage (``plan_share``), at offsets ``_pack``
        gives them: their lifetimes (``_span``), each one's fellow members (``_slot_of``:
        all of them) and the storage's alignment. Blocks a late check sizes keep their
        own: growing the storage between kernel calls would move a member that is live then;
        so do the blocks the shape and value phases touch (``shape_calls``: both): their
        values outlive a run."""
        late = {b.index for checks, _ in self._segments if checks is not None
                for b in checks.sized}
        touched = {t.base.index for k in shape_calls for t in walk.calls[k].args
                   if type(t.base) is Block}
        excluded = set(results) | late | touched | {
            b.index for b in walk.blocks if b.size is None or self._base[b.index] is not None}
        reads = shape_tensors(walk.calls, walk.blocks)
        span = lifetimes(walk.calls, self._rest, walk.blocks, excluded, reads, self._roots)
        if not shared_slots(walk.calls, self._rest, walk.blocks, excluded, reads,
                            self._roots):
            span = {}  # no two blocks could ever share: each keeps storage of its own
        # the shared blocks, placed together in one storage (``_pack``)
        self._span = span
        members = sorted(span)
        self._slot_of: dict[int, list[int]] = {i: members for i in members}
        self._slot_align = max((b.alignment for b in walk.blocks if b.index in span),
                               default=64)

    def _dltensors(self, calls: list[Call], kernels: Sequence[CPackedFunc]) -> None:
        """One DLTensor per tensor a kernel reads or writes; the pointers that change (an
        argument's data, a block allocated per run or grown) are patched before the calls."""
        self._arg_patches: list[tuple[DLTensor, int, int, bool]] = []
        self._block_patches: dict[int, list[tuple[DLTensor, int, bool]]] = {}
        self._dl: dict[tuple[Any, ...], DLTensor] = {}
        self._calls = [c_call_at(kernels[call.kernel],
                                 [ctypes.addressof(self._dltensor(t)) for t in call.args])
                       for call in calls]
        self._funcs = [kernels[c.kernel] for c in calls]
        # the DLTensors each call writes (its last ``outputs`` arguments), by address; the
        # calls of concatenations made in place are not made
        self._written = frozenset(ctypes.addressof(self._dltensor(t))
                                  for k, call in enumerate(calls) if k not in self._dropped
                                  for t in call.args[len(call.args) - call.outputs:])

    def _dltensor(self, t: Tensor) -> DLTensor:
        dl = self._dl.get(t.key())
        if dl is not None:
            return dl
        shape_arr = None
        if t.static:
            shape_arr = (ctypes.c_int64 * max(t.ndim, 1))(*t.shape)
            self._keep.append(shape_arr)
        device = t.base._device if type(t.base) is NDArray else t.base.device
        dl = DLTensor.from_buffer_copy(dltensor_template(shape_arr, t.ndim, device, t.dtype))
        self._dl[t.key()] = dl
        self._point(dl, t.base, t.offset, shape=False)
        if not t.static:
            self._point(dl, t.shape.base, t.shape.offset, shape=True)
        return dl

    def _point(self, dl: DLTensor, base: Any, offset: int, shape: bool) -> None:
        """Set ``dl``'s data (or shape) pointer to ``base`` + ``offset`` now, or record the
        patch for when the base's address is known."""
        if type(base) is Arg:
            self._arg_patches.append((dl, base.index, offset, shape))
        elif type(base) is NDArray:
            self._keep.append(base)
            _set_pointer(dl, (base._dl.data or 0) + offset, shape)
        elif id(base) in self._where:  # the arena
            _set_pointer(dl, self._arena.ctypes.data + self._where[id(base)] + offset, shape)
        elif type(base) is ShapeOnly:  # bytes never read: any fixed address will do
            _set_pointer(dl, self._arena.ctypes.data, shape)
        elif self._base[base.index] is not None:  # a fixed block
            _set_pointer(dl, self._base[base.index] + offset, shape)  # type: ignore[operator]
        else:  # a block of this run's size (a result, or grown)
            self._block_patches.setdefault(base.index, []).append((dl, offset, shape))

    # -- phases and checks ----------------------------------------------------------------
    def _phases(self, walk: Walk, shape_calls: set[int], early: Early,
                value_calls: list[int]) -> None:
        """The shape phase and its checks, the value phase, then the other calls, split where
        a check needs a value that one of them computes (the checks come before the split's
        first call)."""
        order = [k for k in range(len(walk.calls)) if k in shape_calls]
        self._shape_run = self._runner(order) if order else None
        # the same calls as one C table (plan_native runs them), None where none or no C runner
        self._shape_cplan = c_plan([self._funcs[k] for k in order],
                                   [self._calls[k] for k in order]) if order else None
        self._early = Checks(self, [c for c in walk.checks if sources_in(c, early)])
        # the value phase: run after the shape phase's checks placed the blocks, when the
        # signature is not the one its blocks hold (``values``)
        self._value_calls = value_calls
        self._value_run = self._runner(value_calls) if value_calls else None
        self._value_cplan = c_plan([self._funcs[k] for k in value_calls],
                                   [self._calls[k] for k in value_calls]) if value_calls else None
        hoisted = shape_calls | set(value_calls) | self._dropped
        rest = self._rest = [k for k in range(len(walk.calls)) if k not in hoisted]
        at: dict[int, list[Check]] = {}
        for c in walk.checks:
            if not sources_in(c, early):
                pos = next((i for i, k in enumerate(rest) if k >= c.before), len(rest))
                at.setdefault(pos, []).append(c)
        cuts = sorted({0, *at})
        self._segments: list[tuple[Checks | None, Callable[[], int] | None]] = []
        self._spans: list[tuple[int, int]] = []  # each segment's calls: positions in ``rest``
        for j, start in enumerate(cuts):
            end = cuts[j + 1] if j + 1 < len(cuts) else len(rest)
            self._spans.append((start, end))
            self._segments.append((Checks(self, at[start]) if start in at else None,
                                   self._runner(rest[start:end]) if end > start else None))
        # A plan without late checks has one kernel runner (as the first plans had).
        self._run_calls = self._segments[0][1] if len(self._segments) == 1 else None

    def _runner(self, indices: list[int]) -> Callable[[], int]:
        """One C call making the calls ``indices`` in order: 0, or -1 - the failed one."""
        run = c_plan([self._funcs[k] for k in indices], [self._calls[k] for k in indices]) \
            or _in_turn([self._calls[k] for k in indices])
        if indices == list(range(len(indices))):
            return run

        def mapped() -> int:
            failed = run()
            return -1 - indices[-1 - failed] if failed else 0
        return mapped

    def _results_of(self, result: Any, results: dict[int, Tensor]) -> None:
        fields = result.fields if type(result) is not Tensor else (result,)
        self._result_tensors = list(results.values())
        self._result_index = {b: k for k, b in enumerate(results)}
        self._fields = [self._result_index[f.base.index] for f in fields]
        self._tag = None if type(result) is Tensor else result.tag
        self._templates = [_template(t) if t.static else None for t in self._result_tensors]
        # A static tensor in a block of static size: taken from the allocator as that tensor
        # (the allocator's array is the result; nothing to compute per run).
        self._static_results = [
            (k, Allocator.block_key(t.base.nbytes, t.base.alignment, t.base.device),
             t.base.nbytes, t.base.device, t.offset, t.shape, t.dtype.numpy_dtype.str,
             t.base.index, self._block_patches.get(t.base.index, []))
            for k, t in enumerate(self._result_tensors) if t.static and t.base.size is None]
        self._late_typed = [k for k, t in enumerate(self._result_tensors)
                            if not (t.static and t.base.size is None)]
        # Per result: (offset, numpy dtype, item size, static shape or None, first arena slot
        # of a run-time shape or None, rank), so a run reads a shape with one slice.
        self._typed_info = [
            (t.offset, t.dtype.numpy_dtype, t.dtype.numpy_dtype.itemsize,
             t.shape if t.static else None, None if t.static else slot(self, t.shape), t.ndim)
            for t in self._result_tensors]

    # -- running --------------------------------------------------------------------------
    def run(self, args: Sequence[Any]) -> Any:
        """The function's result on ``args``, or NOT_RUN (then the interpreter runs it)."""
        arrays = self._run(args)
        if arrays is NOT_RUN:
            return NOT_RUN
        outs = [_ndarray(arr, t, template) for arr, t, template
                in zip(arrays, self._result_tensors, self._templates)]
        if self._tag is None:
            return outs[0]
        return ADT(self._tag, [outs[k] for k in self._fields])

    def run_arrays(self, args: Sequence[Any]) -> list[np.ndarray] | Any:
        """The result's tensors as numpy arrays (a tuple's fields in order), or NOT_RUN: what
        a compiled model's call returns, without an NDArray per result."""
        arrays = self._run(args)
        if arrays is NOT_RUN:
            return NOT_RUN
        return [arrays[k][0] for k in self._fields]

    def _run(self, args: Sequence[Any]) -> list[tuple[np.ndarray, int]] | Any:
        """[(the result tensor as a numpy array, its address)] per result block, or
        NOT_RUN."""
        if not self._lock.acquire(blocking=False):  # a re-entrant call: buffers in use
            return NOT_RUN
        try:
            self.applied = None  # the pointers plan_arrays set are being changed
            signature = self._arguments(args)
            if signature is None:
                return NOT_RUN
            out: list[Any] = [None] * len(self._result_tensors)
            self._out = out
            alloc = self._allocator.alloc_array
            for k, key, nbytes, device, offset, shape, typestr, index, patches in \
                    self._static_results:
                arr, ptr = alloc(key, nbytes, device, offset, shape, typestr)
                out[k] = (arr, ptr + offset)
                self._base[index] = ptr
                for dl, at, shape_field in patches:
                    _set_pointer(dl, ptr + at, shape_field)
            if not self._fixed and self._shapes(signature) is None:
                return NOT_RUN
            if self._value_run is not None and self._values_for != signature and \
                    not self.values(signature):
                return NOT_RUN
            for checks, run in self._segments:
                if checks is not None and not checks.run():
                    return NOT_RUN
                failed = run() if run is not None else 0
                if failed:
                    _clear_error(self._funcs[-1 - failed])
                    return NOT_RUN
            for k in self._late_typed:
                out[k] = self._typed(k)
            return out
        finally:
            self._args, self._out = (), []  # hold neither the arguments nor the results
            self._lock.release()

    def _arguments(self, args: Sequence[Any]) -> tuple[Any, ...] | None:
        """Check ``args`` against the plan, point the DLTensors at them, write the run-time
        shapes into the arena; their shapes (the signature), None on a mismatch."""
        if len(args) != len(self._arg_types):
            return None
        for a, (dt, ndim, shape) in zip(args, self._arg_types):
            if type(a) is not NDArray or (a._dtype is not dt and a._dtype != dt) or \
                    len(a._np.shape) != ndim or shape is not None and a._np.shape != shape:
                return None
        self._args = args
        for dl, i, offset, shape in self._arg_patches:
            if shape:
                _set_pointer(dl, (args[i]._dl.data or 0) + offset, True)
            else:
                dl.data = (args[i]._dl.data or 0) + offset
        if not self._arg_slots:
            return ()
        signature = tuple(args[i]._np.shape for i, _ in self._arg_slots)
        if signature != self._last:
            flat = [d for shape in signature for d in shape]
            self._arena_i64[:len(flat)] = flat
        return signature

    def _shapes(self, signature: tuple[Any, ...], take_results: bool = True
                ) -> dict[int, int] | None:
        """The shape phase and the early checks, or their kept results for a signature seen
        before: the size of each block they size, or None when the interpreter must run the
        call. ``take_results``: take this run's result blocks from the allocator (not for
        ``plan_arrays``, which has its own)."""
        hit = self._seen.get(signature)
        if hit is not None:
            self._seen.move_to_end(signature)
            if signature != self._last:
                np.copyto(self._arena, hit[0])
                self._last = signature
            if take_results:
                self._early.place(hit[1], seen=True)
            return hit[1]
        self._last = None  # the arena is being rewritten
        if self._shape_run is not None:
            failed = self._shape_run()
            if failed:
                _clear_error(self._funcs[-1 - failed])
                return None
        sizes = self._early.sizes()
        if sizes is None:
            return None
        self._early.place(sizes, take_results=take_results)
        self._seen[signature] = (self._arena.copy(), sizes)
        while len(self._seen) > SIGNATURES:
            self._seen.popitem(last=False)
        self._last = signature
        return sizes

    def values(self, signature: tuple[Any, ...]) -> bool:
        """The value phase for ``signature`` (whose shape phase ran, whose blocks are placed),
        unless its blocks hold that signature's values already; False if a kernel failed."""
        if self._value_run is None or self._values_for == signature:
            return True
        self._values_for = None  # (a failure leaves them half made)
        failed = self._value_run()
        if failed:
            _clear_error(self._funcs[-1 - failed])
            return False
        self._values_for = signature
        self.value_runs += 1
        return True

    def forget_values(self) -> None:
        """The value phase's blocks hold no signature's values (another runner wrote them,
        or they moved)."""
        self._values_for = None

    def _take_result(self, k: int, nbytes: int) -> None:
        """Result block ``k`` of ``nbytes`` from the allocator, the DLTensors pointed at it."""
        b = self._result_tensors[k].base
        key = Allocator.block_key(nbytes, b.alignment, b.device)
        arr, ptr = self._allocator.alloc_array(key, nbytes, b.device, 0, (nbytes,), "|u1")
        self._out[k] = (arr, ptr)
        self._move(b.index, ptr)

    def _typed(self, k: int) -> tuple[np.ndarray, int]:
        """Result ``k`` as an array of its dtype and (now known) shape, and its address."""
        raw, ptr = self._out[k]
        offset, np_dtype, itemsize, shape, slot, ndim = self._typed_info[k]
        if shape is None:
            shape = tuple(self._arena_i64[slot:slot + ndim].tolist()) if slot is not None else \
                tuple(int(d) for d in self.value(self._result_tensors[k].shape))
        n = math.prod(shape) * itemsize
        return raw[offset:offset + n].view(np_dtype).reshape(shape), ptr + offset

    def _move(self, index: int, ptr: int) -> None:
        self._base[index] = ptr
        for dl, offset, shape in self._block_patches.get(index, ()):
            _set_pointer(dl, ptr + offset, shape)

    def _grow(self, b: Block, nbytes: int, ahead: int | None = None) -> None:
        """Give dynamic block ``b`` at least ``nbytes`` (it never shrinks). A block that grew
        before takes twice what it had, if more than asked (``ahead``, if given, instead),
        and says so in ``regrew``: sizes that keep growing (longer and longer sequences) then
        re-grow a logarithmic number of times, and the calls between stay on the native
        path, which runs within the capacity held (``plan_arrays`` then gives every buffer
        room for twice its size, ``reserve``). Memory: at most twice the largest size asked,
        in the allocator's size classes (25% over at most), never more than the machine's."""
        old = self._capacity.get(b.index)
        if ahead is None:
            self.regrew |= old is not None
            ahead = max(nbytes, 2 * old) if old is not None else nbytes
        ahead = max(nbytes, min(ahead, self._allocator.max_block_bytes))
        if b.index in self._span:
            self._pack(b, nbytes, ahead)
            return
        try:
            storage = self._allocator.alloc(ahead, b.alignment, b.device, b.dtype_hint)
        except TVMError:  # no room for the margin: exactly what is needed (or its error)
            if ahead == nbytes:
                raise
            storage = self._allocator.alloc(nbytes, b.alignment, b.device, b.dtype_hint)
        if b.index in self._value_blocks:
            self._values_for = None  # the new storage holds nothing yet
        self._grown[b.index] = storage  # the smaller one, if any, goes
        self._capacity[b.index] = storage.nbytes
        self._move(b.index, storage.ptr)

    def _pack(self, b: Block, nbytes: int, ahead: int) -> None:
        """Grow shared block ``b`` to ``ahead`` bytes (``nbytes`` at least): every shared
        block moves to one new storage, at the offsets ``plan_share.packed_offsets`` gives
        for this run's sizes (scaled by the margin ``ahead`` asks for ``b``), each keeping at
        least the room it had (a signature that fitted before still fits). This happens
        before any kernel of the run: no shared block holds a value then."""
        def room(scale: float) -> dict[int, int]:
            want = {i: max(self._capacity.get(i, 0), int(self._size.get(i, 0) * scale))
                    for i in self._span}
            want[b.index] = max(want[b.index], int(nbytes * scale))
            return want
        for scale in ((ahead / nbytes, 1.0) if ahead > nbytes else (1.0,)):
            want = room(scale)
            offsets, total = packed_offsets(self._span, want, max(self._slot_align, 64))
            try:
                storage = self._allocator.alloc(max(total, 1), self._slot_align, b.device,
                                                b.dtype_hint)
                break
            except TVMError:  # no room for the margin: exactly what is needed (or its error)
                if scale == 1.0:
                    raise
        for index, offset in offsets.items():
            self._grown[index] = storage  # the smaller one, if any, goes
            self._capacity[index] = want[index]
            self._move(index, storage.ptr + offset)

    def reserve(self, sizes: dict[int, int]) -> None:
        """Every dynamic block (not a result's) with room for twice its size in ``sizes``
        (this signature's): after one buffer had to grow again, all get the same room, so
        that the next larger shapes move none of them (each crossing its capacity at
        another size would send call after call back to Python)."""
        for b in self._early.sized:
            if b.index not in self._result_index and b.index not in self._roots and \
                    self._capacity.get(b.index, -1) < 2 * sizes[b.index]:
                self._grow(b, sizes[b.index], 2 * sizes[b.index])
        self.regrew = False
        self._realias()

    def value(self, t: Tensor) -> np.ndarray:
        """The int64 values of ``t`` now (a shape or a size), from wherever it lives."""
        n = math.prod(t.shape)
        where = self._where.get(id(t.base))
        if where is not None and (where + t.offset) % 8 == 0:
            start = (where + t.offset) // 8
            return self._arena_i64[start:start + n]
        if type(t.base) is NDArray:
            return t.base._np.reshape(-1)[:n].astype(np.int64)
        if type(t.base) is Arg:
            ptr = self._args[t.base.index]._dl.data or 0
        elif where is not None:
            ptr = self._arena.ctypes.data + where
        else:
            ptr = self._base[t.base.index] or 0
        return np.frombuffer((ctypes.c_int64 * max(n, 1)).from_address(ptr + t.offset),
                             np.int64)[:n].copy()


# The most bytes a block computed from data may have to go into the arena (a copy of the
# arena is kept per signature): shapes and sizes take a few dozen bytes each.
LATE_ARENA_BYTES = 4096


def late_arena(walk: Walk, early: Early, results: dict[int, Tensor],
               excluded: set[int]) -> list[Block]:
    """The fixed blocks holding what a late check reads or a result's run-time shape (sizes
    and shapes a kernel computes from data: NonZero's count, NonMaxSuppression's, and the
    shape functions after them), to be placed in the arena: every value the late checks and
    the results' shapes read is then an int64 of the arena, which the vectorised checks and
    C's check program read (``plan_checks.VectorChecks``). Their bytes are rewritten by the
    run's kernels before any read, so the arena's copies per signature do them no harm.
    ``excluded``: blocks that stay where they are (the value phase's) or are there already
    (the shape phase's)."""
    late = [c for c in walk.checks if not sources_in(c, early)]
    if not late:
        return []
    held: list[Tensor] = []
    for c in late:
        if c.kind == "size":
            held.append(c.item.size)
        elif c.kind == "fit":
            held += [c.item.shape] + ([c.item.base.size] if c.item.base.size is not None
                                      else [])
        else:
            held += [x.shape for x in c.item if not x.static]
    held += [t.shape for t in results.values() if not t.static]
    chosen: dict[int, Block] = {}
    for t in held:
        b = t.base
        if type(b) is Block and b.size is None and b.index not in results and \
                b.index not in excluded and b.nbytes <= LATE_ARENA_BYTES:
            chosen[b.index] = b
    return [chosen[i] for i in sorted(chosen)]


def build(func: VMFunction, ctx: DecodeContext, args: Sequence[Any], allocator: Allocator
          ) -> StaticPlan | str:
    """The plan of ``func`` for arguments like ``args``, or why there is none."""
    try:
        walk = Walk(func, ctx, args, allocator.max_block_bytes)
        return StaticPlan(walk, func, args, allocator, ctx.kernels,  # type: ignore[arg-type]
                          ctx.value_kernels, ctx.concat_kernels, ctx.kernel_names)
    except NotStatic as err:
        return str(err)


def _template(t: Tensor) -> tuple[bytes, Any]:
    shape_arr = (ctypes.c_int64 * max(len(t.shape), 1))(*t.shape)
    return dltensor_template(shape_arr, len(t.shape), t.base.device, t.dtype), shape_arr


def _ndarray(arr: tuple[np.ndarray, int], t: Tensor, template: tuple[bytes, Any] | None
             ) -> NDArray:
    """Result tensor ``t`` (its array and address) as an NDArray."""
    view, ptr = arr
    if template is None:
        return NDArray(view, t.base.device, t.dtype)
    return fast_ndarray(view, ptr, template[0], template[1], t.base.device, t.dtype)


def _set_pointer(dl: DLTensor, address: int, shape: bool) -> None:
    if shape:
        ctypes.c_void_p.from_address(ctypes.addressof(dl) + _SHAPE_FIELD).value = address
    else:
        dl.data = address


def _in_turn(calls: Sequence[functools.partial[int]]) -> Callable[[], int]:
    """The calls one by one (a library without EmberRunCalls); CPlan's return convention."""
    def run() -> int:
        for i, call in enumerate(calls):
            if call():
                return -1 - i
        return 0
    return run


def _clear_error(kernel: CPackedFunc) -> None:
    """Take the failed kernel's error, so the interpreter's run reports its own."""
    try:
        raise_error(kernel._take_error, kernel.name)
    except Exception:  # noqa: BLE001  (the interpreter raises it again, with context)
        pass


__all__ = ["NOT_RUN", "StaticPlan", "build"]
