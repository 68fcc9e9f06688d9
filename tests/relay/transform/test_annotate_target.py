"""AnnotateTarget and register_op_attr: before/expected text, composite calls, tuples, and the
errors of bad targets and bad support checks."""
from __future__ import annotations

import pytest
from _pass_helpers import assert_main_equal, parse, run

import ember
from ember import relay
from ember.relay.transform import AnnotateTarget
from ember.runtime.errors import TVMError

# Targets of this file only (the op registry is process-wide).
ember.ir.register_op_attr("nn.relu", "target.at_test_a", lambda call: True)
ember.ir.register_op_attr("abs", "target.at_test_a", True)
ember.ir.register_op_attr("tanh", "target.at_test_b", lambda call: True)
ember.ir.register_op_attr("abs", "target.at_test_b", lambda call: True)
ember.ir.register_op_attr("exp", "target.at_test_boom", lambda call: 1 / 0)
ember.ir.register_op_attr("exp", "target.at_test_odd", 3)
ember.ir.register_op_attr("exp", "target.at_test_old", lambda attrs, args: len(args) == 1)


def test_each_use_gets_its_own_end_and_default_takes_the_rest():
    before = """def @main(%x: Tensor[(10, 10), float32]) {
      %0 = nn.relu(%x);
      %1 = abs(%0);
      %2 = abs(%0);
      add(%1, %2)
    }"""
    expected = """def @main(%x: Tensor[(10, 10), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="at_test_a");
      %1 = nn.relu(%0);
      %2 = annotation.compiler_end(%1, compiler="at_test_a");
      %3 = annotation.compiler_begin(%2, compiler="at_test_a");
      %4 = abs(%3);
      %5 = annotation.compiler_end(%4, compiler="at_test_a");
      %6 = annotation.compiler_begin(%5, compiler="default");
      %7 = annotation.compiler_end(%1, compiler="at_test_a");
      %8 = annotation.compiler_begin(%7, compiler="at_test_a");
      %9 = abs(%8);
      %10 = annotation.compiler_end(%9, compiler="at_test_a");
      %11 = annotation.compiler_begin(%10, compiler="default");
      %12 = add(%6, %11);
      annotation.compiler_end(%12, compiler="default")
    }"""
    assert_main_equal(run(AnnotateTarget(["at_test_a"]), before), expected)


def test_target_order_is_priority():
    before = "def @main(%x: Tensor[(4), float32]) { tanh(abs(%x)) }"
    out = run(AnnotateTarget(["at_test_b", "at_test_a"]), before)
    text = out["main"].astext()
    assert text.count('compiler="at_test_b"') == 4 and "at_test_a" not in text
    out = run(AnnotateTarget(["at_test_a", "at_test_b"]), before)
    assert 'abs(%0)' in out["main"].astext()
    assert 'compiler_begin(%x, compiler="at_test_a")' in out["main"].astext()


def test_builtin_ccompiler_support_reads_types():
    before = """def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32],
                         %i: Tensor[(2, 3), int32]) {
      %0 = add(%x, %x);
      %1 = add(%0, %y);
      (%1, add(%i, %i))
    }"""
    out = run(AnnotateTarget("ccompiler"), before)
    calls = [e for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.Call)
             and e.op.name == "add"]
    targets = [e.args[0].attrs.compiler for e in calls]
    # same-shape float32 add: offloaded; broadcasting add and int32 add: kept
    assert targets == ["ccompiler", "default", "default"]


def test_tuples_join_their_fields_region():
    before = """def @main(%x: Tensor[(4), float32]) {
      %0 = nn.relu(%x);
      %1 = abs(%x);
      %2 = (%0, %1);
      %2.0
    }"""
    out = run(AnnotateTarget(["at_test_a"]), before)
    text = out["main"].astext()
    assert 'annotation.compiler_end(%8, compiler="at_test_a")' in text  # the projection
    out = run(AnnotateTarget(["at_test_a"], include_non_call_ops=False), before)
    body = out["main"].body
    assert isinstance(body, relay.TupleGetItem)  # not annotated
    assert isinstance(body.tuple_value, relay.Tuple)
    assert all(f.op.name == "annotation.compiler_end" for f in body.tuple_value.fields)


