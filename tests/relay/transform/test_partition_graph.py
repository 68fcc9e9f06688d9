"""PartitionGraph (with AnnotateTarget and MergeCompilerRegions before it): lifted functions
with their attributes and names, several outputs, constants, the interpreter's result kept
(also on random programs), and malformed regions refused."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_same_result, dataflow_programs, law, parse, run
from hypothesis import given, settings

import ember
from ember import relay
from ember.ir import assert_structural_equal
from ember.relay.transform import (AnnotateTarget, MergeCompilerRegions, PartitionGraph,
                                   Sequential)
from ember.runtime.errors import TVMError

ember.ir.register_op_attr("nn.relu", "target.pg_test", True)
ember.ir.register_op_attr("exp", "target.pg_test", True)

BYOC = Sequential([AnnotateTarget(["ccompiler"]), MergeCompilerRegions(), PartitionGraph()])


def test_annotate_merge_partition_before_expected():
    before = """def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
      %0 = add(%x, %y);
      %1 = nn.relu(%0);
      %2 = multiply(%1, %0);
      %3 = subtract(%2, %y);
      (%3, exp(%3))
    }"""
    expected = """
    def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
      %0 = @tvmgen_default_ccompiler_main_0(%x, %y);
      %1 = nn.relu(%0);
      %2 = @tvmgen_default_ccompiler_main_1(%1, %0, %y);
      (%2, exp(%2))
    }
    def @tvmgen_default_ccompiler_main_0(%ccompiler_0_i0: Tensor[(2, 3), float32],
        %ccompiler_0_i1: Tensor[(2, 3), float32], Primitive=1, Compiler="ccompiler",
        global_symbol="tvmgen_default_ccompiler_main_0") {
      add(%ccompiler_0_i0, %ccompiler_0_i1)
    }
    def @tvmgen_default_ccompiler_main_1(%ccompiler_1_i0: Tensor[(2, 3), float32],
        %ccompiler_1_i1: Tensor[(2, 3), float32], %ccompiler_1_i2: Tensor[(2, 3), float32],
        Primitive=1, Compiler="ccompiler", global_symbol="tvmgen_default_ccompiler_main_1") {
      subtract(multiply(%ccompiler_1_i0, %ccompiler_1_i1), %ccompiler_1_i2)
    }"""
    mod = parse(before)
    out = run(BYOC, mod)
    want = parse(expected)
    for name in ("main", "tvmgen_default_ccompiler_main_0", "tvmgen_default_ccompiler_main_1"):
        assert_structural_equal(out[name], want[name])
    x, y = (np.random.default_rng(0).standard_normal((2, 2, 3)).astype("float32"))
    assert_same_result(mod, out, x, y)


def test_region_with_two_outputs_returns_a_tuple():
    before = """def @main(%x: Tensor[(4), float32]) {
      %0 = nn.relu(%x);
      %1 = exp(%0);
      %2 = abs(%0);
      %3 = abs(%1);
      (%2, %3)
    }"""
    mod = parse(before)
    out = run(Sequential([AnnotateTarget(["pg_test"]), MergeCompilerRegions(),
                          PartitionGraph(mod_name="net")]), mod)
    lifted = out["tvmgen_net_pg_test_main_0"]
    assert isinstance(lifted.body, relay.Tuple) and len(lifted.body.fields) == 2
    gets = [e for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.TupleGetItem)]
    assert sorted(g.index for g in gets) == [0, 1]
    assert lifted.get_attr("Compiler") == "pg_test"
    assert lifted.get_attr("global_symbol") == "tvmgen_net_pg_test_main_0"
    assert_same_result(mod, out, np.linspace(-1, 1, 4, dtype="float32"))


def test_constants_stay_inside_and_default_annotations_go():
    mod = parse("""def @main(%x: Tensor[(3), float32]) {
      %0 = add(%x, meta[relay.Constant][0]);
      abs(%0)
    }""".replace("meta[relay.Constant][0]", "2f"))
    out = run(BYOC, mod)
    lifted = out["tvmgen_default_ccompiler_main_0"]
    assert len(lifted.params) == 1 and isinstance(lifted.body.args[1], relay.Constant)
    assert "annotation" not in out.astext()
    assert_same_result(mod, out, np.arange(3, dtype="float32"))


def test_name_clash_with_an_existing_global_is_skipped():
    mod = parse("""def @tvmgen_default_ccompiler_main_0(%a: Tensor[(3), float32]) { %a }
    def @main(%x: Tensor[(3), float32]) { add(@tvmgen_default_ccompiler_main_0(%x), %x) }""")
    out = run(BYOC, mod)
    assert out["tvmgen_default_ccompiler_main_1"].get_attr("Compiler") == "ccompiler"
    assert out["tvmgen_default_ccompiler_main_0"].get_attr("Compiler") is None


def test_variable_entering_without_begin_is_refused():
    bad = """def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="ccompiler");
      %1 = add(%0, %y);
      annotation.compiler_end(%1, compiler="ccompiler")
    }"""
    with pytest.raises(TVMError, match=r"PartitionGraph: @main: %y is read inside the "
                                       r"'ccompiler' region at .*add.* without a compiler_begin"):
        PartitionGraph()(parse(bad))


def test_result_leaving_without_end_is_refused():
    bad = """def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="ccompiler");
      add(%0, %0)
    }"""
    with pytest.raises(TVMError, match="result leaves the 'ccompiler' region without a "
                                       "compiler_end"):
        PartitionGraph()(parse(bad))


def test_bad_mod_name_is_refused():
    with pytest.raises(ValueError, match="mod_name must be a C identifier"):
        PartitionGraph(mod_name="my model")


@settings(max_examples=25, deadline=None)
@given(dataflow_programs())
def test_partitioning_keeps_the_interpreters_result(case):
    mod, args = case
    out = law(lambda: BYOC, mod, args)
    for gv, func in out.functions.items():  # only the ccompiler's regions were lifted
        if gv.name_hint != "main":
            assert func.get_attr("Compiler") == "ccompiler"
    assert "compiler_begin" not in out.astext() and "compiler_end" not in out.astext()
