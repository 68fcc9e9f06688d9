"""CanonicalizeOps (bias_add -> add of the expanded bias) and BindParams."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, assert_same_result, parse, run

from ember.relay.transform import BindParams, CanonicalizeOps, FoldConstant


def test_bias_add_becomes_add_along_axis():
    before = """def @main(%x: Tensor[(1, 4, 3, 3), float32], %b: Tensor[(4), float32],
                         %y: Tensor[(2, 5), float32], %c: Tensor[(5), float32]) {
      (nn.bias_add(%x, %b), nn.bias_add(%y, %c, axis=-1))
    }"""
    expected = """def @main(%x: Tensor[(1, 4, 3, 3), float32], %b: Tensor[(4), float32],
                         %y: Tensor[(2, 5), float32], %c: Tensor[(5), float32]) {
      (add(%x, expand_dims(%b, axis=1, num_newaxis=2)), add(%y, %c))
    }"""
    out = run(CanonicalizeOps(), before)
    assert_main_equal(out, expected)
    rng = np.random.default_rng(0)
    args = [rng.normal(size=p.type_annotation.shape).astype("float32")
            for p in parse(before)["main"].params]
    assert_same_result(parse(before), out, *args)
    assert CanonicalizeOps().opt_level == 3


def test_bind_params_then_fold():
    mod = parse("""def @main(%x: Tensor[(2), float32], %w: Tensor[(2), float32]) {
      add(%x, multiply(%w, 2f))
    }""")
    out = run(FoldConstant(), run(BindParams({"w": np.array([1, 2], "float32"), "other": 1}),
                                  mod))
    body = out["main"].body
    assert [p.name_hint for p in out["main"].params] == ["x"]
    np.testing.assert_array_equal(body.args[1].data.numpy(), [2, 4])
    assert run(BindParams(), mod) is not None
    with pytest.raises(TypeError, match="BindParams: params must map names"):
        BindParams([1, 2])
