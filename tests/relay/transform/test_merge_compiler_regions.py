"""MergeCompilerRegions: neighbouring regions of one compiler merge unless another path
between them goes through other code; overlapping annotations are refused."""
from __future__ import annotations

import pytest
from _pass_helpers import assert_main_equal, parse, run

from ember.relay.transform import MergeCompilerRegions
from ember.runtime.errors import TVMError

DIAMOND = """def @main(%data: Tensor[(10, 10), float32]) {
  %0 = annotation.compiler_begin(%data, compiler="test");
  %1 = abs(%0);
  %2 = annotation.compiler_end(%1, compiler="test");
  %3 = annotation.compiler_begin(%2, compiler="test");
  %4 = nn.relu(%3);
  %5 = annotation.compiler_end(%4, compiler="test");
  %6 = annotation.compiler_end(%1, compiler="test");
  %7 = annotation.compiler_begin(%6, compiler="default");
  %8 = tanh(%7);
  %9 = annotation.compiler_end(%8, compiler="default");
  %10 = annotation.compiler_begin(%5, compiler="test");
  %11 = annotation.compiler_begin(%9, compiler="test");
  %12 = add(%10, %11);
  annotation.compiler_end(%12, compiler="test")
}"""


def test_diamond_through_another_target_keeps_the_join_apart():
    # abs and relu merge; add may not join them: the path through tanh (default) would
    # have to run inside and after the merged region at once.
    expected = """def @main(%data: Tensor[(10, 10), float32]) {
      %0 = annotation.compiler_begin(%data, compiler="test");
      %1 = abs(%0);
      %2 = nn.relu(%1);
      %3 = annotation.compiler_end(%2, compiler="test");
      %4 = annotation.compiler_begin(%3, compiler="test");
      %5 = annotation.compiler_end(%1, compiler="test");
      %6 = annotation.compiler_begin(%5, compiler="default");
      %7 = tanh(%6);
      %8 = annotation.compiler_end(%7, compiler="default");
      %9 = annotation.compiler_begin(%8, compiler="test");
      %10 = add(%4, %9);
      annotation.compiler_end(%10, compiler="test")
    }"""
    assert_main_equal(run(MergeCompilerRegions(), DIAMOND), expected)


def test_diamond_of_one_target_merges_whole():
    same = DIAMOND.replace('compiler="default"', 'compiler="test"')
    out = run(MergeCompilerRegions(), same)
    text = out["main"].astext()
    assert text.count("compiler_begin") == 1 and text.count("compiler_end") == 1


def test_chain_merges_and_shared_value_keeps_its_end():
    before = """def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="t");
      %1 = abs(%0);
      %2 = annotation.compiler_end(%1, compiler="t");
      %3 = annotation.compiler_begin(%2, compiler="t");
      %4 = exp(%3);
      %5 = annotation.compiler_end(%4, compiler="t");
      %6 = annotation.compiler_end(%1, compiler="t");
      %7 = annotation.compiler_begin(%6, compiler="default");
      %8 = annotation.compiler_begin(%5, compiler="default");
      %9 = add(%7, %8);
      annotation.compiler_end(%9, compiler="default")
    }"""
    expected = """def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="t");
      %1 = abs(%0);
      %2 = exp(%1);
      %3 = annotation.compiler_end(%1, compiler="t");
      %4 = annotation.compiler_end(%2, compiler="t");
      %5 = annotation.compiler_begin(%3, compiler="default");
      %6 = annotation.compiler_begin(%4, compiler="default");
      %7 = add(%5, %6);
      annotation.compiler_end(%7, compiler="default")
    }"""
    assert_main_equal(run(MergeCompilerRegions(), before), expected)


def test_unannotated_module_is_unchanged():
    mod = parse("def @main(%x: Tensor[(4), float32]) { abs(%x) }")
    assert MergeCompilerRegions()(mod)["main"] is mod["main"]


def test_overlapping_targets_are_refused():
    bad = """def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="a");
      %1 = abs(%0);
      annotation.compiler_end(%1, compiler="b")
    }"""
    with pytest.raises(TVMError, match=r"@main: overlapping regions: the region holding "
                                       r".*abs.* is annotated for \['a', 'b'\]"):
        MergeCompilerRegions()(parse(bad))


def test_nested_annotations_are_refused():
    bad = """def @main(%x: Tensor[(4), float32]) {
      %0 = annotation.compiler_begin(%x, compiler="a");
      %1 = annotation.compiler_begin(%0, compiler="a");
      %2 = abs(%1);
      annotation.compiler_end(%2, compiler="a")
    }"""
    with pytest.raises(TVMError, match="compiler_begin is applied directly to another"):
        MergeCompilerRegions()(parse(bad))
