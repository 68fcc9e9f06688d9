"""The RPC wire protocol: frame layout, message kinds, limits and the protocol's errors.

Every message is one frame: a 16-byte header, then ``length`` payload bytes (all integers
little-endian; ``docs/rpc.md`` has the layout byte by byte)::

    offset  size  field
    0       4     magic   b"EMBR"
    4       2     kind    message kind (``Kind``)
    6       2     flags   0 (reserved)
    8       4     seq     request number; a reply carries the number of its request
    12      4     length  payload bytes after the header

The layout of the header and of the HELLO payload's first field (the protocol version) never
changes between versions, so any server can read a client's version and refuse it clearly.
"""
from __future__ import annotations

import enum
import struct

from ..errors import RPCError

PROTOCOL_VERSION = 1
MAGIC = b"EMBR"
HEADER = struct.Struct("<4sHHII")  # magic, kind, flags, seq, length
HEADER_SIZE = HEADER.size  # 16
MAX_U32 = 0xFFFF_FFFF

# A server refuses frames longer than this (``Server(max_frame_bytes=...)``); clients split
# array and file transfers into chunks that fit the limit the server announces.
DEFAULT_MAX_FRAME = 64 << 20
MIN_MAX_FRAME = 64 << 10
CLIENT_MAX_FRAME = MAX_U32  # what a client accepts from a server
NONCE_BYTES = 16
CHALLENGE_BYTES = 32
MAC_BYTES = 32
MAX_KEY_BYTES = 4096


class Kind(enum.IntEnum):
    """Message kinds: the ``kind`` field of the frame header."""

    HELLO = 0x0001        # client -> server: version, flags, session timeout, nonce, key
    CHALLENGE = 0x0002    # server -> client: nonce to authenticate against
    AUTH = 0x0003         # client -> server: HMAC over the handshake
    WELCOME = 0x0004      # server -> client: session accepted
    CALL = 0x0010         # call a function by name or handle -> RETURN | ERROR
    GET_FUNC = 0x0011     # look a function up in a module (or the registry) -> RETURN | ERROR
    ARRAY_NEW = 0x0020    # allocate an array on the server -> RETURN (array handle)
    ARRAY_WRITE = 0x0021  # copy bytes into a server array -> RETURN (none)
    ARRAY_READ = 0x0022   # copy bytes out of a server array -> RETURN (bytes)
    UPLOAD = 0x0030       # write (part of) a file into the session directory -> RETURN (none)
    LOAD_MODULE = 0x0031  # load a file of the session directory -> RETURN (module handle)
    FREE = 0x0040         # release handles (no reply)
    CLOSE = 0x0041        # end the session (no reply)
    RETURN = 0x0080       # server -> client: one value
    ERROR = 0x0081        # server -> client: error type, message, remote traceback
    TRACKER = 0x00A0      # tracker request or event (JSON)
    TRACKER_REPLY = 0x00A1  # tracker reply (JSON)


KIND_NAMES = {int(k): k.name for k in Kind}
# Requests the server answers with exactly one RETURN or ERROR frame.
REQUESTS = frozenset({Kind.CALL, Kind.GET_FUNC, Kind.ARRAY_NEW, Kind.ARRAY_WRITE,
                      Kind.ARRAY_READ, Kind.UPLOAD, Kind.LOAD_MODULE})
# HELLO flag bits.
HELLO_HAS_SECRET = 1
# WELCOME flag bits.
WELCOME_AUTHENTICATED = 1
# UPLOAD modes.
UPLOAD_CREATE, UPLOAD_APPEND = 0, 1


def kind_name(kind: int) -> str:
    """``CALL`` for a known kind, ``0x1234`` otherwise (for messages)."""
    return KIND_NAMES.get(kind, f"{kind:#06x}")


class ProtocolError(RPCError):
    """The peer sent bytes that break the protocol (bad magic, version, length, payload);
    the session ends. The message names what was wrong: 'bad frame magic b"GET "'."""


class RPCConnectionError(RPCError):
    """The connection closed or timed out: 'connection to 127.0.0.1:9091 closed by the
    server while waiting for the reply to CALL'."""


class AuthenticationError(RPCError):
    """The shared-secret handshake failed (wrong or missing secret on either side)."""


class RPCPathError(RPCError, ValueError):
    """A file name that would leave the session directory ('../x', '/etc/passwd')."""


def pack_header(kind: int, seq: int, length: int) -> bytes:
    """The 16-byte header of a frame."""
    return HEADER.pack(MAGIC, int(kind), 0, seq & MAX_U32, length)


def unpack_header(data: bytes, limit: int) -> tuple[int, int, int]:
    """``(kind, seq, length)`` of a header; ProtocolError for a bad magic or a length over
    ``limit``."""
    magic, kind, _flags, seq, length = HEADER.unpack(data)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame magic {magic!r} (expected {MAGIC!r}): not an ember RPC "
                            "peer, or the stream lost its framing")
    if length > limit:
        raise ProtocolError(f"{kind_name(kind)} frame of {length} bytes exceeds the limit of "
                            f"{limit} bytes")
    return kind, seq, length
