"""typed_copy builds node copies without __init__: each must equal, field by field, what
dataclasses.replace (the constructor, with its __post_init__) builds."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ember import relay
from ember.ir import Op, visitor
from ember.ir.types import TensorType
from ember.ir.visitor import typed_copy, walk_children

T = TensorType((2,), "float32")


def nodes():
    x, y = relay.var("x", T), relay.var("y", T)
    c = relay.const(np.zeros(2, "float32"))
    add = relay.Call(Op.get("add"), (x, c), span=None)
    tup = relay.Tuple([x, y])
    return [x, c, add, tup, relay.TupleGetItem(tup, 1), relay.Let(y, add, y),
            relay.If(relay.const(True), x, y), relay.Function([x], add),
            relay.RefCreate(x), relay.RefRead(relay.RefCreate(x)),
            relay.RefWrite(relay.RefCreate(x), y)]


def same(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    return a is b or a == b


@pytest.mark.parametrize("node", nodes(), ids=lambda n: type(n).__name__)
def test_a_copy_equals_the_constructed_one(node):
    fresh = [relay.var(f"k{i}", T) if isinstance(k, relay.Var) else relay.Tuple([k])
             for i, k in enumerate(walk_children(node))]
    change = visitor._CHANGES.get(type(node))
    want = dataclasses.replace(node, checked_type_=T,
                               **(change(node, fresh) if change else {}))
    got = typed_copy(node, fresh, T)
    assert type(got) is type(node) and got is not node and got.checked_type_ is T
    for f in dataclasses.fields(node):
        assert same(getattr(got, f.name), getattr(want, f.name)), f.name


def test_a_subclass_is_copied_through_its_constructor():
    @dataclasses.dataclass(frozen=True, slots=True, eq=False)
    class Tagged(relay.Var):
        tag: str = "t"

    v = Tagged("v", T, tag="kept")
    got = typed_copy(v, [], T)
    assert type(got) is Tagged and got.tag == "kept" and got.checked_type_ is T
