"""MergeComposite and relay.op.contrib pattern tables: composite functions from patterns
(with checks), the whole BYOC chain keeping them inside partitions, and bad tables."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_same_result, parse, run

from ember import relay
from ember.relay.dataflow_pattern import is_constant, is_op, wildcard
from ember.relay.op.contrib import get_pattern_table, register_pattern_table
from ember.relay.transform import (AnnotateTarget, MergeComposite, MergeCompilerRegions,
                                   PartitionGraph, Sequential)


def _add_relu():
    return is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))


@register_pattern_table("mc_test")
def _table():
    return [("mc_test.add_relu", _add_relu()),
            ("mc_test.add_const", is_op("add")(wildcard(), is_constant()),
             lambda root: root.checked_type_.shape == (4,))]


PROGRAM = """def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
  %0 = nn.relu(add(%x, %y));
  %1 = add(%0, 1f);
  exp(%1)
}"""


def test_pattern_table_makes_composites():
    out = run(MergeComposite(get_pattern_table("mc_test")), PROGRAM)
    composites = [e.op.get_attr("Composite") for e in relay.analysis.post_order(out["main"])
                  if isinstance(e, relay.Call) and isinstance(e.op, relay.Function)]
    assert composites == ["mc_test.add_relu", "mc_test.add_const"]


def test_check_can_refuse_a_match():
    table = [("mc_test.add_const", is_op("add")(wildcard(), is_constant()), lambda root: False)]
    mod = parse(PROGRAM)
    assert run(MergeComposite(table), mod)["main"].astext() == mod["main"].astext()


def test_composites_partition_with_their_compiler():
    mod = parse(PROGRAM)
    out = run(Sequential([MergeComposite(get_pattern_table("mc_test")),
                          AnnotateTarget(["mc_test"]), MergeCompilerRegions(),
                          PartitionGraph()]), mod)
    lifted = out["tvmgen_default_mc_test_main_0"]
    inner = [e.op.get_attr("Composite") for e in relay.analysis.post_order(lifted)
             if isinstance(e, relay.Call) and isinstance(e.op, relay.Function)]
    assert inner == ["mc_test.add_relu", "mc_test.add_const"]
    assert isinstance(out["main"].body, relay.Call) and out["main"].body.op.name == "exp"
    assert_same_result(mod, out, np.linspace(-2, 2, 4, dtype="float32"),
                       np.ones(4, "float32"))


def test_bad_tables_are_refused():
    assert get_pattern_table("mc_test_none") is None
    with pytest.raises(TypeError, match=r"pattern_table\[0\] must be \(name, pattern\)"):
        MergeComposite([("x",)])
    with pytest.raises(TypeError, match=r"pattern_table\[1\] \('b'\): expected a dataflow "
                                        "pattern, got str"):
        MergeComposite([("a", _add_relu()), ("b", "add")])
    with pytest.raises(TypeError, match="check must be a function"):
        MergeComposite([("a", _add_relu(), 3)])
    with pytest.raises(TypeError, match="must be a list"):
        MergeComposite("a")
    with pytest.raises(TypeError, match="compiler must be a name"):
        register_pattern_table("not a name")
