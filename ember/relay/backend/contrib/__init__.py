"""External codegens (BYOC): how a partitioned function (``Compiler="<name>"``) becomes code.

Two kinds, looked up by the function's ``Compiler`` in this order:

- **kernel codegens** (built in: ``ccompiler``) emit C in ember's kernel ABI (an unpacked
  function and the checking packed wrapper); the TE compiler puts it into the model's own C
  module, so every executor, ``export_library`` and Model Library Format treat it as a kernel;
- **module codegens**: a global function ``relay.ext.<name>`` (``tvm.register_func``) taking
  the partitioned function and returning a runtime module that defines the function's
  ``global_symbol`` as a PackedFunc (a ``CSourceModule`` of C with ember's packed signature, or
  a ``PyModule``). The module is imported into the model's library: C sources are compiled
  into it at export, other modules travel inside it serialised (see ``external.py``).

``relay.ext.ccompiler`` is registered too (the ccompiler's C as a CSourceModule of its own), as
in the Relay era.
"""
from __future__ import annotations

from .ccompiler import CcompilerError, ccompiler_kernel  # noqa: F401
from .registry import (ExternalCodegenError, codegen_module, has_codegen,  # noqa: F401
                       kernel_codegen, register_kernel_codegen)

__all__ = ["CcompilerError", "ExternalCodegenError", "ccompiler_kernel", "codegen_module",
           "has_codegen", "kernel_codegen", "register_kernel_codegen"]
