"""An output whose size is computed from the inputs' run-time sizes (``max(n, m)`` of a
broadcast, a slice's ``min(1, n) * m``) takes that size from its own tensor: one size variable,
bound from the caller's tensor, that the loops run to; the kernel checks it once against the
computation before its loops and refuses a tensor of another size."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import te, tir
from ember.contrib import cc
from ember.runtime.errors import TVMError
from ember.tir.expr import SizeVar
from ember.tir.stmt import AssertStmt, For

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _broadcast_add():
    n, m = te.size_var("n"), te.size_var("m")
    a, b = te.placeholder((n,), name="A"), te.placeholder((m,), name="B")

    def at(size, i):
        return tir.Select(size == 1, tir.const(0), i)

    c = te.compute((tir.max(n, m),), lambda i: a[at(n, i)] + b[at(m, i)], name="C")
    return te.create_schedule(c.op), [a, b, c]


def _loops(body):
    return [x for x in tir.post_order(body) if isinstance(x, For)]


def test_a_computed_size_becomes_the_outputs_own_and_is_checked_once():
    func = te.lower(*_broadcast_add(), "badd")
    size = func.buffer_map[func.params[2]].shape[0]
    assert isinstance(size, SizeVar) and size.name == "C_dim0"
    assert isinstance(func.body, AssertStmt) and str(func.body.condition) == \
        "(C_dim0 == max(n, m))"
    assert {str(loop.extent) for loop in _loops(func.body)} == {"C_dim0"}


def test_static_sizes_and_sizes_that_simplify_to_a_variable_stay():
    n = te.size_var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute(((n + 2) - 2,), lambda i: a[i] * 2.0, name="B")
    func = te.lower(te.create_schedule(b.op), [a, b], "same")
    assert func.buffer_map[func.params[1]].shape[0] is n and not isinstance(func.body,
                                                                            AssertStmt)
    x = te.placeholder((3, 4), name="X")
    y = te.compute((3, 4), lambda i, j: x[i, j] + 1.0, name="Y")
    func = te.lower(te.create_schedule(y.op), [x, y], "static")
    assert [int(d) for d in func.buffer_map[func.params[1]].shape] == [3, 4]


@pytest.fixture(scope="module")
def badd():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    return tir.build(*_broadcast_add(), name="badd")


@needs_cc
@settings(max_examples=12, deadline=None)
@given(n=st.sampled_from([1, 3, 17]), m_one=st.booleans())
def test_broadcast_add_matches_numpy(badd, n, m_one):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype("float32")
    b = rng.standard_normal(1 if m_one else n).astype("float32")
    out = ember.nd.empty((n,))
    badd["badd"](ember.nd.array(a), ember.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
    bb = rng.standard_normal(5).astype("float32")  # a size-1 A broadcast against B
    out = ember.nd.empty((5,))
    badd["badd"](ember.nd.array(a[:1]), ember.nd.array(bb), out)
    np.testing.assert_allclose(out.numpy(), a[0] + bb, rtol=1e-6)


@needs_cc
def test_an_output_of_another_size_is_refused(badd):
    a, b = ember.nd.array(np.ones(4, "float32")), ember.nd.array(np.ones(4, "float32"))
    with pytest.raises(TVMError, match="C: dimension 0 is not the size"):
        badd["badd"](a, b, ember.nd.empty((5,)))
