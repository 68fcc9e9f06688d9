"""``tvm._ffi.registry``: the global function registry and object registration (they live in
``ember.runtime.registry`` and ``ember.runtime.object``)."""
from ..runtime.object import register_object  # noqa: F401
from ..runtime.registry import (get_global_func, list_global_func_names,  # noqa: F401
                                register_func, remove_global_func)
