"""``ember.error`` (``tvm.error``): the exception classes, defined in ``ember.runtime.errors``."""
from .runtime.errors import *  # noqa: F401,F403
from .runtime.errors import (ArgumentError, ArgumentIndexError,  # noqa: F401
                             ArgumentTypeError, ArtifactError, CompileError,
                             CompilerNotFoundError, DiagnosticError, FrontendError,
                             FunctionNotFoundError, InternalError, OpAttributeInvalid,
                             OpAttributeRequired, OpAttributeUnImplemented, OpError,
                             OpNotImplemented, RPCError, TVMError, TypeInferenceError)
