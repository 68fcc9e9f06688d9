"""Tracker messages: JSON objects in TRACKER / TRACKER_REPLY frames (``docs/rpc.md``).

A connection starts with ``{"op": "hello", "version": 1, "role": "server" | "client"}``.
Servers send ``put`` (register as free under a key, with the match key a client must present)
and receive ``assigned`` events; clients send ``request``, ``cancel`` and ``summary`` and get
one reply per request, matched by ``id``.
"""
from __future__ import annotations

import json
from typing import Any

from .. import json_reader
from .protocol import Kind, ProtocolError, kind_name
from .transport import Channel, read_frame, write_frame

TRACKER_VERSION = 1
TRACKER_MAX_FRAME = 1 << 20


def send_message(ch: Channel, message: dict[str, Any], reply: bool = False,
                 timeout: float | None = 10.0) -> None:
    """Send one JSON message (a TRACKER frame, or TRACKER_REPLY with ``reply``)."""
    kind = Kind.TRACKER_REPLY if reply else Kind.TRACKER
    write_frame(ch, kind, 0, [json.dumps(message).encode()], timeout)


def read_message(ch: Channel, timeout: float | None, expect_reply: bool = False
                 ) -> dict[str, Any]:
    """The next JSON message; ProtocolError for another frame kind or a payload that is not a
    JSON object."""
    kind, _, payload = read_frame(ch, TRACKER_MAX_FRAME, timeout, 10.0)
    want = Kind.TRACKER_REPLY if expect_reply else Kind.TRACKER
    if kind != want:
        raise ProtocolError(f"tracker: expected a {kind_name(want)} frame, got {kind_name(kind)}")
    return parse_message(bytes(payload))


def parse_message(payload: bytes) -> dict[str, Any]:
    """A tracker message; ProtocolError unless it is a JSON object (of sane nesting)."""
    try:
        message = json_reader.loads(payload)
    except (ValueError, RecursionError) as err:
        raise ProtocolError(f"tracker: payload is not a JSON object: {err}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"tracker: expected a JSON object, got {type(message).__name__}")
    return message


def field(message: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``message[name]`` checked against ``kind``; ProtocolError naming the field otherwise."""
    value = message.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProtocolError(f"tracker: {message.get('op', 'message')!r} needs field {name!r} of "
                            f"type {getattr(kind, '__name__', kind)}, got {value!r}")
    return value
