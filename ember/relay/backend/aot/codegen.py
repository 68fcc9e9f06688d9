"""AOT codegen, step 1: a fused, typed ``main`` -> ``tvmgen_<mod>_run_model`` as loop IR.

``lower_main`` reads the dataflow of ``main`` (``_liveness.Dataflow``, the view the graph
codegen and memory planners share), places every tensor, and builds a ``tir.PrimFunc`` whose
body is one statement per fused operator, in execution order::

    @tvmgen_my_mod_run_model(a: uint8[1, 2], b: uint8[1, 2], output: uint8[1, 2]) {
      tir.call_cpacked('tvmgen_my_mod_fused_add', a, b, output)
    }

Where a tensor lives (its Buffer's ``data`` var and ``elem_offset``):

- an input or output of ``main``: the caller's memory (a parameter of run_model); an output
  made by an operator is written there directly;
- an intermediate: ONE arena (``memory_plan.plan_dataflow_arena``), a byte offset in the
  ``workspace`` parameter; tensors alive at the same time never overlap;
- a constant (of ``main``, or lifted out of a kernel): a static array when params are linked,
  else an offset in the ``constants`` pool parameter.

Reshape-only groups make no call: their output aliases their input. An output that is an
input, a constant, or the same tensor as an earlier output is copied (``ember.aot.copy``).
Calls use the operator calling convention of the build: ``tir.call_unpacked`` /
``tir.call_cpacked`` / ``tir.call_packed``; the C emitter (``codegen_c.py``) renders them and
checks every return code.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ....ir.expr import Function
from ....ir.memory_pools import PoolError
from ....ir.module import IRModule
from ....runtime.aot_format import ParameterInfo
from ....runtime.errors import InternalError, TVMError
from ....runtime.ndarray import NDArray
from ....tir.expr import Call, IntImm, PrimExpr, StringImm, Var
from ....tir.stmt import Buffer, Evaluate, PrimFunc, Stmt, seq
from .._liveness import Dataflow, Step
from ..memory_plan import ArenaPlan, _align, plan_dataflow_arena
from .calling_convention import AotOptions
from .usmp import PoolPlan, output_roots, plan_dataflow_pools

CALL_OPS = {"unpacked": "tir.call_unpacked", "cpacked": "tir.call_cpacked",
            "packed": "tir.call_packed"}
COPY_OP = "ember.aot.copy"


@dataclass
class ConstantEntry:
    """A constant of the model: its name (``p0``...), value and pool offset in bytes."""

    name: str
    value: NDArray
    offset: int
    var: Var  # the linked array (its symbol), the constants pool, or a constant memory pool
    pooled: bool = False  # at ``offset`` of ``var`` (a pool), not an array of its own

    @property
    def nbytes(self) -> int:
        return int(self.value.nbytes)


@dataclass
class AotProgram:
    """``run_model`` as loop IR, with everything the C emitter and the metadata need."""

    prefix: str
    run_model: PrimFunc
    inputs: list[ParameterInfo]
    outputs: list[ParameterInfo]
    constants: list[ConstantEntry]
    arena: ArenaPlan
    intermediate_bytes: int  # every intermediate in its own buffer (no reuse)
    kernels: dict[str, Any]  # kernel symbol -> LoweredFunc, in first-call order
    notes: list[str] = field(default_factory=list)  # per statement: what it computes
    workspace: Var | None = None
    constant_pool: Var | None = None
    # USMP (usmp.py): the pools' plan, run_model's pool parameters, and with use_workspace_io
    # where each input and output lives (pool index, byte offset), inputs first
    pool_plan: PoolPlan | None = None
    pool_vars: list[Var] = field(default_factory=list)
    io_locations: list[tuple[int, int]] | None = None
    constant_pool_vars: list[Var] = field(default_factory=list)  # constant_memory_pools'
    # per constant memory pool: pool_name, size_hint_bytes, planned_bytes, its constants
    constant_pools: list[dict[str, Any]] = field(default_factory=list)
    # USMP: per workspace pool, the largest operator scratch placed in it (one call at a time)
    scratch_by_pool: dict[str, int] = field(default_factory=dict)

    @property
    def constant_pool_bytes(self) -> int:
        return max((c.offset + c.nbytes for c in self.constants), default=0)


def itemsize(dtype: str) -> int:
    from ....runtime.dtype import DataType

    dt = DataType(dtype)
    return max(1, (dt.bits * dt.lanes + 7) // 8)


def _dims(shape: tuple[int, ...]) -> tuple[PrimExpr, ...]:
    return tuple(IntImm("int32" if d < 2**31 else "int64", int(d)) for d in shape)


def _where(step: Step) -> str:
    from ....ir.printer import short_text

    return short_text(step.call) if step.call is not None else "?"


class _Lowering:
    """Builds the PrimFunc of one ``main``; one instance per build."""

    def __init__(self, df: Dataflow, kernels: Mapping[Any, Any], opts: AotOptions, prefix: str,
                 io_names: tuple[list[str], list[str]],
                 scratch: Mapping[str, int] | None = None) -> None:
        self.df, self.kernels, self.opts, self.prefix = df, kernels, opts, prefix
        self.scratch = dict(scratch or {})  # kernel name -> bytes of scratch it takes (USMP)
        self.scratch_at: dict[int, tuple[int, int]] = {}  # step -> (pool, offset) of its scratch
        self.scratch_steps: dict[int, tuple[str, int]] = {}  # step -> (kernel, scratch bytes)
        self.places = df.alias_places()  # per tensor (root, byte offset in the root)
        self.roots = [r for r, _ in self.places]
        self.in_names, self.out_names = io_names
        align = max([opts.workspace_alignment] + [itemsize(t.dtype) for t in df.tensors])
        self.output_of = output_roots(df, self.roots)
        self.pool_of: dict[int, int] = {}  # tensor (or -1 - output index) -> pool index
        self.pool_plan: PoolPlan | None = None
        self.pool_vars: list[Var] = []
        if opts.usmp is None:
            self.offsets, self.arena = plan_dataflow_arena(df, align)
        else:
            self._plan_pools(align)
        self.workspace = (Var("workspace", "handle")
                          if self.arena.total and opts.usmp is None else None)
        self.const_align = max([opts.constant_alignment] + [itemsize(t.dtype) for t in df.tensors])
        self.pool = None if opts.link_params else Var("constants", "handle")
        # constant_memory_pools (linked params only): one static array per pool
        self.cpools = tuple(opts.constant_pools or ())
        self.cpool_vars = [Var(f"{prefix}_{p.pool_name}", "handle") for p in self.cpools]
        self.cpool_fill = [0] * len(self.cpools)
        self.constants: list[ConstantEntry] = []
        self.const_of: dict[int, int] = {}  # root tensor id -> constant index
        self.lifted: dict[str, list[int]] = {}  # kernel -> constant indices it takes
        self.in_vars = [Var(n, "handle") for n in self.in_names]
        self.out_vars = [Var(n, "handle") for n in self.out_names]
        self.taken = {p.name_hint for p, _ in df.params}
        self._next_name = 0

    # -- constants ---------------------------------------------------------------------------
    def _const_name(self) -> str:
        """``p0``, ``p1``, ... skipping names of main's parameters (as the graph codegen)."""
        while f"p{self._next_name}" in self.taken:
            self._next_name += 1
        self._next_name += 1
        return f"p{self._next_name - 1}"

    def add_constant(self, value: NDArray) -> int:
        k = len(self.constants)
        prev = self.constants[-1] if self.constants else None
        offset = 0 if prev is None else _align(prev.offset + prev.nbytes, self.const_align)
        var = self.pool if self.pool is not None else Var(f"{self.prefix}_constant_{k}", "handle")
        name = self._const_name()
        if self.cpools:
            var, offset = self._in_constant_pool(name, int(value.nbytes))
        self.constants.append(ConstantEntry(name, value, offset, var,
                                            self.pool is not None or bool(self.cpools)))
        return k

    def _in_constant_pool(self, name: str, nbytes: int) -> tuple[Var, int]:
        """The first constant pool with room for ``nbytes`` more: (its var, the offset)."""
        for k, pool in enumerate(self.cpools):
            offset = _align(self.cpool_fill[k], self.const_align)
            limit = pool.size_hint_bytes
            if limit < 0 or offset + nbytes <= limit:
                self.cpool_fill[k] = offset + nbytes
                return self.cpool_vars[k], offset
        listed = ", ".join(f"{p.pool_name} ({p.size_hint_bytes} bytes, {f} used)"
                           for p, f in zip(self.cpools, self.cpool_fill, strict=True))
        raise PoolError(f"aot: the constant pools are too small: constant {name} ({nbytes} "
                        f"bytes) fits in none of {listed}; the model's constants need at least "
                        f"{sum(self.cpool_fill) + nbytes} bytes so far, or add a pool without a "
                        "size_hint_bytes")

    def _plan_pools(self, align: int) -> None:
        """USMP: the intermediates (and with use_workspace_io the inputs and outputs) placed
        in the pools; keys are root tensor ids, and ``-1 - j`` for output ``j`` when it is a
        copy (its own buffer, written after the last step)."""
        usmp, df = self.opts.usmp, self.df
        self.scratch_steps = self._scratch_steps()
        keys, plan = plan_dataflow_pools(df, usmp, align, self.scratch_steps)
        self.pool_plan = plan
        self.pool_vars = [Var(f"{p.pool_name}_var", "handle") for p in usmp.pools]
        place = {k: (plan.pool_of[i], plan.offsets[i]) for i, k in enumerate(keys)}
        for k in [k for k in place if isinstance(k, tuple)]:  # ("scratch", step)
            self.scratch_at[k[1]] = place.pop(k)
        self.offsets = {t: place[r][1] + at for t, (r, at) in enumerate(self.places)
                        if r in place}
        self.pool_of = {t: place[self.roots[t]][0] for t in range(len(df.tensors))
                        if self.roots[t] in place}
        for k, where in place.items():
            if k < 0:
                self.pool_of[k], self.offsets[k] = where
        self.arena = ArenaPlan([], plan.total, plan.lower_bound)

    def _scratch_steps(self) -> dict[int, tuple[str, int]]:
        """Step index -> (kernel, scratch bytes) for the calls of kernels that take scratch."""
        out = {}
        for i, step in enumerate(self.df.steps):
            low = None if step.is_nop else self.kernels.get(step.func)
            if low is not None and self.scratch.get(low.name, 0) > 0:
                out[i] = (low.name, self.scratch[low.name])
        return out

    def constant_pool_report(self) -> list[dict[str, Any]]:
        """Per constant memory pool: name, limit (-1: none), bytes used, its constants (name,
        byte offset, bytes), as TVM's ``ConstantPoolInfo.constant_info_arr``."""
        out = []
        for pool, var, fill in zip(self.cpools, self.cpool_vars, self.cpool_fill, strict=True):
            members = [{"name_hint": c.name, "byte_offset": c.offset, "data_len": c.nbytes}
                       for c in self.constants if c.var is var]
            out.append({"pool_name": pool.pool_name, "size_hint_bytes": pool.size_hint_bytes,
                        "planned_bytes": fill, "constants": members})
        return out

    def scratch_report(self) -> dict[str, int]:
        """Per workspace pool (USMP) the largest operator scratch placed in it."""
        out: dict[str, int] = {}
        for i, (pool, _) in self.scratch_at.items():
            name = self.opts.usmp.pools[pool].pool_name
            out[name] = max(out.get(name, 0), self.scratch_steps[i][1])
        return out

    def io_locations(self) -> list[tuple[int, int]] | None:
        """With use_workspace_io, (pool, offset) of each input then each output."""
        if self.opts.usmp is None or not self.opts.usmp.use_workspace_io:
            return None
        out = [(self.pool_of[tid], self.offsets[tid]) for _, tid in self.df.params]
        for j, t in enumerate(self.df.outputs):
            key = t if self.output_of.get(self.roots[t]) == j else -1 - j
            out.append((self.pool_of[key], self.offsets[key]))
        return out

    # -- where tensors live -------------------------------------------------------------------
    def describe(self, t: int) -> str:
        """Where tensor ``t`` lives, for comments: an input/output/constant name (``+<offset>``
        for a concat input in an output's memory), or ``arena+<offset>``."""
        r, at = self.places[t]
        part = f"+{at}" if at else ""
        if r in self.input_of:
            return self.in_names[self.input_of[r]] + part
        if r in self.output_of:
            return self.out_names[self.output_of[r]] + part
        if r in self.const_of:
            return self.constants[self.const_of[r]].name + part
        if r in self.pool_of:
            return f"{self.opts.usmp.pools[self.pool_of[r]].pool_name}+{self.offsets[t]}"
        return f"arena+{self.offsets.get(t, '?')}"

    def buffer(self, t: int) -> Buffer:
        """A Buffer for tensor ``t`` over the memory of its alias root, at its offset."""
        info, (r, at) = self.df.tensors[t], self.places[t]
        base, byte_offset = self._base(r)
        byte_offset += at
        return Buffer(self.describe(t), _dims(info.shape), info.dtype,
                      data=base, elem_offset=IntImm("int64", byte_offset // itemsize(info.dtype)))

    def _base(self, r: int) -> tuple[Var, int]:
        if r in self.pool_of:  # USMP (with use_workspace_io also the inputs and outputs)
            return self.pool_vars[self.pool_of[r]], self.offsets[r]
        if r in self.input_of:
            return self.in_vars[self.input_of[r]], 0
        if r in self.output_of:
            return self.out_vars[self.output_of[r]], 0
        if r in self.const_of:
            c = self.constants[self.const_of[r]]
            return c.var, (c.offset if c.pooled else 0)
        if r in self.offsets:
            assert self.workspace is not None, "an arena offset implies a non-empty arena"
            return self.workspace, self.offsets[r]
        raise InternalError(f"aot codegen: tensor {r} has no memory (not an input, output, "
                            "constant or arena buffer)")

    # -- the function -------------------------------------------------------------------------
    def lower(self) -> tuple[PrimFunc, list[str], dict[str, Any]]:
        df = self.df
        self.input_of = {tid: i for i, (_, tid) in enumerate(df.params)}
        for const, tid in df.constants:
            self.const_of[tid] = self.add_constant(const.data)
        stmts: list[Stmt] = []
        notes: list[str] = []
        used: dict[str, Any] = {}
        for i, step in enumerate(df.steps):
            if step.is_nop:
                continue  # the output aliases the input (same root): nothing to run
            low = self.kernels.get(step.func)
            if low is None:
                raise InternalError(f"aot codegen: no lowered kernel for {_where(step)}")
            used.setdefault(low.name, low)
            stmts.append(self._call(step, low, i))
            ins = ", ".join(self.describe(t) for t in step.inputs)
            outs = ", ".join(self.describe(t) for t in step.outputs)
            if i in self.scratch_at:
                pool, offset = self.scratch_at[i]
                outs += f" (scratch {self.opts.usmp.pools[pool].pool_name}+{offset})"
            notes.append(f"{low.name}({ins}) -> {outs}")
        for j, t in enumerate(df.outputs):
            if self.output_of.get(self.roots[t]) != j:
                base, offset = ((self.pool_vars[self.pool_of[-1 - j]], self.offsets[-1 - j])
                                if -1 - j in self.pool_of else (self.out_vars[j], 0))
                dst = Buffer(f"output{j}", self.buffer(t).shape, df.tensors[t].dtype, data=base,
                             elem_offset=IntImm("int64", offset // itemsize(df.tensors[t].dtype)))
                stmts.append(Evaluate(Call("int32", COPY_OP, (dst, self.buffer(t),
                                           IntImm("int64", df.tensors[t].nbytes)))))
                notes.append(f"{self.out_names[j]} <- a copy of {self.describe(t)}")
        return self._prim_func(seq(*stmts) if stmts else seq()), notes, used

    def _call(self, step: Step, low: Any, index: int) -> Stmt:
        if low.name not in self.lifted:
            self.lifted[low.name] = [self.add_constant(c) for c in (low.constants or [])]
        consts = [self._const_buffer(k) for k in self.lifted[low.name]]
        args = ([self.buffer(t) for t in step.inputs] + consts
                + [self.buffer(t) for t in step.outputs])
        if len(args) != low.num_args:
            raise InternalError(f"aot codegen: {low.name} takes {low.num_args} arguments, the "
                                f"call {_where(step)} passes {len(args)}")
        if index in self.scratch_at:  # USMP: the kernel's scratch, last (scratch.py)
            pool, offset = self.scratch_at[index]
            args.append(Buffer(f"scratch of {low.name}", _dims((self.scratch[low.name],)),
                               "uint8", data=self.pool_vars[pool],
                               elem_offset=IntImm("int64", offset)))
        op = CALL_OPS[self.opts.operator_convention]
        if getattr(low, "external_module", None) is not None:
            op = _external_call_op(low, self.opts)
        return Evaluate(Call("int32", op, (StringImm(low.name), *args)))

    def _const_buffer(self, k: int) -> Buffer:
        c = self.constants[k]
        offset = c.offset if c.pooled else 0
        return Buffer(c.name, _dims(c.value.shape), c.value.dtype,
                      data=c.var, elem_offset=IntImm("int64", offset // itemsize(c.value.dtype)))

    def _prim_func(self, body: Stmt) -> PrimFunc:
        io_in_pools = self.opts.usmp is not None and self.opts.usmp.use_workspace_io
        params = [] if io_in_pools else list(self.in_vars) + list(self.out_vars)
        bmap: dict[Var, Buffer] = {}
        for (_, tid), var in zip(self.df.params, self.in_vars, strict=True):
            info = self.df.tensors[tid]
            bmap[var] = Buffer(var.name, _dims(info.shape), info.dtype, data=var)
        for t, var in zip(self.df.outputs, self.out_vars, strict=True):
            info = self.df.tensors[t]
            bmap[var] = Buffer(var.name, _dims(info.shape), info.dtype, data=var)
        if io_in_pools:  # the inputs and outputs are pool offsets, not parameters
            bmap = {}
        if self.pool is not None and self.constants:
            params.append(self.pool)
        if self.workspace is not None:
            params.append(self.workspace)
        params += self.pool_vars
        return PrimFunc(tuple(params), bmap, body,
                        attrs={"global_symbol": f"{self.prefix}_run_model",
                               "runner_function": True})


def _external_call_op(low: Any, opts: AotOptions) -> str:
    """How run_model calls a function of an external codegen's module (BYOC): a C source
    module is linked into the library, so its packed symbol is called directly (or found by
    name with the packed convention); another module only by name, through the C++ runtime."""
    if low.external_module.is_dso_exportable:
        return CALL_OPS["packed" if opts.operator_convention == "packed" else "cpacked"]
    if opts.runtime == "crt":
        raise TVMError(f"aot codegen: {low.name} comes from a {low.external_module.type_key!r} "
                       "module of an external codegen, which has no C source; the C runtime "
                       "links every operator as C (build with Runtime('cpp'), or return a "
                       "CSourceModule from the codegen)")
    return CALL_OPS["packed"]


def lower_main(mod: IRModule, kernels: Mapping[Any, Any], opts: AotOptions,
               prefix: str, scratch: Mapping[str, int] | None = None) -> AotProgram:
    """``run_model`` of ``mod["main"]`` (fused, typed, static) as an :class:`AotProgram`.

    ``kernels`` maps each callee (primitive Function or GlobalVar) to its LoweredFunc;
    ``scratch`` (USMP, ``scratch.py``) per kernel name the scratch bytes each call takes from
    the pools (passed as the call's last argument).
    Raises TVMError for inputs without a name, duplicate names, or names that clash in C.
    """
    from .interface import c_names

    main = mod["main"]
    if not isinstance(main, Function):
        raise TVMError(f"aot codegen: main must be a relay Function, got {type(main).__name__}")
    df = Dataflow.from_function(main, mod)
    relay_in = [p.name_hint for p, _ in df.params]
    relay_out = ["output"] if len(df.outputs) == 1 else [f"output{j}"
                                                          for j in range(len(df.outputs))]
    c_in, c_out = c_names(relay_in, relay_out, prefix)
    low = _Lowering(df, kernels, opts, prefix, (c_in, c_out), scratch)
    prim, notes, used = low.lower()
    inputs = [ParameterInfo(r, c, df.tensors[t].shape, df.tensors[t].dtype)
              for r, c, (_, t) in zip(relay_in, c_in, df.params, strict=True)]
    outputs = [ParameterInfo(r, c, df.tensors[t].shape, df.tensors[t].dtype)
               for r, c, t in zip(relay_out, c_out, df.outputs, strict=True)]
    groups = df.groups()
    in_arena = {low.roots[t] for t in low.offsets}
    scratch_total = sum(nbytes for _, nbytes in low.scratch_steps.values())
    return AotProgram(prefix, prim, inputs, outputs, low.constants, low.arena,
                      sum(groups[r].nbytes for r in in_arena) + scratch_total, used, notes,
                      low.workspace,
                      low.pool if low.constants else None, low.pool_plan, low.pool_vars,
                      low.io_locations(),
                      [v for v, f in zip(low.cpool_vars, low.cpool_fill, strict=True) if f],
                      low.constant_pool_report(), low.scratch_report())
