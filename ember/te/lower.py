"""Lowering a scheduled tensor-expression graph to a PrimFunc.

Each stage at root becomes a loop nest over its leaf loops (in schedule order) writing its
buffer; an inlined stage is substituted into its readers; a stage placed with ``compute_at``
is computed inside its parent's loop for the region the parent reads there (bound inference
by interval arithmetic over the parent's inner loops) into a local buffer of that size.
A reduction writes its identity before the first reduction loop and combines inside it.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from ..runtime.errors import OpError
from ..tir import op as _op
from ..tir.expr import (
    EQ,
    GE,
    LT,
    BufferLoad,
    Call,
    IntImm,
    PrimExpr,
    ProducerLoad,
    SizeVar,
    StringImm,
    Var,
)
from ..tir.broadcast_versions import version_broadcasts
from ..tir.partition_guards import partition_guards
from ..tir.functor import post_order, rewrite, substitute, transform
from ..tir.simplify import StructuralKeys, bound, prove, simplify
from ..tir.stmt import (
    Allocate,
    AssertStmt,
    Buffer,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    Stmt,
    seq,
)
from .bounds import guard_to_extent, sym_interval
from .lower_scan import ScanPlan, lower_scan
from .piecewise import PieceSplit, piece_source, pieces_of
from .schedule import Fuse, Schedule, Split, Stage, split_extents
from .scan import ScanOp
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor


MAX_CUTS = 8  # cuts of one loop (``Lowerer._cuts``): past this, code size outweighs the tests


class _Nest:
    """Loop variables, extents and root-axis values of one stage's loop nest."""

    def __init__(self, st: Stage, region: list[tuple[PrimExpr, PrimExpr]], ranges: dict) -> None:
        op = st.op
        self.stage, self.region = st, region
        ext: dict[Any, PrimExpr] = {iv: e for iv, (_, e) in zip(op.axis, region)}
        ext.update({iv: iv.dom.extent for iv in op.reduce_axis})
        divisible: dict[Any, bool] = {}
        for rel in st.relations:
            if isinstance(rel, Split):
                pe = ext[rel.parent]
                ext[rel.outer], ext[rel.inner] = split_extents(rel, pe)
                divisible[rel] = isinstance(pe, IntImm) and isinstance(
                    ext[rel.inner], IntImm) and pe.value % ext[rel.inner].value == 0 and (
                    rel.factor is not None or pe.value == ext[rel.outer].value * ext[
                        rel.inner].value)
            else:
                ext[rel.fused] = simplify(ext[rel.outer] * ext[rel.inner])
        self.ext = ext
        self.lv = {leaf: Var(leaf.var.name, "int32") for leaf in st.leaf_iter_vars}
        for leaf, v in self.lv.items():
            e = ext[leaf]
            _, hi = bound(e, ranges)
            ranges[v] = (0, hi - 1 if hi is not None else None)
        val: dict[Any, PrimExpr] = dict(self.lv)
        # exact: the value runs over [0, extent) and no further (no split tail above it)
        exact: dict[Any, bool] = dict.fromkeys(self.lv, True)
        self.guards: list[PrimExpr] = []
        for rel in reversed(st.relations):
            if isinstance(rel, Split):
                val[rel.parent] = val[rel.outer] * ext[rel.inner] + val[rel.inner]
                exact[rel.parent] = divisible[rel] and exact[rel.outer] and exact[rel.inner]
                if not divisible[rel]:
                    self.guards.append(val[rel.parent] < ext[rel.parent])
            else:
                val[rel.outer] = val[rel.fused] // ext[rel.inner]
                val[rel.inner] = val[rel.fused] % ext[rel.inner]
                exact[rel.outer] = exact[rel.inner] = exact[rel.fused]
        self.reduce_ids = _reduce_leaves(st)
        self.rel = {iv: simplify(val[iv], ranges) for iv in list(op.axis) + list(op.reduce_axis)}
        self.abs = {iv.var: simplify(mn + self.rel[iv], ranges)
                    for iv, (mn, _) in zip(op.axis, region)}
        self.abs.update({iv.var: simplify(iv.dom.min + self.rel[iv], ranges)
                         for iv in op.reduce_axis})
        self.guards = [simplify(g, ranges) for g in self.guards]
        # (value, region start, region end) of the exact root axes: with a run-time extent
        # the ranges cannot bound a fused loop's quotients, but a stage computed inside this
        # nest at these values needs no clamp (``Lowerer._clamp_guards``)
        self.exact = [(self.abs[iv.var], mn, simplify(mn + e, ranges))
                      for iv, (mn, e) in zip(op.axis, region) if exact.get(iv, False)]


