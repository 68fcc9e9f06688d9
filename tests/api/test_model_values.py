"""``ember.api.model_values``: sequence / optional specs read from their type text, callers'
lists and Nones to VM values and back, with errors naming the input and element (no build:
the end-to-end checks are in ``tests/relay/frontend/test_onnx_seq_io.py``)."""
from __future__ import annotations

import numpy as np
import pytest

from ember.api import model_values as mv
from ember.api.model import ModelInputError, check_input
from ember.runtime.container import ADT, tuple_object
from ember.runtime.model_record import TensorSpec
from ember.runtime.ndarray import array

SEQ = TensorSpec("seq", None, "List[Tensor[(?, 3), float32]]")
OPT_SEQ = TensorSpec("opt", None, "Option[List[Tensor[(2), int64]]]")


def test_the_tags_are_the_preludes():
    from ember.relay.prelude import Prelude

    p = Prelude()
    assert (p.cons.tag, p.nil.tag) == (mv.CONS, mv.NIL)
    assert (p.some.tag, p.none.tag) == (mv.SOME, mv.NONE)


@pytest.mark.parametrize("text, kind", [
    ("List[Tensor[(?, 3), float32]]", mv.ValueKind(("list",), "float32", (None, 3))),
    ("Option[Tensor[(), bool]]", mv.ValueKind(("option",), "bool", ())),
    ("Option[List[Tensor[(2), int64]]]", mv.ValueKind(("option", "list"), "int64", (2,))),
    ("List[Tensor[(?, 3), float32]", None),  # a bracket short
    ("Tree[Tensor[(3), float32]]", None),
    ("List[(Tensor[(3), float32], Tensor[(3), float32])]", None),
    ("List[Tensor[(n, 3), float32]]", None),
])
def test_value_kind_reads_the_type_text(text, kind):
    assert mv.value_kind(TensorSpec("v", None, text)) == kind


def test_a_tensor_spec_is_no_value_kind():
    assert mv.value_kind(TensorSpec("x", (2, 3), "float32")) is None


def _items(value):
    out = []
    while value.tag == mv.CONS:
        out.append(value.fields[0])
        value = value.fields[1]
    assert value.tag == mv.NIL and not value.fields
    return out


def test_a_list_becomes_a_cons_chain_and_comes_back():
    rows = [np.ones((1, 3), "float32"), np.zeros((4, 3), "float32")]
    value = check_input(SEQ, rows)
    assert [a.numpy().shape for a in _items(value)] == [(1, 3), (4, 3)]
    assert _items(check_input(SEQ, [])) == []
    back = mv.from_vm_value(mv.value_kind(SEQ), value)
    assert isinstance(back, list) and [b.shape for b in back] == [(1, 3), (4, 3)]
    assert check_input(SEQ, [[[1, 2, 3]]]).fields[0].numpy().dtype == np.float32


def test_an_optional_is_none_or_some():
    kind = mv.value_kind(OPT_SEQ)
    none = check_input(OPT_SEQ, None)
    assert (none.tag, none.fields) == (mv.NONE, ())
    some = check_input(OPT_SEQ, [np.arange(2)])
    assert some.tag == mv.SOME and len(_items(some.fields[0])) == 1
    assert mv.from_vm_value(kind, none) is None
    assert [v.tolist() for v in mv.from_vm_value(kind, some)] == [[0, 1]]


@pytest.mark.parametrize("spec, value, message", [
    (SEQ, np.zeros((2, 3), "float32"), r"input 'seq': expected a list of float32\[\?, 3\] "),
    (SEQ, "abc", r"input 'seq': expected a list of .*got str"),
    (SEQ, [np.zeros((2, 3), "float32"), None], r"input 'seq' element 1: expected "
                                               r"float32\[\?, 3\], got None"),
    (SEQ, [np.zeros((2, 3), "int32")], r"element 0: expected float32\[\?, 3\], got "
                                       r"int32\[2, 3\]"),
    (OPT_SEQ, np.arange(2), r"input 'opt': expected a list of int64\[2\]"),
    (OPT_SEQ, [np.arange(3)], r"input 'opt' element 0: expected int64\[2\], got int64\[3\]"),
    (OPT_SEQ, [[1.5, 2.5]], r"element 0: float values would be truncated to int64"),
])
def test_wrong_values_raise_model_input_errors(spec, value, message):
    with pytest.raises(ModelInputError, match=message):
        check_input(spec, value)


def test_split_results_keeps_lists_whole_and_flattens_tensor_tuples():
    kinds = [None, mv.value_kind(SEQ), None]
    x, y, z = (array(np.full(2, k, "float32")) for k in range(3))
    chain = ADT(mv.CONS, [y, ADT(mv.NIL, [])])
    result = tuple_object([tuple_object([x]), chain, z])
    out = mv.split_results(result, kinds)
    assert out[0] is x and out[1] is chain and out[2] is z
    assert mv.split_results(chain, [kinds[1]]) == [chain]


def test_a_shape_rejection_message_names_sequence_inputs_by_type():
    from ember.api.model import shapes_rejected
    from ember.runtime.vm.interpreter import VMError

    err = VMError("dyn.reshape: cannot reshape 5 elements to [2, 3]")
    err.kernel = "fused_dyn_reshape_shape_func"
    x = TensorSpec("x", (None, 3), "float32")
    text = shapes_rejected([SEQ, x], [check_input(SEQ, []), np.zeros((2, 3), "float32")], err)
    assert text.startswith("the model cannot run on these inputs: 'seq' "
                           "(List[Tensor[(?, 3), float32]]); 'x' float32[2, 3] (declared "
                           "float32[?, 3], dynamic axes 0): dyn.reshape: cannot reshape")
