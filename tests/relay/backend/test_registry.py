"""The executors' compile sides are chosen by name from relay/backend/registry.py."""
from __future__ import annotations

import pytest

from ember import relay
from ember.relay.backend import registry
from ember.runtime.errors import TVMError


def test_every_executor_registers_its_builder_and_kind():
    assert {"graph", "aot", "vm"} <= set(registry.builder_names())
    assert {"debug", "graph", "vm"} <= set(registry.evaluator_kinds())
    from ember.relay.backend.aot import build_aot
    from ember.relay.backend.graph import build_graph
    from ember.relay.backend.vm import build_vm

    assert registry.get_builder("graph") is build_graph
    assert registry.get_builder("aot") is build_aot
    assert registry.get_builder("vm") is build_vm


def test_unknown_names_raise_naming_the_known_ones():
    with pytest.raises(TVMError, match=r"'nope' executor cannot be built.*'graph'"):
        registry.get_builder("nope")
    with pytest.raises(TVMError, match=r"executor kind 'nope' is not available.*'debug'"):
        relay.create_executor("nope")


def test_registering_a_second_builder_under_a_taken_name_fails():
    with pytest.raises(ValueError, match="'graph' is already registered"):
        registry.register_builder("graph", lambda *args: None)
    with pytest.raises(ValueError, match="'vm' is already registered"):
        registry.register_evaluator("vm", object)
