"""relay.backend.Executor / Runtime: registries, typed options, TVM's error messages."""
from __future__ import annotations

import pickle

import pytest

import ember as tvm
from ember.relay.backend import Executor, Runtime


def test_executor_with_options():
    executor = Executor("aot", {"interface-api": "c", "unpacked-api": True,
                                "workspace-byte-alignment": 16})
    assert str(executor) == "aot" and executor.name == "aot"
    assert executor["interface-api"] == "c"
    assert executor["unpacked-api"] is True
    assert executor["workspace-byte-alignment"] == 16


def test_defaults_and_membership():
    assert not Executor("graph")["link-params"]
    executor = Executor("aot", {"interface-api": "c"})
    assert "interface-api" in executor and "woof" not in executor
    assert "unpacked-api" not in executor  # no default: absent unless set
    assert executor.get("unpacked-api", False) is False
    with pytest.raises(KeyError, match='Executor "aot" has no attribute "unpacked-api"'):
        executor["unpacked-api"]


def test_equality_hash_and_pickle():
    assert Executor("graph") == Executor("graph", {"link-params": False})
    assert Executor("graph") != Executor("graph", {"link-params": True})
    assert Executor("aot") != Executor("graph")
    assert Runtime("crt") != Executor("vm")
    assert len({Runtime("cpp"), Runtime("cpp"), Runtime("crt")}) == 2
    rt = Runtime("crt", {"system-lib": True})
    assert pickle.loads(pickle.dumps(rt)) == rt
    assert repr(rt) == "Runtime('crt', {'system-lib': True})"


def test_registries():
    assert Executor.list_registered() == ["graph", "aot", "vm"]
    assert Runtime.list_registered() == ["cpp", "crt"]
    for executor in (Executor("aot"), "aot"):
        options = Executor.list_registered_options(executor)
        assert options["interface-api"] == "runtime.String"
        assert options["unpacked-api"] == "IntImm"
    assert Runtime.list_registered_options("crt") == {"system-lib": "IntImm"}
    assert Executor.list_registered_options("graph") == {"link-params": "IntImm"}


@pytest.mark.parametrize("make, match", [
    (lambda: Executor("woof", {}), 'Executor "woof" is not defined'),
    (lambda: Executor("aot", {"woof": "bark"}),
     'Attribute "woof" is not available on this Executor'),
    (lambda: Executor("graph", {"interface-api": "c"}),
     ('Attribute "interface-api" is not available on this Executor; Executor "graph" accepts: '
      'link-params')),
    (lambda: Executor("aot", {"interface-api": True}),
     'Attribute "interface-api" should have type "runtime.String" but instead found "IntImm"'),
    (lambda: Executor("aot", {"workspace-byte-alignment": "16"}),
     'should have type "IntImm" but instead found "runtime.String"'),
    (lambda: Executor("aot", {"interface-api": "cpp"}),
     'Attribute "interface-api" must be "c" or "packed", got "cpp"'),
    (lambda: Executor.list_registered_options("woof"), 'Executor "woof" is not defined'),
    (lambda: Runtime("woof"), 'Runtime "woof" is not defined'),
    (lambda: Runtime("crt", {"woof": 1}), 'Attribute "woof" is not available on this Runtime'),
    (lambda: Runtime("crt", {"system-lib": "yes"}),
     'Attribute "system-lib" should have type "IntImm" but instead found "runtime.String"'),
    (lambda: Runtime("cpp", {"system-lib": 1.0}), 'instead found "FloatImm"'),
])
def test_errors_use_tvm_messages(make, match):
    with pytest.raises(tvm.TVMError, match=match):
        make()


def test_reachable_as_tvm_paths():
    assert tvm.relay.backend.Executor is Executor
    assert tvm.relay.backend.Runtime is Runtime
    assert str(tvm.relay.backend.Runtime("crt", {"system-lib": 1})) == "crt"
    assert Runtime("crt", {"system-lib": 1})["system-lib"] is True
