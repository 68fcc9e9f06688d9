"""InferType's shortcuts between runs give the types a full check gives.

A build re-infers, pass after pass, a module made mostly of nodes the last InferType typed.
Kept across runs: op type relation results (by op, attrs object and static argument types),
one TensorType per constant shape and dtype; a node already typed as the check finds it, on
unchanged children, is kept rather than copied. Each shortcut must be invisible in the
result: the same types, the same errors at the same nodes.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir import IRModule, Op
from ember.ir.types import Any, IncompleteType, ShapeVar, TensorType, TupleType
from ember.ir.visitor import post_order, walk_children
from ember.relay.transform import InferType, _checker, _deferred, type_infer
from ember.relay.transform._helpers import _Reach
from ember.relay.transform._unify import Unifier, UnifyError
from ember.runtime.errors import TypeInferenceError


def call(name, *args, **attrs):
    op = Op.get(name)
    return relay.Call(op, args, op.make_attrs(**attrs) if attrs else None)


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def assert_same_typed(a, b):
    """Same structure, and every node (walked in step) of the same type."""
    ember.ir.assert_structural_equal(a, b, map_free_vars=True)
    for x, y in zip(post_order(a, kids=walk_children), post_order(b, kids=walk_children)):
        assert x.checked_type_ == y.checked_type_, (x, x.checked_type_, y.checked_type_)


def without_shortcuts(monkeypatch):
    monkeypatch.setattr(_deferred, "_relation_key", lambda call, args: None)
    monkeypatch.setattr(_checker, "CONSTANT_TYPES_KEPT", 0)
    monkeypatch.setattr(type_infer, "_same_type", lambda a, b: False)


# -- type relation results ------------------------------------------------------------------------
def test_an_edited_input_is_retyped_though_the_call_keeps_its_attrs():
    x = relay.var("x", T(2, 3))
    body = call("sum", x, axis=(1,))
    typed = InferType()(IRModule.from_expr(relay.Function([x], body)))
    assert typed["main"].body.checked_type == T(2)
    # a pass gives the same call (same op, same attrs object) a wider input
    y = relay.var("x", T(5, 3))
    edited = relay.Call(body.op, (y,), body.attrs)
    again = InferType()(IRModule.from_expr(relay.Function([y], edited)))
    assert again["main"].body.checked_type == T(5)


def test_equal_attrs_of_another_object_give_the_same_result():
    x = relay.var("x", T(4, 6))
    a = call("transpose", x, axes=(1, 0))
    b = call("transpose", x, axes=(1, 0))
    assert a.attrs is not b.attrs
    typed = InferType()(IRModule.from_expr(relay.Function([x], relay.Tuple([a, b]))))
    assert typed["main"].body.checked_type == TupleType((T(6, 4), T(6, 4)))


def test_one_op_on_one_input_with_other_attrs_is_typed_apart():
    x = relay.var("x", T(2, 3))
    body = relay.Tuple([call("sum", x, axis=(0,)), call("sum", x, axis=(1,))])
    for _ in range(2):  # the second run finds both results kept
        typed = InferType()(IRModule.from_expr(relay.Function([x], body)))
        assert typed["main"].body.checked_type == TupleType((T(3), T(2)))


def test_a_failing_relation_fails_again_at_its_node():
    x = relay.var("x", T(2, 3))
    y = relay.var("y", T(4, 5))
    mod = IRModule.from_expr(relay.Function([x, y], call("add", x, y)))
    messages = []
    for _ in range(2):  # the second run must not find a kept result
        with pytest.raises(TypeInferenceError) as err:
            InferType()(mod)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "add" in messages[0]


def test_results_with_symbolic_sizes_are_made_afresh(monkeypatch):
    monkeypatch.setattr(_deferred, "_RESULTS", {})
    n = ShapeVar("n")
    assert not _deferred._static(T(n, 3))
    assert not _deferred._static(IncompleteType())
    assert _deferred._static(TupleType((T(2, Any()), T(1))))
    x = relay.var("x", T(n, 3))
    body = call("sum", x, axis=(1,))
    for _ in range(2):
        typed = InferType()(IRModule.from_expr(relay.Function([x], body)))
        assert typed["main"].body.checked_type.shape[0] is n
    assert _deferred._RESULTS == {}  # nothing kept for symbolic sizes
    s = relay.var("s", T(2, 3))
    InferType()(IRModule.from_expr(relay.Function([s], call("sum", s, axis=(1,)))))
    assert len(_deferred._RESULTS) == 1  # a static one is


def test_relation_results_are_bounded(monkeypatch):
    monkeypatch.setattr(_deferred, "RELATION_RESULTS_KEPT", 2)
    monkeypatch.setattr(_deferred, "_RESULTS", {})
    x = relay.var("x", T(2, 3, 4))
    body = call("sum", call("transpose", call("exp", x), axes=(2, 1, 0)), axis=(0,))
    typed = InferType()(IRModule.from_expr(relay.Function([x], body)))
    assert typed["main"].body.checked_type == T(3, 2)
    assert len(_deferred._RESULTS) <= 2


# -- constants --------------------------------------------------------------------------------------
def test_constants_of_one_shape_share_a_type_and_others_do_not():
    a = relay.const(np.zeros((2, 3), "float32"))
    b = relay.const(np.ones((2, 3), "float32"))
    c = relay.const(np.ones((2, 3), "int32"))
    typed = InferType()(IRModule.from_expr(relay.Tuple([a, b, c])))
    fields = typed["main"].body.fields
    assert fields[0].checked_type is fields[1].checked_type
    assert fields[2].checked_type == T(2, 3, dtype="int32")


# -- typed nodes kept ---------------------------------------------------------------------------------
def test_untouched_typed_nodes_are_kept_and_edited_ones_retyped():
    x = relay.var("x", T(2, 3))
    inner = call("exp", x)
    typed = InferType()(IRModule.from_expr(relay.Function([x], call("negative", inner))))
    kept = typed["main"].body.args[0]  # the typed exp(x)
    # a pass swaps the outer op and widens nothing: exp(x) is unchanged, reused as is
    edited = relay.Function(list(typed["main"].params), call("sum", kept, axis=(0,)))
    again = InferType()(IRModule.from_expr(edited))
    assert again["main"].body.args[0] is kept
    assert again["main"].body.checked_type == T(3)


def test_a_typed_node_whose_input_changed_type_is_copied():
    x = relay.var("x", T(2, 3))
    typed = InferType()(IRModule.from_expr(relay.Function([x], call("exp", x))))
    old_body = typed["main"].body
    y = relay.var("x", T(7))
    again = InferType()(IRModule.from_expr(relay.Function([y], relay.Call(
        old_body.op, (y,), old_body.attrs))))
    assert again["main"].body.checked_type == T(7)
    assert old_body.checked_type == T(2, 3)  # the earlier module keeps its types


def test_edited_global_and_its_caller_are_rechecked():
    # @f typed, then edited to return another shape: @main, unchanged, must see it
    typed = two_globals()
    assert typed["main"].body.checked_type == T(2, 3)
    edited = typed.copy()
    fx = relay.var("x", T(2, 3))
    edited[typed.get_global_var("f")] = relay.Function([fx], call("sum", fx, axis=(1,)))
    again = InferType()(edited)
    assert again["main"].body.checked_type == T(2)
    assert again["main"].checked_type.ret_type == T(2)


def test_an_error_in_an_edited_typed_module_names_the_node():
    x = relay.var("x", T(2, 3))
    typed = InferType()(IRModule.from_expr(relay.Function([x], call("exp", x))))
    body = typed["main"].body  # typed exp(x), kept ...
    bad = call("add", body, relay.const(np.zeros((4,), "float32")))  # ... fed a bad add
    with pytest.raises(TypeInferenceError, match="add"):
        InferType()(IRModule.from_expr(relay.Function(list(typed["main"].params), bad)))


def test_a_pipeline_types_as_it_does_without_shortcuts(monkeypatch):
    from ember.relay.testing import mlp
    mod, params = mlp.get_workload(batch_size=1, image_shape=(1, 8, 8), num_classes=4)
    with ember.transform.PassContext(opt_level=3):
        fast, _ = relay.optimize(mod, target="llvm", params=params)
    without_shortcuts(monkeypatch)
    with ember.transform.PassContext(opt_level=3):
        slow, _ = relay.optimize(mod, target="llvm", params=params)
    assert_same_typed(fast["main"], slow["main"])


# -- the unifier's direct path ----------------------------------------------------------------------
def test_an_unknown_unified_with_tensors_merges_and_rejects_as_before():
    u = Unifier()
    t = IncompleteType()
    u.unify(t, T(Any(), 3))
    u.unify(t, T(2, 3))
    assert u.resolve(t) == T(2, 3)
    with pytest.raises(UnifyError, match="dimension 1 is 3 vs 4"):
        u.unify(t, T(2, 4))
    with pytest.raises(UnifyError, match="dtype"):
        u.unify(t, T(2, 3, dtype="int32"))
    tup = IncompleteType()
    u.unify(tup, TupleType((T(1),)))
    with pytest.raises(UnifyError):
        u.unify(tup, T(1))


# -- rewrite_span's bounded reach ---------------------------------------------------------------
def _reference_reach(expr, limit):
    from ember.ir.visitor import children
    seen, queue = {id(expr)}, [expr]
    for node in queue:
        for kid in children(node):
            if id(kid) not in seen and len(seen) < limit:
                seen.add(id(kid))
                queue.append(kid)
    return seen


@pytest.mark.parametrize("limit", [1, 3, 64])
def test_reach_answers_as_the_whole_bounded_walk(limit):
    x = relay.var("x", T(2))
    nodes = [x]
    for i in range(40):
        nodes.append(call("add", nodes[-1], nodes[max(0, i - 3)]))
    root = nodes[-1]
    want = _reference_reach(root, limit)
    everything = {id(n) for n in post_order(root)}
    reach = _Reach(root, limit)
    for key in [id(root), id(nodes[-2]), id(x), -1, *everything]:
        assert (key in reach) == (key in want)
    assert reach.seen == want


# -- global functions typed already ---------------------------------------------------------------
def checked_names(monkeypatch):
    """The functions InferType checks from now on (by the name messages give them)."""
    names = []
    orig = type_infer.ModuleChecker.check_function

    def spy(self, name, func, closed):
        names.append(name)
        return orig(self, name, func, closed)

    monkeypatch.setattr(type_infer.ModuleChecker, "check_function", spy)
    return names


def two_globals():
    """@f(x: (2, 3)) = exp(x); @main(y) = @f(y)."""
    x = relay.var("x", T(2, 3))
    f = relay.GlobalVar("f")
    mod = IRModule({f: relay.Function([x], call("exp", x))})
    y = relay.var("y", T(2, 3))
    mod[relay.GlobalVar("main")] = relay.Function([y], relay.Call(f, (y,)))
    return InferType()(mod)


def with_main(typed, body_fn):
    """``typed`` with @main's body replaced by ``body_fn(param, @f)`` (what a pass does)."""
    out = typed.copy()
    y = relay.var("y", T(2, 3))
    out[typed.get_global_var("main")] = relay.Function(
        [y], body_fn(y, typed.get_global_var("f")))
    return out


