"""ONNX random operators: shapes and dtypes against onnxruntime, ranges and moments by
statistics (the generators differ), determinism for a seed, and bad attributes."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import make_model, node_case, run_graph, run_ort

from ember import relay
from ember.runtime.errors import FrontendError, OpAttributeUnImplemented

N = 4000
P = np.array([[0.1, 0.5, 0.9, 0.0, 1.0]], "float32").repeat(800, 0)
LOGITS = np.log(np.array([[1, 2, 7], [5, 0.001, 5]], "float32"))


def _cases():
    return [
        node_case("uniform", "RandomUniform", {}, shape=[N], low=-1.0, high=3.0, seed=1.0),
        node_case("uniform64", "RandomUniform", {}, shape=[40, 100], dtype=11, seed=2.0),
        node_case("normal", "RandomNormal", {}, shape=[N], mean=1.0, scale=2.0, seed=3.0),
        node_case("normal_like", "RandomNormalLike", {"x": np.zeros((N,), "float64")},
                  seed=4.0),
        node_case("uniform_like", "RandomUniformLike", {"x": np.zeros((20, 200), "float32")},
                  dtype=11, low=5.0, high=6.0),
        node_case("bernoulli", "Bernoulli", {"p": P}, seed=5.0),
        node_case("bernoulli_int", "Bernoulli", {"p": P.astype("float64")}, dtype=7, seed=6.0),
        node_case("multinomial", "Multinomial", {"x": LOGITS}, sample_size=N, seed=7.0),
        node_case("multinomial64", "Multinomial", {"x": LOGITS}, sample_size=3, dtype=7),
    ]


def _run(cases, opset=18):
    model = make_model(cases, opset)
    fed = {f"{c.name}__{k}": v for c in cases for k, v in c.inputs.items()}
    return run_graph(model, fed), run_ort(model, fed)


def test_shapes_dtypes_and_statistics():
    got, want = _run(_cases())
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
    uniform, uniform64, normal, normal_like, uniform_like, bern, bern_int, multi, _ = got
    assert -1 <= uniform.min() and uniform.max() < 3 and abs(uniform.mean() - 1) < 0.1
    assert 0 <= uniform64.min() and uniform64.max() < 1 and abs(uniform64.var() - 1 / 12) < 0.01
    assert abs(normal.mean() - 1) < 0.15 and abs(normal.std() - 2) < 0.15
    assert abs(normal_like.mean()) < 0.08 and abs(normal_like.std() - 1) < 0.08
    assert 5 <= uniform_like.min() and uniform_like.max() < 6
    for b in (bern, bern_int):
        assert set(np.unique(b).tolist()) <= {0, 1}
        np.testing.assert_allclose(b.mean(0), P[0], atol=0.06)
    np.testing.assert_allclose(np.bincount(multi[0], minlength=3) / N, [0.1, 0.2, 0.7],
                               atol=0.03)
    assert (multi[1] != 1).mean() > 0.99  # the near-zero class almost never
    np.testing.assert_allclose((multi[1] == 0).mean(), 0.5, atol=0.03)


def test_a_seed_repeats_on_every_import_and_none_differs():
    seeded = [node_case("u", "RandomUniform", {}, shape=[8], seed=11.0)]
    free = [node_case("u", "RandomUniform", {}, shape=[8])]
    first, second = _run(seeded)[0][0], _run(seeded)[0][0]
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(_run(free)[0][0], _run(free)[0][0])


def test_bad_attributes_name_the_node():
    bad = {"RandomUniform int dtype": (node_case("r", "RandomUniform", {}, shape=[2],
                                                 dtype=6), OpAttributeUnImplemented,
                                       "RandomUniform node 'r__RandomUniform': attribute dtype=6"),
           "Multinomial 1-D": (node_case("m", "Multinomial", {"x": np.zeros(3, "float32")}),
                               FrontendError, "Multinomial node 'm__Multinomial': input must "
                                              r"be \[batch_size, class_size\]"),
           "Multinomial dtype": (node_case("m", "Multinomial", {"x": LOGITS}, dtype=1),
                                 OpAttributeUnImplemented, "attribute dtype=1"),
           "Bernoulli int": (node_case("b", "Bernoulli", {"x": np.zeros(3, "int32")}),
                             FrontendError, "Bernoulli node 'b__Bernoulli': input must be "
                                            "float or double")}
    for case, error, message in bad.values():
        with pytest.raises(error, match=message):
            relay.frontend.from_onnx(make_model([case], 18))
