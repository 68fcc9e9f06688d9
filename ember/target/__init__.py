"""ember.target: what to compile for (``Target("llvm")``, ``Target("c -executor=aot")``).

``ember.target.target`` is the module holding ``Target`` and ``micro`` (TVM's path
``tvm.target.target.micro``).
"""
from __future__ import annotations

from . import target  # noqa: F401
from ._kinds import TargetError, TargetKind  # noqa: F401
from .target import Target, create, micro  # noqa: F401

__all__ = ["Target", "TargetKind", "TargetError", "create", "micro", "target"]
