"""Host micro sessions that go wrong: errors of the device's functions come back as the
Python classes they map to and leave the session usable; a device that is killed or hangs
fails the waiting call within the timeout and is reaped; projects refuse bad options, models
and directories with messages that say what to do."""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from _micro_session import TIMEOUTS, build, input_of, needs_toolchain

import ember as tvm
from ember import rpc
from ember.micro import IoTimeoutError, MicroSessionError, ProjectError, SessionTerminatedError
from ember.micro.transport import TransportChannel, TransportTimeouts
from ember.runtime.errors import ArgumentError, ArgumentIndexError, ArtifactError, TVMError

pytestmark = needs_toolchain


@pytest.fixture
def session(host_project):
    project, factories = host_project
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        yield sess, factories


def test_device_errors_come_back_and_the_session_goes_on(session):
    sess, factories = session
    graph_mod = tvm.micro.create_local_graph_executor(factories["mlp"].get_graph_json(),
                                                      sess.get_system_lib(), sess.device)
    with pytest.raises(ValueError, match=r"set_input: no input named 'nope' \(this model has"):
        graph_mod.set_input("nope", np.zeros((1, 20), "float32"))
    with pytest.raises(ArgumentError, match=r"expected float32\[1, 20\], got float32\[1, 21\]"):
        graph_mod.set_input("data", np.zeros((1, 21), "float32"))
    with pytest.raises(ArgumentIndexError, match=r"get_output: output index 4 out of range"):
        graph_mod.get_output(4)
    with pytest.raises(AttributeError, match="has no function named 'nope'"):
        graph_mod.module.get_function("nope")
    with pytest.raises(ValueError, match="has no function named 'no.such.function'"):
        sess._rpc.get_function("no.such.function")
    with pytest.raises(rpc.RPCError, match="no file system"):
        sess._rpc.upload(b"abc", "x.bin")
    with pytest.raises(TVMError, match=r"no AOT model named 'nope'"):
        sess.create_aot_executor("nope")
    with pytest.raises(ArtifactError, match="graph json"):
        tvm.micro.create_local_graph_executor("{\"nodes\": [", sess.get_system_lib(),
                                              sess.device)
    with pytest.raises(MemoryError, match="exhausted"):
        tvm.nd.empty((1 << 40,), "float32", sess.device)
    graph_mod.set_input(**factories["mlp"].get_params())  # still usable
    graph_mod.run(data=input_of("mlp"))
    assert graph_mod.get_output(0).numpy().shape == (1, 10)


def test_aot_executor_refuses_the_c_interface(session):
    sess, _ = session
    with pytest.raises(TVMError, match=r"interface-api=c.*build it with interface-api=packed"):
        sess.create_aot_executor("mlpc")


def test_aot_run_refuses_unset_constants(session):
    sess, _ = session
    aot = sess.create_aot_executor("cnn")
    aot.set_input("image", input_of("cnn"))
    with pytest.raises(TVMError, match=r"run: constant '.*' has not been set; call load_params"):
        aot.run()


def test_authentication_and_key_are_refused_clearly(host_project):
    project, _ = host_project
    for kwargs, error, message in [({"secret": "s3cret"}, rpc.AuthenticationError,
                                     "does not support authentication"),
                                    ({"key": "board-7"}, rpc.RPCError, "does not match")]:
        with project.transport() as transport:
            channel = TransportChannel(transport, "test device")
            with pytest.raises(error, match=message):
                rpc.ChannelSession(channel, timeout=20.0, **kwargs)


def test_a_killed_device_fails_the_call_within_the_timeout(host_project):
    project, factories = host_project
    project.flash()
    device = project._device
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        graph_mod = tvm.micro.create_local_graph_executor(
            factories["mlp"].get_graph_json(), sess.get_system_lib(), sess.device)
        os.kill(device.pid, signal.SIGKILL)
        with pytest.raises(SessionTerminatedError, match=r"killed by SIGKILL") as info:
            graph_mod.run()
        assert isinstance(info.value, rpc.RPCError) and isinstance(info.value, MicroSessionError)
        with pytest.raises(rpc.RPCError, match="closed"):
            graph_mod.run()
    assert device.proc.returncode == -signal.SIGKILL  # reaped


