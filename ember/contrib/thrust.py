"""``tvm.contrib.thrust``: whether Thrust sorting/scans can be used: never in ember (no
GPU), so both predicates answer False."""
from ._unavailable import NO_CUDA, answering_false

_no = answering_false(__name__, NO_CUDA)

can_use_thrust = _no("can_use_thrust")
can_use_rocthrust = _no("can_use_rocthrust")

__all__ = ["can_use_rocthrust", "can_use_thrust"]
