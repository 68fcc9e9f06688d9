"""``tvm._ffi``: the names Relay-era scripts reach through the FFI package (the registry,
objects, the base helpers). ember's FFI is ``ember.runtime``; these are the same objects."""
from . import base, registry, runtime_ctypes  # noqa: F401
from .registry import (get_global_func, list_global_func_names, register_func,  # noqa: F401
                       register_object, remove_global_func)
