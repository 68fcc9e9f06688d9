"""``ember.error`` (``tvm.error``): the exception classes, defined in ``ember.runtime.errors``."""
from .runtime.errors import *  # noqa: F401,F403
from .runtime.errors import (ArtifactError, CompileError, CompilerNotFoundError,  # noqa: F401
                             DiagnosticError, FrontendError, InternalError, OpAttributeInvalid,
                             OpAttributeRequired, OpAttributeUnImplemented, OpError,
                             OpNotImplemented, RPCError, TVMError, TypeInferenceError)
