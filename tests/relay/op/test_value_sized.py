"""Outputs sized by tensor values on the VM: the shape function reads the value
(``op/_value_dims.py``, ``backend/vm/shape_func.py``), here through ``arange``."""
from __future__ import annotations

import numpy as np
import pytest
from _vm_util import vm_runner

from ember import relay
from ember.runtime.errors import TVMError


def _arange(start, stop, step, dtype="int64"):
    return relay.arange(*(v if isinstance(v, relay.Expr) else relay.const(v, dtype)
                          for v in (start, stop, step)), dtype=dtype)


def test_arange_with_a_run_time_stop_is_sized_by_its_value():
    n = relay.var("n", shape=(), dtype="int64")
    run = vm_runner(relay.Function([n], _arange(2, n, 3)))
    for stop in (10, 2, 0, 11, 100, 3):  # the same argument shape, other values
        np.testing.assert_array_equal(run(np.array(stop, "int64")), np.arange(2, stop, 3))


def test_arange_float_bounds_from_values():
    a = relay.var("a", shape=(), dtype="float32")
    b = relay.var("b", shape=(), dtype="float32")
    run = vm_runner(relay.Function([a, b], _arange(a, b, 0.5, "float32")))
    got = run(np.array(-1.0, "float32"), np.array(1.25, "float32"))
    np.testing.assert_allclose(got, np.arange(-1.0, 1.25, 0.5, dtype="float32"))


def test_arange_step_zero_at_run_time_is_a_clear_error():
    s = relay.var("s", shape=(), dtype="int64")
    run = vm_runner(relay.Function([s], _arange(2, 5, s)))
    np.testing.assert_array_equal(run(np.array(-1, "int64")), np.zeros(0, "int64"))
    with pytest.raises(TVMError, match="arange: step must not be 0"):
        run(np.array(0, "int64"))


def test_a_size_from_values_without_a_formula_is_refused_at_compile_time():
    # An op whose compute gives its output a size variable of its own, without value_dim:
    # nothing says how to compute it, so the VM refuses to compile it.
    from ember.relay.op._reg import OPAQUE, call, defop
    from ember.te import tensor as te

    name = "test.value_sized_without_formula"
    if name not in relay.op.list_op_names():
        defop(name, lambda args, attrs: relay.TensorType((relay.Any(),), "float32"),
              lambda x, attrs: x, OPAQUE,
              compute=lambda attrs, ins, ty: [te.compute((te.size_var("n"),),
                                                         lambda i: ins[0][0], name="T")])
    x = relay.var("x", shape=(3,))
    with pytest.raises(TVMError, match="depends on tensor values"):
        vm_runner(relay.Function([x], call(name, x)))


def test_sizes_computed_by_kernels_size_later_outputs_on_every_run():
    # The bounds come out of kernels (cumsum, take); the shapes of the three results come
    # from value-reading shape functions whose arena slots are reused later in the run: a
    # tensor's shape must live as long as the tensor (memory_alloc.py), also in VM plans.
    from ember.relay.op import dyn

    x = relay.var("x", shape=(2, 7))
    s = relay.var("s", shape=(3,), dtype="int64")
    ends = relay.cumsum(s, axis=0)
    begins = relay.subtract(ends, s)
    one = relay.const(np.array([1], "int64"))
    parts = [dyn.strided_slice(x, relay.take(begins, relay.const(np.array([k])), axis=0),
                               relay.take(ends, relay.const(np.array([k])), axis=0), one,
                               axes=[1]) for k in range(3)]
    run = vm_runner(relay.Function([x, s], relay.Tuple(parts)))
    a = np.arange(14, dtype="float32").reshape(2, 7)
    for sizes in ([1, 2, 4], [7, 0, 0], [3, 3, 1], [1, 2, 4]):
        got = run(a, np.array(sizes, "int64"))
        bounds = np.cumsum([0, *sizes])
        for k in range(3):
            np.testing.assert_array_equal(got[k], a[:, bounds[k]:bounds[k + 1]])

