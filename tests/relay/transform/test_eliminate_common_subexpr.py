"""EliminateCommonSubexpr: equal calls on the same arguments merge (attrs compared, fskip
and stateful ops respected), chains merge bottom-up, results are kept."""
from __future__ import annotations

import pytest
from _pass_helpers import assert_main_equal, dataflow_programs, law, run
from hypothesis import given, settings

from ember import relay
from ember.relay.transform import EliminateCommonSubexpr


def test_merges_chains_bottom_up():
    before = """def @main(%x: Tensor[(3), float32]) {
      %0 = add(%x, 1f);
      %1 = add(%x, 1f);
      %2 = exp(%0);
      %3 = exp(%1);
      multiply(%2, %3)
    }"""
    expected = """def @main(%x: Tensor[(3), float32]) {
      %0 = add(%x, 1f);
      %1 = exp(%0);
      multiply(%1, %1)
    }"""
    assert_main_equal(run(EliminateCommonSubexpr(), before), expected)


def test_different_attrs_do_not_merge_but_tuple_items_do():
    before = """def @main(%x: Tensor[(2, 4), float32]) {
      %0 = sum(%x, axis=[0]);
      %1 = sum(%x, axis=[1]);
      %2 = split(%x, indices_or_sections=2, axis=1);
      %3 = add(%2.0, %2.0);
      (%0, %1, %3, sum(%x, axis=[0]))
    }"""
    expected = """def @main(%x: Tensor[(2, 4), float32]) {
      %0 = sum(%x, axis=[0]);
      %1 = sum(%x, axis=[1]);
      %2 = split(%x, indices_or_sections=2, axis=1);
      %3 = %2.0;
      %4 = add(%3, %3);
      (%0, %1, %4, %0)
    }"""
    assert_main_equal(run(EliminateCommonSubexpr(), before), expected)


def test_fskip_and_bad_fskip():
    before = """def @main(%x: Tensor[(3), float32]) {
      %0 = cast(%x, dtype="float16");
      %1 = cast(%x, dtype="float16");
      (%0, %1)
    }"""
    skip_casts = lambda e: isinstance(e, relay.Call) and e.op.name == "cast"
    assert_main_equal(run(EliminateCommonSubexpr(skip_casts), before), before)
    with pytest.raises(TypeError, match="fskip must be callable"):
        EliminateCommonSubexpr(fskip=3)
    assert EliminateCommonSubexpr().opt_level == 3


def test_calls_of_functions_are_not_merged():
    before = """def @f(%y: Tensor[(3), float32]) { exp(%y) }
    def @main(%x: Tensor[(3), float32]) { (@f(%x), @f(%x)) }"""
    out = run(EliminateCommonSubexpr(), before)
    a, b = out["main"].body.fields
    assert a is not b


@settings(max_examples=30, deadline=None)
@given(dataflow_programs())
def test_law_preserves_result(program):
    mod, args = program
    law(EliminateCommonSubexpr, mod, args)
