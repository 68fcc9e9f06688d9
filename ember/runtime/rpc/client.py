"""Client sessions: ``connect`` (TCP), ``LocalSession`` (in-process), ``PopenSession`` (a
server subprocess on pipes). All three are an RPCSession and speak the same messages; only
the way frames travel differs.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import RPC_SESS_MASK, Device, register_rpc_session
from ..device import device as make_device
from ..errors import RPCError
from ..module import Module
from ..ndarray import SUPPORTED_DTYPES, NDArray
from ..ndarray import array as local_array
from ..packed_func import PackedFunc
from .codec import (
    MODULE_EXECUTOR,
    Reader,
    Side,
    Tag,
    Writer,
    decode_value,
    encode_values,
    read_error,
    write_ndarray,
)
from .handshake import as_secret, client_handshake
from .protocol import (
    CLIENT_MAX_FRAME,
    DEFAULT_MAX_FRAME,
    UPLOAD_APPEND,
    UPLOAD_CREATE,
    Kind,
    ProtocolError,
    RPCConnectionError,
    kind_name,
)
from .remote import RemoteExecutor, RemoteFunction, RemoteModule, RemoteNDArray
from .remote_errors import make_remote_error
from .transport import Channel, PipeChannel, SocketChannel, read_frame, write_frame

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

log = logging.getLogger("ember.rpc.client")
_CHUNK_CAP = 32 << 20  # bytes per array/file transfer frame
_OVERHEAD = 4096  # room for a frame's fields around a chunk


class _ClientSide(Side):
    """How a client writes its values: its remote objects by handle, local arrays by value."""

    def __init__(self, session: RPCSession) -> None:
        self.session = session
        self.inline_budget = 0
        self.keep: list[Any] = []  # arrays uploaded for one call, alive until it returns

    def encode_object(self, w: Writer, value: Any) -> bool:
        s = self.session
        if isinstance(value, Device):
            w.u8(Tag.DEVICE)
            w.device(s._server_device_type(value), value.device_id)
        elif isinstance(value, (RemoteNDArray, RemoteModule, RemoteFunction)):
            self._write_handle(w, value)
        elif isinstance(value, (NDArray, np.ndarray)):
            self._write_array(w, value)
        elif isinstance(value, Module):
            raise TypeError(f"{value!r} is a local module: export it, upload the file and "
                            "load it with session.load_module")
        elif isinstance(value, PackedFunc) or callable(value):
            raise TypeError(f"{value!r} is a local function: a remote session cannot call back "
                            "into the client")
        else:
            return False
        return True

    def _write_handle(self, w: Writer, value: Any) -> None:
        owner = value.rpc_session if isinstance(value, RemoteModule) else value._session
        if owner is not self.session:
            raise TypeError(f"{value!r} belongs to another RPC session ({owner.peer})")
        if isinstance(value, RemoteNDArray):
            w.u8(Tag.ARRAY_HANDLE)
            w.u64(value.handle)
            w.string(value.dtype)
            w.shape(value.shape)
            w.device(self.session._server_device_type(value.device), value.device.device_id)
        elif isinstance(value, RemoteModule):
            w.u8(Tag.MODULE_HANDLE)
            w.u64(value._handle)
            w.string(value.remote_type)
            w.u32(0)
        else:
            w.u8(Tag.FUNC_HANDLE)
            w.u64(value._handle)

    def _write_array(self, w: Writer, value: NDArray | np.ndarray) -> None:
        arr = value if isinstance(value, NDArray) else local_array(value)
        if arr.nbytes <= self.inline_budget:
            self.inline_budget -= arr.nbytes
            write_ndarray(w, arr)
            return
        remote = self.session.array(arr, self.session.cpu(0))  # too big to go inline
        self.keep.append(remote)
        self._write_handle(w, remote)

    def decode_device(self, dev_type: int, dev_id: int) -> Device:
        return Device(dev_type + RPC_SESS_MASK * (self.session._index + 1), dev_id)

    def decode_array_handle(self, handle: int, dtype: str, shape: tuple[int, ...],
                            dev: tuple[int, int]) -> RemoteNDArray:
        return RemoteNDArray(self.session, handle, dtype, shape, self.decode_device(*dev))

    def decode_module_handle(self, handle: int, type_key: str, flags: int) -> RemoteModule:
        cls = RemoteExecutor if flags & MODULE_EXECUTOR else RemoteModule
        return cls(self.session, handle, type_key)

    def decode_func_handle(self, handle: int) -> RemoteFunction:
        return RemoteFunction(self.session, handle, f"<remote function {handle}>")


class RPCSession:
    """A session with an RPC server: remote functions, modules, arrays, devices and files.

    Threads may share a session: their requests are sent one at a time.
    """

    def __init__(self, peer: str, max_frame: int, server_info: str = "",
                 logging_enabled: bool = False) -> None:
        self.peer = peer
        self.server_info = server_info
        self.max_frame = max_frame
        self._chunk = max(1, min(_CHUNK_CAP, max_frame - _OVERHEAD))
        self._index = register_rpc_session(self)
        self._lock = threading.RLock()
        self._pending_free: list[int] = []
        self._seq = 0
        self._closed: str | None = None
        self._side = _ClientSide(self)
        self._log = logging_enabled

    # -- transport (subclasses) -----------------------------------------------------------------
    def _exchange(self, kind: int, seq: int, parts: list[Any]) -> tuple[int, int, memoryview]:
        raise NotImplementedError

    def _send_oneway(self, kind: int, seq: int, parts: list[Any]) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        """Release the transport (the socket, the subprocess, the in-process server)."""

    # -- requests -------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq = self._seq % 0xFFFF_FFFF + 1  # 1 .. 2**32 - 1: seq 0 is the server's own
        return self._seq

    def _check_open(self) -> None:
        if self._closed is not None:
            raise RPCError(f"RPC session with {self.peer} is closed ({self._closed})")

    def _request(self, kind: int, parts: list[Any], what: str) -> Any:
        """Send one request and return the decoded RETURN value (or raise its ERROR)."""
        payload = self._request_payload(kind, parts, what)
        r = Reader(payload, "RETURN")
        value = decode_value(r, self._side)
        r.done()
        return value

    def _request_payload(self, kind: int, parts: list[Any], what: str) -> memoryview:
        """Send one request and return the payload of its RETURN (or raise its ERROR)."""
        with self._lock:
            self._check_open()
            start = time.perf_counter()
            try:
                self._flush_frees()
                seq = self._next_seq()
                rkind, rseq, payload = self._exchange(kind, seq, parts)
            except (RPCConnectionError, ProtocolError) as err:
                self._broken(f"{type(err).__name__}: {err}")
                where = "" if str(err).startswith(self.peer) else f"{self.peer}: "
                raise type(err)(f"{where}{err} (during {what})") from None
            if self._log:
                log.info("%s %s: %d bytes back in %.3f ms", kind_name(kind), what, len(payload),
                         (time.perf_counter() - start) * 1e3)
            if rkind == Kind.ERROR and rseq == 0:  # not a reply: the server ended the session
                message = read_error(payload)[1]
                self._broken(message)
                raise RPCConnectionError(f"{self.peer}: {message} (during {what})")
            if rseq != seq:
                self._broken("reply out of order")
                raise ProtocolError(f"RPC session with {self.peer}: reply {rseq} to request {seq}")
            if rkind == Kind.ERROR:
                raise make_remote_error(*read_error(payload), self.peer)
            if rkind != Kind.RETURN:
                self._broken(f"unexpected {kind_name(rkind)}")
                raise ProtocolError(f"RPC session with {self.peer}: expected RETURN or ERROR, got "
                                    f"{kind_name(rkind)}")
            return payload

    def _broken(self, reason: str) -> None:
        self._closed = reason
        self._shutdown()

    def _flush_frees(self) -> None:
        if self._pending_free:
            handles, self._pending_free = self._pending_free, []
            w = Writer()
            w.u32(len(handles))
            w.raw(np.asarray(handles, "<u8").tobytes())
            self._send_oneway(Kind.FREE, self._next_seq(), w.parts)

    def _free_later(self, handle: int) -> None:
        # Called from __del__: only queue, the next request sends it.
        if self._closed is None:
            self._pending_free.append(handle)

    def _call(self, target: int | str, args: tuple[Any, ...], name: str) -> Any:
        with self._lock:
            head = Writer()
            if isinstance(target, str):
                head.u8(0)
                head.string(target)
            else:
                head.u8(1)
                head.u64(target)
            side = self._side
            side.inline_budget, side.keep = self.max_frame // 2, []
            try:
                body = encode_values(args, side)
                return self._request(Kind.CALL, head.parts + body.parts, f"call of {name}")
            except (TypeError, ValueError, OverflowError) as err:
                if isinstance(err, RPCError):
                    raise
                raise type(err)(f"{name}: {err}") from None
            finally:
                side.keep = []

    def _get_function(self, module_handle: int, name: str, query_imports: bool) -> RemoteFunction:
        w = Writer()
        w.u64(module_handle)
        w.u8(int(query_imports))
        w.string(name)
        func = self._request(Kind.GET_FUNC, w.parts, f"lookup of {name!r}")
        func.name = name
        return func  # type: ignore[no-any-return]

    # -- arrays ---------------------------------------------------------------------------------
    def empty(self, shape: Any, dtype: Any, dev: Device) -> RemoteNDArray:
        """A new uninitialised array on the server (``ember.nd.empty`` on a remote device)."""
        from ..ndarray import _normalize_shape, _parse_dtype

        shape = _normalize_shape(shape, "nd.empty")
        w = Writer()
        w.string(str(_parse_dtype(dtype)[0]))
        w.shape(shape)
        w.device(self._server_device_type(dev), dev.device_id)
        return self._request(Kind.ARRAY_NEW, w.parts, "array allocation")  # type: ignore

    def array(self, obj: Any, dev: Device, dtype: Any = None) -> RemoteNDArray:
        """A copy of ``obj`` on the server (``ember.nd.array`` on a remote device)."""
        if isinstance(obj, RemoteNDArray):
            obj = obj.numpy()
        if isinstance(obj, np.ndarray) and dtype is None and obj.dtype.name in SUPPORTED_DTYPES:
            src, name, shape = obj, obj.dtype.name, obj.shape  # sent as it is, no local copy
        else:
            local = obj if isinstance(obj, NDArray) and dtype is None else local_array(obj,
                                                                                      dtype=dtype)
            src, name, shape = local._np, local.dtype, local.shape
        return self.empty(shape, name, dev).copyfrom(src)

    def _write_array(self, handle: int, data: memoryview) -> None:
        for start in range(0, max(len(data), 1), self._chunk):
            w = Writer()
            w.u64(handle)
            w.u64(start)
            w.raw(data[start:start + self._chunk])
            self._request(Kind.ARRAY_WRITE, w.parts, "array copy to the server")

    def _read_array(self, handle: int, nbytes: int) -> memoryview:
        """The bytes of a server array: the reply's own buffer when one frame holds them all,
        else the chunks copied into one buffer."""
        chunks = []
        for start in range(0, nbytes, self._chunk):
            w = Writer()
            w.u64(handle)
            w.u64(start)
            w.u64(min(self._chunk, nbytes - start))
            payload = self._request_payload(Kind.ARRAY_READ, w.parts, "array copy from the server")
            r = Reader(payload, "ARRAY_READ reply")
            if r.u8("value tag") != Tag.BYTES:
                raise ProtocolError(f"{self.peer}: ARRAY_READ must be answered with bytes")
            chunks.append(r.blob("array data"))
            r.done()
        if len(chunks) == 1:
            return chunks[0]
        out = memoryview(bytearray(nbytes))
        for start, chunk in zip(range(0, nbytes, self._chunk), chunks):
            out[start:start + len(chunk)] = chunk
        return out

    # -- devices --------------------------------------------------------------------------------
    def device(self, dev_type: str | int, dev_id: int = 0) -> Device:
        """A device of the server: ``session.device("cpu", 0)``; ``str()`` starts with remote."""
        base = make_device(dev_type, dev_id)
        return Device(base.device_type + RPC_SESS_MASK * (self._index + 1), base.device_id)

    def cpu(self, dev_id: int = 0) -> Device:
        """The server's CPU ``dev_id``."""
        return self.device("cpu", dev_id)

    def _server_device_type(self, dev: Device) -> int:
        if dev.device_type < RPC_SESS_MASK:
            return dev.device_type
        if dev.device_type // RPC_SESS_MASK - 1 != self._index:
            raise TypeError(f"device {dev} belongs to another RPC session")
        return dev.device_type % RPC_SESS_MASK

    # -- functions, modules, files --------------------------------------------------------------
    def get_function(self, name: str) -> RemoteFunction:
        """The server's global function ``name`` (its session functions first)."""
        return self._get_function(0, name, False)

    def upload(self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None
               ) -> None:
        """Copy a file (a path, or bytes with ``target``) into the session directory."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            if target is None:
                raise ValueError("upload: give target= (the file name on the server) when "
                                 "uploading bytes")
            blob = memoryview(data).cast("B")
        else:
            with open(data, "rb") as f:
                blob = memoryview(f.read())
            target = target or os.path.basename(os.fspath(data))
        for start in range(0, max(len(blob), 1), self._chunk):
            w = Writer()
            w.u8(UPLOAD_CREATE if start == 0 else UPLOAD_APPEND)
            w.string(target)
            w.raw(blob[start:start + self._chunk])
            self._request(Kind.UPLOAD, w.parts, f"upload of {target!r}")

    def download(self, path: str) -> bytearray:
        """The bytes of a file of the session directory."""
        size = self.get_function("ember.rpc.file_size")(path)
        read = self.get_function("tvm.rpc.server.download")
        out = bytearray()
        for start in range(0, size, self._chunk):
            out += read(path, start, self._chunk)
        return out

    def remove(self, path: str) -> None:
        """Remove a file (or directory) of the session directory."""
        self.get_function("tvm.rpc.server.remove")(path)

    def listdir(self, path: str = ".") -> list[str]:
        """The names in a directory of the session directory."""
        return list(self.get_function("tvm.rpc.server.listdir")(path))

    def load_module(self, path: str, fmt: str = "") -> RemoteModule:
        """Load an uploaded file (an exported library) on the server."""
        w = Writer()
        w.string(path)
        w.string(fmt)
        return self._request(Kind.LOAD_MODULE, w.parts, f"load of {path!r}")  # type: ignore

    def download_linked_module(self, path: str) -> bytearray:
        """The shared library of an uploaded ``.tar`` (linked on the server, which needs a C
        compiler there) or ``.so``, as bytes."""
        return bytearray(self.get_function("tvm.rpc.server.download_linked_module")(path))

    # -- life -----------------------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self._closed is not None

    def close(self) -> None:
        """End the session (the server removes its directory)."""
        with self._lock:
            if self._closed is None:
                self._closed = "closed by the client"
                try:
                    self._send_oneway(Kind.CLOSE, self._next_seq(), [])
                except RPCError:
                    pass
                self._shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", "") is None:
            self._closed = "garbage collected"
            self._shutdown()

    def __repr__(self) -> str:
        state = f", closed: {self._closed}" if self._closed else ""
        return f"<{type(self).__name__} {self.peer} (remote[{self._index}]){state}>"


class ChannelSession(RPCSession):
    """A session over a Channel: a socket, pipes, or any byte stream a Channel subclass
    carries (``ember.micro.Session`` uses one over a micro transport).

    ``timeout`` bounds the wait for each reply (None: none, or ``session_timeout`` + 10 s);
    ``handshake_timeout`` the handshake (default: ``timeout``, or 60 s).
    """

    def __init__(self, ch: Channel, key: str = "", secret: str | bytes | None = None,
                 session_timeout: int = 0, timeout: float | None = None,
                 logging_enabled: bool = False, *, handshake_timeout: float | None = None
                 ) -> None:
        if timeout is None and session_timeout > 0:
            timeout = session_timeout + 10.0  # the server ends the session by then
        self._ch, self._timeout = ch, timeout
        if handshake_timeout is None:
            handshake_timeout = timeout if timeout is not None else 60.0
        try:
            welcome = client_handshake(ch, key, as_secret(secret), session_timeout,
                                       handshake_timeout)
        except BaseException:
            ch.close()
            raise
        super().__init__(ch.peer, welcome.max_frame, welcome.server_info, logging_enabled)

    def _exchange(self, kind: int, seq: int, parts: list[Any]) -> tuple[int, int, memoryview]:
        self._send_oneway(kind, seq, parts)
        return read_frame(self._ch, CLIENT_MAX_FRAME, self._timeout, self._timeout)

    def _send_oneway(self, kind: int, seq: int, parts: list[Any]) -> None:
        try:
            write_frame(self._ch, kind, seq, parts, self._timeout)
        except RPCConnectionError:
            reason = self._last_words()
            if reason is None:
                raise
            raise RPCConnectionError(f"{self.peer}: {reason}") from None

    def _last_words(self) -> str | None:
        """Why the server ended the session, when it said so (an ERROR with seq 0) before it
        closed: read once a request could not be sent."""
        try:
            kind, seq, payload = read_frame(self._ch, CLIENT_MAX_FRAME, 1.0, 1.0)
        except RPCError:
            return None
        return read_error(payload)[1] if kind == Kind.ERROR and seq == 0 else None

    def _shutdown(self) -> None:
        self._ch.close()





def connect(url: str, port: int, key: str = "", session_timeout: int = 0,
            enable_logging: bool = False, *, secret: str | bytes | None = None,
            timeout: float | None = None, connect_timeout: float = 30.0) -> RPCSession:
    """Open a session with the server at ``url:port``.

    ``key`` must match the server's. ``session_timeout`` (seconds, 0 for none) asks the server
    to end the session after that long. ``secret`` is the server's shared secret, if it
    requires one. ``timeout`` bounds the wait for each reply (default: none, or
    ``session_timeout`` + 10 s); a server that dies closes the connection, which fails the
    waiting call at once. Raises RPCConnectionError when nothing answers, and
    AuthenticationError or RPCError when the server refuses the session.
    """
    try:
        sock = socket.create_connection((url, int(port)), timeout=connect_timeout)
    except OSError as err:
        raise RPCConnectionError(f"cannot connect to an RPC server at {url}:{port}: {err}") \
            from None
    return ChannelSession(SocketChannel(sock, f"{url}:{port}"), key, secret, int(session_timeout),
                          timeout, enable_logging)


class LocalSession(RPCSession):
    """The session API served in this process: the same messages and encoding as a remote
    session, without a network (for tests, and for code that takes a session)."""

    def __init__(self) -> None:
        from .endpoint import ServerSession

        workdir = tempfile.mkdtemp(prefix="ember_rpc_local_")
        self._server = ServerSession(workdir)
        self._cleanup = weakref.finalize(self, shutil.rmtree, workdir, True)
        super().__init__("local", DEFAULT_MAX_FRAME, "ember in-process session")

    def _exchange(self, kind: int, seq: int, parts: list[Any]) -> tuple[int, int, memoryview]:
        payload = memoryview(b"".join(parts))
        if len(payload) > self.max_frame:
            raise ProtocolError(f"{kind_name(kind)} frame of {len(payload)} bytes exceeds the "
                                f"limit of {self.max_frame} bytes")
        reply = self._server.handle(kind, payload)
        assert reply is not None, f"{kind_name(kind)} must be answered"
        return reply[0], seq, _joined(reply[1])

    def _send_oneway(self, kind: int, seq: int, parts: list[Any]) -> None:
        if kind == Kind.FREE:
            self._server.handle(kind, memoryview(b"".join(parts)))

    def _shutdown(self) -> None:
        self._server.handles.clear()
        self._cleanup()


def _joined(parts: list[Any]) -> memoryview:
    """The parts in one writable buffer (what a reader of a stream gets)."""
    views = [memoryview(p).cast("B") for p in parts]
    out = memoryview(bytearray(sum(len(v) for v in views)))
    pos = 0
    for v in views:
        out[pos:pos + len(v)] = v
        pos += len(v)
    return out


class PopenSession(ChannelSession):
    """A session with a server subprocess speaking the protocol on its stdin/stdout.

    ``PopenSession()`` starts ``python -m ember.exec.rpc_server --stdio``; ``binary`` (and
    ``args``) start another program that speaks the protocol on its standard streams.
    """

    def __init__(self, binary: str | None = None, args: tuple[str, ...] = (),
                 timeout: float | None = None, secret: str | bytes | None = None) -> None:
        cmd = ([sys.executable, "-m", "ember.exec.rpc_server", "--stdio", "--silent"]
               if binary is None else [binary, *args])
        env = dict(os.environ)
        if secret is not None:
            env["EMBER_RPC_SECRET"] = secret if isinstance(secret, str) else secret.decode()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      start_new_session=True, env=env)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        ch = PipeChannel(self._proc.stdout.fileno(), self._proc.stdin.fileno(),
                         f"pipe to {os.path.basename(cmd[0])} (pid {self._proc.pid})",
                         owns_fds=False)
        try:
            super().__init__(ch, "", secret, 0, timeout, False)
        except BaseException:
            self._kill()
            raise

    def _shutdown(self) -> None:
        super()._shutdown()
        self._kill()

    def _kill(self) -> None:
        proc = self._proc
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
