"""Devices of every kind are values (compare, hash, print, pickle, cross the FFI); only
allocating memory or running code on a device ember has no backend for is refused."""
from __future__ import annotations

import pickle

import pytest

import ember as tvm


@pytest.mark.parametrize("make, text, dev_type", [
    (tvm.cuda, "cuda", 2), (tvm.gpu, "cuda", 2), (tvm.opencl, "opencl", 4),
    (tvm.cl, "opencl", 4), (tvm.vulkan, "vulkan", 7), (tvm.metal, "metal", 8),
    (tvm.mtl, "metal", 8), (tvm.vpi, "vpi", 9), (tvm.rocm, "rocm", 10),
    (tvm.ext_dev, "ext_dev", 12), (tvm.webgpu, "webgpu", 15), (tvm.hexagon, "hexagon", 16)])
def test_device_constructors(make, text, dev_type):
    dev = make(3)
    assert (dev.device_type, dev.device_id, str(dev)) == (dev_type, 3, f"{text}(3)")
    assert dev == tvm.device(text, 3) and hash(dev) == hash(tvm.device(dev_type, 3))
    assert dev != tvm.cpu(3) and not dev.exist
    assert pickle.loads(pickle.dumps(dev)) == dev


def test_devices_cross_the_ffi():
    x = tvm.opencl(10)
    assert tvm.testing.device_test(x, x.device_type, x.device_id) == tvm.opencl(10)
    assert tvm.testing.echo(tvm.cuda(7)) == tvm.cuda(7)

    def test_device_func(dev):
        assert tvm.cuda(7) == dev
        return tvm.cpu(0)

    assert tvm.runtime.convert(test_device_func)(tvm.cuda(7)) == tvm.cpu(0)


def test_device_test_checks_type_and_id():
    with pytest.raises(ValueError, match=r"testing.device_test: .*cuda\(7\).*device_type 4"):
        tvm.testing.device_test(tvm.cuda(7), 4, 7)


def test_relay_era_type_tables():
    assert tvm.runtime.Device.STR2MASK["cuda"] == 2 and tvm.runtime.Device.MASK2STR[4] == "opencl"


def test_gpu_properties_none_on_cpu_and_explained_elsewhere():
    assert tvm.cpu(0).compute_version is None and tvm.cpu(0).max_threads_per_block is None
    with pytest.raises(tvm.TVMError, match=r"cuda\(0\): cannot read compute_version: ember "
                                           r"has no cuda backend.*exist is False"):
        tvm.cuda(0).compute_version  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_property"):
        tvm.cuda(0).no_such_property  # noqa: B018


def test_memory_and_code_on_a_gpu_are_refused():
    with pytest.raises(tvm.TVMError, match=r"cuda\(0\) is not supported: ember runs on the CPU"):
        tvm.nd.empty((2,), "float32", tvm.cuda(0))
    from ember import relay

    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x + x))
    with pytest.raises(tvm.TVMError, match=r"cuda\(0\)"):
        relay.create_executor("graph", mod=mod, device=tvm.cuda(0), target="llvm")


def test_runtime_enabled_and_num_threads():
    assert tvm.runtime.enabled("cpu") and not tvm.runtime.enabled("cuda")
    assert not tvm.runtime.enabled("gpu") and not tvm.runtime.enabled("opencl")
    assert tvm.runtime.enabled("llvm") == (tvm.testing.find_c_compiler() is not None)
    with pytest.raises(ValueError, match="enabled: unknown target 'tpu'"):
        tvm.runtime.enabled("tpu")
    assert isinstance(tvm.runtime.num_threads(), int) and tvm.runtime.num_threads() >= 1
    assert tvm.container.Map is tvm.runtime.container.Map
