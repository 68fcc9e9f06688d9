"""Host micro sessions: models run by the C runtime's graph and AOT executors inside the
device process, driven over its pipes by ember's RPC protocol (ember.micro.Session), compared
with the Python executors (float32, rtol = atol = 1e-5: the same C kernels)."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from _micro_session import (
    ATOL,
    RTOL,
    TIMEOUTS,
    build,
    input_name,
    input_of,
    make_project,
    needs_toolchain,
    python_output,
)

import ember as tvm
from ember.contrib import graph_executor
from ember.runtime.params import save_param_dict

pytestmark = needs_toolchain


def test_graph_executor_runs_in_the_device(host_project):
    project, factories = host_project
    factory, data = factories["mlp"], input_of("mlp")
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        graph_mod = tvm.micro.create_local_graph_executor(factory.get_graph_json(),
                                                          sess.get_system_lib(), sess.device)
        assert isinstance(graph_mod, graph_executor.GraphModule)
        assert str(graph_mod.get_output(0).device).startswith("remote")
        graph_mod.set_input(**factory.get_params())
        graph_mod.set_input("data", data)
        graph_mod.run()
        out = graph_mod.get_output(0).numpy()
        assert graph_mod.get_num_outputs() == 1 and graph_mod.get_input_index("data") >= 0
    np.testing.assert_allclose(out, python_output(factory, "mlp", data), rtol=RTOL, atol=ATOL)


def test_aot_executor_runs_in_the_device(host_project):
    project, factories = host_project
    factory = factories["cnn"]
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        aot = tvm.runtime.executor.AotModule(sess._rpc.get_function("tvm.aot_executor.create")(
            sess.get_system_lib(), sess.device, "cnn"))
        assert aot.get_input_index("image") == 0 and aot.get_input_name(0) == "image"
        assert aot.get_num_inputs() == 1 and aot.get_num_outputs() == 1
        assert '"module_name":"cnn"' in aot["get_model_metadata"]().replace(" ", "")
        aot.load_params(save_param_dict(factory.get_params()))
        for seed in (0, 1):  # the Relay-era way in: fill the input's view
            data = input_of("cnn", seed)
            aot.get_input("image").copyfrom(data)
            aot.run()
            np.testing.assert_allclose(aot.get_output(0).numpy(),
                                       python_output(factory, "cnn", data), rtol=RTOL, atol=ATOL)


def test_session_frees_the_device_arena(host_project):
    """Executors, views and arrays the client drops are released on the device: the arena is
    empty again (blocks freed in LIFO order whatever order the client drops them in)."""
    project, factories = host_project
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        before = sess.workspace_stats()
        graph_mod = tvm.micro.create_local_graph_executor(
            factories["mlp"].get_graph_json(), sess.get_system_lib(), sess.device)
        aot = sess.create_aot_executor("cnn")
        big = tvm.nd.array(np.arange(50000, dtype="float32"), device=sess.device)
        out = graph_mod.get_output(0)
        during = sess.workspace_stats()
        assert during["used"] > before["used"] and during["live"] > before["live"]
        del graph_mod  # the oldest first: its memory waits for the newer blocks
        gc.collect()
        np.testing.assert_array_equal(big.numpy(), np.arange(50000, dtype="float32"))
        assert out.shape == (1, 10)
        del aot, big, out
        gc.collect()
        after = sess.workspace_stats()
        assert after["used"] == before["used"] and after["live"] == before["live"]


def test_arrays_cross_the_link_in_chunks(host_project):
    """An array larger than a frame goes over in several ARRAY_WRITE / ARRAY_READ frames."""
    project, _ = host_project
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        sess._rpc._chunk = 4096  # as with a small device's frame limit
        host = np.random.default_rng(5).integers(-100, 100, (37, 129)).astype("int16")
        remote = tvm.nd.array(host, device=sess.device)
        np.testing.assert_array_equal(remote.numpy(), host)
        copy = tvm.nd.empty(host.shape, "int16", sess.device)
        copy.copyfrom(remote)  # on the device (ember.rpc.array_copy)
        np.testing.assert_array_equal(copy.numpy(), host)


def test_values_cross_the_link(host_project):
    project, _ = host_project
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        echo = sess._rpc.get_function("testing.echo")
        for value in (None, 7, -2**63, 2.5, True, "ümlaut", b"\0raw\xff",
                      tvm.runtime.DataType("int8x4")):
            assert echo(value) == value
        dev = echo(sess.device)
        assert (dev.device_type, dev.device_id) == (sess.device.device_type, 0)


def test_relay_era_single_factory_flow(tmp_path):
    """generate_project from the 'crt' directory itself, flash, transport, one model."""
    factory = build("mlp", "graph")
    project = tvm.micro.generate_project(str(tvm.micro.get_microtvm_template_projects("crt")),
                                         factory, tmp_path / "proj", {"verbose": False})
    project.build()
    project.flash()
    data = input_of("mlp", 3)
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        graph_mod = tvm.micro.session.create_local_graph_executor(
            factory.get_graph_json(), sess.get_system_lib(), sess.device)
        graph_mod.set_input(**factory.get_params())
        graph_mod.run(data=data)
        out = graph_mod.get_output(0).numpy()
    np.testing.assert_allclose(out, python_output(factory, "mlp", data), rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("model, executor, options", [
    ("mlp", "aot", {}), ("cnn", "graph", {}), ("cnn", "aot", {"link-params": True}),
    ("mlp", "aot", {"interface-api": "packed", "link-params": True})])
def test_each_model_in_its_own_project(model, executor, options, tmp_path):
    factory = build(model, executor, **options)
    project = make_project(tmp_path / "proj", factory)
    data = input_of(model, 7)
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        if executor == "graph":
            mod = tvm.micro.create_local_graph_executor(factory.get_graph_json(),
                                                        sess.get_system_lib(), sess.device)
            mod.set_input(**factory.get_params())
        else:
            mod = sess.create_aot_executor()
            if factory.get_params():
                mod.load_params(save_param_dict(factory.get_params()))
        mod.set_input(input_name(model), data)
        mod.run()
        out = mod.get_output(0).numpy()
    np.testing.assert_allclose(out, python_output(factory, model, data), rtol=RTOL, atol=ATOL)
