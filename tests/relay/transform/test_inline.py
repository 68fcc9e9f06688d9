"""Inline and RemoveUnusedFunctions, called as Relay-era scripts call them."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_same_result, parse, run

import ember
from ember import relay
from ember.ir import assert_structural_equal
from ember.relay.analysis import check_well_formed

T = "Tensor[(2, 3), float32]"


def _assert_mod_equal(got: ember.IRModule, want_text: str) -> None:
    want = parse(want_text)
    assert sorted(g.name_hint for g in got.functions) == sorted(
        g.name_hint for g in want.functions)
    for gv in want.functions:
        assert_structural_equal(got[gv.name_hint], want[gv.name_hint])


def test_inline_chain_of_marked_functions():
    before = f"""
    def @g(%y: {T}, Inline=1) {{ multiply(%y, 2f) }}
    def @f(%x: {T}, Inline=1) {{ add(@g(%x), 1f) }}
    def @main(%a: {T}) {{ @f(nn.relu(%a)) }}"""
    out = run(relay.transform.Inline(), before)
    _assert_mod_equal(out, f"def @main(%a: {T}) {{ add(multiply(nn.relu(%a), 2f), 1f) }}")
    x = np.random.default_rng(0).normal(size=(2, 3)).astype("float32")
    assert_same_result(parse(before), out, x)


def test_unmarked_and_recursive_functions_stay():
    before = f"""
    def @plain(%y: {T}) {{ exp(%y) }}
    def @rec(%n: int32, Inline=1) -> int32 {{
      if (less(%n, 1)) {{ %n }} else {{ @rec(subtract(%n, 1)) }}
    }}
    def @wrap(%y: {T}, Inline=1) {{ @plain(%y) }}
    def @main(%a: {T}) {{ (@wrap(%a), @rec(3)) }}"""
    out = run(relay.transform.Inline(), before)
    # @wrap calls a function that is not inlinable, so it is not inlinable either
    assert_structural_equal(out["main"], parse(before)["main"])
    assert {g.name_hint for g in out.functions} == {"plain", "rec", "wrap", "main"}


def test_inlined_twice_gets_fresh_variables():
    before = f"""
    def @f(%x: {T}, Inline=1) {{ let %t = exp(%x); add(%t, %t) }}
    def @main(%a: {T}) {{ multiply(@f(%a), @f(negative(%a))) }}"""
    out = run(relay.transform.Inline(), before)
    check_well_formed(out)
    assert "f" not in out
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    assert_same_result(parse(before), out, x)


def test_global_used_as_value_becomes_a_literal():
    before = f"""
    def @f(%x: {T}, Inline=1) {{ tanh(%x) }}
    def @apply(%g: fn ({T}) -> {T}, %x: {T}) {{ %g(%x) }}
    def @main(%a: {T}) {{ @apply(@f, %a) }}"""
    out = run(relay.transform.Inline(), before)
    assert "f" not in out and "apply" in out
    assert isinstance(out["main"].body.args[0], relay.Function)
    x = np.ones((2, 3), "float32")
    assert_same_result(parse(before), out, x)


def test_entry_marked_inline_is_kept():
    text = f"def @main(%a: {T}, Inline=1) {{ exp(%a) }}"
    out = run(relay.transform.Inline(), text)
    assert "main" in out


def test_remove_unused_functions_keeps_what_main_reaches():
    before = f"""
    def @used2(%y: {T}) {{ exp(%y) }}
    def @used(%y: {T}) {{ @used2(%y) }}
    def @unused(%y: {T}) {{ @used(%y) }}
    def @main(%a: {T}) {{ @used(%a) }}"""
    out = run(relay.transform.RemoveUnusedFunctions(), before)
    assert {g.name_hint for g in out.functions} == {"main", "used", "used2"}
    out = relay.transform.RemoveUnusedFunctions(["unused"])(parse(before))
    assert {g.name_hint for g in out.functions} == {"unused", "used", "used2"}


def test_remove_unused_functions_keeps_the_prelude_types():
    mod = ember.IRModule()
    p = relay.prelude.Prelude(mod)
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], x)
    out = relay.transform.RemoveUnusedFunctions()(mod)
    assert [g.name_hint for g in out.functions] == ["main"]
    assert "List" in out and p.cons.name_hint == "Cons"


def test_remove_unused_functions_bad_entries():
    mod = parse(f"def @main(%a: {T}) {{ %a }}")
    with pytest.raises(KeyError, match="entry function 'mian' is not in the module; "
                                       "it defines: main"):
        relay.transform.RemoveUnusedFunctions(["mian"])(mod)
    with pytest.raises(TypeError, match="entry_functions must be a list of function names"):
        relay.transform.RemoveUnusedFunctions("main")


def test_a_bad_inline_attribute_is_named():
    x = relay.var("x", shape=(2,))
    mod = ember.IRModule()
    g = relay.GlobalVar("g")
    mod[g] = relay.Function([x], relay.negative(x)).with_attr("Inline", "yes")
    y = relay.var("y", shape=(2,))
    mod["main"] = relay.Function([y], relay.Call(g, [y]))
    with pytest.raises(ember.TVMError, match=r"Inline: @g has attribute Inline='yes'; "
                                             "expected 0 or 1"):
        relay.transform.Inline()(mod)


def test_registered_names():
    assert "inline" in relay.transform.list_passes()
    assert relay.transform.get_pass("remove-unused-functions").name == "RemoveUnusedFunctions"
