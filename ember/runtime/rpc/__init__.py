"""Remote sessions (``ember.rpc``, ``tvm.rpc``): run compiled modules on another machine.

A client connects to a server (``connect``), uploads an exported library, loads it there,
and runs it on the server's devices with arrays copied over and back; ``time_evaluator``
times on the server. ``LocalSession`` serves the same API in-process and ``PopenSession``
through a subprocess's pipes. A ``Tracker`` queues clients for the servers registered under
a key. The wire protocol is written down in ``docs/rpc.md``.

A server runs the code of every library a client uploads: it binds 127.0.0.1 unless told
otherwise, and can require a shared secret (``Server(secret=...)``, ``connect(secret=...)``).
"""
from __future__ import annotations

from ..errors import RPCError
from . import tracker
from .client import ChannelSession, LocalSession, PopenSession, RPCSession, connect
from .protocol import (
    PROTOCOL_VERSION,
    AuthenticationError,
    ProtocolError,
    RPCConnectionError,
    RPCPathError,
)
from .remote import RemoteExecutor, RemoteFunction, RemoteModule, RemoteNDArray
from .server import Server
from .tracker import Tracker, TrackerSession, connect_tracker

__all__ = ["PROTOCOL_VERSION", "AuthenticationError", "ChannelSession", "LocalSession",
           "PopenSession",
           "ProtocolError", "RPCConnectionError", "RPCError", "RPCPathError", "RPCSession",
           "RemoteExecutor", "RemoteFunction", "RemoteModule", "RemoteNDArray", "Server",
           "Tracker", "TrackerSession", "connect", "connect_tracker", "tracker"]