def test_a_hung_device_times_out_and_is_reaped(host_project):
    project, _ = host_project
    short = TransportTimeouts(0.0, 20.0, 1.0)
    sess = tvm.micro.Session(project.transport(), timeout_override=short)
    with sess:
        device = sess.transport.device
        lib = sess.get_system_lib()
        os.kill(device.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(IoTimeoutError, match=r"sent nothing for 1 s"):
            lib.get_function("tvmgen_mlp_fused_nn_dense_add_nn_relu", query_imports=True)
        assert time.monotonic() - start < 15  # bounded by the timeout, not the test's patience
    assert device.proc.returncode == -signal.SIGKILL


def test_a_closed_session_ends_the_process_cleanly(host_project):
    project, _ = host_project
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        device = sess.transport.device
        assert sess.get_system_lib() is not None
    assert device.proc.returncode == 0  # CLOSE: the server released everything and exited
    with pytest.raises(MicroSessionError, match="not open"):
        sess.get_system_lib()


def test_session_needs_a_transport():
    with pytest.raises(MicroSessionError, match="transport_context_manager"):
        tvm.micro.Session()


# ---- projects -----------------------------------------------------------------------------------
def _template() -> str:
    crt = tvm.micro.get_standalone_crt_dir()
    assert tvm.micro.get_microtvm_template_projects("crt") == crt + "/template"
    return crt + "/template/host"  # the path TVM's newer API gives


def test_project_options_are_checked(tmp_path):
    factory = build("mlp", "graph")
    with pytest.raises(ProjectError, match=r"unknown project option 'verbosity'; the options "
                       r"are .*verbose"):
        tvm.micro.generate_project(_template(), factory, tmp_path / "a", {"verbosity": True})
    with pytest.raises(ProjectError, match="'max_frame_bytes' must be a int"):
        tvm.micro.generate_project(_template(), factory, tmp_path / "b", {"max_frame_bytes": "1"})
    with pytest.raises(ProjectError, match="at least 65536"):
        tvm.micro.generate_project(_template(), factory, tmp_path / "c", {"max_frame_bytes": 100})
    with pytest.raises(ProjectError, match="platform 'zephyr' is not supported"):
        tvm.micro.get_microtvm_template_projects("zephyr")
    with pytest.raises(ProjectError, match="is not a micro template project"):
        tvm.micro.generate_project(str(tmp_path), factory, tmp_path / "d")


def test_project_refuses_models_and_directories_it_cannot_use(tmp_path):
    from ember.relay.backend import Runtime

    mod, params = __import__("_micro_models").mlp_model()
    cpp = tvm.relay.build(mod, target="c", params=params, runtime=Runtime("cpp"))
    with pytest.raises(ProjectError, match=r"no C runtime function table "
                       r"\(tvmgen_default_func_registry\); build it with target 'c' and "
                       r"runtime=Runtime\('crt'"):
        tvm.micro.generate_project(_template(), cpp, tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    with pytest.raises(ProjectError, match="already exists and is not an empty directory"):
        tvm.micro.generate_project(_template(), build("mlp", "graph"), tmp_path / "b")
    with pytest.raises(ProjectError, match="is not a Model Library Format file"):
        tvm.micro.generate_project(_template(), str(tmp_path / "missing.tar"), tmp_path / "c")


def test_project_from_a_model_library_format_file(tmp_path):
    factory = build("mlp", "graph", "net")
    mlf = tvm.micro.export_model_library_format(factory, tmp_path / "net.tar")
    project = tvm.micro.generate_project(_template(), str(mlf), tmp_path / "p")
    registries = (project.project_dir / "src" / "model_registries.c").read_text()
    assert "&tvmgen_net_func_registry," in registries
    assert (project.project_dir / "model" / "runtime" / "rpc" / "rpc_server.c").is_file()
    assert not (project.project_dir / "model" / "runtime" / "template").exists()
    with pytest.raises(ProjectError, match=r"micro_host does not exist; call build\(\) first"):
        project.flash()
    again = tvm.micro.GeneratedProject.from_directory(project.project_dir)
    assert again.options == project.options


def test_build_failure_shows_the_command_and_the_compiler_output(tmp_path):
    from ember.runtime.errors import CompileError

    project = tvm.micro.generate_project(_template(), build("mlp", "graph"), tmp_path / "p")
    (project.project_dir / "main.c").write_text("int main(void) { return undefined_name; }\n")
    with pytest.raises(CompileError, match=r"(?s)command: make .*undefined_name"):
        project.build()


def test_a_flashed_device_ends_with_the_interpreter(host_project):
    """A script that flashes and exits without closing anything leaves no process behind."""
    import subprocess
    import sys

    project, _ = host_project
    script = ("import sys, ember.micro as m\n"
              "p = m.GeneratedProject.from_directory(sys.argv[1])\n"
              "p.flash()\n"
              "print(p._device.pid, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", script, str(project.project_dir)],
                         capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and reaped: not even a zombie is left
