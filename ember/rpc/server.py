"""``ember.rpc.server`` (``tvm.rpc.server``): see ``ember.runtime.rpc.server``."""
from __future__ import annotations

from ..runtime.rpc.server import Server, main  # noqa: F401
