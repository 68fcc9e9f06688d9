"""tir.transform: prim_func_pass, the common passes, and tir.add_lower_pass in ember.lower."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc
from ember.runtime.errors import TVMError

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _vector_add(n=64):
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    return te.create_schedule(c.op), [a, b, c]


def _split8_pass():
    @tvm.tir.transform.prim_func_pass(opt_level=0)
    def vectorize(f, mod, ctx):
        loops = []
        tvm.tir.stmt_functor.post_order_visit(
            f.body, lambda op: loops.append(op) if isinstance(op, tvm.tir.For)
            and op.extent.value % 8 == 0 else None)
        if not loops:
            return f

        def split(op):
            if op not in loops:
                return None
            lo, li = te.var(op.loop_var.name + ".outer"), te.var(op.loop_var.name + ".inner")
            body = tvm.tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
            body = tvm.tir.For(li, 0, 8, tvm.tir.ForKind.VECTORIZED, body)
            return tvm.tir.For(lo, 0, op.extent.value // 8, tvm.tir.ForKind.SERIAL, body)

        return f.with_body(tvm.tir.stmt_functor.ir_transform(f.body, None, split, ["tir.For"]))
    return vectorize


@needs_cc
def test_add_lower_pass_runs_a_custom_pass_inside_lower_and_build():
    sch, args = _vector_add()
    vectorize = _split8_pass()
    assert vectorize.name == "vectorize" and vectorize.opt_level == 0
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [(1, vectorize)]}):
        text = str(tvm.lower(sch, args))
        f = tvm.build(sch, args, "llvm")
    assert "for vectorized (i.inner, 0, 8)" in text
    assert "i.inner" not in str(tvm.lower(sch, args))  # outside the context: not applied
    x, y = np.arange(64, dtype="float32"), np.ones(64, dtype="float32")
    out = tvm.nd.array(np.zeros(64, dtype="float32"))
    f(tvm.nd.array(x), tvm.nd.array(y), out)
    np.testing.assert_allclose(out.numpy(), x + y)


def test_add_lower_pass_bad_config():
    sch, args = _vector_add()
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [("late", _split8_pass())]}):
        with pytest.raises(TVMError, match=r"list of \(phase, pass\) pairs"):
            tvm.lower(sch, args)
    bad = tvm.tir.transform.prim_func_pass(lambda f, mod, ctx: f.body, name="Broken")
    with pytest.raises(TypeError, match="Broken returned .*expected a PrimFunc"):
        bad(tvm.lower(sch, args))
    with pytest.raises(TypeError, match="expected an IRModule .* got str"):
        tvm.tir.transform.Simplify()("main")  # a name, not the module


def test_unroll_loop_and_vectorize_loop_passes():
    a = te.placeholder((6, 4), name="a")
    b = te.compute((6, 4), lambda i, j: a[i, j] * 2.0, name="b")
    s = te.create_schedule(b.op)
    s[b].vectorize(b.op.axis[1])
    func = tvm.lower(s, [a, b])
    unrolled = str(tvm.tir.transform.UnrollLoop(auto_max_step=8)(func))
    assert "for (i, 0, 6)" in unrolled  # 6 * 4 = 24 steps > 8: stays a loop
    with tvm.transform.PassContext(config={"tir.UnrollLoop": {"auto_max_step": 24}}):
        assert "for unrolled (i, 0, 6)" in str(tvm.tir.transform.UnrollLoop()(func))
    serial = str(tvm.tir.transform.VectorizeLoop(enable=False)(func))
    assert "vectorized" in str(func) and "vectorized" not in serial
    assert tvm.tir.transform.VectorizeLoop()(func) is func
    with tvm.transform.PassContext(config={"tir.UnrollLoop": {"auto_max_step": -1}}):
        with pytest.raises(TVMError, match="auto_max_step must be a non-negative int"):
            tvm.tir.transform.UnrollLoop()(func)


def test_simplify_and_remove_no_op():
    i = te.var("i")
    buf = tvm.tir.decl_buffer((4,), "float32", name="x")
    store = tvm.tir.BufferStore(buf, tvm.tir.const(1.0, "float32"), (i * 1 + 0,))
    body = tvm.tir.SeqStmt((
        tvm.tir.For(i, 0, 4, tvm.tir.ForKind.SERIAL, store),
        tvm.tir.For(te.var("j"), 0, 0, tvm.tir.ForKind.SERIAL, store),
        tvm.tir.IfThenElse(tvm.tir.const(False, "bool"), store),
        tvm.tir.Evaluate(tvm.tir.const(0)),
    ))
    func = tvm.tir.PrimFunc((buf.data,), {buf.data: buf}, body)
    cleaned = tvm.tir.transform.RemoveNoOp()(tvm.tir.transform.Simplify()(func))
    assert isinstance(cleaned.body, tvm.tir.For) and "x[i] = 1.0f" in str(cleaned)
    applied = tvm.tir.transform.Apply(lambda f: f.with_attr("global_symbol", "g"))([func])
    assert applied[0].name == "g"


def test_unroll_loop_config_applies_inside_lower():
    a = te.placeholder((3, 4), name="a")
    b = te.compute((3, 4), lambda i, j: a[i, j] + 1.0, name="b")
    s = te.create_schedule(b.op)
    assert "unrolled" not in str(tvm.lower(s, [a, b]))
    with tvm.transform.PassContext(config={"tir.UnrollLoop": {"auto_max_step": 4}}):
        text = str(tvm.lower(s, [a, b]))
    assert "for (i, 0, 3)" in text and "for unrolled (j, 0, 4)" in text
