"""``tvm._ffi.base`` names used by scripts."""
from ..runtime.errors import TVMError  # noqa: F401
