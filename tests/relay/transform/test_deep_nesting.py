"""Deep nesting is linear: InferType, the printer, the parser, structural equality and hash,
well-formedness and the optimisation passes take time linear in how deeply a program nests.

The default run's programs are 3,000 levels deep, three times Python's recursion limit, so a
step that recursed per level fails; the slow run repeats them at 10,000 (through the whole
pipeline) and 50,000 levels (printer and parser), where a step quadratic in the depth (as
InferType, the printer and ToANormalForm were) takes minutes, a linear one a second or two.
Nothing here asserts on time; ``benchmarks/bench_deep.py`` measures the growth per doubling.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import ember
from ember import relay
from ember.ir import assert_structural_equal, structural_hash
from ember.ir.well_formed import well_formed
from ember.relay.backend.pipeline import optimize_passes
from ember.relay.transform import FuseOps, InferType
from ember.relay.transform.to_a_normal_form import ToANormalForm
from ember.relay.transform.to_graph_normal_form import ToGraphNormalForm

DEPTH = 3000  # the default run's depth: above the recursion limit, cheap (7 kinds, ~2 s each)
T = relay.TensorType((2,), "float32")


def _tuples(x: relay.Expr, n: int) -> relay.Expr:
    for _ in range(n):
        x = relay.Tuple([x])
    return x


def _projections(x: relay.Expr, n: int) -> relay.Expr:
    x = _tuples(x, n)
    for _ in range(n):
        x = relay.TupleGetItem(x, 0)
    return x


def _fns(x: relay.Expr, n: int) -> relay.Expr:
    for _ in range(n):
        x = relay.Function([], x)
    return x


def _calls(x: relay.Expr, n: int) -> relay.Expr:
    for i in range(n):
        x = relay.negative(x) if i % 2 else relay.tanh(x)
    return x


def _let_chain(x: relay.Expr, n: int) -> relay.Expr:
    vs = [relay.var(f"a{i}") for i in range(n)]
    out: relay.Expr = vs[-1]
    for i in reversed(range(n)):
        out = relay.Let(vs[i], relay.negative(x if i == 0 else vs[i - 1]), out)
    return out


def _nested_lets(x: relay.Expr, n: int) -> relay.Expr:
    for i in range(n):
        v = relay.var(f"v{i}")
        x = relay.Let(v, x, v)
    return x


C = relay.var("c", shape=(), dtype="bool")


def _ifs(x: relay.Expr, n: int) -> relay.Expr:
    e = x
    for _ in range(n):
        e = relay.If(C, relay.negative(e), x)
    return e


# kind -> (body over %x, the number of types the result type nests: tuples, functions)
KINDS: dict[str, tuple[Callable[[relay.Expr, int], relay.Expr], Callable[[int], int]]] = {
    "tuples": (_tuples, lambda n: n), "projections": (_projections, lambda n: 0),
    "fns": (_fns, lambda n: n), "calls": (_calls, lambda n: 0),
    "let_chain": (_let_chain, lambda n: 0), "nested_lets": (_nested_lets, lambda n: 0),
    "ifs": (_ifs, lambda n: 0),
}


def deep_module(kind: str, n: int) -> ember.IRModule:
    x = relay.var("x", T)
    params = [x, C] if kind == "ifs" else [x]
    return ember.IRModule.from_expr(relay.Function(params, KINDS[kind][0](x, n)))


def _nesting(ty: relay.Type) -> int:
    """How many tuple and function types ``ty`` nests before its tensor type."""
    depth = 0
    while not isinstance(ty, relay.TensorType):
        ty = ty.fields[0] if isinstance(ty, relay.TupleType) else ty.ret_type
        depth += 1
    assert ty == T, ty
    return depth


def _types_prints_and_parses_back(kind: str, n: int) -> None:
    typed = InferType()(deep_module(kind, n))
    assert _nesting(typed["main"].checked_type.ret_type) == KINDS[kind][1](n)
    text = typed.astext()
    assert len(text) < 1000 * n  # the printed size is linear too: indents, comments capped
    back = InferType()(ember.parser.fromtext(text))
    assert_structural_equal(back, typed, map_free_vars=True)
    assert structural_hash(back, map_free_vars=True) == structural_hash(typed,
                                                                         map_free_vars=True)
    assert well_formed(back)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_3000_deep_types_prints_and_parses_back(kind: str) -> None:
    assert DEPTH > 2 * sys.getrecursionlimit()
    _types_prints_and_parses_back(kind, DEPTH)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_50_000_deep_types_prints_and_parses_back(kind: str) -> None:
    _types_prints_and_parses_back(kind, 50_000)


def test_deep_indentation_stops_growing() -> None:
    from ember.ir._print_layout import MAX_INDENT

    text = deep_module("fns", 100).astext()
    indents = [len(line) - len(line.lstrip(" ")) for line in text.splitlines()]
    assert max(indents) == 2 * MAX_INDENT
    assert indents.count(2 * MAX_INDENT) > 100 - MAX_INDENT  # every deeper block, and its }


def test_type_comments_show_eight_levels() -> None:
    typed = InferType()(deep_module("tuples", 12))
    text = typed.astext()
    assert "/* ty=((((((((...,),),),),),),),) */" in text  # the outer levels
    assert "/* ty=((((((((Tensor[(2), float32],),),),),),),),) */" in text  # the eighth one
    assert_structural_equal(ember.parser.fromtext(text), deep_module("tuples", 12),
                            map_free_vars=True)


PIPELINE = [*optimize_passes(), FuseOps(), ToANormalForm(), ToGraphNormalForm()]


def _through_the_pipeline(kind: str, n: int) -> None:
    """Every pass of relay.build's optimisation (opt_level 3) and the normal forms the
    executors use, one at a time, on the typed ``n``-deep program of ``kind``."""
    mod = InferType()(deep_module(kind, n))
    with ember.transform.PassContext(opt_level=3):
        for p in PIPELINE:
            out = p(mod)
            assert well_formed(out), p.name
            assert _nesting(out["main"].checked_type.ret_type) == KINDS[kind][1](n), p.name


@pytest.mark.parametrize("kind", ["tuples", "fns"])
def test_3000_deep_through_every_pass_of_the_pipeline(kind: str) -> None:
    _through_the_pipeline(kind, 3000)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_10_000_deep_through_every_pass_of_the_pipeline(kind: str) -> None:
    _through_the_pipeline(kind, 10_000)
