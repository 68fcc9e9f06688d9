"""The registry as a whole: every op complete, fusion patterns as TVM assigns them, the Python
API namespaces, attrs records as value objects."""
from __future__ import annotations

import dataclasses

import pytest
from _op_helpers import infer

from ember import relay
from ember.ir.op import OP_REGISTRY, Op, OpPattern
from ember.ir.types import TensorType
from ember.relay.op.nn._attrs import Conv2DAttrs
from ember.runtime.errors import OpAttributeInvalid, OpNotImplemented
from ember.runtime.object import OBJECT_TYPES

P = OpPattern
EXPECTED_PATTERNS = {
    P.ELEMWISE: ["exp", "negative", "sqrt", "sigmoid", "round", "clip", "cast", "copy", "zeros",
                 "ones_like", "full", "nn.relu", "nn.leaky_relu", "logical_not"],
    P.BROADCAST: ["add", "subtract", "divide", "power", "equal", "less", "logical_and",
                  "maximum", "where", "nn.bias_add", "nn.prelu", "broadcast_to", "expand_dims",
                  "tile", "repeat"],
    P.INJECTIVE: ["reshape", "reshape_like", "transpose", "squeeze", "concatenate", "stack",
                  "split", "take", "strided_slice", "reverse", "layout_transform", "nn.pad",
                  "nn.batch_flatten", "nn.upsampling"],
    P.COMM_REDUCE: ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "variance"],
    P.OUT_ELEMWISE_FUSABLE: ["nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.matmul",
                             "nn.batch_matmul", "nn.max_pool2d", "nn.avg_pool2d",
                             "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d", "one_hot"],
    P.OPAQUE: ["nn.softmax", "nn.log_softmax", "nn.batch_norm", "nn.layer_norm", "nn.dropout",
               "arange", "shape_of", "annotation.stop_fusion"],
}


@pytest.mark.parametrize("pattern, names", EXPECTED_PATTERNS.items())
def test_fusion_patterns_follow_tvm(pattern, names):
    for name in names:
        assert Op.get(name).op_def.pattern == pattern, name
        assert Op.get(name).get_attr("TOpPattern") == pattern


def test_every_op_is_complete():
    relay.op.get("add")  # loads the library
    assert len(OP_REGISTRY) > 100
    for name, op_def in OP_REGISTRY.items():
        if name.startswith("test"):  # registered by other test modules
            continue
        assert callable(op_def.type_rel) and callable(op_def.reference), name
        assert op_def.num_inputs == len(op_def.arg_names), name
        assert op_def.description, name
        if op_def.attrs_type is not None:
            assert dataclasses.is_dataclass(op_def.attrs_type), name
            op_def.attrs_type()  # every field has a default


def test_namespaces_match_relay():
    assert relay.nn.conv2d is relay.op.nn.conv2d
    assert relay.op.nn.dense is relay.nn.dense
    assert relay.op.add is relay.add and relay.op.transform.take is relay.take
    assert relay.annotation.stop_fusion(relay.var("x")).op.name == "annotation.stop_fusion"
    assert relay.op.get("nn.relu") is Op.get("nn.relu")
    assert "nn.conv2d" in relay.op.list_op_names()
    with pytest.raises(OpNotImplemented, match="did you mean nn.conv2d"):
        relay.op.get("nn.conv2dd")


def test_attrs_are_value_objects():
    a = Conv2DAttrs(padding=[1, 1], strides=[2, 2])
    b = Conv2DAttrs(padding=(1, 1, 1, 1), strides=(2, 2))
    assert a == b and hash(a) == hash(b)
    assert a.padding == (1, 1, 1, 1) and isinstance(a.strides, tuple)
    assert dict(a.non_default_items()) == {"padding": (1, 1, 1, 1), "strides": (2, 2)}
    assert a["groups"] == 1 and "kernel_layout" in a.keys()  # noqa: SIM118 (Attrs.keys, not a dict)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.groups = 2  # type: ignore[misc]
    assert OBJECT_TYPES["relay.attrs.Conv2DAttrs"] is Conv2DAttrs


def test_relations_accept_missing_or_mapping_attrs():
    rel = Op.get("sum").op_def.type_rel
    assert rel([TensorType((2, 3))], None) == TensorType(())
    assert rel([TensorType((2, 3))], {"axis": [1]}) == TensorType((2,))
    with pytest.raises(OpAttributeInvalid, match="reshape: unknown attribute.*bogus.*newshape"):
        Op.get("reshape").op_def.type_rel([TensorType((2,))], {"bogus": 1})
    with pytest.raises(OpAttributeInvalid, match="expected attrs of type ReduceAttrs"):
        rel([TensorType((2, 3))], Conv2DAttrs())


def test_stop_fusion_is_identity():
    assert infer("annotation.stop_fusion", TensorType((2, 3), "int8")) == TensorType((2, 3), "int8")
