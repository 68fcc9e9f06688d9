"""relay.random: keys, determinism, independence of split keys, the statistics of the
distributions (on the compiled VM program), the type relations and their errors."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import infer
from _vm_util import interpret, vm_runner

from ember import relay
from ember.ir.types import TensorType, TupleType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

random = relay.random
KEY = TensorType((10,), "uint64")


def _program():
    """uint64 bits, uniform [-1, 3), normal N(1, 2^2) float64, multinomial draws and the
    two halves of a split, all from one seed."""
    probs = relay.var("probs", shape=(2, 3))
    key, bits = random.threefry_generate(random.threefry_key(3), (4, 5))
    key, u = random.uniform(key, (4000,), low=-1.0, high=3.0)
    key, z = random.normal(key, (4000,), "float64", mean=1.0, scale=2.0)
    left, right = random.threefry_split(key)
    _, draws = random.multinomial(left, probs, num_samples=4000)
    _, left_bits = random.threefry_generate(left, (64,))
    _, right_bits = random.threefry_generate(right, (64,))
    outs = relay.Tuple([bits, u, z, draws, left_bits, right_bits])
    return relay.Function([probs], outs)


PROBS = np.array([[1, 2, 7], [0, 1, 0]], "float32")


def test_vm_statistics_and_agreement_with_the_reference():
    run = vm_runner(_program())
    bits, u, z, draws, left, right = run(PROBS)
    assert -1 <= u.min() and u.max() < 3 and abs(u.mean() - 1) < 0.1  # sd of the mean 0.018
    assert abs(u.var() - 16 / 12) < 0.15
    assert z.dtype == np.float64 and abs(z.mean() - 1) < 0.15 and abs(z.std() - 2) < 0.15
    freq = np.bincount(draws[0], minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.03)
    assert (draws[1] == 1).all()  # a zero-probability category is never drawn
    assert len(set(bits.ravel().tolist())) == 20 and not set(left) & set(right)
    for got, want in zip((bits, u, z, draws, left, right), interpret(_program(), PROBS)):
        np.testing.assert_allclose(got, want, rtol=1e-6)  # the same numbers as the reference
    again = run(PROBS)
    assert all((a == b).all() for a, b in zip(again, (bits, u, z, draws, left, right)))


def test_keys_advance_and_seeds_differ():
    key = random.threefry_key(5)
    k1, first = random.threefry_generate(key, (3,))
    _, second = random.threefry_generate(k1, (3,))
    _, other = random.threefry_generate(random.threefry_key(6), (3,))
    a, b, c = interpret(relay.Function([], relay.Tuple([first, second, other])))
    assert len({*a.tolist(), *b.tolist(), *c.tolist()}) == 9


def test_type_relations_and_errors():
    out = infer("random.uniform", KEY, TensorType((), "float64"), TensorType((), "float64"),
                out_shape=(2, 3), out_dtype="float64")
    assert out == TupleType((KEY, TensorType((2, 3), "float64")))
    out = infer("random.multinomial", KEY, TensorType((4, 5), "float32"), num_samples=3)
    assert out == TupleType((KEY, TensorType((4, 3), "int32")))
    with pytest.raises(TypeInferenceError, match=r"threefry_split: key must be uint64\[10\]"):
        infer("random.threefry_split", TensorType((4,), "uint64"))
    with pytest.raises(TypeInferenceError, match="random.uniform: low/mean must be a float32 "
                                                 "scalar, got float64"):
        infer("random.uniform", KEY, TensorType((), "float64"), TensorType((), "float32"),
              out_shape=(2,))
    with pytest.raises(TypeInferenceError, match="probs must be float32 or float64, got int32"):
        infer("random.multinomial", KEY, TensorType((4,), "int32"))
    with pytest.raises(OpAttributeInvalid, match="out_dtype must be float32 or float64"):
        random.uniform(random.threefry_key(0), (2,), "int32")
    with pytest.raises(OpAttributeInvalid, match="num_samples"):
        random.multinomial(random.threefry_key(0), relay.var("p", shape=(3,)), num_samples=0)
    with pytest.raises(TypeError, match="seed must be an int"):
        random.threefry_key(1.5)
