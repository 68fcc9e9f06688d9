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
    """A source range: 1-based line and column of the start and end."""

    source_name: SourceName | None
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0

    def __str__(self) -> str:
        src = self.source_name.name if self.source_name else "<string>"
        return f"{src}:{self.line}:{self.column}"


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
