"""tir.stmt_functor as the Relay-era "custom lowering pass" tutorial uses it: find loops with
post_order_visit, split them with substitute and ir_transform, rebuild For with ints."""
from __future__ import annotations

import pytest

import ember as tvm
from ember import te


def _vector_add(n=128):
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    return te.create_schedule(c.op), [a, b, c]


def _split_by_8(loops):
    def vectorize8(op):
        if op in loops:
            extent = op.extent.value
            name = op.loop_var.name
            lo, li = te.var(name + ".outer"), te.var(name + ".inner")
            body = tvm.tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
            body = tvm.tir.For(li, 0, 8, tvm.tir.ForKind.VECTORIZED, body)
            return tvm.tir.For(lo, 0, extent // 8, tvm.tir.ForKind.SERIAL, body)
        return None
    return vectorize8


def test_post_order_visit_and_ir_transform_split_a_loop():
    sch, args = _vector_add()
    func = tvm.lower(sch, args)["main"]
    loops = []

    def find_width8(op):
        if isinstance(op, tvm.tir.For) and isinstance(op.extent, tvm.tir.IntImm):
            if op.extent.value % 8 == 0:
                loops.append(op)

    tvm.tir.stmt_functor.post_order_visit(func.body, find_width8)
    assert len(loops) == 1
    body = tvm.tir.stmt_functor.ir_transform(func.body, None, _split_by_8(loops), ["tir.For"])
    text = str(func.with_body(body))
    assert "for (i.outer, 0, 16)" in text and "for vectorized (i.inner, 0, 8)" in text
    assert "c[((i.outer * 8) + i.inner)]" in text


def test_ir_transform_preorder_replaces_without_visiting_children():
    sch, args = _vector_add(16)
    func = tvm.lower(sch, args)["main"]
    seen = []
    stop = tvm.tir.Evaluate(tvm.tir.const(0))
    out = tvm.tir.stmt_functor.ir_transform(func.body, lambda n: stop,
                                            lambda n: seen.append(n), ["For"])
    assert out is stop and seen == []
    nodes = []
    tvm.tir.stmt_functor.pre_order_visit(func.body, lambda n: nodes.append(type(n).__name__)
                                         or not isinstance(n, tvm.tir.For))
    assert nodes == ["For"]


def test_ir_transform_rejects_an_unknown_node_type():
    sch, args = _vector_add(16)
    with pytest.raises(ValueError, match="unknown node type 'tir.Loop'"):
        tvm.tir.stmt_functor.ir_transform(tvm.lower(sch, args)["main"].body, None, None, ["tir.Loop"])


def test_substitute_takes_python_ints():
    i = te.var("i")
    e = tvm.tir.stmt_functor.substitute(i * 2 + 1, {i: 3})
    assert str(tvm.tir.simplify(e)) == "7"
