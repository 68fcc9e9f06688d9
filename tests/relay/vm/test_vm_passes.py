"""The VM passes on their own: InlinePrimitives, ManifestAlloc (arena planning, escapes, the
no-overlap law) and LambdaLift; plus random programs through the whole VM pipeline."""
from __future__ import annotations

import numpy as np
from _vm_check import check, requires_cc
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.expr import Call, GlobalVar, Let
from ember.relay.backend.vm import InlinePrimitives, LambdaLift, ManifestAlloc, _ops
from ember.relay.backend.vm.lambda_lift import is_closure_global
from ember.relay.backend.vm.memory_alloc import _Alloc, first_fit
from ember.relay.transform import FuseOps, InferType, ToANormalForm


def _lowered(mod: ember.IRModule, opt_level: int = 0) -> ember.IRModule:
    with ember.transform.PassContext(opt_level=opt_level):
        mod = InferType()(FuseOps()(InferType()(mod)))
    return ManifestAlloc()(InlinePrimitives()(InferType()(ToANormalForm()(mod))))


def _bindings(expr: relay.Expr) -> list[tuple[relay.Var, relay.Expr]]:
    out = []
    while isinstance(expr, Let):
        out.append((expr.var, expr.value))
        expr = expr.body
    return out


def _chain(n: int) -> ember.IRModule:
    x = relay.var("x", shape=(16, 16))
    y = x
    for _ in range(n):
        y = relay.nn.relu(relay.add(y, x))
    return ember.IRModule.from_expr(relay.Function([x], y))


def test_intermediates_share_one_arena_and_reuse_bytes() -> None:
    binds = _bindings(_lowered(_chain(4))["main"].body)
    storages = [v for _, v in binds if isinstance(v, Call) and v.op is _ops.ALLOC_STORAGE]
    tensors = [v for _, v in binds if isinstance(v, Call) and v.op is _ops.ALLOC_TENSOR]
    assert len(tensors) == 8 and len(storages) == 2  # the arena + the returned tensor's own
    arena_size = int(storages[0].args[0].data.numpy())
    assert arena_size == 2 * 16 * 16 * 4  # two live intermediates at a time, not seven
    offsets = {t.attrs.offset for t in tensors if t.args[0] is binds[0][0]}
    assert offsets == {0, 1024}


def test_escaping_values_get_their_own_storage() -> None:
    x = relay.var("x", shape=(4,))
    a = relay.exp(x)
    mod = ember.IRModule.from_expr(relay.Function([x], relay.Tuple([a, relay.negative(a)])))
    binds = _bindings(_lowered(mod)["main"].body)
    storages = [v for _, v in binds if isinstance(v, Call) and v.op is _ops.ALLOC_STORAGE]
    assert len(storages) == 2  # both results escape through the tuple; no arena


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10), st.integers(1, 3000)),
                min_size=1, max_size=25))
def test_first_fit_never_overlaps_live_tensors(spec: list[tuple[int, int, int]]) -> None:
    allocs = [_Alloc(relay.var(f"t{i}"), start, (size,), "uint8", last=start + span)
              for i, (start, span, size) in enumerate(spec)]
    offsets, total = first_fit(allocs)
    for i, a in enumerate(allocs):
        assert offsets[a.var] % 64 == 0 and offsets[a.var] + a.nbytes <= total
        for b in allocs[i + 1:]:
            live_together = a.index <= b.last and b.index <= a.last
            apart = (offsets[a.var] + a.nbytes <= offsets[b.var]
                     or offsets[b.var] + b.nbytes <= offsets[a.var])
            assert apart or not live_together


def test_inline_primitives_puts_let_bound_kernels_in_call_position() -> None:
    x = relay.var("x", shape=(2,))
    mod = InferType()(FuseOps()(InferType()(ember.IRModule.from_expr(
        relay.Function([x], relay.exp(x))))))
    prim = mod["main"].body.op
    f = relay.var("f")
    mod["main"] = relay.Function([x], relay.Let(f, prim, relay.Call(f, [x])))
    body = InlinePrimitives()(mod)["main"].body
    assert isinstance(body, Call) and body.op is prim


def test_lambda_lift_makes_closures_and_direct_self_calls() -> None:
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    f = relay.var("f")
    inner = relay.Function([y], relay.add(x, y))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.Let(f, inner, relay.Call(f, [x]))))
    lifted = LambdaLift()(InferType()(mod))
    names = sorted(gv.name_hint for gv in lifted.functions)
    assert names == ["main", "main_lifted_0"]
    closure = lifted["main_lifted_0"]
    assert is_closure_global(closure) and [p.name_hint for p in closure.params] == ["x"]
    let = lifted["main"].body
    assert isinstance(let.value, Call) and isinstance(let.value.op, GlobalVar)


@requires_cc
def test_lambda_lift_of_a_function_without_free_variables() -> None:
    y = relay.var("y", shape=(2,))
    f = relay.var("f")
    x = relay.var("x", shape=(2,))
    mod = ember.IRModule.from_expr(relay.Function(
        [x], relay.Let(f, relay.Function([y], relay.exp(y)), relay.Call(f, [x]))))
    lifted = LambdaLift()(InferType()(mod))
    assert not is_closure_global(lifted["main_lifted_0"])
    check(mod, np.zeros(2, "float32"))


# -- law: the VM pipeline preserves the interpreter's result ------------------------------------
@st.composite
def programs(draw):
    """Random programs over a (3, 4) input: elementwise ops, an if on a reduction, a closure."""
    x = relay.var("x", shape=(3, 4))
    values = [x]
    for _ in range(draw(st.integers(1, 5))):
        a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["unary", "binary", "if", "closure"]))
        if kind == "unary":
            values.append(draw(st.sampled_from([relay.nn.relu, relay.negative, relay.tanh]))(a))
        elif kind == "binary":
            values.append(draw(st.sampled_from([relay.add, relay.multiply]))(a, b))
        elif kind == "if":
            values.append(relay.If(relay.greater(relay.sum(a), relay.const(0.0)), a, b))
        else:
            z = relay.var("z", shape=(3, 4))
            values.append(relay.Call(relay.Function([z], relay.subtract(z, a)), [b]))
    return ember.IRModule.from_expr(relay.Function([x], values[-1]))


@requires_cc
@settings(max_examples=8, deadline=None)
@given(programs(), st.sampled_from([0, 3]))
def test_random_programs_match_the_interpreter(mod: ember.IRModule, opt_level: int) -> None:
    data = np.random.default_rng(3).standard_normal((3, 4)).astype("float32")
    with ember.transform.PassContext(opt_level=opt_level):
        check(mod, data)
