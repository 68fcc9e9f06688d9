"""The session API over a loopback server and through LocalSession: remote functions and their
errors, values of every kind, arrays both ways, devices, files and path traversal."""
from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest

import ember
from ember import rpc
from ember.runtime.container import ADT


def test_call_by_name(session):
    assert session.get_function("rpc.test.addone")(41) == 42
    assert session.get_function("rpc.test.addone")(1.5) == 2.5
    assert session.get_function("rpc.test.strcat")("x", 7) == "x:7"
    assert session.get_function("testing.echo")("héllo") == "héllo"


@pytest.mark.parametrize("value", [
    None, True, False, 0, -(1 << 63), (1 << 63) - 1, 3.25, float("inf"), "", "ünï", b"\x00\xff",
    [1, [2.5, ["x"]], []], {"a": 1, "b": [None]}, ember.DataType("float32x4"),
])
def test_values_round_trip(session, value):
    assert session.get_function("testing.echo")(value) == value


def test_tuples_and_numpy_scalars_cross(session):
    echo = session.get_function("rpc.test.echo_all")
    assert echo((1, 2), np.int16(3), np.float32(0.5), np.bool_(True)) == [[1, 2], 3, 0.5, True]


def test_int_out_of_range_is_refused(session):
    with pytest.raises(OverflowError, match="testing.echo: argument 0: int 18446744073709551616"):
        session.get_function("testing.echo")(1 << 64)


def test_local_functions_and_modules_cannot_be_passed(session):
    from ember.runtime.module import PyModule

    with pytest.raises(TypeError, match="local function: a remote session cannot call back"):
        session.get_function("testing.echo")(lambda x: x)
    with pytest.raises(TypeError, match="argument 0: .* is a local module: export it"):
        session.get_function("testing.echo")(PyModule({}))


def test_remote_error_keeps_class_and_message(session):
    with pytest.raises(ValueError, match="boom") as info:
        session.get_function("rpc.test.except")("boom")
    assert str(info.value) == "boom" and isinstance(info.value, rpc.RPCError)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised on the RPC server" in notes and "in _raise" in notes  # the remote traceback
    assert session.get_function("rpc.test.addone")(1) == 2  # the session goes on


def test_unknown_function_names_near_misses(session):
    with pytest.raises(ValueError, match="no global function named 'rpc.test.addon'.*addone"):
        session.get_function("rpc.test.addon")


def test_returned_function_is_callable(session):
    add5 = session.get_function("rpc.test.add_to_lhs")(5)
    assert add5(3) == 8
    assert add5(-5) == 0


def test_returned_device_is_remote(session):
    dev = session.cpu(0)
    back = session.get_function("testing.echo")(dev)
    assert back == dev and str(back).startswith("remote[")
    assert session.get_function("testing.echo")(ember.cpu(0)) == dev  # the server's CPU


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint16", "int64",
                                   "bool"])
@pytest.mark.parametrize("shape", [(2, 3), (0, 4), (), (5,)])
def test_array_round_trip(session, dtype, shape):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal(shape) * 10).astype(dtype)
    arr = ember.nd.array(data, device=session.cpu(0))
    assert arr.shape == shape and arr.dtype == dtype
    assert str(arr.device).startswith("remote")
    np.testing.assert_array_equal(arr.numpy(), data)


def test_vector_dtype_round_trip(session):
    data = np.arange(8, dtype="float32").reshape(2, 4)
    arr = ember.nd.array(data, device=session.cpu(0), dtype="float32x4")
    assert arr.shape == (2,)
    np.testing.assert_array_equal(arr.numpy(), data)


