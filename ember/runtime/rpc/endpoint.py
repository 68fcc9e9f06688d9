"""The server's side of one session: a table of handles, the session's files and functions,
and one handler per request kind.

``ServerSession.handle(kind, payload)`` answers a frame with ``(reply kind, payload parts)``
(None for FREE and CLOSE). A payload that breaks the protocol raises ProtocolError, which ends
the session; an error while serving a well-formed request (a function that raises, an unknown
handle, a bad file name) becomes an ERROR reply and the session goes on. ``serve`` runs the
frame loop over a channel; the same ServerSession also answers a LocalSession in-process.
"""
from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from ..device import Device
from ..errors import RPCError
from ..loaders import load_module
from ..module import Module
from ..ndarray import NDArray, array, empty
from ..packed_func import PackedFunc, as_packed_func
from ..registry import get_global_func
from . import builtins, testing  # noqa: F401  (register the server-side global functions)
from .codec import (
    MODULE_EXECUTOR,
    Reader,
    Side,
    Tag,
    Writer,
    byte_view,
    decode_values,
    encode_value,
    error_payload,
)
from .files import SessionFiles
from .handshake import send_error
from .protocol import (
    UPLOAD_APPEND,
    UPLOAD_CREATE,
    Kind,
    ProtocolError,
    RPCConnectionError,
    kind_name,
)
from .remote_errors import qualified_name
from .slots import RequestWaiter, SlotLink
from .transport import Channel, read_frame, write_frame

log = logging.getLogger("ember.rpc.server")
Reply = tuple[int, list[Any]]
_EXECUTOR_FUNCS = ("set_input", "run", "get_output", "get_num_outputs")


class SessionClosed(Exception):
    """The client ended the session with CLOSE."""


class ServerSession(Side):
    """One session's state: the objects handed to the client by handle, its directory, and
    the functions bound to it (``tvm.rpc.server.upload``...)."""

    def __init__(self, workdir: str, extra_functions: dict[str, Callable[..., Any]] | None = None
                 ) -> None:
        self.files = SessionFiles(workdir)
        self.handles: dict[int, Any] = {}
        self._next = 1
        self.functions = {name: as_packed_func(f, name)
                          for name, f in {**self._file_functions(), **(extra_functions or {})}
                          .items()}
        self._handlers: dict[int, Callable[[Reader], Any]] = {
            Kind.CALL: self._call, Kind.GET_FUNC: self._get_func,
            Kind.ARRAY_NEW: self._array_new, Kind.ARRAY_WRITE: self._array_write,
            Kind.ARRAY_READ: self._array_read, Kind.UPLOAD: self._upload,
            Kind.LOAD_MODULE: self._load_module}

    def _file_functions(self) -> dict[str, Callable[..., Any]]:
        files = self.files
        return {
            "tvm.rpc.server.upload": lambda name, data: files.write(name, data, False),
            "tvm.rpc.server.download": files.read,
            "tvm.rpc.server.remove": files.remove,
            "tvm.rpc.server.listdir": files.listdir,
            "tvm.rpc.server.workpath": lambda name: files.resolve(name, "workpath"),
            "tvm.rpc.server.load_module": lambda name: load_module(files.resolve(name,
                                                                                 "load_module")),
            "tvm.rpc.server.download_linked_module": files.linked_library,
            "ember.rpc.file_size": files.size,
        }

    # -- handles --------------------------------------------------------------------------------
    def store(self, obj: Any) -> int:
        handle = self._next
        self._next += 1
        self.handles[handle] = obj
        return handle

    def lookup(self, handle: int, cls: type | tuple[type, ...], what: str) -> Any:
        obj = self.handles.get(handle)
        if obj is None:
            raise RPCError(f"no {what} with handle {handle} in this session (freed, or never "
                           "handed out)")
        if not isinstance(obj, cls):
            raise RPCError(f"handle {handle} is a {type(obj).__name__}, not a {what}")
        return obj

    def free(self, handles: list[int]) -> None:
        for h in handles:
            self.handles.pop(h, None)

    # -- Side: how handles cross ----------------------------------------------------------------
    def encode_object(self, w: Writer, value: Any) -> bool:
        if isinstance(value, np.ndarray):
            value = array(value)
        if isinstance(value, NDArray):
            w.u8(Tag.ARRAY_HANDLE)
            w.u64(self.store(value))
            w.string(value.dtype)
            w.shape(value.shape)
            w.device(value.device.device_type, value.device.device_id)
        elif isinstance(value, Module):
            w.u8(Tag.MODULE_HANDLE)
            w.u64(self.store(value))
            w.string(type(value).__name__)
            w.u32(MODULE_EXECUTOR if _is_executor(value) else 0)
        elif isinstance(value, PackedFunc) or callable(value) and not isinstance(value, type):
            w.u8(Tag.FUNC_HANDLE)
            w.u64(self.store(as_packed_func(value)))
        else:
            return super().encode_object(w, value)
        return True

    def decode_array_handle(self, handle: int, dtype: str, shape: tuple[int, ...],
                            dev: tuple[int, int]) -> Any:
        return self.lookup(handle, NDArray, "array")

    def decode_module_handle(self, handle: int, type_key: str, flags: int) -> Any:
        return self.lookup(handle, Module, "module")

    def decode_func_handle(self, handle: int) -> Any:
        return self.lookup(handle, PackedFunc, "function")

    # -- requests -------------------------------------------------------------------------------
    def handle(self, kind: int, payload: memoryview) -> Reply | None:
        """The reply to one frame (None for FREE). ProtocolError ends the session."""
        if kind == Kind.FREE:
            r = Reader(payload, "FREE")
            self.free([r.u64("handle") for _ in range(r.u32("handle count"))])
            r.done()
            return None
        if kind == Kind.CLOSE:
            raise SessionClosed()
        handler = self._handlers.get(kind)
        if handler is None:
            raise ProtocolError(f"unexpected {kind_name(kind)} frame from the client")
        r = Reader(payload, kind_name(kind))
        try:
            result = handler(r)
            w = Writer()
            encode_value(w, result, self)
            return Kind.RETURN, w.parts
        except ProtocolError:
            raise
        except Exception as err:  # noqa: BLE001  (the request failed: tell the client, go on)
            log.debug("%s failed: %s", kind_name(kind), err)
            return Kind.ERROR, [error_payload(qualified_name(type(err)), _message(err),
                                              traceback.format_exc())]

    def find_function(self, name: str) -> PackedFunc:
        """A session function, else a global one (GlobalFuncNotFoundError names near misses)."""
        func = self.functions.get(name)
        return func if func is not None else get_global_func(name)  # type: ignore[return-value]

    def _call(self, r: Reader) -> Any:
        target = r.u8("call target")
        if target == 0:
            func = self.find_function(r.string("function name"))
        elif target == 1:
            func = self.lookup(r.u64("function handle"), PackedFunc, "function")
        else:
            raise ProtocolError(f"CALL: unknown target kind {target}")
        args = decode_values(r, self)
        r.done()
        return func(*args)

    def _get_func(self, r: Reader) -> PackedFunc:
        handle, query_imports, name = r.u64("module handle"), r.u8("query imports"), r.string("name")
        r.done()
        if handle == 0:
            return self.find_function(name)
        mod: Module = self.lookup(handle, Module, "module")
        return mod.get_function(name, query_imports=bool(query_imports))

    def _array_new(self, r: Reader) -> NDArray:
        dtype, shape, dev = r.string("dtype"), r.shape("shape"), r.device("device")
        r.done()
        return empty(shape, dtype, Device(*dev))

    def _array_span(self, r: Reader, length: int | None = None) -> tuple[memoryview, int, int]:
        arr = self.lookup(r.u64("array handle"), NDArray, "array")
        offset = r.u64("offset")
        if length is None:
            length = r.u64("length")
        data = byte_view(arr._np)
        if offset + length > len(data):
            raise IndexError(f"array copy of bytes [{offset}, {offset + length}) is out of "
                             f"range for an array of {len(data)} bytes")
        return data, offset, length

    def _array_write(self, r: Reader) -> None:
        data, offset, length = self._array_span(r, length=r.left() - 16)
        data[offset:offset + length] = r.take(length, "array data")

    def _array_read(self, r: Reader) -> memoryview:
        data, offset, length = self._array_span(r)
        r.done()
        return data[offset:offset + length]

    def _upload(self, r: Reader) -> None:
        mode, name = r.u8("upload mode"), r.string("file name")
        if mode not in (UPLOAD_CREATE, UPLOAD_APPEND):
            raise ProtocolError(f"UPLOAD: unknown mode {mode}")
        self.files.write(name, r.take(r.left(), "file data"), append=mode == UPLOAD_APPEND)

    def _load_module(self, r: Reader) -> Module:
        name, fmt = r.string("file name"), r.string("format")
        r.done()
        return load_module(self.files.resolve(name, "load_module"), fmt)


