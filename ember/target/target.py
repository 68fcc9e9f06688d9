"""``Target``: what to compile for, parsed from ``"llvm -mcpu=skylake"`` or a dict.

``"llvm"`` is the host CPU (ember compiles it through C) and ``"c"`` is C source; both build.
GPU kinds (``cuda``, ``vulkan``, ...) parse but are refused when something is built for them
(``Target.check_buildable``). The string form is canonical: ``str(Target(s))`` parses back to
an equal target, with ``-keys`` first and the other options sorted by name.
"""
from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

from ..runtime.errors import TVMError
from ._kinds import (
    CPU_KINDS,
    KINDS,
    TargetError,
    TargetKind,
    convert_option,
    format_option,
    get_kind,
)

_local = threading.local()


def _stack() -> list[Target]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    stack: list[Target] = _local.stack
    return stack


def _parse_string(text: str) -> tuple[str, dict[str, Any]]:
    """``"llvm -mcpu=x --system-lib"`` -> ("llvm", {"mcpu": "x", "system-lib": "1"})."""
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise TargetError(f"Target: cannot parse {text!r}: {err}") from None
    if not words:
        raise TargetError("Target: empty target string; use e.g. 'llvm' or 'c'")
    kind, options = words[0], {}
    for word in words[1:]:
        if not word.startswith("-") or word.strip("-") == "":
            raise TargetError(f"Target {text!r}: expected an option like -name=value, "
                              f"got {word!r}")
        name, eq, value = word.lstrip("-").partition("=")
        if name in options:
            raise TargetError(f"Target {text!r}: option -{name} is given twice")
        options[name] = value if eq else "1"
    return kind, options


