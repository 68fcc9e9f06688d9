"""Nested blocks laid out once, at the end of printing, so printing is linear in depth.

The printer writes the text of a block (``{``, its statements, ``}``) into the statement that
holds it as a *hole*, and keeps the block's lines here; ``text`` fills every hole once, when
the whole root is printed. Pasting each block's text into its parent and indenting it there
would copy the inner text once per enclosing block: quadratic in the nesting depth.

Indentation grows two spaces per block for ``MAX_INDENT`` levels and then stays: the text of
a program nested n blocks deep is then linear in n, and whitespace means nothing to the parser.
"""
from __future__ import annotations

import re

from .trampoline import Step, run

MAX_INDENT = 32  # levels of indentation; deeper blocks are printed at this one
_HOLE = "\x00"  # a hole is \x00<index>\x00; printed names never hold NUL characters
_HOLE_RE = re.compile("\x00([0-9]+)\x00")


class Layout:
    """The blocks of one printout and how to lay them out."""

    def __init__(self) -> None:
        self.blocks: list[list[str]] = []

    def block(self, lines: list[str]) -> str:
        """``{`` ``lines`` (one a line, indented) ``}``, as a hole to fill in ``text``."""
        self.blocks.append(lines)
        return f"{{{_HOLE}{len(self.blocks) - 1}{_HOLE}}}"

    def text(self, text: str) -> str:
        """``text`` with its holes (and theirs) filled; ``text`` starts at indentation 0."""
        if _HOLE not in text:
            return text
        out: list[str] = []
        run(self._emit(text, 0, out))
        return "".join(out)

    def _emit(self, text: str, depth: int, out: list[str]) -> Step[None]:
        parts = _HOLE_RE.split(text)  # text, hole index, text, hole index, ..., text
        out.append(parts[0])
        pad, close = _pad(depth + 1), "\n" + _pad(depth)
        for i in range(1, len(parts), 2):
            for line in self.blocks[int(parts[i])]:
                out.append("\n")
                if not line:
                    continue  # blank lines stay blank
                out.append(pad)
                if "\n" in line:  # a multi-line statement: each of its lines indented
                    line = line.replace("\n", "\n" + pad)
                if _HOLE in line:
                    yield self._emit(line, depth + 1, out)
                else:
                    out.append(line)
            out.append(close)
            out.append(parts[i + 1])


def _pad(depth: int) -> str:
    return "  " * min(depth, MAX_INDENT)
