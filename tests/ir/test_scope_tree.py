"""``ir.scope_tree``: the innermost scope enclosing two, in log(depth) steps."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.ir.scope_tree import Scope, common_scope


def _naive(a: Scope, b: Scope) -> Scope:
    outer = set()
    s: Scope | None = a
    while s is not None:
        outer.add(id(s))
        s = s.parent
    while id(b) not in outer:
        assert b.parent is not None
        b = b.parent
    return b


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=300),
       st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=50))
def test_common_scope_is_the_innermost_enclosing_one(shape, queries) -> None:
    scopes = [Scope()]
    for nest, pick in shape:  # mostly chains (nest) with branches off earlier scopes
        scopes.append(Scope(scopes[-1] if nest else scopes[pick % len(scopes)]))
    for i, j in queries:
        a, b = scopes[i % len(scopes)], scopes[j % len(scopes)]
        assert common_scope(a, b) is _naive(a, b)
        assert common_scope(b, a) is _naive(a, b)


def test_deep_chain() -> None:
    top = Scope()
    chain = [top]
    for _ in range(100_000):
        chain.append(Scope(chain[-1]))
    left, right = Scope(chain[70_000]), Scope(chain[99_999])
    assert common_scope(left, right) is chain[70_000]
    assert common_scope(chain[-1], chain[12_345]) is chain[12_345]
    assert chain[-1].depth == 100_000 and len(chain[-1].up) == 17


def test_scopes_of_two_trees_have_none_in_common() -> None:
    with pytest.raises(ValueError, match="not in one tree"):
        common_scope(Scope(Scope()), Scope(Scope()))
