"""Base classes of the IR: Node, source spans, and the node-kind registry."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..runtime.object import Object, register_object


@register_object("ir.SourceName")
@dataclass(frozen=True, slots=True)
class SourceName(Object):
    """The name of a source file (or '<string>') that a Span points into."""

    name: str


@register_object("ir.Span")
@dataclass(frozen=True, slots=True)
class Span(Object):
    """A source range: 1-based line and column of the start and end.

    A span of line 0 names a node of a source graph instead (its ``source_name`` is the
    node's name, as TVM's frontends write them): ``node_span("conv1")`` is what the ONNX
    importer gives every call it builds for node ``conv1``; see ``node_names``.
    """

    source_name: SourceName | None
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0

    @property
    def node_names(self) -> tuple[str, ...]:
        """The source-graph nodes this span names (none for a text range)."""
        return (self.source_name.name,) if self.line == 0 and self.source_name else ()

    def __str__(self) -> str:
        if self.node_names:
            return f"node {self.node_names[0]!r}"
        src = self.source_name.name if self.source_name else "<string>"
        return f"{src}:{self.line}:{self.column}"


@register_object("ir.SequentialSpan")
@dataclass(frozen=True, slots=True)
class SequentialSpan(Span):
    """Several spans as one (TVM's SequentialSpan): the span of a call that a pass made out of
    several (a conv with the bias, activation and residual add it absorbed). Its own position
    is its first span's. Made by ``merge_spans``."""

    spans: tuple[Span, ...] = ()

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(name for span in self.spans for name in span.node_names)


def node_span(name: str) -> Span:
    """The span naming node ``name`` of a source graph (an ONNX node)."""
    return Span(SourceName(name), 0, 0)


def merge_spans(*spans: Span | None) -> Span | None:
    """One span covering ``spans`` (Nones and repeats left out; nested SequentialSpans
    flattened): None for none, the span itself for one, else a SequentialSpan."""
    parts: dict[Span, None] = {}
    for span in spans:
        for part in span.spans if isinstance(span, SequentialSpan) else (span,):
            if part is not None:
                parts[part] = None
    if len(parts) <= 1:
        return next(iter(parts), None)
    first = next(iter(parts))
    return SequentialSpan(first.source_name, first.line, first.column, first.end_line,
                          first.end_column, spans=tuple(parts))


class Node(Object):
    """Base of every IR node (types, expressions, attrs, modules)."""

    __slots__ = ()

    def astext(self, show_meta_data: bool = True, annotate: Any = None) -> str:
        """The node in the text format (see docs/text_format.md); ``annotate(expr) -> str``
        replaces the ``/* ty=... */`` comments with comments of the caller's."""
        from .printer import astext

        return astext(self, show_meta_data=show_meta_data, annotate=annotate)

    def __str__(self) -> str:
        return self.astext(show_meta_data=False)
