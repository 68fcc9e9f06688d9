"""Compatibility aliases for scripts that reach into ``tvm._ffi``."""
from . import base  # noqa: F401
from ..runtime.registry import get_global_func, register_func  # noqa: F401