def test_composite_call_goes_to_its_compiler():
    before = """def @main(%x: Tensor[(4), float32]) {
      %0 = fn (%a: Tensor[(4), float32], Composite="at_test_a.relu_exp") { exp(nn.relu(%a)) };
      %0(%x)
    }"""
    out = run(AnnotateTarget(["at_test_a"]), before)
    call = out["main"].body.args[0]
    assert call.op.get_attr("Composite") == "at_test_a.relu_exp"
    assert call.args[0].attrs.compiler == "at_test_a"
    assert "annotation" not in call.op.astext()  # the composite's insides are left alone


def test_older_two_argument_checks_are_called_with_attrs_and_args():
    out = run(AnnotateTarget(["at_test_old"]), "def @main(%x: Tensor[(4), float32]) { exp(%x) }")
    assert out["main"].body.args[0].args[0].attrs.compiler == "at_test_old"


def test_bad_targets_are_refused():
    with pytest.raises(ValueError, match="unknown target 'nosuch'.*target.nosuch"):
        AnnotateTarget(["nosuch"])
    with pytest.raises(ValueError, match="'at_test_a' is listed twice"):
        AnnotateTarget(["at_test_a", "at_test_a"])
    with pytest.raises(ValueError, match="'default' is not a usable target"):
        AnnotateTarget(["default"])
    with pytest.raises(TypeError, match="targets must be a compiler name"):
        AnnotateTarget([])
    with pytest.raises(TypeError, match="targets must be"):
        AnnotateTarget([3])


def test_failing_support_check_names_op_and_target():
    mod = parse("def @main(%x: Tensor[(4), float32]) { exp(%x) }")
    with pytest.raises(TVMError, match="'target.at_test_boom' check of exp failed.*"
                                       "ZeroDivisionError"):
        AnnotateTarget(["at_test_boom"])(mod)
    with pytest.raises(TypeError, match="'target.at_test_odd' of exp must be a bool or a "
                                        "function"):
        AnnotateTarget(["at_test_odd"])(mod)


def test_annotating_twice_is_refused():
    mod = parse("def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")
    once = AnnotateTarget(["at_test_a"])(mod)
    with pytest.raises(TVMError, match="already annotated"):
        AnnotateTarget(["at_test_a"])(once)


def test_register_op_attr_levels_and_errors():
    ember.ir.register_op_attr("sigmoid", "target.at_test_lvl", False)
    assert relay.op.get("sigmoid").get_attr("target.at_test_lvl") is False
    ember.ir.register_op_attr("sigmoid", "target.at_test_lvl", True, level=11)
    ember.ir.register_op_attr("sigmoid", "target.at_test_lvl", False, level=5)  # lower: ignored
    assert relay.op.get("sigmoid").get_attr("target.at_test_lvl") is True
    with pytest.raises(ValueError, match="already registered at level 11"):
        ember.ir.register_op_attr("sigmoid", "target.at_test_lvl", True, level=11)
    with pytest.raises(Exception, match="unknown operator 'sigmoidd'.*sigmoid"):
        ember.ir.register_op_attr("sigmoidd", "target.x", True)

    @ember.ir.register_op_attr("sigmoid", "target.at_test_deco")
    def _check(call):
        return True

    assert relay.op.get("sigmoid").get_attr("target.at_test_deco") is _check


def test_annotations_parse_print_and_reject_bad_names():
    mod = parse("""def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="ccompiler");
      annotation.compiler_end(%0, compiler="ccompiler")
    }""")
    ember.ir.assert_structural_equal(parse(mod.astext().split('\n', 1)[1]), mod)
    x = relay.var("x", shape=(4,))
    with pytest.raises(Exception, match="attribute compiler must be a target name"):
        relay.annotation.compiler_begin(x, "two words")
    with pytest.raises(Exception, match="expected 1 argument"):
        parse('def @main(%x: Tensor[(4), float32]) { annotation.compiler_end(%x, %x, '
              'compiler="a") }')
