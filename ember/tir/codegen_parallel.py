"""Parallel loops in C without OpenMP: the loop body becomes a task function for the pool.

A ``ForKind.PARALLEL`` loop of a hosted build is outlined, as TVM does: its body goes into a
``static int <func>_par<k>(int task, TVMParallelGroupEnv* penv, void* cdata)`` that runs
iterations ``[begin, end)`` of the task's share, the variables it reads from the enclosing
function travel in a closure struct, and the loop itself becomes one
``TVMBackendParallelLaunch`` call (ember's thread pool, ``runtime/csrc/thread_pool.h``; the C
runtime runs the task serially). A loop with too little work to pay for waking a thread
(:data:`MIN_PARALLEL_WORK`), a nested parallel loop, and the loops of C-runtime builds stay
plain serial loops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .expr import BufferLoad, Call, IntImm, Var
from .functor import fold, post_order
from .simplify import bound
from .stmt import Allocate, Buffer, BufferStore, For, LetStmt

if TYPE_CHECKING:
    from .codegen_c import FunctionWriter

# Work (stores times trip counts, see parallel_work) below which a loop runs serially:
# about 10-30 us of code, against ~1 us to hand tasks to spinning workers.
MIN_PARALLEL_WORK = 32768
_UNKNOWN = 1 << 20  # a symbolic trip count or an opaque call: assume it is worth threads


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
    """Emit ``loop`` as a launch of an outlined task function; False (nothing emitted) when
    it should run serially instead. A symbolic trip count over a body of known work decides
    at run time: below MIN_PARALLEL_WORK the launch runs its one task on the caller."""
    if parallel_work(loop) < MIN_PARALLEL_WORK:
        return False
    tasks = _tasks(w, loop)
    captured = _captures(w, loop)
    if captured is None:
        return False
    from .codegen_packed import c_ident

    fn = f"{c_ident(w.func.name)}_par{w.num_outlined}"
    w.num_outlined += 1
    begin, extent = w.expr(loop.min), w.expr(loop.extent)
    # The call site: fill the closure, launch, fail like any other statement.
    cl = w.fresh("ember_closure")
    w.emit("{", ind)
    w.emit(f"{fn}_closure {cl};", ind + 1)
    for _, name in captured:
        w.emit(f"{cl}.{name} = {name};", ind + 1)
    w.emit(f"{cl}.ember_begin = {begin};", ind + 1)
    w.emit(f"{cl}.ember_extent = {extent};", ind + 1)
    w.fail_return(f"TVMBackendParallelLaunch({fn}, &{cl}, {tasks}) != 0", "-1", ind + 1)
    w.emit("}", ind)
    w.outlined.append(_task_function(w, loop, fn, captured))
    return True


def _tasks(w: FunctionWriter, loop: For) -> str:
    """The launch's task count in C: 0 (as many as threads), or where trip counts are known
    only at run time, 1 (run inline) when the work they multiply out to is below
    MIN_PARALLEL_WORK. The inner loops' run-time trip counts multiply the outer one's (an
    upper bound where they sit in different branches of the body)."""
    symbolic = [loop.extent] if not isinstance(loop.extent, IntImm) else []
    symbolic += [n.extent for n in post_order(loop.body)
                 if isinstance(n, For) and not isinstance(n.extent, IntImm)]
    # By name: lowering may rebuild a loop's variable as an equal object (a piecewise
    # concat's loops), and a name bound inside cannot be evaluated before the launch.
    bound_inside = {loop.loop_var.name} | {n.loop_var.name for n in post_order(loop.body)
                                           if isinstance(n, For)}
    bound_inside |= {n.var.name for n in post_order(loop.body) if isinstance(n, LetStmt)}
    one_trip = For(loop.loop_var, IntImm("int32", 0), IntImm("int32", 1), loop.kind, loop.body)
    per_trip = parallel_work(one_trip, symbolic=1)
    varying = [e for e in symbolic if any(isinstance(v, Var) and v.name in bound_inside
                                          for v in post_order(e))]
    for e in varying:  # a trip count that varies per iteration (a split's tail, at most 256)
        hi = bound(e, {})[1]
        if hi is None:
            return "0"  # assume large
        per_trip *= max(hi, 1)
    symbolic = [e for e in symbolic if all(e is not v for v in varying)]
    if not symbolic or per_trip >= _UNKNOWN:
        return "0"
    trips = -(-MIN_PARALLEL_WORK // max(int(per_trip), 1))
    work = " * ".join(f"(int64_t)({w.expr(e)})" for e in symbolic)
    return f"(({work}) < {trips}LL ? 1 : 0)"  # one task: inline


def _task_function(w: FunctionWriter, loop: For, fn: str,
                   captured: list[tuple[str, str]]) -> str:
    """The closure struct and the task function: this task's share of the iterations."""
    fields = [f"  {ctype} {name};" for ctype, name in captured]
    fields += ["  int32_t ember_begin;", "  int32_t ember_extent;"]
    head = ["typedef struct {", *fields, f"}} {fn}_closure;", "",
            (f"static int {fn}(int ember_task, TVMParallelGroupEnv* ember_penv, "
             "void* ember_cdata) {"),
            f"  const {fn}_closure* ember_c = (const {fn}_closure*)ember_cdata;"]
    for ctype, name in captured:
        qual = " restrict" if ctype.endswith("*") else ""
        head.append(f"  {ctype}{qual} {name} = ember_c->{name};")
        head.append(f"  (void){name};")  # a shape read only by a buffer's other dimensions
    head += ["  const int64_t ember_n = ember_penv->num_task;",
             "  const int64_t ember_chunk = (ember_c->ember_extent + ember_n - 1) / ember_n;",
             "  const int64_t ember_lo = ember_chunk * ember_task;",
             "  const int64_t ember_end = ember_lo + ember_chunk;",
             ("  const int64_t ember_hi = ember_end < ember_c->ember_extent ? ember_end : "
              "ember_c->ember_extent;")]
    saved, vmath_calls = (w.lines, w.workspaces, w.divisions), w.vmath_calls
    w.lines, w.workspaces = [], []  # the enclosing function's blocks are not ours to free
    w.divisions = {}  # nor its hoisted quotients: the task hoists its own
    w.in_parallel += 1
    try:
        v = w.bind(loop.loop_var, loop.loop_var.name)
        w.decl_types[id(loop.loop_var)] = "int32_t"
        if w._nonneg(loop.min):
            w.nonneg.add(id(loop.loop_var))
        w.emit(f"for (int32_t {v} = ember_c->ember_begin + (int32_t)ember_lo; "
               f"{v} < ember_c->ember_begin + (int32_t)ember_hi; ++{v}) {{", 1)
        outer_divisions = w.hoist_body_divisions(loop, 2)
        w.stmt(loop.body, 2)
        w.divisions = outer_divisions
        w.emit("}", 1)
        body = w.lines
        if w.vmath_calls > vmath_calls:
            at = len(fields) + 3  # the task function's signature line
            head.insert(at, "EMBER_VMATH_WIDE")
    finally:
        w.lines, w.workspaces, w.divisions = saved
        w.in_parallel -= 1
    return "\n".join(head + body + ["  return 0;", "}"])
