"""The lazy names of ``ember`` and ``ember.relay`` resolve to what they advertise; any other
name is simply absent (``hasattr`` is False, no exception)."""
from __future__ import annotations

import types

import pytest

import ember
from ember import relay


@pytest.mark.parametrize("name", sorted(ember._LAZY))
def test_every_lazy_module_of_ember_resolves(name):
    mod = getattr(ember, name)
    assert isinstance(mod, types.ModuleType) and mod.__name__ == ember._LAZY[name]


@pytest.mark.parametrize("name", sorted(ember._LAZY_ATTRS))
def test_every_lazy_name_of_ember_resolves(name):
    assert getattr(ember, name) is not None


@pytest.mark.parametrize("name", relay._LAZY_MODULES)
def test_every_lazy_module_of_relay_resolves(name):
    mod = getattr(relay, name)
    assert isinstance(mod, types.ModuleType) and mod.__name__ == f"ember.relay.{name}"


@pytest.mark.parametrize("name", sorted(relay._LAZY_ATTRS))
def test_every_lazy_name_of_relay_resolves(name):
    assert callable(getattr(relay, name))


@pytest.mark.parametrize("owner, name", [
    (ember, "nonexistent"), (ember, "autotvm"), (relay, "nonexistent"),
    (relay, "qnn"), (relay.transform, "nonexistent")])
def test_absent_names_are_simply_absent(owner, name):
    assert not hasattr(owner, name)
    with pytest.raises(AttributeError, match=repr(name)):
        getattr(owner, name)


def test_tvm_module_aliases_hold_the_same_classes():
    assert relay.expr.Call is relay.Call and relay.expr.const is relay.const
    assert relay.ty.TensorType is relay.TensorType and relay.ty.RefType is relay.RefType
    assert relay.function.Function is relay.Function
    assert relay.adt.Match is relay.Match and relay.adt.TypeData is relay.TypeData
    assert set(relay.expr.__all__) <= set(dir(relay.expr))


def test_relay_era_module_names():
    assert relay.expr.ExprWithOp is relay.Expr and relay.expr.var is relay.var
    assert isinstance(relay.split(relay.var("x", shape=(4,)), 2), relay.expr.TupleWrapper)
    assert relay.ty.is_dynamic(relay.TensorType((relay.Any(), 2)))
    assert not relay.ty.is_dynamic(relay.TensorType((1, 2)))
    assert relay.expr_functor.ExprVisitor is relay.ExprVisitor
    assert relay.expr_functor.ExprMutator is relay.ExprMutator
