"""Errors raised on a server, re-raised on the client.

An ERROR frame names the exception's class (``ValueError``,
``ember.runtime.errors.ArtifactError``). The client raises a class that is both an
``RPCError`` and the original class when that class is a builtin exception or one of ember's
(looked up among modules already imported, never imported by name from the wire), so either
``except ValueError`` or ``except RPCError`` catches it. Anything else is a plain RPCError.
"""
from __future__ import annotations

import builtins
import functools
import sys

from ..errors import RPCError, add_note


@functools.lru_cache(maxsize=128)
def _known_class(type_name: str) -> type[BaseException] | None:
    module, _, name = type_name.rpartition(".")
    if module in ("", "builtins"):
        cls = getattr(builtins, name, None)
    elif module == "ember" or module.startswith("ember."):
        cls = getattr(sys.modules.get(module), name, None)
    else:
        return None
    if (isinstance(cls, type) and issubclass(cls, Exception)
            and not issubclass(cls, (StopIteration, StopAsyncIteration))):
        return cls
    return None


@functools.lru_cache(maxsize=128)
def remote_class(type_name: str) -> type[RPCError]:
    """The class to raise for a remote ``type_name``: RPCError, or a subclass of RPCError and
    the original class (for classes whose layout allows combining them)."""
    cls = _known_class(type_name)
    if cls is None:
        return RPCError
    if issubclass(cls, RPCError):
        return cls
    try:
        combined = type(f"Remote{cls.__name__}", (RPCError, cls), {
            "__module__": __name__,
            "__doc__": f"A {cls.__name__} raised on an RPC server."})
    except TypeError:  # e.g. OSError: its layout does not combine with RuntimeError's
        return RPCError
    return combined


def make_remote_error(type_name: str, message: str, remote_traceback: str,
                      where: str) -> RPCError:
    """The exception for an ERROR frame from ``where`` (a server address)."""
    cls = remote_class(type_name)
    if cls is RPCError and type_name.rpartition(".")[2] != "RPCError":
        message = f"{type_name}: {message}"  # keep the remote class's name in the message
    try:
        err = cls(message)
    except TypeError:  # a class whose constructor wants other arguments
        err = RPCError(f"{type_name}: {message}")
    if str(err) not in (message, repr(message)):  # e.g. SyntaxError prints its own fields
        err = RPCError(f"{type_name}: {message}")
    add_note(err, f"raised on the RPC server {where} ({type_name})")
    if remote_traceback:
        add_note(err, "remote traceback:\n" + remote_traceback.rstrip())
    return err


def qualified_name(cls: type) -> str:
    """``ValueError`` for builtins, ``module.Class`` otherwise (what ERROR frames carry)."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
