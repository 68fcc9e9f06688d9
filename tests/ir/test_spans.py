"""Spans that name source-graph nodes (ONNX node names) and their merging."""
from __future__ import annotations

from ember.ir import SequentialSpan, SourceName, Span, merge_spans, node_span


def test_node_span_names_its_node_and_a_text_span_names_none():
    assert node_span("conv1").node_names == ("conv1",)
    assert str(node_span("conv1")) == "node 'conv1'"
    text = Span(SourceName("model.relay"), 3, 7)
    assert text.node_names == ()
    assert str(text) == "model.relay:3:7"


def test_merge_spans_drops_nones_and_repeats_and_flattens():
    a, b, c = node_span("a"), node_span("b"), node_span("c")
    assert merge_spans() is None
    assert merge_spans(None, None) is None
    assert merge_spans(a, None, node_span("a")) == a
    ab = merge_spans(a, b)
    assert isinstance(ab, SequentialSpan) and ab.node_names == ("a", "b")
    abc = merge_spans(ab, c, a)
    assert abc.node_names == ("a", "b", "c")
    assert all(not isinstance(s, SequentialSpan) for s in abc.spans)


def test_sequential_span_keeps_its_first_position():
    first = Span(SourceName("m.relay"), 2, 5)
    merged = merge_spans(first, node_span("x"))
    assert (merged.line, merged.column) == (2, 5)
    assert merged.node_names == ("x",)
