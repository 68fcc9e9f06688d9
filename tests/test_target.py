"""ember.target: parsing, canonical strings, hosts, contexts, micro, and refusals."""
from __future__ import annotations

import pickle

import pytest

import ember as tvm
from ember.target import Target, TargetError


def test_llvm_is_host_cpu_with_default_keys():
    t = Target("llvm")
    assert t.kind.name == "llvm"
    assert t.keys == ("cpu",)
    assert t.is_cpu and t.get_target_device_type() == 1
    assert str(t) == "llvm -keys=cpu"
    assert t.host is None


def test_options_are_typed_and_canonical():
    t = Target("c -unpacked-api --system-lib -executor=aot -interface-api=c "
               "-constants-byte-alignment=16 -mcpu=cortex-m4 -keys=arm_cpu,cpu")
    assert t.attrs["unpacked-api"] is True and t.attrs["system-lib"] is True
    assert t.attrs["constants-byte-alignment"] == 16
    assert t.attrs["keys"] == ("arm_cpu", "cpu")
    assert t.mcpu == "cortex-m4"
    assert str(t) == ("c -keys=arm_cpu,cpu -constants-byte-alignment=16 -executor=aot "
                      "-interface-api=c -mcpu=cortex-m4 -system-lib=1 -unpacked-api=1")
    assert Target(str(t)) == t


@pytest.mark.parametrize("text", ["llvm", "c -link-params=0",
                                  "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma -model=foo", "c -runtime=c -executor=graph"])
def test_round_trips_through_string_dict_and_pickle(text):
    t = Target(text)
    assert Target(str(t)) == t
    assert Target(t.export()) == t
    assert pickle.loads(pickle.dumps(t)) == t
    assert hash(Target(str(t))) == hash(t)


def test_dict_and_json_forms():
    t = Target({"kind": "llvm", "mcpu": "skylake", "host": "c"})
    assert t.mcpu == "skylake" and t.host == Target("c")
    assert Target('{"kind": "c", "link-params": true}').attrs["link-params"] is True


def test_host_and_canon_target_and_host():
    t = Target("c", host="llvm")
    assert t.host == Target("llvm")
    target, host = Target.canon_target_and_host("c", "llvm")
    assert isinstance(target, Target) and target.host == host == Target("llvm")
    assert Target.canon_target_and_host(None, None) == (None, None)
    targets, host = Target.canon_target_and_host({"cpu": "llvm"}, "c")
    assert targets == [Target("llvm", "c")] and host == Target("c")
    assert Target(t).host == t.host  # copying keeps the host


def test_current_target_context():
    assert Target.current() is None
    with Target("llvm") as outer:
        with Target("c") as inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current() is None
    with pytest.raises(tvm.TVMError, match="no target is set"):
        Target.current(allow_none=False)


def test_micro_host():
    t = tvm.target.target.micro("host")
    assert t.kind.name == "c" and t.model == "host"
    assert str(tvm.target.target.micro("host", "-mcpu=x")) == "c -keys=cpu -mcpu=x -model=host"


@pytest.mark.parametrize("text, match", [
    ("woof", r"unknown target kind 'woof'; known kinds: 'llvm', 'c'"),
    ("llvm -woof=1", r"unknown option -woof; options of 'llvm' are: .*-mcpu"),
    ("llvm -executor=fast", r"-executor must be one of 'graph', 'aot', 'vm', got 'fast'"),
    ("c -interface-api=cpp", r"-interface-api must be one of 'c', 'packed'"),
    ("llvm -num-cores=many", r"-num-cores takes an integer, got 'many'"),
    ("llvm -link-params=maybe", r"-link-params takes a boolean"),
    ("llvm mcpu=x", r"expected an option like -name=value, got 'mcpu=x'"),
    ("llvm -mcpu=a -mcpu=b", r"-mcpu is given twice"),
    ("", r"empty target string"),
])
def test_bad_targets_raise_value_errors(text, match):
    with pytest.raises(ValueError, match=match):
        Target(text)
    with pytest.raises(tvm.TVMError):  # TargetError is both
        Target(text)


def test_bad_target_type():
    with pytest.raises(TargetError, match="expected a target string, dict or Target, got int"):
        Target(3)
    with pytest.raises(TargetError, match="needs a 'kind' entry"):
        Target({"mcpu": "x"})


@pytest.mark.parametrize("kind", ["cuda", "vulkan", "opencl", "rocm", "metal"])
def test_gpu_kinds_parse_but_are_not_buildable(kind):
    t = Target(f"{kind} -max_num_threads=256")
    assert not t.is_cpu and "gpu" in t.keys
    with pytest.raises(tvm.TVMError, match=f"target '{kind}' is not supported; ember compiles "
                       "for CPU targets only"):
        t.check_buildable("relay.build")
    Target("llvm").check_buildable()
    with pytest.raises(tvm.TVMError, match="'cuda' is not supported"):
        Target("llvm", host="cuda").check_buildable()


def test_ember_target_is_lazy_attribute_of_ember():
    assert tvm.target.Target is Target
    assert tvm.target.create("llvm") == Target("llvm")
    assert "cuda" in Target.list_kinds()
