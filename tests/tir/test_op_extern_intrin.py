"""``tir.call_pure_extern`` and ``tir.call_intrin`` with TVM's intrinsic names, as the
"Intrinsics and Math Functions" tutorial calls them."""
import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc
from ember.runtime.errors import OpError


def test_call_intrin_takes_tvm_names_and_refuses_unknown_ones():
    x = te.var("x", "float32")
    assert str(tvm.tir.call_intrin("float32", "tir.log", x)) == str(te.log(x))
    assert tvm.tir.call_intrin("float32", "exp", x).op == "exp"
    with pytest.raises(OpError, match="ember has no intrinsic 'tir.mylog'; .*call_extern"):
        tvm.tir.call_intrin("float32", "tir.mylog", x)


@pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
def test_pure_extern_and_tvm_named_intrinsic_compile_and_run():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: tvm.tir.call_pure_extern("float32", "expf", A[i])
                   + tvm.tir.call_intrin("float32", "tir.log", A[i]), name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm", name="exp_plus_log")
    a = np.random.default_rng(0).uniform(0.5, 2.0, size=7).astype("float32")
    b = tvm.nd.empty((7,))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), np.exp(a) + np.log(a), rtol=1e-5)