def test_an_unchanged_callee_is_not_checked_again(monkeypatch):
    typed = two_globals()
    names = checked_names(monkeypatch)
    again = InferType()(with_main(typed, lambda y, f: call("negative", relay.Call(f, (y,)))))
    assert names == ["@main"]
    assert again["f"].checked_type == typed["f"].checked_type
    assert again["main"].body.checked_type == T(2, 3)
    # the @f of the result still finds its globals by the new module's GlobalVars
    assert again.get_global_var("f").checked_type == typed["f"].checked_type


def test_a_changed_callee_forces_its_callers_to_be_checked(monkeypatch):
    # @g(y) = @f(y) is unchanged; @f is edited to sum its input: @g's type must follow
    x = relay.var("x", T(2, 3))
    f, g = relay.GlobalVar("f"), relay.GlobalVar("g")
    mod = IRModule({f: relay.Function([x], call("exp", x))})
    y = relay.var("y", T(2, 3))
    mod[g] = relay.Function([y], relay.Call(f, (y,)))
    typed = InferType()(mod)
    names = checked_names(monkeypatch)
    edited = typed.copy()
    fx = relay.var("x", T(2, 3))
    edited[typed.get_global_var("f")] = relay.Function([fx], call("sum", fx, axis=(1,)))
    again = InferType()(edited)
    assert sorted(names) == ["@f", "@g"]
    assert again["g"].checked_type.ret_type == T(2)
    assert again["g"].body.checked_type == T(2)


