"""The lexer of the text format, and parse errors that point at the source with a caret."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..runtime.errors import DiagnosticError
from ._text_common import NAME_PATTERN
from .base import SourceName, Span

# Token kinds.
LOCAL, GLOBAL, IDENT, NUMBER, STRING, PUNCT, EOF = (
    "local", "global", "identifier", "number", "string", "punct", "end of input")

_NAME = NAME_PATTERN
_TOKEN_RE = re.compile(rf"""
    (?P<space>[ \t\r\n]+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<stray_close>\*/(?!\*))
  | (?P<local>%(?:{_NAME}|[0-9]+))
  | (?P<global>@{_NAME})
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?:{_NAME})?)
  | (?P<ident>{_NAME}(?:\.{_NAME})*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>->|=>|==|!=|<=|>=|[()\[\]{{}},:;=.?#\-+*/<>])
""", re.VERBOSE)
_DIGITS_RE = re.compile(r"[0-9]+")
EXCERPT_WIDTH = 120  # characters of a long source line shown in an error, around the caret
_KINDS = {"local": LOCAL, "global": GLOBAL, "ident": IDENT, "number": NUMBER, "string": STRING,
          "punct": PUNCT}
_NUMBER_PARTS_RE = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(.*)", re.S)


@dataclass(frozen=True, slots=True)
class Token:
    """One token; ``line``/``col`` are 1-based, ``value`` is the decoded payload."""

    kind: str
    text: str
    line: int
    col: int
    end_line: int
    end_col: int
    value: object = None

    def describe(self) -> str:
        return "end of input" if self.kind == EOF else repr(self.text)

    def is_(self, kind: str, text: str | None = None) -> bool:
        return self.kind == kind and (text is None or self.text == text)


class Source:
    """The text being parsed: makes spans and caret-marked DiagnosticErrors."""

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = SourceName(name)
        self.lines = [line.removesuffix("\r") for line in text.split("\n")]  # CRLF text too

    def span(self, start: Token, end: Token | None = None) -> Span:
        end = end or start
        return Span(self.name, start.line, start.col, end.end_line, end.end_col)

    def error(self, message: str, line: int, col: int) -> DiagnosticError:
        """``name:line:col: message`` followed by the source line (the part of a long line
        around ``col``) and a caret under ``col``."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        text, at = _excerpt(text, col)
        pad = "".join("\t" if c == "\t" else " " for c in text[: at - 1])
        err = DiagnosticError(f"{self.name.name}:{line}:{col}: {message}\n    {text}\n    {pad}^")
        # Where it happened, for tools and tests (DiagnosticError has no such fields itself).
        vars(err).update(source_name=self.name.name, line=line, column=col)
        return err

    def error_at(self, tok: Token, message: str, got: bool = True) -> DiagnosticError:
        suffix = f", got {tok.describe()}" if got else ""
        return self.error(message + suffix, tok.line, tok.col)


def _excerpt(text: str, col: int) -> tuple[str, int]:
    """The part of a source line shown in an error, and where ``col`` falls in it: a line of
    a deeply nested program (or its metadata) may be megabytes long."""
    if len(text) <= EXCERPT_WIDTH:
        return text, col
    start = max(0, min(col - 1 - EXCERPT_WIDTH // 2, len(text) - EXCERPT_WIDTH))
    head = "..." if start > 0 else ""
    tail = "..." if start + EXCERPT_WIDTH < len(text) else ""
    return head + text[start:start + EXCERPT_WIDTH] + tail, col - start + len(head)


def tokenize(src: Source) -> list[Token]:
    """Split ``src.text`` into tokens, skipping whitespace and comments; ends with EOF."""
    text, pos, line, line_start = src.text, 0, 1, 0
    tokens: list[Token] = []
    while pos < len(text):
        col = pos - line_start + 1
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise src.error(_bad_char_message(text, pos), line, col)
        end = m.end()
        if m.lastgroup == "stray_close":
            raise src.error("'*/' closes no comment (comments nest: each '/*' needs its own "
                            "'*/')", line, col)
        if m.lastgroup == "block_comment":
            end = _comment_end(src, pos, line, col)
        elif m.lastgroup not in ("space", "line_comment"):
            tokens.append(_make(src, m.lastgroup or "", m.group(), line, col))
            if m.group() == "." and (d := _DIGITS_RE.match(text, end)) is not None:
                # '%t.0.1' is two projections, never the float 0.1
                tokens.append(_make(src, "number", d.group(), line, col + 1))
                end = d.end()
        if m.lastgroup in ("space", "block_comment") and (n := text.count("\n", pos, end)):
            line += n  # only whitespace and block comments span lines
            line_start = text.rindex("\n", pos, end) + 1
        pos = end
    col = pos - line_start + 1
    tokens.append(Token(EOF, "", line, col, line, col))
    return tokens


def _bad_char_message(text: str, pos: int) -> str:
    if text[pos] == '"':
        return "unterminated string literal"
    if text[pos] in "%@":
        return f"expected a name after {text[pos]!r}"
    return f"unexpected character {text[pos]!r}"


_COMMENT_MARK_RE = re.compile(r"/\*|\*/")


def _comment_end(src: Source, pos: int, line: int, col: int) -> int:
    """The end of the block comment opened at ``pos``: comments nest, as in TVM, so
    ``/* a /* b */ c */`` is one comment (and commenting out code that has a comment works)."""
    depth = 0
    for m in _COMMENT_MARK_RE.finditer(src.text, pos):
        depth += 1 if m.group() == "/*" else -1
        if depth == 0:
            return m.end()
    raise src.error(f"unterminated comment: '/*' has no closing '*/' ({depth} still open)",
                    line, col)


def _make(src: Source, kind: str, text: str, line: int, col: int) -> Token:
    value: object = None
    if kind == "string":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise src.error(f"bad escape in string literal ({e.msg})", line, col) from None
    elif kind == "number":
        m = _NUMBER_PARTS_RE.match(text)
        value = (m.group(1), m.group(2)) if m else (text, "")
    elif kind in ("local", "global"):
        value = text[1:]
    return Token(_KINDS[kind], text, line, col, line, col + len(text), value)