class Target:
    """A compilation target: ``Target("llvm")``, ``Target("c -executor=aot")``,
    ``Target({"kind": "llvm", "mcpu": "skylake"})``, ``Target("c", host="llvm")``.

    ``kind.name`` is the kind, ``attrs`` the options (read-only mapping, typed values),
    ``host`` the host target or None. Raises TargetError (a ValueError and a TVMError) for an
    unknown kind or option, listing the known ones.
    """

    __slots__ = ("_attrs", "_text", "host", "kind")
    _attrs: dict[str, Any]

    def __init__(self, target: str | Mapping[str, Any] | Target,
                 host: str | Mapping[str, Any] | Target | None = None) -> None:
        if isinstance(target, Target):
            kind, options = target.kind.name, dict(target._attrs)
            host = host if host is not None else target.host
        elif isinstance(target, str):
            text = target.strip()
            if text.startswith("{"):
                kind, options, host = self._from_dict(json.loads(text), host)
            else:
                kind, options = _parse_string(text)
        elif isinstance(target, Mapping):
            kind, options, host = self._from_dict(target, host)
        else:
            raise TargetError(f"Target: expected a target string, dict or Target, got "
                              f"{type(target).__name__} {target!r}")
        self.kind: TargetKind = get_kind(kind)
        attrs = {name: convert_option(self.kind, name, value) for name, value in options.items()}
        attrs.setdefault("keys", self.kind.default_keys)
        self._attrs = attrs
        self.host: Target | None = None if host is None else Target(host)
        self._text = self._canonical()

    @staticmethod
    def _from_dict(spec: Mapping[str, Any], host: Any) -> tuple[str, dict[str, Any], Any]:
        if "kind" not in spec:
            raise TargetError(f"Target: a target dict needs a 'kind' entry, got {dict(spec)!r}")
        options = {k: v for k, v in spec.items() if k not in ("kind", "host", "id")}
        return str(spec["kind"]), options, host if host is not None else spec.get("host")

    def _canonical(self) -> str:
        names = ["keys"] + sorted(n for n in self._attrs if n != "keys")
        return " ".join([self.kind.name] + [format_option(n, self._attrs[n]) for n in names])

    # -- reading ------------------------------------------------------------------------------
    @property
    def attrs(self) -> Mapping[str, Any]:
        """The options, by name without the dash: ``target.attrs["mcpu"]``."""
        return MappingProxyType(self._attrs)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._attrs["keys"])

    @property
    def mcpu(self) -> str:
        return str(self._attrs.get("mcpu", ""))

    @property
    def mattr(self) -> tuple[str, ...]:
        return tuple(self._attrs.get("mattr", ()))

    @property
    def model(self) -> str:
        return str(self._attrs.get("model", "unknown"))

    @property
    def libs(self) -> tuple[str, ...]:
        return tuple(self._attrs.get("libs", ()))

    @property
    def device_name(self) -> str:
        return str(self._attrs.get("device", ""))

    @property
    def is_cpu(self) -> bool:
        return self.kind.is_cpu

    def get_target_device_type(self) -> int:
        """The DLPack device type this target compiles for (1 = CPU)."""
        return self.kind.device_type

    def export(self) -> dict[str, Any]:
        """A dict that ``Target(d)`` turns back into an equal target."""
        out: dict[str, Any] = {"kind": self.kind.name}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self._attrs.items()})
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    def with_host(self, host: str | Mapping[str, Any] | Target | None) -> Target:
        return Target(self, host)

    def check_buildable(self, where: str = "build") -> None:
        """Raise TVMError unless ember can build for this target (and its host)."""
        for t in (self, self.host):
            if t is not None and not t.kind.is_cpu:
                raise TVMError(f"{where}: target {t.kind.name!r} is not supported; ember "
                               f"compiles for CPU targets only "
                               f"({', '.join(map(repr, CPU_KINDS))})")

    # -- context --------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The innermost target entered with ``with target:`` (None outside any)."""
        stack = _stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise TVMError("Target.current: no target is set; use 'with Target(...):'")
        return None

    # -- canonicalisation -----------------------------------------------------------------------
    @staticmethod
    def canon_target(target: Any) -> Target | None:
        """None stays None; anything else becomes a Target."""
        return None if target is None else Target(target)

    @staticmethod
    def canon_target_and_host(target: Any, target_host: Any = None) -> tuple[Any, Any]:
        """``(target, host)`` with ``target`` a Target carrying ``host`` (TVM's helper).

        ``target`` may also be a dict or list of targets (each gets the host); None stays
        None.
        """
        if target is None:
            return None, Target.canon_target(target_host)
        if isinstance(target, Mapping) and "kind" not in target:
            targets = Target.canon_multi_target_and_host(target, target_host)
            return targets, targets[0].host if targets else None
        if isinstance(target, (list, tuple)):
            targets = Target.canon_multi_target_and_host(target, target_host)
            return targets, targets[0].host if targets else None
        canon = Target(target, target_host)
        return canon, canon.host

    @staticmethod
    def canon_multi_target_and_host(target: Any, target_host: Any = None) -> list[Target]:
        """A list of Targets, each with ``target_host``, from a dict or list of targets."""
        values = list(target.values()) if isinstance(target, Mapping) else list(target)
        return [Target(t, target_host) for t in values]

    @staticmethod
    def target_or_current(target: Any) -> Target | None:
        return Target.current() if target is None else Target(target)

    @staticmethod
    def list_kinds() -> list[str]:
        return list(KINDS)

    # -- values -------------------------------------------------------------------------------
    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        host = f", host={str(self.host)!r}" if self.host is not None else ""
        return f"Target({self._text!r}{host})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except (TargetError, TVMError):
                return False
        if not isinstance(other, Target):
            return NotImplemented
        return self._text == other._text and str(self.host) == str(other.host)

    def __hash__(self) -> int:
        return hash((self._text, str(self.host)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Target, (self.export(),))


def micro(model: str = "unknown", options: str | list[str] | None = None) -> Target:
    """A ``c`` target for a micro device: ``micro("host")`` is ``c -keys=cpu -model=host``.

    The executor and runtime are chosen with ``relay.backend.Executor`` / ``Runtime``
    (``Runtime("crt")`` for the standalone C runtime), not with target options.
    """
    extra = shlex.split(options) if isinstance(options, str) else list(options or [])
    return Target(" ".join(["c", f"-model={model}"] + extra))


def create(target: str | Mapping[str, Any] | Target) -> Target:
    """Deprecated spelling of ``Target(target)``."""
    return Target(target)
