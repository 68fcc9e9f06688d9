"""The unified metadata: JSON round trip (hypothesis), validation with the failing path named,
and the C struct ``tvmgen_<mod>_metadata`` in the compiled library agreeing with the JSON."""
from __future__ import annotations

import ctypes
import json

import pytest
from _aot_util import build, mlp, needs_cc
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime.aot_format import (
    ConstantInfo,
    FunctionInfo,
    MetadataError,
    ModelMetadata,
    ParameterInfo,
    parse_metadata,
)
from ember.runtime.dtype import DataType

names = st.text(st.characters(min_codepoint=32, max_codepoint=0x24F), min_size=1, max_size=8)
dtypes = st.sampled_from(["float32", "float16", "int8", "uint8", "int32", "bool", "float64"])
shapes = st.lists(st.integers(0, 64), max_size=4).map(tuple)
params = st.builds(ParameterInfo, names, names, shapes, dtypes)


@st.composite
def metadata(draw):
    ins, outs = draw(st.lists(params, max_size=3)), draw(st.lists(params, min_size=1, max_size=3))
    func = FunctionInfo(draw(names), tuple(ins + outs), len(ins), len(outs),
                        draw(st.integers(0, 1 << 40)), draw(st.integers(0, 1 << 20)),
                        draw(st.integers(0, 1 << 20)))
    consts = tuple(draw(st.lists(st.builds(ConstantInfo, names, shapes, dtypes,
                                           st.integers(0, 1 << 20)), max_size=3)))
    return ModelMetadata(draw(names), draw(names), (func,),
                         draw(st.sampled_from(["packed", "c"])), draw(st.booleans()),
                         draw(st.booleans()), draw(st.sampled_from(["packed", "cpacked",
                                                                     "unpacked"])),
                         16, 8, consts, ({"function_name": "k", "workspace_size_bytes": 0},),
                         {"planned_bytes": 4})


@settings(max_examples=60, deadline=None)
@given(metadata())
def test_json_round_trip(meta):
    assert parse_metadata(meta.to_json()) == meta
    assert parse_metadata(meta.to_json()).to_json() == meta.to_json()


def _valid():
    p = ParameterInfo("x", "x", (2, 3), "float32")
    return json.loads(ModelMetadata("m", "tvmgen_m", (FunctionInfo("tvmgen_m_run_model",
                                                                   (p, p), 1, 1, 0, 48, 0),)
                                    ).to_json())


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(version=2), "version: format version 2; this runtime reads version 1"),
    (lambda m: m.pop("prefix"), "prefix: missing"),
    (lambda m: m.update(interface_api="cpp"), "interface_api: must be one of 'packed', 'c'"),
    (lambda m: m["functions"][0]["params"][1].update(shape=[2, -1]),
     r"functions\[0\]\.params\[1\]\.shape\[1\]: expected a non-negative int, got -1"),
    (lambda m: m["functions"][0]["params"][0].update(dtype="floaty"),
     r"functions\[0\]\.params\[0\]\.dtype: not a dtype"),
    (lambda m: m["functions"][0].update(num_inputs=2),
     r"functions\[0\]\.params: 2 parameters, but num_inputs \+ num_outputs = 2 \+ 1"),
    (lambda m: m["functions"][0].update(workspace_size_bytes="0"),
     r"functions\[0\]\.workspace_size_bytes: expected int, got str"),
    (lambda m: m.update(functions=[]), "functions: empty"),
    (lambda m: m.update(link_params=1), "link_params: expected bool, got int"),
    (lambda m: m.update(memory={"workspace": "big"}), "memory.workspace: expected int, got str"),
    (lambda m: m.update(memory={"workspace": -8}), "memory.workspace: must be >= 0, got -8"),
    (lambda m: m.update(use_workspace_io="false"), "use_workspace_io: expected bool, got str"),
])
def test_malformed_metadata_names_the_path(edit, message):
    meta = _valid()
    edit(meta)
    with pytest.raises(MetadataError, match="aot metadata: " + message):
        parse_metadata(json.dumps(meta))


def test_not_json():
    with pytest.raises(MetadataError, match="aot metadata: not valid JSON"):
        parse_metadata("{")


# -- the C struct ------------------------------------------------------------------------------------
class _Param(ctypes.Structure):
    _fields_ = [("relay_name_hint", ctypes.c_char_p), ("tir_name_hint", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("ndim", ctypes.c_int64),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Func(ctypes.Structure):
    _fields_ = [("function_name", ctypes.c_char_p), ("params", ctypes.POINTER(_Param)),
                ("num_inputs", ctypes.c_int32), ("num_outputs", ctypes.c_int32),
                ("workspace_size_bytes", ctypes.c_int64), ("io_size_bytes", ctypes.c_int64),
                ("constant_size_bytes", ctypes.c_int64)]


class _Meta(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int32), ("functions", ctypes.POINTER(_Func)),
                ("num_functions", ctypes.c_int32), ("module_name", ctypes.c_char_p)]


@needs_cc
@pytest.mark.parametrize("config", ["cpp-cpacked", "crt-c"])
def test_c_struct_agrees_with_the_json(config):
    mod, params_ = mlp(batch=1, features=8, hidden=(16,), classes=4)
    factory = build(mod, config, params_, mod_name="net")
    meta = factory.get_model_metadata()
    dso = factory.get_lib()._compiled()  # the CSourceModule's loaded library
    c = _Meta.in_dll(dso._lib, "tvmgen_net_metadata")
    assert (c.version, c.num_functions, c.module_name) == (1, 1, b"net")
    f, main = c.functions[0], meta.main
    assert f.function_name.decode() == main.function_name
    assert (f.num_inputs, f.num_outputs) == (main.num_inputs, main.num_outputs)
    assert (f.workspace_size_bytes, f.io_size_bytes, f.constant_size_bytes) == (
        main.workspace_size_bytes, main.io_size_bytes, main.constant_size_bytes)
    for i, p in enumerate(main.params):
        q = f.params[i]
        assert (q.relay_name_hint.decode(), q.tir_name_hint.decode()) == (p.relay_name_hint,
                                                                          p.tir_name_hint)
        assert tuple(q.shape[k] for k in range(q.ndim)) == p.shape
        dt = DataType(p.dtype)
        assert (q.code, q.bits, q.lanes) == (dt.type_code, dt.bits, 1)
    assert factory.get_lib()["tvmgen_net_get_metadata"]() == meta.to_json()
