"""The micro RPC server (ember/crt/rpc) against hostile bytes on its link: garbage, truncated,
oversized and malformed frames are answered with an ERROR frame and end the session, or are
answered with an ERROR reply when the request was well formed; the process never crashes
(exit status 0 or 1, never a signal). The slow run repeats the fuzzing on a build with
AddressSanitizer and UndefinedBehaviorSanitizer."""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from _micro_session import (
    ATOL,
    RTOL,
    TIMEOUTS,
    call_by_name,
    error_text,
    frame,
    hello,
    input_of,
    make_project,
    needs_toolchain,
    python_output,
    run_raw,
    sstr,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember as tvm
from ember.runtime.params import save_param_dict
from ember.runtime.rpc.protocol import Kind

pytestmark = needs_toolchain
PROTOCOL = "ember.runtime.rpc.protocol.ProtocolError"
REPLIES = {Kind.WELCOME, Kind.RETURN, Kind.ERROR}
SANITIZER_ENV = {"ASAN_OPTIONS": "exitcode=86:abort_on_error=0:detect_leaks=1",
                 "UBSAN_OPTIONS": "halt_on_error=1:exitcode=87:print_stacktrace=1"}


def survive(program, data: bytes) -> list[tuple[int, bytes]]:
    """Send ``data``; check that the server ended on its own terms; its reply frames."""
    status, frames, stderr = run_raw(program, data)
    assert status in (0, 1), (status, stderr[-2000:])
    assert "Sanitizer" not in stderr and "runtime error" not in stderr, stderr[-2000:]
    assert all(kind in REPLIES for kind, _ in frames), frames
    return frames


def echo_int(v: int) -> bytes:
    return frame(Kind.CALL, call_by_name("testing.echo", b"\x01" + struct.pack("<q", v)))


OK = echo_int(42)
CPU = struct.pack("<ii", 1, 0)  # a request that must still be answered when the session goes on


@pytest.fixture(scope="module")
def program(host_project):
    return host_project[0].program


@pytest.mark.parametrize("data, message", [
    (b"", "closed the stream before its HELLO"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad frame magic"),
    (b"EMBR\x01\x00", "truncated frame"),
    (frame(Kind.HELLO, b"", length=0x7FFFFFFF), "exceeds the limit of 4194304 bytes"),
    (frame(Kind.HELLO, b"\x01\x00\x00"), "HELLO: payload truncated reading protocol version"),
    (hello(version=2), "the client speaks RPC protocol version 2; this server speaks version 1"),
    (hello(secret=True), "does not support authentication"),
    (frame(Kind.CALL, b"\0"), "expected a HELLO frame"),
])
def test_bad_handshakes_are_refused(program, data, message):
    frames = survive(program, data)
    assert frames[-1][0] == Kind.ERROR and message in error_text(frames[-1][1])[1]


@pytest.mark.parametrize("request_, message", [
    (frame(0x7777), "unexpected frame kind 30583"),
    (frame(Kind.HELLO, b"x"), "unexpected frame kind 1"),
    (frame(Kind.CALL, b"\x00\xff\xff\xff\xff"), "CALL: payload truncated reading function name"),
    (frame(Kind.CALL, b"\x05"), "unknown call target kind"),
    (frame(Kind.CALL, call_by_name("testing.nop", b"\x63")), "unknown value tag"),
    (frame(Kind.CALL, call_by_name("testing.nop", b"\x00") + b"junk"), "4 unexpected bytes"),
    (frame(Kind.CALL, b"\0" + sstr("testing.nop") + struct.pack("<I", 10**6)),
     "more arguments than bytes"),
    (frame(Kind.CALL, call_by_name("testing.nop", b"\x08" + sstr("float32")
                                   + struct.pack("<IqQ", 1, 4, 3) + b"abc")), "does not match"),
    (frame(Kind.ARRAY_NEW, sstr("int8") + struct.pack("<I", 65)), "has ndim 65 (at most 64)"),
    (frame(Kind.ARRAY_NEW, sstr("int8") + struct.pack("<Iq", 1, -1) + bytes(8)),
     "negative dimension"),
    (frame(Kind.FREE, struct.pack("<IQ", 3, 1)), "does not match the payload"),
    (frame(Kind.CALL, b"\x00\x00\x00", length=100), "truncated frame"),
])
def test_malformed_requests_end_the_session(program, request_, message):
    frames = survive(program, hello() + request_ + OK)
    kinds = [k for k, _ in frames]
    assert kinds == [Kind.WELCOME, Kind.ERROR], frames  # OK after it is never answered
    error_type, text = error_text(frames[-1][1])
    assert error_type == PROTOCOL and message in text, text


@pytest.mark.parametrize("request_, error_type, message", [
    (frame(Kind.CALL, call_by_name("no.such")), "GlobalFuncNotFoundError", "no.such"),
    (frame(Kind.CALL, b"\x01" + struct.pack("<QI", 99, 0)), "RPCError",
     "no function with handle 99"),
    (frame(Kind.CALL, call_by_name("testing.echo", b"\x0c" + struct.pack("<I", 0))), "RPCError",
     "lists, maps and ADTs"),
    (frame(Kind.CALL, call_by_name("testing.nop", *[b"\x00"] * 33)), "RPCError", "at most 32"),
    (frame(Kind.ARRAY_NEW, sstr("int8") + struct.pack("<I", 20) + bytes(160) + CPU),
     "RPCError", "at most 16 dimensions"),
    (frame(Kind.ARRAY_NEW, sstr("float32") + struct.pack("<Iqq", 2, 2**20, 2**20) + CPU),
     "MemoryError", "exhausted"),
    (frame(Kind.ARRAY_NEW, sstr("float7") + struct.pack("<I", 0) + bytes(8)), "ArgumentError",
     "unknown dtype 'float7'"),
    (frame(Kind.ARRAY_NEW, sstr("int8") + struct.pack("<Iqii", 1, 4, 2, 0)), "ArgumentError",
     "only the CPU"),
    (frame(Kind.ARRAY_READ, struct.pack("<QQQ", 5, 0, 1)), "RPCError", "no array"),
    (frame(Kind.UPLOAD, b"\0" + sstr("f") + b"data"), "RPCError", "no file system"),
    (frame(Kind.GET_FUNC, struct.pack("<QB", 77, 0) + sstr("run")), "RPCError", "no module"),
])
def test_failed_requests_leave_the_session_open(program, request_, error_type, message):
    frames = survive(program, hello() + request_ + OK)
    assert [k for k, _ in frames] == [Kind.WELCOME, Kind.ERROR, Kind.RETURN], frames
    got_type, text = error_text(frames[1][1])
    assert got_type.endswith(error_type) and message in text, (got_type, text)
    assert frames[2][1] == b"\x01" + struct.pack("<q", 42)


def test_array_bounds_are_checked(program):
    new = frame(Kind.ARRAY_NEW, sstr("int32") + struct.pack("<Iq", 1, 4) + struct.pack("<ii", 1, 0))
    write = frame(Kind.ARRAY_WRITE, struct.pack("<QQ", 1, 12) + b"12345678")
    read_ok = frame(Kind.ARRAY_READ, struct.pack("<QQQ", 1, 0, 16))
    read_past = frame(Kind.ARRAY_READ, struct.pack("<QQQ", 1, 2**64 - 8, 16))
    frames = survive(program, hello() + new + write + read_ok + read_past + OK)
    assert [k for k, _ in frames] == [Kind.WELCOME, Kind.RETURN, Kind.ERROR, Kind.RETURN,
                                      Kind.ERROR, Kind.RETURN]
    assert "out of range for an array of 16 bytes" in error_text(frames[2][1])[1]
    assert frames[3][1] == b"\x05" + struct.pack("<I", 16) + bytes(16)


# ---- fuzzing -------------------------------------------------------------------------------------
_KINDS = [int(k) for k in Kind] + [0, 0x7FFF, 0xFFFF]
_VALID = [
    call_by_name("testing.echo", b"\x04" + sstr("hi")),
    call_by_name("runtime.SystemLib"),
    call_by_name("tvm.graph_executor.create", b"\x04" + sstr('{"nodes": []}'),
                 b"\x0a" + struct.pack("<Q", 1) + sstr("system_lib") + bytes(4),
                 b"\x06" + struct.pack("<ii", 1, 0)),
    call_by_name("testing.nop", b"\x08" + sstr("int8") + struct.pack("<IqQ", 1, 3, 3) + b"abc"),
    sstr("uint8") + struct.pack("<Iqii", 1, 64, 1, 0),
    struct.pack("<QQ", 1, 0) + bytes(32),
    struct.pack("<QQQ", 1, 0, 64),
    struct.pack("<QB", 0, 0) + sstr("runtime.SystemLib"),
    struct.pack("<IQQ", 2, 1, 2),
]


@st.composite
def frames(draw):
    """A frame: a valid request's payload mutated (cut, bytes flipped, junk appended) or
    random bytes, under any kind, with a length field that may lie."""
    kind = draw(st.sampled_from(_KINDS))
    payload = bytearray(draw(st.sampled_from(_VALID)) if draw(st.booleans())
                        else draw(st.binary(max_size=64)))
    if payload and draw(st.booleans()):
        del payload[draw(st.integers(0, len(payload) - 1)):]
    for _ in range(draw(st.integers(0, 3))):
        if payload:
            payload[draw(st.integers(0, len(payload) - 1))] = draw(st.integers(0, 255))
    payload += draw(st.binary(max_size=8))
    length = draw(st.sampled_from([None, None, None, 0, len(payload) + 5, 2**32 - 1]))
    return frame(kind, bytes(payload), seq=draw(st.integers(0, 2**32 - 1)), length=length)


def fuzz_case(program, data: bytes) -> None:
    survive(program, data)


def run_models(project, factories) -> None:
    """Both models of the project in one session, checked against Python (sanitizer run)."""
    with tvm.micro.Session(project.transport(), timeout_override=TIMEOUTS) as sess:
        graph_mod = tvm.micro.create_local_graph_executor(
            factories["mlp"].get_graph_json(), sess.get_system_lib(), sess.device)
        graph_mod.set_input(**factories["mlp"].get_params())
        graph_mod.run(data=input_of("mlp"))
        np.testing.assert_allclose(graph_mod.get_output(0).numpy(),
                                   python_output(factories["mlp"], "mlp", input_of("mlp")),
                                   rtol=RTOL, atol=ATOL)
        aot = sess.create_aot_executor("cnn")
        aot.load_params(save_param_dict(factories["cnn"].get_params()))
        aot.run(image=input_of("cnn"))
        np.testing.assert_allclose(aot.get_output(0).numpy(),
                                   python_output(factories["cnn"], "cnn", input_of("cnn")),
                                   rtol=RTOL, atol=ATOL)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(frames(), max_size=6), st.booleans())
def test_fuzzed_sessions_never_crash_the_server(program, requests, shake_hands):
    fuzz_case(program, (hello() if shake_hands else b"") + b"".join(requests))


@pytest.mark.slow
def test_fuzzed_sessions_under_sanitizers(tmp_path_factory, host_project):
    _, factories = host_project
    project = make_project(tmp_path_factory.mktemp("asan") / "p", list(factories.values()),
                           sanitize=True)
    os.environ.update(SANITIZER_ENV)

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(frames(), max_size=8), st.booleans())
    def fuzz(requests, shake_hands):
        fuzz_case(project.program, (hello() if shake_hands else b"") + b"".join(requests))

    try:
        assert b"__asan_init" in project.program.read_bytes()  # the sanitizers are really in
        fuzz()
        for data in [OK, hello() + OK, hello() + frame(0x7777)]:
            fuzz_case(project.program, data)
        run_models(project, factories)
        log = (project.project_dir / "build" / "micro_host.log").read_text()
        assert "Sanitizer" not in log and "runtime error" not in log, log[-2000:]
    finally:
        for name in SANITIZER_ENV:
            os.environ.pop(name, None)
