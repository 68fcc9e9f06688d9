"""System-lib registration: how code built with ``Runtime(..., {"system-lib": True})`` (or
``--system-lib`` in the target) makes its functions findable by name once it is linked into a
program, with no loader.

- ``Runtime("cpp")``: a constructor function in the generated C calls
  ``TVMBackendRegisterSystemLibSymbol(name, fn)`` for every packed function at start-up; the
  native runtime's ``runtime.SystemLib`` (and ``ember.runtime.system_lib()`` for a library
  Python loaded) then finds them.
- ``Runtime("crt")``: firmware has no constructors to rely on, so the C is a static table
  ``<prefix>_func_registry`` (``ember/crt/func_registry.h``'s layout) that the application
  registers with ``ember_crt_register_func_registry``.
"""
from __future__ import annotations

from collections.abc import Sequence

from .c_literals import c_string

REGISTRY_TYPES = """#ifndef EMBER_CRT_FUNC_REGISTRY_H_
typedef struct { const char* name; TVMBackendPackedCFunc func; } EmberFuncEntry;
typedef struct {
  const char* module_name;
  const EmberFuncEntry* funcs;
  uint32_t num_funcs;
} EmberFuncRegistry;
#endif"""


def constructor_source(names: Sequence[str], prefix: str) -> str:
    """C that registers ``names`` (packed functions of this file) at start-up."""
    lines = [f"/* system-lib: register the functions of {prefix} when the program starts. */",
             f"static void __attribute__((constructor)) {prefix}_register_system_lib(void) {{"]
    lines += [f'  (void)TVMBackendRegisterSystemLibSymbol("{n}", (void*)(uintptr_t){n});'
              for n in names]
    return "\n".join([*lines, "}"]) + "\n"


def registry_source(names: Sequence[str], prefix: str, module_name: str) -> str:
    """C defining ``<prefix>_func_registry``: the static function table of the C runtime."""
    lines = [REGISTRY_TYPES, f"static const EmberFuncEntry {prefix}_funcs[] = {{"]
    lines += [f'  {{"{n}", (TVMBackendPackedCFunc){n}}},' for n in names]
    lines += ["};", (f"TVM_DLL const EmberFuncRegistry {prefix}_func_registry = {{"
                     f"{c_string(module_name)}, {prefix}_funcs, {len(names)}}};")]
    return "\n".join(lines) + "\n"


def registration_source(names: Sequence[str], prefix: str, module_name: str,
                        runtime: str) -> str:
    """The registration of ``names`` for ``runtime`` ("cpp": a constructor, "crt": a table)."""
    if runtime == "crt":
        return registry_source(names, prefix, module_name)
    return constructor_source(names, prefix)