class Lowerer:
    """Lower one schedule; see :func:`lower`."""

    def __init__(self, sch: Schedule, args: Sequence[Any], name: str) -> None:
        self.sch, self.name = sch, name
        self.bufs: dict[int, Buffer] = {}
        self.region: dict[int, list[tuple[PrimExpr, PrimExpr]]] = {}
        self.ranges: dict[Var, tuple] = {}
        self.params: list[Var] = []
        self.buffer_map: dict[Var, Buffer] = {}
        self.arg_ids: set[int] = set()
        self.scan = ScanPlan(sch)
        self.absolute_store: set[int] = set()  # ops storing at absolute indices (scan updates)
        self.size_checks: list[tuple[SizeVar, PrimExpr, str]] = []  # see _given_sizes
        for a in args:
            self._add_arg(a)
        self.exact: list[tuple[PrimExpr, PrimExpr, PrimExpr]] = []  # see _Nest.exact
        self.keys = StructuralKeys()
        self.attached: dict[tuple[int, int], list[Stage]] = {}
        for st in sch.stages:
            if st.attach_type == "scope":
                key = (id(st.attach_stage), id(st.attach_ivar))
                self.attached.setdefault(key, []).append(st)
        # whether any stage is piecewise (else no stage looks for pieces: most kernels)
        self.piecewise = any(isinstance(st.op, ComputeOp) and pieces_of(st.op) is not None
                             for st in sch.stages)

    def _add_arg(self, a: Any) -> None:
        if isinstance(a, Var):
            self.params.append(a)
            return
        if isinstance(a, Buffer):
            raise OpError(f"lower {self.name}: pass tensors, not buffers, as arguments")
        if not isinstance(a, Tensor):
            raise OpError(f"lower {self.name}: arguments must be te tensors or vars, "
                          f"got {type(a).__name__}")
        a = self.sch.current(a)  # after cache_write, C names the stage's copy-out op
        st = self.sch.stage_map.get(id(a.op))
        if st is not None and st.storage_aligns:
            raise OpError(f"lower {self.name}: storage_align on {a.name}, an argument of the "
                          "function, whose layout the caller fixes; align an intermediate "
                          "stage (from cache_read/cache_write) instead")
        buf = Buffer(_c_name(a.name), a.shape, a.dtype)
        buf.shape = self._given_sizes(buf)
        self.bufs[id(a)] = buf
        self.params.append(buf.data)
        self.buffer_map[buf.data] = buf
        self.arg_ids.add(id(a))
        self.region[id(a.op)] = [(_op.const(0), s) for s in buf.shape]

    def _given_sizes(self, buf: Buffer) -> tuple[PrimExpr, ...]:
        """``buf``'s shape with each size computed from other arguments' sizes (an output of
        shape ``max(a, b)``, ``min(1, n) * n``...) replaced by a size variable that the
        caller's tensor gives: loops run to it and indices over it stay linear. The kernel
        checks each once, before its loops, against the computation (``size_checks``)."""
        given = {id(v) for b in self.buffer_map.values() for d in b.shape
                 for v in post_order(d) if isinstance(v, Var)}
        given |= {id(p) for p in self.params if p.dtype != "handle"}
        shape = []
        for axis, dim in enumerate(buf.shape):
            free = [v for v in post_order(dim) if isinstance(v, Var)]
            if isinstance(dim, (IntImm, Var)) or not free or \
                    any(id(v) not in given for v in free):  # nothing to check it against
                shape.append(dim)
                continue
            dim = simplify(dim)
            if isinstance(dim, (IntImm, Var)):
                shape.append(dim)
                continue
            size = SizeVar(f"{buf.name}_dim{axis}", dim.dtype)
            self.size_checks.append((size, dim, f"{buf.name}: dimension {axis} is not the "
                                     "size that the other arguments' sizes give"))
            shape.append(size)
        return tuple(shape)

    # -- expressions ------------------------------------------------------------------------
    def resolve(self, e: PrimExpr, on_load: Callable | None = None,
                bodies: dict[int, PrimExpr] | None = None) -> PrimExpr:
        """Inline inlined producers and turn the other ProducerLoads into BufferLoads.

        A load of an inlined stage becomes the stage's body at the load's indices, which is
        resolved in turn (``rewrite``: no recursion however long the chain of inlined
        stages). Loads of one stage at the same index nodes share one inlined body, so a
        chain where each stage reads the two before it stays linear in size. ``bodies``
        replaces the body of the inlined ops it names (by ``id``): one piece's body.
        """
        inlined: dict[tuple[int, ...], PrimExpr] = {}

        def fn(n: Any) -> Any:
            if not isinstance(n, ProducerLoad):
                return None
            t: Tensor = self.sch.current(n.producer)
            st = self.sch[t.op]
            if st.attach_type == "inline" or id(t.op) in self.scan.body:
                key = (id(t), *map(id, n.indices))
                if key not in inlined:
                    body = (bodies or {}).get(id(t.op), t.op.body[t.value_index])
                    inlined[key] = substitute(body, {iv.var: i
                                                     for iv, i in zip(t.op.axis, n.indices)})
                return inlined[key]
            if on_load is not None:
                on_load(t, n.indices)
            buf = self.bufs.get(id(t))
            if buf is None:
                return n
            mins = [mn for mn, _ in self.region[id(t.op)]]
            return BufferLoad(buf, tuple(simplify(i - m, self.ranges)
                                         for i, m in zip(n.indices, mins)), t.dtype)
        return rewrite(e, fn)

    # -- stages -----------------------------------------------------------------------------
    def stage_stmt(self, st: Stage) -> Stmt:
        op = st.op
        if isinstance(op, ExternOp):
            return self._extern(op)
        if not isinstance(op, ComputeOp):
            raise OpError(f"lower {self.name}: cannot lower {op!r}")
        split = self._piece_source(st)
        if split is not None:
            return self._pieces_stmt(st, split)
        nest = _Nest(st, self.region[id(op)], self.ranges)
        leaves = st.leaf_iter_vars
        reduce_ids = _reduce_leaves(st)
        first_red = next((i for i, lf in enumerate(leaves) if id(lf) in reduce_ids), len(leaves))
        guards = nest.guards + self._clamp_guards(st, nest)
        self.exact += nest.exact  # the nest's own loop variables: no need to pop them
        self._prepare_attached(nest)
        bodies = [simplify(self.resolve(substitute(b, nest.abs)), self.ranges) for b in op.body]
        outs = [self.bufs[id(op.output(i))] for i in range(op.num_outputs)]
        idx = tuple(nest.abs[iv.var] if id(op) in self.absolute_store else nest.rel[iv]
                    for iv in op.axis)
        if not op.reduce_axis:
            stores = seq(*[BufferStore(b, _op.cast(v, b.dtype), idx) for b, v in zip(outs, bodies)])
            cuts = self._cuts(st, nest, bodies, guards)
            if cuts:
                return self._partitioned(nest, outs, bodies, idx, cuts)
            return self._versioned(st, nest, guards,
                                   lambda gs: self._loops(nest, leaves, stores, gs))
        init, update = self._reduce_stores(op, nest, bodies, outs, idx)
        spatial_after = [lf for lf in leaves[first_red:] if id(lf) not in reduce_ids]
        red_vars = {id(nest.lv[lf]) for lf in leaves if id(lf) in reduce_ids}

        def inner(gs: list[PrimExpr]) -> Stmt:
            init_guards = [g for g in gs if not any(id(v) in red_vars for v in post_order(g))]
            return seq(self._loops(nest, spatial_after, init, init_guards, attach=False),
                       self._loops(nest, leaves[first_red:], update, gs))

        return self._loops(nest, leaves[:first_red], self._versioned(st, nest, guards, inner),
                           [], innermost=False)

    def _versioned(self, st: Stage, nest: _Nest, guards: list[PrimExpr],
                   make: Callable[[list[PrimExpr]], Stmt]) -> Stmt:
        """``make(guards)``; for a tile computed inside its reader (``compute_at``) whose
        guards test its own loops (the last tile of a run-time width: ``16 * q + x < w``),
        ``if (whole tile) make([]) else make(guards)``: the guards, one per accumulator, keep
        the C compiler from holding the tile in registers (a conv at a ``?`` width ran 2x its
        static build's time), and every tile but the last is whole."""
        whole = self._whole_tile(st, nest, guards)
        if whole is None:
            return make(guards)
        if isinstance(whole, IntImm):
            return make([] if whole.value else guards)
        return IfThenElse(whole, make([]), make(guards))

    def _whole_tile(self, st: Stage, nest: _Nest, guards: list[PrimExpr]) -> PrimExpr | None:
        """The condition, free of the stage's loop variables, under which ``guards`` (each
        ``a < b`` or ``a >= b``) hold at every point of the tile; None if there is none."""
        if st.attach_type != "scope" or not guards:
            return None
        inner = {nest.lv[lf]: nest.ext[lf] for lf in st.leaf_iter_vars}
        ids = {id(v) for v in inner}
        if not any(id(n) in ids for g in guards for n in post_order(g)):
            return None  # tests of the tile's position only: the C compiler hoists them
        conds = []
        for g in guards:
            if not isinstance(g, (LT, GE)):
                return None
            iv = sym_interval(simplify(g.a - g.b, self.ranges), inner, self.ranges)
            if iv is None:
                return None
            conds.append(iv[1] < 0 if isinstance(g, LT) else iv[0] >= 0)
        return simplify(_op.all(*conds), self.ranges)

    def _cuts(self, st: Stage, nest: _Nest, bodies: list[PrimExpr], guards: list) -> list[int]:
        """Where to cut the innermost loop so that no ``if_then_else`` in ``bodies`` tests
        its index against a constant (``i2 < 6400``: a concat inlined into its consumer)."""
        leaves = st.leaf_iter_vars
        if not leaves or guards or (id(st), id(leaves[-1])) in self.attached:
            return []
        var, ext = nest.lv[leaves[-1]], nest.ext[leaves[-1]]
        if not isinstance(ext, IntImm):
            return []
        cuts = {n.args[0].b.value for b in bodies for n in post_order(b)
                if isinstance(n, Call) and n.op == "if_then_else" and isinstance(n.args[0], LT)
                and n.args[0].a is var and isinstance(n.args[0].b, IntImm)
                and 0 < n.args[0].b.value < ext.value}
        return sorted(cuts) if len(cuts) <= MAX_CUTS else []

    def _partitioned(self, nest: _Nest, outs: list[Buffer], bodies: list[PrimExpr],
                     idx: tuple, cuts: list[int]) -> Stmt:
        """The stage's loops with the innermost one cut at ``cuts``: one loop per range, its
        body simplified for that range (the tests on the index fold away)."""
        st, leaves = nest.stage, nest.stage.leaf_iter_vars
        last = leaves[-1]
        var, kind = nest.lv[last], nest.stage.iter_var_attrs.get(last, ForKind.SERIAL)
        notes = {f"pragma_{k}": v for k, v in st.pragmas.get(last, [])}
        parts = []
        for lo, hi in itertools.pairwise([0, *cuts, nest.ext[last].value]):
            part = Var(var.name, "int32")
            self.ranges[part] = (0, hi - lo - 1)
            where = {var: part + lo}
            stores = [BufferStore(b, _op.cast(simplify(substitute(v, where), self.ranges),
                                              b.dtype),
                                  tuple(simplify(substitute(i, where), self.ranges) for i in idx))
                      for b, v in zip(outs, bodies)]
            parts.append(For(part, _op.const(0), _op.const(hi - lo), kind, seq(*stores), notes))
        return self._loops(nest, leaves[:-1], seq(*parts), [], innermost=False)

    def _piece_source(self, st: Stage) -> PieceSplit | None:
        # How a piecewise op's pieces split this root stage (itself, or one it reads through
        # inlined stages at one of its axes), when nothing is computed inside its loops.
        if not self.piecewise or st.attach_type != "root" or id(st.op) in self.scan.parts or any(
                key[0] == id(st) for key in self.attached):
            return None  # (a scan's init and update stages own their regions: lower_scan)
        return piece_source(self.sch, st.op)

    def _pieces_stmt(self, st: Stage, split: PieceSplit) -> Stmt:
        """One loop nest per piece of ``split.source`` (``te/piecewise.py``): the stage's own
        loops (fuse, split, parallel, vectorise) over the piece's box, the piece's body in
        place of the source's whole body (the stage's own when it is the source)."""
        op, source, f = st.op, split.source, split.factor
        pieces = pieces_of(source)
        out = self.bufs[id(op.output(0))]
        parts = []
        for off, ext, body in zip(pieces.offsets, pieces.extents, pieces.bodies):
            region = list(self.region[id(op)])
            region[split.axis] = (off, ext) if f == 1 else (_op.const(off.value // f),
                                                             _op.const(ext.value // f))
            nest = _Nest(st, region, self.ranges)
            own, bodies = (body, None) if source is op else (op.body[0], {id(source): body})
            value = simplify(self.resolve(substitute(own, nest.abs), bodies=bodies),
                             self.ranges)
            idx = tuple(nest.abs[iv.var] for iv in op.axis)
            # a concat along another axis inside the piece (YOLO's decode: each level's
            # (xy, wh, rest) concat on the last axis, the levels a concat on the rows) is cut
            # as in a plain stage, else it stays a select chain per element
            cuts = self._cuts(st, nest, [value], nest.guards)
            if cuts:
                parts.append(self._partitioned(nest, [out], [value], idx, cuts))
                continue
            store = BufferStore(out, _op.cast(value, out.dtype), idx)
            parts.append(self._loops(nest, st.leaf_iter_vars, store, list(nest.guards)))
        return seq(*parts)

    def _reduce_stores(self, op: ComputeOp, nest: _Nest, bodies: list, outs: list[Buffer],
                       idx: tuple) -> tuple[Stmt, Stmt]:
        red = op.body[0]
        comb = red.combiner
        inits = red.init or comb.identity_element
        init = seq(*[BufferStore(b, _op.cast(self.resolve(substitute(v, nest.abs)), b.dtype), idx)
                     for b, v in zip(outs, inits)])
        cur = [BufferLoad(b, idx, b.dtype) for b in outs]
        src = [simplify(self.resolve(substitute(s, nest.abs)), self.ranges) for s in red.source]
        vmap = dict(zip(comb.lhs, cur))
        vmap.update(zip(comb.rhs, src))
        results = [substitute(r, vmap) for r in comb.result]
        if len(outs) == 1:
            update: Stmt = BufferStore(outs[0], results[0], idx)
        else:
            tmps = [Var(f"{outs[0].name}_red{i}", b.dtype) for i, b in enumerate(outs)]
            update = seq(*[BufferStore(b, t, idx) for b, t in zip(outs, tmps)])
            for t, r in reversed(list(zip(tmps, results))):
                update = LetStmt(t, r, update)
        cond = simplify(self.resolve(substitute(red.condition, nest.abs)), self.ranges)
        if not (isinstance(cond, IntImm) and cond.value):
            update = IfThenElse(cond, update)
        return init, update

    def _loops(self, nest: _Nest, leaves: list, body: Stmt, guards: list[PrimExpr],
               innermost: bool = True, attach: bool = True) -> Stmt:
        guards = [g for g in guards if prove(g, self.ranges) is not True]
        ext = {id(lf): nest.ext[lf] for lf in leaves}
        if innermost and leaves:
            last = nest.lv[leaves[-1]]
            guards, new_ext = guard_to_extent(guards, last, ext[id(leaves[-1])], self.ranges)
            ext[id(leaves[-1])] = new_ext
        for g in guards:
            body = IfThenElse(g, body)
        for lf in reversed(leaves):
            if attach:
                body = self._attach_at(nest, lf, body)
            kind = nest.stage.iter_var_attrs.get(lf, ForKind.SERIAL)
            if kind in (ForKind.VECTORIZED, ForKind.PARALLEL) and id(lf) in nest.reduce_ids:
                kind = ForKind.SERIAL  # a reduction loop carries a dependency: keep it serial
            notes = {f"pragma_{k}": v for k, v in nest.stage.pragmas.get(lf, [])}
            body = For(nest.lv[lf], _op.const(0), ext[id(lf)], kind, body, notes)
        return body

    def _attach_at(self, nest: _Nest, leaf: Any, body: Stmt) -> Stmt:
        stages = self.attached.get((id(nest.stage), id(leaf)))
        if not stages:
            return body
        parts = [self.stage_stmt(st) for st in stages]
        out = seq(*parts, body)
        for st in reversed(stages):
            for i in reversed(range(st.op.num_outputs)):
                out = Allocate(self.bufs[id(st.op.output(i))], out)
        return out

    def _prepare_attached(self, nest: _Nest) -> None:
        # Regions and local buffers of the stages computed inside this nest, before its body
        # is resolved (its loads of them index relative to the region's start).
        leaves = nest.stage.leaf_iter_vars
        for pos, leaf in enumerate(leaves):
            inner = {nest.lv[lf]: nest.ext[lf] for lf in leaves[pos + 1:]}
            for st in self.attached.get((id(nest.stage), id(leaf)), []):
                self._infer_region(st, nest, inner)
                for i in range(st.op.num_outputs):
                    t = st.op.output(i)
                    self.bufs[id(t)] = _stage_buffer(st, t, tuple(
                        e for _, e in self.region[id(st.op)]), "local")

    def _infer_region(self, st: Stage, parent: _Nest, inner: dict) -> None:
        accesses: list[tuple] = []
        target = st.op

        def on_load(t: Tensor, idx: tuple) -> None:
            if t.op is target:
                accesses.append(idx)

        for b in parent.stage.op.body:
            src = b.source + (b.condition,) if hasattr(b, "combiner") else (b,)
            for s in src:
                self.resolve(substitute(s, parent.abs), on_load)
        if not accesses:
            raise OpError(f"compute_at: {target.name} is not read by {parent.stage.op.name}")
        region = []
        for d, full in enumerate(target.output(0).shape):
            ivs = [sym_interval(simplify(a[d], self.ranges), inner, self.ranges)
                   for a in accesses]
            if any(iv is None for iv in ivs):
                region.append((_op.const(0), full))
                continue
            lo, hi = ivs[0]
            for l2, h2 in ivs[1:]:
                lo, hi = _op.min(lo, l2), _op.max(hi, h2)
            lo, hi = simplify(lo, self.ranges), simplify(hi, self.ranges)
            extent = simplify(hi - lo + 1, self.ranges)
            region.append((lo, extent) if isinstance(extent, IntImm) else (_op.const(0), full))
        self.region[id(target)] = region

    def _clamp_guards(self, st: Stage, nest: _Nest) -> list[PrimExpr]:
        if st.attach_type != "scope":
            return []
        out = []
        for iv, full, (mn, e) in zip(st.op.axis, st.op.output(0).shape, nest.region):
            if self._inside(mn, e, full):
                continue
            a = nest.abs[iv.var]
            out += [simplify(a < full, self.ranges), simplify(a >= 0, self.ranges)]
        return [g for g in out if not (isinstance(g, IntImm) and g.value)]

    def _inside(self, mn: PrimExpr, e: PrimExpr, full: PrimExpr) -> bool:
        """Whether the region [mn, mn + e) lies in [0, full) by construction: the whole axis,
        or one value of an enclosing nest's exact axis over [0, full) (``_Nest.exact``), which
        the ranges cannot show when ``full`` is a run-time size."""
        full = simplify(full, self.ranges)
        if isinstance(mn, IntImm) and mn.value == 0:
            return self._same(simplify(e, self.ranges), full)
        if not (isinstance(e, IntImm) and e.value == 1):
            return False
        return any(self._same(value, mn) and isinstance(lo, IntImm) and lo.value >= 0 and
                   self._same(hi, full) for value, lo, hi in self.exact)

    def _same(self, a: PrimExpr, b: PrimExpr) -> bool:
        return a is b or self.keys.of(a) == self.keys.of(b)

    def _extern(self, op: ExternOp) -> Stmt:
        bmap: dict[int, Buffer] = {}
        for ph, t in zip(op.input_placeholders, op.inputs):
            t = self.sch.current(t)
            if id(t) not in self.bufs:
                raise OpError(f"lower {self.name}: extern {op.name} reads {t.name}, which must "
                              "be computed into a buffer (not inlined)")
            bmap[id(ph)] = self.bufs[id(t)]
        for i, ph in enumerate(op.output_placeholders):
            bmap[id(ph)] = self.bufs[id(op.output(i))]
        return _rebind_buffers(op.body, bmap,
                               [*op.input_placeholders, *op.output_placeholders])

    # -- driver -----------------------------------------------------------------------------
    def _scan_buffers(self) -> list[Buffer]:
        """The buffer of each scan output (a temporary unless it is an argument), which its
        state, init and update tensors share; returns the temporaries."""
        temps = []
        for op in self.scan.scans:
            st = self.sch[op]
            self.region[id(op)] = [(_op.const(0), s) for s in op.output(0).shape]
            for i, out in enumerate(op._outputs):
                if id(out) not in self.bufs:
                    self.bufs[id(out)] = _stage_buffer(st, out, out.shape, st.scope)
                    temps.append(self.bufs[id(out)])
                state = op.state_placeholder[i]
                self.region[id(state.op)] = [(_op.const(0), s) for s in state.shape]
                for t in (state, op.init[i], op.update[i]):
                    self.bufs[id(t)] = self.bufs[id(out)]
        return temps

    def run(self) -> PrimFunc:
        parts: list[Stmt] = []
        temps: list[Buffer] = self._scan_buffers()
        for st in self.sch.stages:
            op = st.op
            if id(op) in self.scan.parts or id(op) in self.scan.body:
                continue  # lowered by its scan (init, update) or inlined into an update
            if isinstance(op, ScanOp):
                parts.append(lower_scan(self, op))
                continue
            if isinstance(op, PlaceholderOp):
                if id(op.output(0)) not in self.arg_ids and id(op) not in self.scan.states:
                    raise OpError(f"lower {self.name}: input {op.name} is not in the argument "
                                  "list")
                continue
            if st.attach_type != "root":
                continue
            for i in range(op.num_outputs):
                t = op.output(i)
                if id(t) not in self.bufs:
                    buf = _stage_buffer(st, t, t.shape, st.scope)
                    self.bufs[id(t)] = buf
                    temps.append(buf)
            self.region.setdefault(id(op), [(_op.const(0), s) for s in op.output(0).shape])
            parts.append(self.stage_stmt(st))
        body = seq(*parts)
        for buf in reversed(temps):
            body = Allocate(buf, body)
        body = partition_guards(version_broadcasts(simplify(body)))
        for size, dim, message in reversed(self.size_checks):
            body = AssertStmt(EQ(size, dim, "bool"), StringImm(message), body)
        from ..ir.transform import PassContext

        if any(st.pragmas for st in self.sch.stages) or (
                "tir.UnrollLoop" in PassContext.current().config):
            from ..tir.transform import unroll_loops

            body = unroll_loops(body, None)
        return PrimFunc(tuple(self.params), dict(self.buffer_map), body,
                        attrs={"global_symbol": self.name})


def _reduce_leaves(st: Stage) -> set[int]:
    red = {id(iv) for iv in st.op.reduce_axis}
    for rel in st.relations:
        if isinstance(rel, Split) and id(rel.parent) in red:
            red |= {id(rel.outer), id(rel.inner)}
        elif isinstance(rel, Fuse) and id(rel.outer) in red:
            red.add(id(rel.fused))
    return red


def _rebind_buffers(body: Stmt, bmap: dict[int, Buffer], placeholders: Sequence[Buffer]) -> Stmt:
    # An extern body names placeholder buffers, their elements or (for extern C kernels)
    # their data pointers; each becomes the real buffer's.
    data = {id(ph.data): bmap[id(ph)].data for ph in placeholders}

    def fn(n: Any) -> Any:
        if id(n) in data:
            return data[id(n)]
        if isinstance(n, (BufferLoad, BufferStore)) and id(n.buffer) in bmap:
            import dataclasses

            return dataclasses.replace(n, buffer=bmap[id(n.buffer)])
        if isinstance(n, Call) and any(id(a) in bmap for a in n.args):
            return Call(n.dtype, n.op, tuple(bmap.get(id(a), a) for a in n.args))
        return None
    return transform(body, fn)


def _stage_buffer(st: Stage, t: Tensor, shape: tuple, scope: str) -> Buffer:
    """The buffer a stage computes ``t`` into, its rows padded as storage_align asks."""
    buf = Buffer(_c_name(t.name), shape, t.dtype, scope=scope)
    if not st.storage_aligns:
        return buf
    # TVM's StorageFlatten rule, innermost dimension first: the stride of an aligned dimension
    # rounds up to k * factor + offset.
    strides: list[PrimExpr] = []
    stride: PrimExpr = _op.const(1)
    for d in reversed(range(len(buf.shape))):
        if d in st.storage_aligns:
            factor, offset = st.storage_aligns[d]
            stride = simplify(stride + (factor + offset - stride % factor) % factor)
        strides.append(stride)
        stride = simplify(stride * buf.shape[d])
    buf.strides = tuple(reversed(strides))
    return buf


def _c_name(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"t_{out}"


def lower(sch: Schedule, args: Sequence[Any], name: str = "main", binds: Any = None,
          simple_mode: bool = False) -> PrimFunc:
    """Lower schedule ``sch`` to a PrimFunc whose parameters are ``args`` (tensors, vars).

    The outputs must be among ``args``; every input placeholder must be too. ``simple_mode``
    is accepted for TVM's signature (the printed IR is always the simple form). Passes in the
    current PassContext's ``"tir.add_lower_pass"`` config, ``[(phase, pass), ...]``, run on
    the result in phase order (ember lowers in one step, so every phase is "after lowering").
    """
    func = Lowerer(sch, args, name).run()
    from ..ir.transform import PassContext

    extra = PassContext.current().config.get("tir.add_lower_pass")
    if extra:
        from ..tir.transform import run_lower_passes

        func = run_lower_passes(func, extra)
    return func
