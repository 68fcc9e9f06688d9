"""The target kinds ember knows, and the options each accepts with their types.

Only the CPU kinds (``llvm`` = the host CPU compiled through C, and ``c`` = C source) can be
built for. The GPU kinds parse, so that scripts naming them fail at build time with a clear
message rather than at parse time with a confusing one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runtime.errors import TVMError

# Option value kinds: "bool" (a flag; "-x" alone is true), "int", "str", "list" (comma list).
_CPU_OPTIONS: dict[str, str] = {
    "keys": "list", "libs": "list", "device": "str", "model": "str", "tag": "str",
    "mtriple": "str", "mcpu": "str", "mattr": "list", "march": "str", "mabi": "str",
    "mfloat-abi": "str", "num-cores": "int",
    # Deprecated executor/runtime options, mapped onto relay.backend.Executor / Runtime.
    "executor": "str", "runtime": "str", "system-lib": "bool", "link-params": "bool",
    "interface-api": "str", "unpacked-api": "bool",
    "constants-byte-alignment": "int", "workspace-byte-alignment": "int",
}
_GPU_OPTIONS: dict[str, str] = {
    "keys": "list", "libs": "list", "device": "str", "model": "str", "tag": "str",
    "mtriple": "str", "mcpu": "str", "mattr": "list", "arch": "str",
    "max_num_threads": "int", "max_threads_per_block": "int", "thread_warp_size": "int",
    "max_shared_memory_per_block": "int", "registers_per_block": "int",
    "supports_float16": "bool", "supports_int8": "bool", "supports_float64": "bool",
}

# Options whose value must be one of a few words.
CHOICES: dict[str, tuple[str, ...]] = {
    "executor": ("graph", "aot", "vm"),
    "runtime": ("c", "cpp"),
    "interface-api": ("c", "packed"),
}


@dataclass(frozen=True)
class TargetKind:
    """A kind of target: its name, DLPack device type, default keys and accepted options."""

    name: str
    device_type: int
    default_keys: tuple[str, ...]
    options: dict[str, str] = field(compare=False, repr=False)
    is_cpu: bool = True

    @property
    def options_names(self) -> list[str]:
        return sorted(self.options)

    def __str__(self) -> str:
        return self.name


KINDS: dict[str, TargetKind] = {
    "llvm": TargetKind("llvm", 1, ("cpu",), _CPU_OPTIONS),
    "c": TargetKind("c", 1, ("cpu",), _CPU_OPTIONS),
    "cuda": TargetKind("cuda", 2, ("cuda", "gpu"), _GPU_OPTIONS, is_cpu=False),
    "opencl": TargetKind("opencl", 4, ("opencl", "gpu"), _GPU_OPTIONS, is_cpu=False),
    "vulkan": TargetKind("vulkan", 7, ("vulkan", "gpu"), _GPU_OPTIONS, is_cpu=False),
    "metal": TargetKind("metal", 8, ("metal", "gpu"), _GPU_OPTIONS, is_cpu=False),
    "rocm": TargetKind("rocm", 10, ("rocm", "gpu"), _GPU_OPTIONS, is_cpu=False),
}
CPU_KINDS = tuple(name for name, kind in KINDS.items() if kind.is_cpu)


class TargetError(TVMError, ValueError):
    """A target string or dict that ember does not understand (both a ``ValueError`` and a
    ``TVMError``, so callers may catch either)."""


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise TargetError(f"Target: option -{name} takes a boolean (0/1/true/false), got {value!r}")


def _parse_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    try:
        return int(str(value).strip(), 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise TargetError(f"Target: option -{name} takes an integer, got {value!r}") from None


def _parse_list(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v for v in (p.strip() for p in value.split(",")) if v)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    raise TargetError(f"Target: option -{name} takes a comma-separated list, got {value!r}")


def convert_option(kind: TargetKind, name: str, value: Any) -> Any:
    """``value`` converted to the type of option ``name`` of ``kind``; TargetError if unknown."""
    option_type = kind.options.get(name)
    if option_type is None:
        known = ", ".join(f"-{n}" for n in kind.options_names)
        raise TargetError(f"Target {kind.name!r}: unknown option -{name}; "
                          f"options of {kind.name!r} are: {known}")
    if option_type == "bool":
        return _parse_bool(name, value)
    if option_type == "int":
        return _parse_int(name, value)
    if option_type == "list":
        return _parse_list(name, value)
    text = str(value)
    choices = CHOICES.get(name)
    if choices is not None and text not in choices:
        raise TargetError(f"Target: option -{name} must be one of "
                          f"{', '.join(map(repr, choices))}, got {text!r}")
    return text


def format_option(name: str, value: Any) -> str:
    """``-name=value`` as the canonical string prints it (bools as 0/1, lists with commas)."""
    if isinstance(value, bool):
        return f"-{name}={int(value)}"
    if isinstance(value, tuple):
        return f"-{name}={','.join(value)}"
    return f"-{name}={value}"


def get_kind(name: str) -> TargetKind:
    """The kind called ``name``; TargetError listing the known kinds otherwise."""
    kind = KINDS.get(name)
    if kind is None:
        known = ", ".join(map(repr, KINDS))
        raise TargetError(f"Target: unknown target kind {name!r}; known kinds: {known} "
                          f"(ember builds for {' and '.join(map(repr, CPU_KINDS))} only)")
    return kind
