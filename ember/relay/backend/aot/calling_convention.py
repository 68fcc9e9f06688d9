"""The AOT calling conventions and the rules on combining them (RFC 0046, "Operator Calling
Convention").

Two choices shape the generated code:

- the **interface** of the model (``Executor("aot", {"interface-api": ...})``): ``"packed"``,
  a PackedFunc ``tvmgen_<mod>_run`` taking DLTensors, or ``"c"``, ``int32_t
  tvmgen_<mod>_run(struct tvmgen_<mod>_inputs*, struct tvmgen_<mod>_outputs*)`` with a
  generated header;
- the **operator calling convention**, how ``run_model`` calls each fused operator:
  ``"unpacked"`` (``<op>_unpacked(float* ...)``, a plain C call; with ``unpacked-api``),
  ``"cpacked"`` (TVMValue arrays and DLTensors on the stack, then a direct call of the packed
  C symbol ``<op>``; the default otherwise: every operator is in the same library), or
  ``"packed"`` (the same arrays, the function found by name with TVMBackendGetFuncFromEnv and
  called with TVMFuncCall: what operators living in another module need; chosen with the
  PassContext config ``"ember.aot.operator_calling_convention"``).

The rules, each with an id that error messages cite (the first part of each message is TVM's
own wording, which scripts match):

- R1 (C++ runtime): ``unpacked-api`` must be false and ``interface-api`` packed: the C++
  runtime drives the model through its PackedFunc entry.
- R2 (C runtime): ``interface-api = c`` needs ``unpacked-api = true``: the C interface is
  for statically linked firmware, where every operator is called directly.
- R3: the operator convention must agree with ``unpacked-api`` (unpacked iff set).
- R4: ``workspace-byte-alignment`` and ``constant-byte-alignment`` are powers of two.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ....runtime.errors import TVMError
from ..executor import Executor
from ..runtime import Runtime

CONVENTION_CONFIG = "ember.aot.operator_calling_convention"
CONVENTIONS = ("packed", "cpacked", "unpacked")
RULES = {
    "R1": "the C++ runtime drives an AOT model through its PackedFunc entry and calls "
          "operators through PackedFuncs (RFC 0046: unpacked may not be used with the C++ "
          "runtime); use Runtime('crt') for the C interface",
    "R2": "the C interface calls every operator directly, so it needs unpacked-api (RFC 0046: "
          "with interface-api=c you must also use the unpacked calling convention)",
    "R3": "the operator calling convention is 'unpacked' exactly when unpacked-api is set",
    "R4": "alignments are powers of two (bytes)",
}


class AotOptionError(TVMError, ValueError):
    """An unsupported combination of AOT options; the message cites the rule it breaks."""


def _rule(rule: str, message: str) -> AotOptionError:
    return AotOptionError(f"{message} [AOT rule {rule}: {RULES[rule]}]")


@dataclass(frozen=True)
class AotOptions:
    """The validated options of one AOT build (see the module doc for the rules)."""

    interface_api: str = "packed"
    unpacked_api: bool = False
    link_params: bool = False
    workspace_alignment: int = 16
    constant_alignment: int = 16
    runtime: str = "cpp"
    system_lib: bool = False
    operator_convention: str = "cpacked"
    usmp: Any = None  # usmp.UsmpSettings when tir.usmp.enable is set (build.py fills it)
    constant_pools: Any = None  # ConstantPoolInfo tuple from constant_memory_pools (build.py)

    @property
    def hosted(self) -> bool:
        """True for the C++ (hosted) runtime: kernels may format messages with stdio."""
        return self.runtime == "cpp"


def _alignment(executor: Executor, key: str) -> int:
    value = int(executor.get(key, 16))
    if value < 1 or value & (value - 1):
        raise _rule("R4", f'Executor "aot": {key} must be a power of two, got {value}')
    return value


def options_from(executor: Executor, runtime: Runtime,
                 config: Mapping[str, Any] | None = None) -> AotOptions:
    """Validate ``Executor("aot", ...)`` against ``runtime``; AotOptionError names the rule.

    ``config`` is the PassContext config (for ``ember.aot.operator_calling_convention``).
    """
    if executor.name != "aot":
        raise TVMError(f"aot: expected Executor('aot'), got {executor!r}")
    interface = str(executor.get("interface-api", "packed"))
    unpacked = bool(executor.get("unpacked-api", False))
    if runtime.name == "cpp" and (unpacked or interface != "packed"):
        raise _rule("R1", f'Need unpacked-api == false (got: {int(unpacked)}) and '
                    f'interface-api == "packed" (got: {interface}) when targeting c++ runtime')
    if runtime.name == "crt" and interface == "c" and not unpacked:
        raise _rule("R2", f'Either need interface_api == "packed" (got: {interface}) or '
                    f'unpacked-api == true (got: {int(unpacked)}) when targeting c runtime')
    convention = _convention(unpacked, config or {})
    return AotOptions(interface, unpacked, bool(executor.get("link-params", False)),
                      _alignment(executor, "workspace-byte-alignment"),
                      _alignment(executor, "constant-byte-alignment"), runtime.name,
                      bool(runtime.get("system-lib", False)), convention)


def _convention(unpacked: bool, config: Mapping[str, Any]) -> str:
    asked = config.get(CONVENTION_CONFIG)
    if asked is None:
        return "unpacked" if unpacked else "cpacked"
    if asked not in CONVENTIONS:
        raise _rule("R3", f"{CONVENTION_CONFIG} must be one of "
                    f"{', '.join(map(repr, CONVENTIONS))}, got {asked!r}")
    if (asked == "unpacked") != unpacked:
        raise _rule("R3", f"{CONVENTION_CONFIG} = {asked!r} contradicts unpacked-api = "
                    f"{int(unpacked)}")
    return str(asked)


__all__ = [
    "CONVENTIONS",
    "CONVENTION_CONFIG",
    "RULES",
    "AotOptionError",
    "AotOptions",
    "options_from",
]
