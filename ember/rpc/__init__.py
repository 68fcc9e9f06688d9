"""``ember.rpc`` (``tvm.rpc``): remote sessions, servers and the tracker.

The implementation is part of the runtime layer, ``ember.runtime.rpc``; this package gives it
the public path users import (``from ember import rpc``, ``ember.rpc.tracker.Tracker``).
"""
from __future__ import annotations

from ..runtime.rpc import *
from ..runtime.rpc import __all__  # noqa: F401
from . import client, server, tracker  # noqa: F401