def _message(err: Exception) -> str:
    # KeyError's str() quotes its argument; send the argument, the client's KeyError quotes it.
    if isinstance(err, KeyError) and len(err.args) == 1:
        return str(err.args[0])
    return str(err)


def _is_executor(mod: Module) -> bool:
    """Whether ``mod`` answers the module-based executor interface (not the VM's own API)."""
    try:
        return (all(mod._find(n, False) is not None for n in _EXECUTOR_FUNCS)
                and mod._find("invoke", False) is None)
    except (RPCError, TypeError, ValueError, AttributeError):  # lookups that fail: no
        return False


def serve(ch: Channel, session: ServerSession, max_frame: int, frame_timeout: float | None,
          idle_timeout: float | None = None, link: SlotLink | None = None) -> str:
    """Answer frames until the client closes, or sends no request for ``idle_timeout`` seconds
    (None or 0: no limit), or the main process reclaims the slot (``link``); returns why the
    session ended. Raises ProtocolError (after telling the client) when the client breaks the
    protocol."""
    waiter = RequestWaiter(ch, idle_timeout, link)
    try:
        while True:
            ended = waiter.wait()
            if ended is not None:
                send_error(ch, RPCConnectionError(f"the server ended the session: {ended}"))
                return ended
            try:
                kind, seq, payload = read_frame(ch, max_frame, idle_timeout or None,
                                                frame_timeout)
            except RPCConnectionError as err:
                return f"client disconnected ({err})"
            waiter.started()
            try:
                reply = session.handle(kind, payload)
            except SessionClosed:
                return "client closed the session"
            if reply is not None:
                try:
                    write_frame(ch, reply[0], seq, reply[1], frame_timeout)
                except RPCConnectionError as err:
                    return f"client went away before the reply to {kind_name(kind)} ({err})"
    finally:
        waiter.close()