def test_empty_copyfrom_copyto(session):
    dev = session.cpu(0)
    arr = ember.nd.empty((2, 2), "int32", dev)
    arr.copyfrom([[1, 2], [3, 4]])
    local = arr.copyto(ember.cpu(0))
    assert isinstance(local, ember.nd.NDArray)
    np.testing.assert_array_equal(local.numpy(), [[1, 2], [3, 4]])
    twin = arr.copyto(dev)  # a copy on the server
    arr[:] = 7
    np.testing.assert_array_equal(twin.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(arr.numpy(), np.full((2, 2), 7))
    back = ember.nd.array(np.zeros((2, 2), "int32"))
    back.copyfrom(twin)
    np.testing.assert_array_equal(back.numpy(), [[1, 2], [3, 4]])
    local.copyto(arr)
    np.testing.assert_array_equal(arr.numpy(), [[1, 2], [3, 4]])


def test_array_arguments_and_results(session):
    dev = session.cpu(0)
    remote = ember.nd.array(np.ones((3, 4), "float32"), device=dev)
    assert session.get_function("rpc.test.array_sum")(remote) == 12.0
    assert session.get_function("rpc.test.array_sum")(np.full(4, 2.0)) == 8.0  # by value
    out = session.get_function("rpc.test.array_add_one")(remote)
    assert out.device == dev
    np.testing.assert_array_equal(out.numpy(), np.full((3, 4), 2.0, "float32"))


def test_array_errors(session):
    arr = ember.nd.empty((2, 3), "float32", session.cpu(0))
    with pytest.raises(ValueError, match=r"shape mismatch: array has shape \(2, 3\), source has "
                                         r"shape \(3, 2\)"):
        arr.copyfrom(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="cannot be pickled"):
        import pickle

        pickle.dumps(arr)
    with pytest.raises(ember.TVMError, match="device of an RPC session"):
        ember.cpu(0).__class__(session.cpu(0).device_type, 0).check_supported()


def test_objects_of_another_session_are_refused(session):
    with rpc.LocalSession() as other:
        foreign = ember.nd.array(np.zeros(2), device=other.cpu(0))
        with pytest.raises(TypeError, match="belongs to another RPC session"):
            session.get_function("testing.echo")(foreign)
        with pytest.raises(TypeError, match="belongs to another RPC session"):
            session.get_function("testing.echo")(other.cpu(0))


def test_handles_are_freed(session):
    with rpc.LocalSession() as local:
        before = len(local._server.handles)
        for _ in range(20):
            ember.nd.array(np.zeros(3), device=local.cpu(0))
        local.get_function("testing.nop")()
        assert len(local._server.handles) <= before + 2  # the nop function's handle and one


def test_files(session, tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"\x01\x02" * 1000)
    session.upload(str(path))
    session.upload(b"hello", target="sub/dir/h.txt")
    assert session.listdir(".") == ["data.bin", "sub"]
    assert session.download("sub/dir/h.txt") == b"hello"
    assert session.download("data.bin") == path.read_bytes()
    session.remove("sub")
    assert session.listdir() == ["data.bin"]
    with pytest.raises(FileNotFoundError, match="download: no file 'sub/dir/h.txt'"):
        session.download("sub/dir/h.txt")
    with pytest.raises(ValueError, match="give target="):
        session.upload(b"x")


@pytest.mark.parametrize("name", ["../escape.txt", "a/../../escape.txt", "/tmp/escape.txt",
                                  "..\\escape.txt", "", "a\0b"])
def test_path_traversal_is_refused(session, tmp_path, name):
    for action in (lambda: session.upload(b"x", target=name), lambda: session.download(name),
                   lambda: session.remove(name), lambda: session.load_module(name)):
        with pytest.raises(rpc.RPCPathError):
            action()
    assert not os.path.exists("/tmp/escape.txt") or name != "/tmp/escape.txt"


def test_path_error_names_the_operation(session):
    with pytest.raises(ValueError, match=r"upload: '../x' leaves the session directory"):
        session.upload(b"x", target="../x")


def test_load_module_of_a_missing_file(session):
    with pytest.raises(ember.error.ArtifactError, match="no such file"):
        session.load_module("missing.so")


def test_closed_session(server):
    sess = rpc.connect(server.host, server.port, timeout=30)
    dev = sess.cpu(0)
    sess.close()
    with pytest.raises(rpc.RPCError, match="is closed"):
        sess.get_function("testing.echo")
    del sess
    import gc

    gc.collect()
    with pytest.raises(ember.TVMError, match="RPC session is closed"):
        ember.nd.empty((1,), "float32", dev)


def test_adt_results_cross(session):
    tup = session.get_function("testing.echo")(ADT(0, [1, "a"]))
    assert isinstance(tup, ADT) and tup.tag == 0 and list(tup.fields) == [1, "a"]


def test_session_directory_is_removed_at_the_end(session):
    workdir = session.get_function("tvm.rpc.server.workpath")(".")
    session.upload(b"x", target="f.bin")
    assert os.path.isfile(os.path.join(workdir, "f.bin"))  # the server runs on this machine
    session.close()
    deadline = time.monotonic() + 10
    while os.path.exists(workdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(workdir)


def test_enable_logging(server, caplog):
    with (caplog.at_level(logging.INFO, logger="ember.rpc.client"),
          rpc.connect(server.host, server.port, enable_logging=True, timeout=30) as sess):
        sess.get_function("testing.echo")(1)
    assert any("call of testing.echo" in r.getMessage() for r in caplog.records)


def test_lazy_top_level_name():
    import ember as tvm

    assert tvm.rpc.LocalSession is rpc.LocalSession


def test_channel_session_over_any_channel_bounds_its_handshake():
    """ChannelSession runs a session over any Channel (ember.micro uses one over a micro
    transport); a peer that never answers fails the handshake within handshake_timeout."""
    from ember.runtime.rpc.protocol import RPCConnectionError
    from ember.runtime.rpc.transport import PipeChannel

    to_peer_r, to_peer_w = os.pipe()
    from_peer_r, from_peer_w = os.pipe()
    try:
        start = time.monotonic()
        with pytest.raises(RPCConnectionError, match=r"timed out after 0.3 s"):
            rpc.ChannelSession(PipeChannel(from_peer_r, to_peer_w, "silent peer"),
                               timeout=None, handshake_timeout=0.3)
        assert time.monotonic() - start < 10
        assert os.read(to_peer_r, 4) == b"EMBR"  # the HELLO went out
    finally:
        for fd in (to_peer_r, from_peer_w):
            os.close(fd)