def test_a_function_edited_by_a_pass_is_checked(monkeypatch):
    typed = two_globals()
    names = checked_names(monkeypatch)
    edited = typed.copy()
    fx = relay.var("x", T(2, 3))
    edited[typed.get_global_var("f")] = relay.Function([fx], call("transpose", fx, axes=(1, 0)))
    again = InferType()(edited)
    assert "@f" in names and "@main" in names
    assert again["main"].body.checked_type == T(3, 2)


def test_an_error_next_to_a_reused_callee_names_its_node():
    typed = two_globals()
    bad = with_main(typed, lambda y, f: call("add", relay.Call(f, (y,)),
                                             relay.const(np.zeros((4,), "float32"))))
    with pytest.raises(TypeInferenceError) as reused:
        InferType()(bad)
    # the same program typed from scratch gives the same message
    x = relay.var("x", T(2, 3))
    f = relay.GlobalVar("f")
    fresh = IRModule({f: relay.Function([x], call("exp", x))})
    y = relay.var("y", T(2, 3))
    fresh[relay.GlobalVar("main")] = relay.Function(
        [y], call("add", relay.Call(f, (y,)), relay.const(np.zeros((4,), "float32"))))
    with pytest.raises(TypeInferenceError) as scratch:
        InferType()(fresh)
    assert str(reused.value) == str(scratch.value)
    assert "add" in str(reused.value) and "@main" in str(reused.value)


def test_a_function_typed_by_its_caller_is_checked_again(monkeypatch):
    # @f(%x) = add(%x, %x) waits for @main's argument: its type belongs to its caller's run
    x = relay.var("x")
    f = relay.GlobalVar("f")
    mod = IRModule({f: relay.Function([x], call("add", x, x))})
    y = relay.var("y", T(2, 3))
    mod[relay.GlobalVar("main")] = relay.Function([y], relay.Call(f, (y,)))
    typed = InferType()(mod)
    assert typed["f"].checked_type.ret_type == T(2, 3)
    names = checked_names(monkeypatch)
    edited = typed.copy()
    z = relay.var("z", T(5))
    edited[typed.get_global_var("main")] = relay.Function(
        [z], relay.Call(typed.get_global_var("f"), (z,)))
    again = InferType()(edited)  # %x has no annotation: @f follows its caller again
    assert "@f" in names
    assert again["f"].checked_type.ret_type == T(5)
    assert again["main"].body.checked_type == T(5)
