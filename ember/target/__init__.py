"""ember.target: what to compile for (``Target("llvm")``, ``Target("c -executor=aot")``).

``ember.target.target`` is the module holding ``Target`` and ``micro`` (TVM's path
``tvm.target.target.micro``).
"""
from __future__ import annotations

from . import target
from ._kinds import TargetError, TargetKind
from .target import Target, create, micro

__all__ = ["Target", "TargetError", "TargetKind", "create", "micro", "target"]
