"""Parallel loops in C without OpenMP: the loop body becomes a task function for the pool.

A ``ForKind.PARALLEL`` loop of a hosted build is outlined, as TVM does: its body goes into a
``static int <func>_par<k>(int task, TVMParallelGroupEnv* penv, void* cdata)`` that runs
iterations ``[begin, end)`` of the task's share, the variables it reads from the enclosing
function travel in a closure struct, and the loop itself becomes one
``TVMBackendParallelLaunch`` call (ember's thread pool, ``runtime/csrc/thread_pool.h``; the C
runtime runs the task serially). A loop with too little work to pay for waking a thread
(:data:`MIN_PARALLEL_WORK`), a nested parallel loop, and the loops of C-runtime builds stay
plain serial loops.

Where a run-time trip count makes a parallel loop one of a nest of two (``collapsed_nest``: a
serial loop whose whole body is the parallel loop, as a run-time batch in front of fused static
axes is scheduled; or a narrow parallel loop whose whole body is a loop of a run-time trip
count, the rows of a blocked map), one launch runs the pair as one flat range, as OpenMP's
``collapse(2)`` does: each task finds the two indices of its first iteration with one division
and then steps through the nest, so the body keeps its two plain loop variables (no division
per vector) while the threads share the nest's whole work (one launch per call instead of one
per batch item, each too small to wake a thread: GPT-2's KV-cache concat). Static builds have
no run-time trip counts: their C is unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .expr import BufferLoad, Call, IntImm, PrimExpr, Var
from .functor import fold, post_order
from .hoist_division import DIVISIONS
from .op import is_int
from .simplify import bound
from .stmt import Allocate, Buffer, BufferStore, For, ForKind, LetStmt

if TYPE_CHECKING:
    from .codegen_c import FunctionWriter

# Work (stores times trip counts, see parallel_work) below which a loop runs serially:
# about 10-30 us of code, against ~1 us to hand tasks to spinning workers.
MIN_PARALLEL_WORK = 32768
_UNKNOWN = 1 << 20  # a symbolic trip count or an opaque call: assume it is worth threads
# A static parallel trip count from which the threads share it evenly enough by itself (at
# most 1/64 idle at 2 threads): below it, a run-time inner loop is collapsed into the launch.
WIDE_ENOUGH = 64


def parallel_work(loop: For, symbolic: int = _UNKNOWN) -> float:
    """A rough count of the stores (and calls) that ``loop`` executes: trip counts multiply,
    statements add; symbolic trip counts count as ``symbolic``, extern/packed calls as
    large."""

    def cost(n: Any, kids: list[float]) -> float:
        if isinstance(n, For):
            trips = n.extent.value if isinstance(n.extent, IntImm) else symbolic
            return trips * sum(kids)
        if isinstance(n, BufferStore):
            return 1 + sum(kids)
        if isinstance(n, Call) and n.op in ("tir.call_extern", "tir.call_packed"):
            return _UNKNOWN
        return sum(kids)

    return float(fold(loop, cost))


def collapsed_nest(loop: For) -> list[For]:
    """The loops that the launch for ``loop`` runs as one flat range: ``[loop, inner]`` where
    ``loop``'s whole body is the loop ``inner``, one of the two is parallel and the other
    serial, ``inner`` holds a loop and its bounds do not read ``loop``'s variable, and a trip
    count is known only at run time: a serial loop around the parallel one (a run-time
    batch), or a parallel loop of a run-time or narrow (below WIDE_ENOUGH) trip count around
    a run-time one. Else ``[loop]`` (for a parallel ``loop``) or ``[]``."""
    inner = loop.body
    single = [loop] if loop.kind == ForKind.PARALLEL else []
    if not isinstance(inner, For) or {loop.kind, inner.kind} != {ForKind.SERIAL,
                                                                ForKind.PARALLEL}:
        return single
    if not any(isinstance(n, For) for n in post_order(inner.body)):
        return single  # an innermost loop keeps its own C (a row sum, hoisted divisions)
    names = {loop.loop_var.name}  # by name, as _work_extents does: lowering may rebuild one
    if any(isinstance(v, Var) and (v is loop.loop_var or v.name in names)
           for e in (inner.min, inner.extent) for v in post_order(e)):
        return single
    outer_static, inner_static = isinstance(loop.extent, IntImm), isinstance(inner.extent,
                                                                               IntImm)
    if loop.kind == ForKind.SERIAL:
        return [loop, inner] if not (outer_static and inner_static) else []
    narrow = not outer_static or loop.extent.value < WIDE_ENOUGH
    return [loop, inner] if narrow and not inner_static else single


def _buffers(loop: For) -> list[Buffer]:
    out: dict[int, Buffer] = {}
    for n in post_order(loop):
        if isinstance(n, (BufferLoad, BufferStore)):
            out.setdefault(id(n.buffer), n.buffer)
        elif isinstance(n, Call):
            for a in n.args:
                if isinstance(a, Buffer):
                    out.setdefault(id(a), a)
    return list(out.values())


def _captures(w: FunctionWriter, loop: For) -> list[tuple[str, str]] | None:
    """(C type, name) of every variable of the enclosing function that ``loop``'s body reads,
    in order of first use; None if one has no known declaration (the loop stays serial)."""
    roots: list[Any] = [loop.body]
    for buf in _buffers(loop):
        roots.append(buf.data)
        roots.extend(buf.shape)
        roots.extend(buf.strides or ())
        if buf.elem_offset is not None:
            roots.append(buf.elem_offset)
    inner = {id(n.loop_var) for n in post_order(loop.body) if isinstance(n, For)}
    inner |= {id(n.var) for n in post_order(loop.body) if isinstance(n, LetStmt)}
    inner |= {id(n.buffer.data) for n in post_order(loop.body) if isinstance(n, Allocate)}
    inner.add(id(loop.loop_var))
    seen: set[int] = set()
    out: list[tuple[str, str]] = []
    for root in roots:
        for v in post_order(root):
            if not isinstance(v, Var) or id(v) in seen or id(v) in inner:
                continue
            seen.add(id(v))
            name, ctype = w.names.get(id(v)), w.decl_types.get(id(v))
            if name is None or name.startswith("("):
                continue  # a Let expression's substituted value, or bound inside the body
            if ctype is None:
                return None
            out.append((ctype, name))
    return out


def outline_parallel_loop(w: FunctionWriter, loop: For, ind: int) -> bool:
    """Emit ``loop`` (a parallel loop, or a serial one whose body is the parallel loop:
    ``collapsed_nest``) as a launch of an outlined task function; False (nothing emitted)
    when it should run as plain loops instead. A symbolic trip count over a body of known
    work decides at run time: below MIN_PARALLEL_WORK a branch runs the plain loops, as a
    static build of that size does (``_below_work``)."""
    nest = collapsed_nest(loop)
    if not nest or parallel_work(loop) < MIN_PARALLEL_WORK:
        return False
    captured = _captures(w, loop)
    if captured is None:
        return False
    from .codegen_packed import c_ident

    fn = f"{c_ident(w.func.name)}_par{w.num_outlined}"
    w.num_outlined += 1
    # The call site: fill the closure, launch, fail like any other statement. The bounds
    # and the work test may divide by run-time sizes (a row count from a reshape): each
    # such division once, into a local, guarded against a zero size (hoist_division).
    cl = w.fresh("ember_closure")
    w.emit("{", ind)
    bounds = [b for n in nest for b in (n.min, n.extent)]
    work = _work_extents(nest)
    outer_divisions = w._emit_divisions(
        [d for e in (*bounds, *work[0]) for d in post_order(e) if isinstance(d, DIVISIONS)
         and is_int(d.dtype) and not isinstance(d.b, IntImm)], ind + 1)
    small = _below_work(w, nest, work)
    at = ind + 1
    if small is not None:  # too little work for threads: the plain loops, no launch
        w.emit(f"if ({small}) {{", at)
        w.in_parallel += 1  # (so they stay plain loops, their buffers where a task's are)
        try:
            w.stmt(loop, at + 1)
        finally:
            w.in_parallel -= 1
        w.emit("} else {", at)
        at += 1
    w.emit(f"{fn}_closure {cl};", at)
    for _, name in captured:
        w.emit(f"{cl}.{name} = {name};", at)
    for field, e in zip(_BOUNDS, bounds):
        w.emit(f"{cl}.{field} = {w.expr(e)};", at)
    w.fail_return(f"TVMBackendParallelLaunch({fn}, &{cl}, 0) != 0", "-1", at)
    if small is not None:
        w.emit("}", ind + 1)
    w.divisions = outer_divisions
    w.emit("}", ind)
    w.outlined.append(_task_function(w, nest, fn, captured))
    return True


# The closure's fields for the bounds of the loops of a nest, outermost first.
_BOUNDS = ("ember_begin", "ember_extent", "ember_begin_in", "ember_extent_in")


def _work_extents(nest: list[For]) -> tuple[list[PrimExpr], list[PrimExpr]]:
    """The run-time trip counts that multiply the work of ``nest`` (its loops' and those of
    the loops inside: an upper bound where they sit in different branches of the body), as
    (the ones known before the launch, the ones that vary per iteration: a split's tail)."""
    body = nest[-1].body
    symbolic = [n.extent for n in (*nest, *post_order(body))
                if isinstance(n, For) and not isinstance(n.extent, IntImm)]
    # By name: lowering may rebuild a loop's variable as an equal object (a piecewise
    # concat's loops), and a name bound inside cannot be evaluated before the launch.
    inside = {n.loop_var.name for n in nest} | {
        n.loop_var.name for n in post_order(body) if isinstance(n, For)}
    inside |= {n.var.name for n in post_order(body) if isinstance(n, LetStmt)}
    varies = [any(isinstance(v, Var) and v.name in inside for v in post_order(e))
              for e in symbolic]
    return ([e for e, v in zip(symbolic, varies) if not v],
            [e for e, v in zip(symbolic, varies) if v])


def _below_work(w: FunctionWriter, nest: list[For],
                work: tuple[list[PrimExpr], list[PrimExpr]]) -> str | None:
    """Where trip counts are known only at run time (``work``: ``_work_extents``), the C test
    that the work they multiply out to is below MIN_PARALLEL_WORK (the loops then run plain
    on the caller: a launch that runs one task inline still costs a call through the pool, a
    tenth of a small GPT-2 layer's kernel); None where the work is large or unknown. The work:
    one trip of the innermost loop of ``nest`` times the trip counts of its loops (static
    ones counted in, as ``parallel_work`` counts a static build's) and of the run-time loops
    inside."""
    loop = nest[-1]
    symbolic, varying = work
    one_trip = For(loop.loop_var, IntImm("int32", 0), IntImm("int32", 1), loop.kind, loop.body)
    per_trip = parallel_work(one_trip, symbolic=1)
    for n in nest:
        if isinstance(n.extent, IntImm):
            per_trip *= n.extent.value
    for e in varying:  # a trip count that varies per iteration (a split's tail, at most 256)
        hi = bound(e, {})[1]
        if hi is None:
            return None  # assume large
        per_trip *= max(hi, 1)
    if not symbolic or per_trip >= _UNKNOWN:
        return None
    trips = -(-MIN_PARALLEL_WORK // max(int(per_trip), 1))
    text = " * ".join(f"(int64_t)({w.expr(e)})" for e in symbolic)
    return f"({text}) < {trips}LL"


def _task_function(w: FunctionWriter, nest: list[For], fn: str,
                   captured: list[tuple[str, str]]) -> str:
    """The closure struct and the task function: this task's share of the iterations of the
    loop, or of the flat range of the nest of two (``_collapsed_body``)."""
    fields = [f"  {ctype} {name};" for ctype, name in captured]
    fields += [f"  int32_t {field};" for field in _BOUNDS[:2 * len(nest)]]
    total = "ember_c->ember_extent" if len(nest) == 1 else "ember_total"
    head = ["typedef struct {", *fields, f"}} {fn}_closure;", "",
            (f"static int {fn}(int ember_task, TVMParallelGroupEnv* ember_penv, "
             "void* ember_cdata) {"),
            f"  const {fn}_closure* ember_c = (const {fn}_closure*)ember_cdata;"]
    for ctype, name in captured:
        qual = " restrict" if ctype.endswith("*") else ""
        head.append(f"  {ctype}{qual} {name} = ember_c->{name};")
        head.append(f"  (void){name};")  # a shape read only by a buffer's other dimensions
    if len(nest) > 1:
        head.append("  const int64_t ember_total = (int64_t)ember_c->ember_extent * "
                    "ember_c->ember_extent_in;")
    head += ["  const int64_t ember_n = ember_penv->num_task;",
             f"  const int64_t ember_chunk = ({total} + ember_n - 1) / ember_n;",
             "  const int64_t ember_lo = ember_chunk * ember_task;",
             "  const int64_t ember_end = ember_lo + ember_chunk;",
             f"  const int64_t ember_hi = ember_end < {total} ? ember_end : {total};"]
    saved, vmath_calls = (w.lines, w.workspaces, w.divisions), w.vmath_calls
    w.lines, w.workspaces = [], []  # the enclosing function's blocks are not ours to free
    w.divisions = {}  # nor its hoisted quotients: the task hoists its own
    w.in_parallel += 1
    try:
        if len(nest) == 1:
            loop = nest[0]
            v = _bind_loop_var(w, loop)
            w.emit(f"for (int32_t {v} = ember_c->ember_begin + (int32_t)ember_lo; "
                   f"{v} < ember_c->ember_begin + (int32_t)ember_hi; ++{v}) {{", 1)
            outer_divisions = w.hoist_body_divisions(loop, 2)
            w.stmt(loop.body, 2)
            w.divisions = outer_divisions
            w.emit("}", 1)
        else:
            _collapsed_body(w, nest)
        body = w.lines
        if w.vmath_calls > vmath_calls:
            at = len(fields) + 3  # the task function's signature line
            head.insert(at, "EMBER_VMATH_WIDE")
    finally:
        w.lines, w.workspaces, w.divisions = saved
        w.in_parallel -= 1
    return "\n".join(head + body + ["  return 0;", "}"])


def _bind_loop_var(w: FunctionWriter, loop: For) -> str:
    v = w.bind(loop.loop_var, loop.loop_var.name)
    w.decl_types[id(loop.loop_var)] = "int32_t"
    if w._nonneg(loop.min):
        w.nonneg.add(id(loop.loop_var))
    return v


def _collapsed_body(w: FunctionWriter, nest: list[For]) -> None:
    """This task's iterations ``[ember_lo, ember_hi)`` of the flat range of ``outer x inner``:
    the first one's two indices from one division, then row by row, the inner loop a plain
    loop over its share of each row (a range of no iterations divides nothing)."""
    outer, inner = nest
    i, j = _bind_loop_var(w, outer), _bind_loop_var(w, inner)
    w.emit("if (ember_hi <= ember_lo) return 0;", 1)
    w.emit("const int32_t ember_row = ember_c->ember_extent_in;", 1)
    w.emit(f"int32_t {i} = ember_c->ember_begin + (int32_t)(ember_lo / ember_row);", 1)
    w.emit("int32_t ember_from = (int32_t)(ember_lo % ember_row);", 1)
    w.emit(f"for (int64_t ember_left = ember_hi - ember_lo; ember_left > 0; ++{i}) {{", 1)
    outer_divisions = w.hoist_body_divisions(outer, 2)
    w.emit("const int32_t ember_to = ember_left < (int64_t)(ember_row - ember_from) ? "
           "ember_from + (int32_t)ember_left : ember_row;", 2)
    w.emit(f"for (int32_t {j} = ember_c->ember_begin_in + ember_from; "
           f"{j} < ember_c->ember_begin_in + ember_to; ++{j}) {{", 2)
    w.loops.append(inner)  # the innermost open loop while its body is written
    inner_divisions = w.hoist_body_divisions(inner, 3)
    w.stmt(inner.body, 3)
    w.divisions = inner_divisions
    w.loops.pop()
    w.emit("}", 2)
    w.divisions = outer_divisions
    w.emit("ember_left -= ember_to - ember_from;", 2)
    w.emit("ember_from = 0;", 2)
    w.emit("}", 1)
