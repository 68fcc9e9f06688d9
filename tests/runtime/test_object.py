"""The object system: registration, type keys, reflection and the serialization hooks."""
import dataclasses
from dataclasses import dataclass, field

import pytest

import ember
from ember.runtime.object import (OBJECT_TYPES, Object, get_object_type, is_registered,
                                  register_object)


@register_object("test_object.Leaf")
@dataclass(frozen=True, slots=True, eq=False)
class Leaf(Object):
    name: str
    value: int = 0


@register_object
@dataclass(frozen=True, slots=True, eq=False)
class Bare(Object):
    child: Leaf
    tags: tuple = ()
    derived: int = field(default=0, init=False)

    def __post_init__(self):
        object.__setattr__(self, "derived", len(self.tags))


@register_object("test_object.Slotted")
class Slotted(Object):
    __slots__ = ("alpha", "beta", "_cache")

    def __init__(self, alpha, beta):
        self.alpha, self.beta = alpha, beta


def test_type_keys_and_registry():
    assert Leaf.type_key == "test_object.Leaf"
    assert Bare.type_key == f"{__name__}.Bare"
    assert OBJECT_TYPES["test_object.Leaf"] is Leaf
    assert get_object_type("test_object.Leaf") is Leaf
    assert ember.register_object is register_object and ember.Object is Object
    assert is_registered(Leaf("a")) and not is_registered(object())


def test_unknown_type_key_lists_close_matches():
    with pytest.raises(KeyError, match="test_object.Leaf"):
        get_object_type("test_object.Lef")


def test_duplicate_key_and_bad_targets_are_refused():
    with pytest.raises(ValueError, match="already taken"):
        @register_object("test_object.Leaf")
        class Other(Object):
            __slots__ = ()
    with pytest.raises(TypeError, match="Object"):
        register_object("test_object.NotAnObject")(type("Plain", (), {}))
    with pytest.raises(ValueError, match="non-empty"):
        register_object("")(type("Empty", (Object,), {"__slots__": ()}))


def test_reregistering_the_same_class_name_replaces_it():
    # What a module reload does.
    first = register_object("test_object.Reloaded")(type("Reloaded", (Object,), {"__slots__": ()}))
    second = register_object("test_object.Reloaded")(type("Reloaded", (Object,), {"__slots__": ()}))
    assert first is not second and OBJECT_TYPES["test_object.Reloaded"] is second


def test_reflection_on_frozen_slotted_dataclasses():
    leaf = Leaf("x", 3)
    node = Bare(leaf, ("a", "b"))
    assert leaf.field_names() == ["name", "value"]
    assert node.field_names() == ["child", "tags", "derived"]
    assert {"name", "value", "field_names", "same_as"} <= set(dir(leaf))
    assert node.child is leaf and node.derived == 2
    assert not hasattr(leaf, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        leaf.name = "y"
    assert leaf.same_as(leaf) and not leaf.same_as(Leaf("x", 3))
    assert leaf != Leaf("x", 3)  # eq=False: identity


def test_reflection_on_plain_slotted_objects():
    obj = Slotted(1, 2)
    assert obj.field_names() == ["alpha", "beta"]
    assert {"alpha", "beta"} <= set(dir(obj))


def test_json_state_hooks_round_trip():
    node = Bare(Leaf("x"), ("t",))
    state = node._json_state()
    assert state == {"child": node.child, "tags": ("t",), "derived": 1}
    back = Bare._from_json_state(state)
    assert type(back) is Bare and back.child is node.child and back.derived == 1
    # Missing fields take their defaults; unknown or required-but-missing ones are errors.
    assert Leaf._from_json_state({"name": "n"}).value == 0
    with pytest.raises(ValueError, match="no field"):
        Leaf._from_json_state({"name": "n", "bogus": 1})
    with pytest.raises(ValueError, match="'name' is missing"):
        Leaf._from_json_state({})
    plain = Slotted(1, [2])
    plain._cache = "c"
    back2 = Slotted._from_json_state(plain._json_state())
    assert (back2.alpha, back2.beta, back2._cache) == (1, [2], "c")
