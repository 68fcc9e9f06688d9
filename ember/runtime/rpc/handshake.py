"""The session handshake: HELLO, then (with a shared secret) CHALLENGE and AUTH, then WELCOME.

Authentication never sends the secret: the server sends a fresh random nonce, the client
answers with ``HMAC-SHA256(secret, "ember-rpc-client\\0" + HELLO payload + nonce)`` and the
server proves it knows the secret too with ``HMAC-SHA256(secret, "ember-rpc-server\\0" +
HELLO payload + nonce)`` in its WELCOME. A client holding a secret refuses a server that does
not authenticate, so a stand-in server cannot downgrade the session.

Each side's half runs under one deadline: every read and write waits only for the time left,
so a peer that sends a byte every few seconds cannot stretch the handshake past it.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import RPCError
from .codec import Reader, Writer, error_payload, read_error
from .protocol import (
    CHALLENGE_BYTES,
    HELLO_HAS_SECRET,
    MAC_BYTES,
    MAX_KEY_BYTES,
    MIN_MAX_FRAME,
    NONCE_BYTES,
    PROTOCOL_VERSION,
    WELCOME_AUTHENTICATED,
    AuthenticationError,
    Kind,
    ProtocolError,
    kind_name,
)
from .remote_errors import make_remote_error, qualified_name
from .transport import Channel, Deadline, read_frame, write_frame

HANDSHAKE_LIMIT = 64 << 10  # no handshake frame is longer
_CLIENT_LABEL = b"ember-rpc-client\0"
_SERVER_LABEL = b"ember-rpc-server\0"


@dataclass(frozen=True)
class Hello:
    """What a client asked for: protocol version, key, session timeout (seconds, 0: none)."""

    version: int
    has_secret: bool
    session_timeout: int
    nonce: bytes
    key: str
    raw: bytes  # the whole payload, covered by the HMACs


@dataclass(frozen=True)
class Welcome:
    """What the server granted: version, largest frame it accepts, whether it authenticated."""

    version: int
    authenticated: bool
    max_frame: int
    server_info: str


def _mac(secret: bytes, label: bytes, hello: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, label + hello + nonce, hashlib.sha256).digest()


def as_secret(secret: str | bytes | None) -> bytes | None:
    """A shared secret as bytes (None or empty: no authentication)."""
    if secret is None:
        return None
    data = secret.encode() if isinstance(secret, str) else bytes(secret)
    return data or None


# ---- HELLO ----------------------------------------------------------------------------------
def hello_payload(key: str, session_timeout: int, has_secret: bool, nonce: bytes) -> bytes:
    w = Writer()
    w.u32(PROTOCOL_VERSION)
    w.u32(HELLO_HAS_SECRET if has_secret else 0)
    w.u32(session_timeout)
    w.raw(nonce)
    w.string(key)
    return w.getvalue()


def parse_hello(payload: memoryview) -> Hello:
    """The HELLO fields; ProtocolError for another protocol version or a malformed payload."""
    r = Reader(payload, "HELLO")
    version = r.u32("protocol version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"the client speaks RPC protocol version {version}; this server "
                            f"speaks version {PROTOCOL_VERSION}")
    flags = r.u32("flags")
    timeout = r.u32("session timeout")
    nonce = bytes(r.take(NONCE_BYTES, "client nonce"))
    key = r.string("key")
    if len(key) > MAX_KEY_BYTES:
        raise ProtocolError(f"HELLO: key of {len(key)} characters (at most {MAX_KEY_BYTES})")
    r.done()
    return Hello(version, bool(flags & HELLO_HAS_SECRET), timeout, nonce, key, bytes(payload))


def _welcome_payload(authenticated: bool, max_frame: int, proof: bytes, info: str) -> bytes:
    w = Writer()
    w.u32(PROTOCOL_VERSION)
    w.u32(WELCOME_AUTHENTICATED if authenticated else 0)
    w.u64(max_frame)
    w.raw(proof)
    w.string(info)
    return w.getvalue()


# ---- server side ----------------------------------------------------------------------------
def send_error(ch: Channel, err: BaseException, seq: int = 0, timeout: float | None = 5.0) -> None:
    """Best effort: tell the peer why the session ends (it may be gone already)."""
    try:
        write_frame(ch, Kind.ERROR, seq, [error_payload(qualified_name(type(err)), str(err))],
                    timeout)
    except RPCError:
        pass


def server_handshake(ch: Channel, check_key: Callable[[str], str | None], secret: bytes | None,
                     max_frame: int, timeout: float, server_info: str,
                     admit: Callable[[Hello], None] | None = None) -> Hello:
    """Run the server's half within ``timeout`` seconds in all; returns the client's HELLO.
    ``check_key(key)`` returns None to accept the key or the reason to refuse it. ``admit``
    runs once the client has proved itself, before WELCOME (the server waits there for a
    session slot; that wait is not part of the deadline). Any failure is sent to the client
    as an ERROR frame, then raised (ProtocolError, AuthenticationError or RPCError)."""
    deadline = Deadline.after(timeout, "the handshake's deadline")
    try:
        kind, _, payload = read_frame(ch, HANDSHAKE_LIMIT, deadline=deadline)
        if kind != Kind.HELLO:
            raise ProtocolError(f"expected a HELLO frame to start the session, got "
                                f"{kind_name(kind)}")
        hello = parse_hello(payload)
        refused = check_key(hello.key)
        if refused:
            raise RPCError(refused)
        proof = bytes(MAC_BYTES)
        if secret is not None:
            proof = _authenticate(ch, hello, secret, deadline)
        if admit is not None:
            admit(hello)
            deadline = Deadline.after(timeout, "the handshake's deadline")
        write_frame(ch, Kind.WELCOME, 0,
                    [_welcome_payload(secret is not None, max_frame, proof, server_info)],
                    deadline.left())
        return hello
    except RPCError as err:
        send_error(ch, err)
        raise


def _authenticate(ch: Channel, hello: Hello, secret: bytes, deadline: Deadline) -> bytes:
    nonce = os.urandom(CHALLENGE_BYTES)
    write_frame(ch, Kind.CHALLENGE, 0, [nonce], deadline.left())
    kind, _, payload = read_frame(ch, HANDSHAKE_LIMIT, deadline=deadline)
    if kind != Kind.AUTH:
        raise ProtocolError(f"expected an AUTH frame after CHALLENGE, got {kind_name(kind)}")
    if len(payload) != MAC_BYTES:
        raise ProtocolError(f"AUTH payload of {len(payload)} bytes (expected {MAC_BYTES})")
    if not hmac.compare_digest(bytes(payload), _mac(secret, _CLIENT_LABEL, hello.raw, nonce)):
        raise AuthenticationError("authentication failed: the client's secret does not match "
                                  "this server's")
    return _mac(secret, _SERVER_LABEL, hello.raw, nonce)


# ---- client side ----------------------------------------------------------------------------
def client_handshake(ch: Channel, key: str, secret: bytes | None, session_timeout: int,
                     timeout: float | None) -> Welcome:
    """Run the client's half within ``timeout`` seconds in all (None: no limit). Raises
    AuthenticationError, ProtocolError, or the error the server sent (an RPCError) when the
    session is refused."""
    deadline = None if timeout is None else Deadline.after(timeout, "the handshake's deadline")
    nonce = os.urandom(NONCE_BYTES)
    hello = hello_payload(key, session_timeout, secret is not None, nonce)
    write_frame(ch, Kind.HELLO, 0, [hello], timeout)
    kind, payload = _next(ch, deadline)
    server_nonce = None
    if kind == Kind.CHALLENGE:
        if secret is None:
            raise AuthenticationError(f"the server at {ch.peer} requires authentication; pass "
                                      "its shared secret (secret=...)")
        if len(payload) != CHALLENGE_BYTES:
            raise ProtocolError(f"CHALLENGE payload of {len(payload)} bytes (expected "
                                f"{CHALLENGE_BYTES})")
        server_nonce = bytes(payload)
        write_frame(ch, Kind.AUTH, 0, [_mac(secret, _CLIENT_LABEL, hello, server_nonce)],
                    None if deadline is None else deadline.left())
        kind, payload = _next(ch, deadline)
    if kind != Kind.WELCOME:
        raise ProtocolError(f"expected WELCOME from {ch.peer}, got {kind_name(kind)}")
    welcome = _parse_welcome(payload)
    _check_server_proof(ch, welcome, secret, hello, server_nonce, payload)
    return welcome


def _next(ch: Channel, deadline: Deadline | None) -> tuple[int, memoryview]:
    kind, _, payload = read_frame(ch, HANDSHAKE_LIMIT, deadline=deadline)
    if kind == Kind.ERROR:
        raise make_remote_error(*read_error(payload), ch.peer)
    return kind, payload


def _parse_welcome(payload: memoryview) -> Welcome:
    r = Reader(payload, "WELCOME")
    version = r.u32("protocol version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"the server speaks RPC protocol version {version}; this client "
                            f"speaks version {PROTOCOL_VERSION}")
    flags = r.u32("flags")
    max_frame = r.u64("max frame bytes")
    if max_frame < MIN_MAX_FRAME:
        raise ProtocolError(f"WELCOME: max frame of {max_frame} bytes is below the minimum "
                            f"{MIN_MAX_FRAME}")
    r.take(MAC_BYTES, "server proof")
    info = r.string("server info")
    r.done()
    return Welcome(version, bool(flags & WELCOME_AUTHENTICATED), max_frame, info)


def _check_server_proof(ch: Channel, welcome: Welcome, secret: bytes | None, hello: bytes,
                        nonce: bytes | None, payload: memoryview) -> None:
    if secret is None:
        return
    if not welcome.authenticated or nonce is None:
        raise AuthenticationError(f"the server at {ch.peer} did not authenticate, but a secret "
                                  "was given: refusing a server that cannot prove it knows it")
    proof = bytes(payload[16:16 + MAC_BYTES])
    if not hmac.compare_digest(proof, _mac(secret, _SERVER_LABEL, hello, nonce)):
        raise AuthenticationError(f"the server at {ch.peer} failed to prove it knows the shared "
                                  "secret")
