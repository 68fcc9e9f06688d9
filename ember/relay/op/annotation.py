"""The ``relay.annotation`` namespace: ops that mark the graph for passes, not compute."""
from __future__ import annotations

from typing import Any

from ...ir.expr import Call
from ._reg import OPAQUE, call, defop

__all__ = ["stop_fusion"]

defop("annotation.stop_fusion", lambda args, attrs: args[0], lambda x, attrs: x.copy(), OPAQUE,
      doc="Identity that FuseOps never fuses across.")


def stop_fusion(data: Any) -> Call:
    """``data`` unchanged, marked so that FuseOps starts a new group after it."""
    return call("annotation.stop_fusion", data)
