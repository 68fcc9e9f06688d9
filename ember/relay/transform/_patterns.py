"""Match patterns: printing, and the exhaustiveness check of ``match`` (not ``match?``).

The check is the classic pattern-matrix algorithm: split the first column by constructor,
recurse on the sub-patterns, and when a constructor is never matched look at the rows whose
first pattern matches anything. It returns an example value that no clause matches, written
as a pattern (``Cons(_, Nil)``), or None when the clauses cover every value.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ...ir.adt import (
    Constructor,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
)

Siblings = Callable[[Constructor], Sequence[Constructor]]
_ANY = PatternWildcard()


def show_pattern(pat: Pattern) -> str:
    """A pattern in the text format: ``Cons(%h, _)``, ``(%a, %b)`` (children first, from a
    stack: patterns may nest deeply)."""
    text: dict[int, str] = {}
    stack: list[tuple[Pattern, bool]] = [(pat, False)]
    while stack:
        p, ready = stack.pop()
        subs = p.patterns if isinstance(p, (PatternConstructor, PatternTuple)) else ()
        if subs and not ready:
            stack.append((p, True))
            stack.extend((s, False) for s in subs)
            continue
        args = [text[id(s)] for s in subs]
        if isinstance(p, PatternVar):
            text[id(p)] = f"%{p.var.name_hint}"
        elif isinstance(p, PatternConstructor):
            text[id(p)] = _show_ctor(p.constructor, args)
        elif isinstance(p, PatternTuple):
            text[id(p)] = "(" + ", ".join(args) + ")"
        else:
            text[id(p)] = "_"
    return text[id(pat)]


def _show_ctor(c: Constructor, args: Sequence[str]) -> str:
    return f"{c.name_hint}({', '.join(args)})" if args else c.name_hint


def missing_case(patterns: Sequence[Pattern], siblings: Siblings) -> str | None:
    """A value (as a pattern) matched by none of ``patterns``, or None if they are exhaustive.

    ``siblings(c)`` gives all constructors of the type that constructor ``c`` belongs to.
    """
    witness = _witness([[p] for p in patterns], 1, siblings)
    return None if witness is None else witness[0]


def _is_any(p: Pattern) -> bool:
    return isinstance(p, (PatternWildcard, PatternVar))


def _witness(rows: list[list[Pattern]], width: int, siblings: Siblings) -> list[str] | None:
    """Patterns for ``width`` values that no row matches (None: the rows cover everything)."""
    if not rows:
        return ["_"] * width
    if width == 0:
        return None
    heads = [r[0] for r in rows]
    tup = next((h for h in heads if isinstance(h, PatternTuple)), None)
    if tup is not None:
        return _witness_tuple(rows, width, len(tup.patterns), siblings)
    ctors = [h.constructor for h in heads if isinstance(h, PatternConstructor)]
    if ctors:
        return _witness_ctors(rows, width, siblings(ctors[0]), siblings)
    w = _witness([r[1:] for r in rows], width - 1, siblings)
    return None if w is None else ["_", *w]


def _witness_tuple(rows: list[list[Pattern]], width: int, k: int,
                   siblings: Siblings) -> list[str] | None:
    expanded = []
    for r in rows:
        head = r[0]
        subs = list(head.patterns) if isinstance(head, PatternTuple) else [_ANY] * k
        expanded.append(subs + r[1:])
    w = _witness(expanded, k + width - 1, siblings)
    if w is None:
        return None
    inner = ", ".join(w[:k])
    return [f"({inner},)" if k == 1 else f"({inner})", *w[k:]]


def _specialize(rows: list[list[Pattern]], c: Constructor) -> list[list[Pattern]]:
    """The rows that can match a value built by ``c``, with ``c``'s fields spliced in."""
    k = len(c.inputs)
    out = []
    for r in rows:
        head = r[0]
        if _is_any(head):
            out.append([_ANY] * k + r[1:])
        elif isinstance(head, PatternConstructor) and head.constructor is c:
            out.append(list(head.patterns) + r[1:])
    return out


def _witness_ctors(rows: list[list[Pattern]], width: int, all_ctors: Sequence[Constructor],
                   siblings: Siblings) -> list[str] | None:
    used = {id(r[0].constructor) for r in rows if isinstance(r[0], PatternConstructor)}
    for c in all_ctors:
        k = len(c.inputs)
        if id(c) in used:
            w = _witness(_specialize(rows, c), k + width - 1, siblings)
            if w is not None:
                return [_show_ctor(c, w[:k]), *w[k:]]
            continue
        # c never appears: only the catch-all rows can match its values.
        w = _witness([r[1:] for r in rows if _is_any(r[0])], width - 1, siblings)
        if w is not None:
            return [_show_ctor(c, ["_"] * k), *w]
    return None
