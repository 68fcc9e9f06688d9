"""``ember.rpc.client`` (``tvm.rpc.client``): see ``ember.runtime.rpc.client``."""
from __future__ import annotations

from ..runtime.rpc.client import LocalSession, PopenSession, RPCSession, connect  # noqa: F401
from ..runtime.rpc.tracker import TrackerSession, connect_tracker  # noqa: F401
