"""``te.scan`` as Relay-era scripts wrote it (the "Scan and Recurrent Kernel" tutorial),
lowered to a serial loop over the steps and compared with numpy."""
import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc
from ember.runtime.errors import OpError

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _cumsum(m, n):
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    return X, s_state, s_init, s_update


@needs_cc
def test_cumulative_sum_tutorial():
    m, n = te.var("m"), te.var("n")
    X, s_state, s_init, s_update = _cumsum(m, n)
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    assert tuple(map(str, s_scan.shape)) == ("m", "n") and s_scan.op.scan_axis.var.name
    s = te.create_schedule(s_scan.op)
    text = str(tvm.lower(s, [X, s_scan], simple_mode=True))
    assert "scan[0, i] = X[0, i]" in text and "for (scan.idx, 0, (m - 1))" in text
    assert "scan[(scan.idx + 1), i] = (scan[scan.idx, i] + X[(scan.idx + 1), i])" in text
    fscan = tvm.build(s, [X, s_scan], "llvm", name="myscan")
    a_np = np.random.default_rng(0).uniform(size=(10, 7)).astype("float32")
    b = tvm.nd.array(np.zeros((10, 7), dtype="float32"))
    fscan(tvm.nd.array(a_np), b)
    np.testing.assert_allclose(b.numpy(), np.cumsum(a_np, axis=0), rtol=1e-5)


@needs_cc
def test_multi_stage_body_two_states_scheduled_and_consumed():
    m, n = 6, 16
    X = te.placeholder((m, n), name="X")
    h, c = te.placeholder((m, n), name="h"), te.placeholder((m, n), name="c")
    h_init = te.compute((2, n), lambda t, i: X[t, i], name="h_init")
    c_init = te.compute((2, n), lambda t, i: X[t, i] * 0.0, name="c_init")
    # a body stage between the states and an update (inlined into it)
    mixed = te.compute((m, n), lambda t, i: h[t - 1, i] * 0.5 + c[t - 2, i], name="mixed")
    h_update = te.compute((m, n), lambda t, i: mixed[t, i] + X[t, i], name="h_update")
    c_update = te.compute((m, n), lambda t, i: h[t - 1, i] - c[t - 1, i], name="c_update")
    h_out, c_out = te.scan([h_init, c_init], [h_update, c_update], [h, c], inputs=[X])
    total = te.compute((m, n), lambda t, i: h_out[t, i] + c_out[t, i], name="total")
    s = te.create_schedule(total.op)
    io, ii = s[h_update].split(h_update.op.axis[1], factor=4)
    s[h_update].vectorize(ii)
    s[c_update].parallel(c_update.op.axis[1])
    f = tvm.build(s, [X, total], "llvm", name="two_states")
    x = np.random.default_rng(1).uniform(size=(m, n)).astype("float32")
    hs, cs = x.copy(), np.zeros_like(x)
    for t in range(2, m):
        hs[t] = hs[t - 1] * 0.5 + cs[t - 2] + x[t]
        cs[t] = hs[t - 1] - cs[t - 1]
    out = tvm.nd.empty((m, n))
    f(tvm.nd.array(x), out)
    np.testing.assert_allclose(out.numpy(), hs + cs, rtol=1e-5)


def test_scan_refuses_inconsistent_states():
    X, s_state, s_init, s_update = _cumsum(8, 4)
    with pytest.raises(OpError, match="lists of the same, non-zero length, got 2, 1 and 1"):
        te.scan([s_init, s_init], [s_update], [s_state])
    with pytest.raises(OpError, match=r"state 0 \(compute\) must be a te.placeholder, got "
                                      "the output of compute"):
        te.scan(s_init, s_update, s_update)  # the update passed as its own state
    with pytest.raises(OpError, match="compute has 4 at axis 1, the state has 5"):
        te.scan(s_init, s_update, te.placeholder((8, 5), name="S5"))
    with pytest.raises(OpError, match=r"init compute is float32\[1, 4\] but the state is float16\[8, 4\]"):
        te.scan(s_init, s_update, te.placeholder((8, 4), "float16"))
    with pytest.raises(OpError, match="update compute has 8 steps, the state has 9"):
        te.scan(s_init, te.compute((8, 4), lambda t, i: X[t, i]),
                te.placeholder((9, 4), name="S9"))
    with pytest.raises(OpError, match="init\\[0\\] must be a te tensor, got int"):
        te.scan(0, s_update, s_state)
    k = te.reduce_axis((0, 4), "k")
    red = te.compute((8, 4), lambda t, i: te.sum(X[t, k], axis=k), name="red")
    with pytest.raises(OpError, match="update red must be a te.compute without a reduction"):
        te.scan(s_init, red, s_state)


def test_scan_time_axis_must_stay_the_serial_outer_loop():
    X, s_state, s_init, s_update = _cumsum(8, 4)
    out = te.scan(s_init, s_update, s_state)
    s = te.create_schedule(out.op)
    s[s_update].parallel(s_update.op.axis[0])
    with pytest.raises(OpError, match="time axis t of update compute carries the recurrence"):
        tvm.lower(s, [X, out])
    s = te.create_schedule(out.op)
    s[s_update].split(s_update.op.axis[0], factor=2)
    with pytest.raises(OpError, match="must stay its outermost loop, unsplit"):
        tvm.lower(s, [X, out])


def test_scan_body_with_a_reduction_is_refused():
    X, s_state, s_init, _ = _cumsum(8, 4)
    k = te.reduce_axis((0, 4), "k")
    row = te.compute((8, 4), lambda t, i: te.sum(s_state[t - 1, k], axis=k), name="row")
    upd = te.compute((8, 4), lambda t, i: row[t, i] + X[t, i], name="upd")
    out = te.scan(s_init, upd, s_state)
    with pytest.raises(OpError, match="stage row reads a scan state but is not an elementwise"):
        tvm.lower(te.create_schedule(out.op), [X, out])
