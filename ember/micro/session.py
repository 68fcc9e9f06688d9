"""Micro sessions: drive a device (the host process of a generated project, or a board) over
a transport with ember's RPC protocol, as ``tvm.micro.Session``.

    with ember.micro.Session(project.transport()) as sess:
        graph_mod = ember.micro.create_local_graph_executor(
            factory.get_graph_json(), sess.get_system_lib(), sess.device)
        graph_mod.set_input(**factory.get_params())
        graph_mod.run(data=x)
        y = graph_mod.get_output(0).numpy()

The executors run on the device: ``create_local_graph_executor`` and ``create_aot_executor``
create them there (``tvm.graph_executor.create``, ``tvm.aot_executor.create`` of the device's
micro RPC server), inputs are copied over the link, outputs are read back on ``numpy()``.
A device that dies or stops answering fails the waiting call with ``SessionTerminatedError``
or ``IoTimeoutError`` (``MicroSessionError``s) within the transport's timeouts.
"""
from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ..runtime.aot_executor import AotModule
from ..runtime.device import Device
from ..runtime.graph_executor import GraphModule
from ..runtime.graph_executor import create as create_graph_executor
from ..runtime.module import Module
from ..runtime.rpc.client import ChannelSession
from .transport import MicroSessionError, Transport, TransportChannel, TransportTimeouts

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

_STATS = ("size", "used", "peak", "live", "objects")


class Session:
    """An RPC session with a micro device, opened by ``with`` (or ``__enter__``).

    ``transport_context_manager`` establishes the link when entered (``project.transport()``);
    ``session_name`` names the device in messages; ``timeout_override`` (TransportTimeouts)
    replaces the transport's own timeouts.
    """

    def __init__(self, transport_context_manager: AbstractContextManager[Transport] | None = None,
                 session_name: str = "micro-rpc",
                 timeout_override: TransportTimeouts | None = None) -> None:
        if transport_context_manager is None:
            raise MicroSessionError("Session: give transport_context_manager (e.g. "
                                    "project.transport())")
        self.transport_context_manager = transport_context_manager
        self.session_name = session_name
        self.timeout_override = timeout_override
        self.transport: Transport | None = None
        self._rpc: ChannelSession | None = None
        self.device: Device | None = None

    def __enter__(self) -> Self:
        if self.transport is not None:
            raise MicroSessionError(f"Session {self.session_name!r} is already open")
        self.transport = self.transport_context_manager.__enter__()
        try:
            timeouts = self.timeout_override or self.transport.timeouts()
            channel = TransportChannel(self.transport, self.session_name)
            established = timeouts.session_established_timeout_sec
            self._rpc = ChannelSession(channel, timeout=established if established > 0 else None,
                                       handshake_timeout=timeouts.session_start_timeout_sec)
            self.device = self._rpc.cpu(0)
        except BaseException:
            self.transport = None
            self.transport_context_manager.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        rpc, self._rpc = self._rpc, None
        try:
            if rpc is not None:
                rpc.close()
        finally:
            if self.transport is not None:
                self.transport = None
                self.transport_context_manager.__exit__(*exc)

    def close(self) -> None:
        """End the session and its transport (as leaving the ``with`` block)."""
        self.__exit__(None, None, None)

    @property
    def rpc(self) -> ChannelSession:
        """The RPC session (``_rpc`` in the Relay-era API)."""
        if self._rpc is None:
            raise MicroSessionError(f"Session {self.session_name!r} is not open (use it in a "
                                    "with block)")
        return self._rpc

    def get_system_lib(self) -> Module:
        """The device's system library: the functions of the models linked into it."""
        return self.rpc.get_function("runtime.SystemLib")()  # type: ignore[no-any-return]

    def create_aot_executor(self, module_name: str = "default") -> AotModule:
        """An AOT executor of model ``module_name``, on the device."""
        create = self.rpc.get_function("tvm.aot_executor.create")
        return AotModule(create(self.get_system_lib(), self.device, module_name))

    def workspace_stats(self) -> dict[str, int]:
        """The device's arena: ``size``, ``used``, ``peak`` bytes, ``live`` blocks, and the
        ``objects`` the session holds there."""
        stats = self.rpc.get_function("ember.micro.workspace_stats")
        return {name: int(stats(name)) for name in _STATS}

    def __repr__(self) -> str:
        state = "open" if self._rpc is not None else "closed"
        return f"<micro Session {self.session_name!r} ({state})>"


def create_local_graph_executor(graph_json_str: str, mod: Module, device: Device) -> GraphModule:
    """A graph executor of ``graph_json_str`` with the kernels of ``mod`` (the device's system
    library, ``Session.get_system_lib()``) on ``device`` (``Session.device``): created and run
    on the device."""
    return GraphModule(create_graph_executor(graph_json_str, mod, device))


def create_local_aot_executor(session: Session, module_name: str = "default") -> AotModule:
    """``session.create_aot_executor(module_name)``."""
    return session.create_aot_executor(module_name)


__all__ = ["Session", "create_local_aot_executor", "create_local_graph_executor"]
