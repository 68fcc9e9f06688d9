"""Import paths, the command lines, server options (port search, frame limit and chunked
transfers, load_library, key), the non-loopback warning, PopenSession, and the layering rule
that the RPC runtime loads no compiler module."""
from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
from _rpc_util import start_server, wait_for_log

import ember
from ember import rpc
from ember.runtime.rpc.launch import exposure_warning, is_loopback
from ember.runtime.rpc.serve import bind_listener
from ember.runtime.rpc.server import main as server_main
from ember.runtime.rpc.tracker import main as tracker_main
from ember.testing import requires_llvm, requires_rpc


def test_import_paths():
    import ember.rpc
    from ember.rpc import tracker

    assert ember.rpc.tracker.Tracker is tracker.Tracker is ember.runtime.rpc.tracker.Tracker
    assert ember.rpc.Server is ember.runtime.rpc.Server
    assert ember.rpc.connect is ember.rpc.client.connect
    assert ember.error.RPCError is rpc.RPCError
    assert requires_rpc.enabled


def test_rpc_loads_no_compiler():
    code = ("import sys, ember.rpc as rpc\n"
            "s = rpc.LocalSession(); s.get_function('testing.echo')(1); s.close()\n"
            "bad = [m for m in sys.modules if m.startswith(('ember.relay', 'ember.ir', "
            "'ember.te', 'ember.tir', 'ember.topi', 'ember.parser', 'ember.contrib'))]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("main", [server_main, tracker_main])
def test_command_line_help(main, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "--port" in out and "--host" in out


def test_command_line_errors(capsys):
    assert server_main(["--max-frame-bytes", "10"]) == 1
    assert capsys.readouterr().out == ("ember-rpc-server error: --max-frame-bytes 10: at least "
                                       "65536\n")
    assert server_main(["--tracker", "nowhere"]) == 1
    assert "--tracker 'nowhere': expected HOST:PORT" in capsys.readouterr().out


def test_no_free_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(rpc.RPCError, match=rf"no free port in \[{port}, {port + 1}\)"):
            bind_listener("127.0.0.1", port, port + 1)


def test_missing_load_library(tmp_path):
    with pytest.raises(rpc.RPCError, match="--load-library .*nope.so"):
        rpc.Server(port=0, load_library=str(tmp_path / "nope.so"), silent=True)


@requires_llvm
def test_load_library(tmp_path):
    from ember.contrib import cc

    src = tmp_path / "extra.c"
    src.write_text("int ember_rpc_test_extra(void) { return 7; }\n")
    lib = tmp_path / "libextra.so"
    cc.create_shared(str(lib), [str(src)])
    srv = start_server(tmp_path, load_library=[str(lib)])
    try:
        with rpc.connect(srv.host, srv.port, timeout=20) as sess:
            assert sess.get_function("rpc.test.addone")(1) == 2
    finally:
        srv.terminate()


def test_exposure_warning():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    assert exposure_warning("RPC server", "127.0.0.1", 1, "risk") is None
    banner = exposure_warning("RPC server", "0.0.0.0", 9091, "Anyone can run code.")
    assert banner is not None and "WARNING" in banner and "0.0.0.0:9091" in banner


def test_keyed_server(tmp_path):
    srv = start_server(tmp_path, key="rasp")
    try:
        with rpc.connect(srv.host, srv.port, key="rasp", timeout=20) as sess:
            assert sess.get_function("testing.echo")("k") == "k"
        with pytest.raises(rpc.RPCError, match="key '' does not match"):
            rpc.connect(srv.host, srv.port, timeout=20)
        wait_for_log(srv, "refused: key ''")
    finally:
        srv.terminate()


def test_small_frames_split_transfers(tmp_path):
    srv = start_server(tmp_path, max_frame_bytes=1 << 16)
    try:
        with rpc.connect(srv.host, srv.port, timeout=30) as sess:
            assert sess.max_frame == 1 << 16
            data = np.random.default_rng(0).standard_normal(100_000).astype("float32")
            arr = ember.nd.array(data, device=sess.cpu(0))  # 400 kB in 64 kB frames
            np.testing.assert_array_equal(arr.numpy(), data)
            assert sess.get_function("rpc.test.array_sum")(data) == pytest.approx(
                float(data.sum()), rel=1e-4)  # too large to go inline: uploaded first
            blob = bytes(range(256)) * 1000
            sess.upload(blob, target="big.bin")
            assert sess.download("big.bin") == blob
    finally:
        srv.terminate()


def test_popen_session():
    with rpc.PopenSession(timeout=30) as sess:
        assert sess.peer.startswith("pipe to python")
        dev = sess.cpu(0)
        arr = ember.nd.array(np.arange(5, dtype="int32"), device=dev)
        np.testing.assert_array_equal(arr.numpy(), np.arange(5))
        with pytest.raises(ValueError, match="nope"):
            sess.get_function("rpc.test.except")("nope")
        assert sess.get_function("testing.echo")("after") == "after"


def test_a_forgotten_server_ends_with_its_script():
    code = ("from ember import rpc\n"
            "srv = rpc.Server(port=0, silent=True)\n"
            "print(srv.port, flush=True)\n")  # exits without terminate()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    with pytest.raises(rpc.RPCConnectionError, match="cannot connect"):
        rpc.connect("127.0.0.1", int(out.stdout), timeout=5, connect_timeout=5)
