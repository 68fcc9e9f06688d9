"""Profiling reports: per-call metrics of a run, as a table, CSV or JSON.

A :class:`Report` holds ``calls`` (one dict of metrics per operator call: ``Name``,
``Duration (us)``, ``Percent``, ``Count``, ``Device``, ``Argument Shapes``, ``Hash``...),
``device_metrics`` (per device, e.g. the whole run's ``Duration (us)``) and
``configuration`` (``Executor``, ...). Metric values are typed: :class:`Duration`,
:class:`Percent`, :class:`Count`, :class:`Ratio`, or ``str``. The JSON layout is the Relay-era
one (``{"calls": [{"Name": {"string": "..."}, "Duration (us)": {"microseconds": 1.5}}], ...}``)
so reports written by either can be read by ``Report.from_json``.
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import json_reader
from .errors import ArtifactError

# Columns in the order tables show them; others follow in order of first appearance.
_COLUMN_ORDER = ("Name", "Duration (us)", "Percent", "Count", "Device", "Argument Shapes",
                 "Hash")


class _Metric:
    """A typed metric value; compares and hashes by value. ``float(m)`` gives the number."""

    __slots__ = ()
    field: str = ""
    spec: str = ""  # how str() formats the value

    def __init__(self, value: float) -> None:
        object.__setattr__(self, self.field, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __float__(self) -> float:
        return float(getattr(self, self.field))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and float(other) == float(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, float(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field}={getattr(self, self.field)!r})"

    def __str__(self) -> str:
        return format(getattr(self, self.field), self.spec)


class Duration(_Metric):
    """A time span in microseconds (``.microseconds``)."""

    __slots__ = ("microseconds",)
    field, spec = "microseconds", ",.2f"
    microseconds: float


class Percent(_Metric):
    """A percentage, 0-100 (``.percent``)."""

    __slots__ = ("percent",)
    field, spec = "percent", ".2f"
    percent: float


class Count(_Metric):
    """A number of occurrences (``.value``)."""

    __slots__ = ("value",)
    field, spec = "value", ","
    value: int

    def __int__(self) -> int:
        return int(self.value)


class Ratio(_Metric):
    """A unitless ratio (``.ratio``)."""

    __slots__ = ("ratio",)
    field, spec = "ratio", ".3f"
    ratio: float


_ENCODE = {Duration: "microseconds", Percent: "percent", Count: "count", Ratio: "ratio"}
_DECODE = {"microseconds": Duration, "percent": Percent, "count": Count, "ratio": Ratio}


def _metric(value: Any) -> Any:
    """A typed metric from a plain value (int -> Count, float -> Ratio, else str)."""
    if isinstance(value, (Duration, Percent, Count, Ratio, str)):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return Count(value)
    if isinstance(value, float):
        return Ratio(value)
    return str(value)


def _encode(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"string": value}
    return {_ENCODE[type(value)]: getattr(value, value.field)}


def _decode(value: Any, where: str) -> Any:
    if not (isinstance(value, dict) and len(value) == 1):
        raise ArtifactError(f"Report.from_json: {where}: expected an object with one key such as "
                            f'{{"microseconds": 1.5}}, got {json.dumps(value)[:60]}')
    ((key, raw),) = value.items()
    if key == "string":
        return str(raw)
    if key not in _DECODE or not isinstance(raw, (int, float)) or isinstance(raw, bool):
        raise ArtifactError(f"Report.from_json: {where}: unknown metric {key!r}={raw!r} (known: "
                            f"string, {', '.join(_DECODE)})")
    return _DECODE[key](int(raw) if key == "count" else float(raw))


class Report:
    """The result of profiling one run: ``calls``, ``device_metrics``, ``configuration``."""

    def __init__(self, calls: Sequence[Mapping[str, Any]],
                 device_metrics: Mapping[str, Mapping[str, Any]] | None = None,
                 configuration: Mapping[str, Any] | None = None) -> None:
        self.calls = [{k: _metric(v) for k, v in call.items()} for call in calls]
        self.device_metrics = {dev: {k: _metric(v) for k, v in m.items()}
                               for dev, m in (device_metrics or {}).items()}
        self.configuration = {k: _metric(v) for k, v in (configuration or {}).items()}

    # -- text -------------------------------------------------------------------------------
    def columns(self) -> list[str]:
        seen = {k: None for call in self.calls for k in call}
        return [c for c in _COLUMN_ORDER if c in seen] + [c for c in seen
                                                           if c not in _COLUMN_ORDER]

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """An aligned text table of the calls (longest first when ``sort``), calls with the same
        name, device and shapes merged when ``aggregate``, with ``Sum`` and ``Total`` rows
        when ``col_sums``, and the configuration below."""
        calls = _aggregate(self.calls) if aggregate else list(self.calls)
        if sort:
            calls.sort(key=lambda c: -float(c.get("Duration (us)", Duration(0))))
        cols = self.columns() or ["Name"]
        rows = [[_cell(c.get(col)) for col in cols] for c in calls]
        if col_sums and calls:
            rows.append(["-" * 4] + [""] * (len(cols) - 1))
            rows.append([_cell(_sum(calls, col)) if col != "Name" else "Sum" for col in cols])
            for dev, metrics in self.device_metrics.items():
                total = metrics.get("Duration (us)")
                if total is not None:
                    rows.append([f"Total ({dev})" if col == "Name" else
                                 _cell(total) if col == "Duration (us)" else "" for col in cols])
        numeric = {i for i, col in enumerate(cols) if col in ("Duration (us)", "Percent", "Count")}
        widths = [max([len(col)] + [len(r[i]) for r in rows]) for i, col in enumerate(cols)]
        lines = ["  ".join(_pad(col, widths[i], i in numeric) for i, col in enumerate(cols))]
        lines += ["  ".join(_pad(cell, widths[i], i in numeric) for i, cell in enumerate(r))
                  for r in rows]
        lines = [line.rstrip() for line in lines]
        if self.configuration:
            lines += ["", "Configuration", "-------------"]
            lines += [f"{k}: {_cell(v)}" for k, v in self.configuration.items()]
        return "\n".join(lines)

    def csv(self) -> str:
        """The calls as CSV (one row per call, raw numbers, no aggregation)."""
        import csv  # only here: keeps importing the runtime cheap

        cols = self.columns()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(cols)
        for call in self.calls:
            writer.writerow([_raw(call.get(col)) for col in cols])
        return out.getvalue()

    def json(self) -> str:
        """The report as JSON: ``{"calls": [...], "device_metrics": {...}, "configuration":
        {...}}``, every metric an object such as ``{"microseconds": 12.5}``."""
        return json.dumps({
            "calls": [{k: _encode(v) for k, v in call.items()} for call in self.calls],
            "device_metrics": {dev: {k: _encode(v) for k, v in m.items()}
                               for dev, m in self.device_metrics.items()},
            "configuration": {k: _encode(v) for k, v in self.configuration.items()},
        })

    @classmethod
    def from_json(cls, text: str | bytes) -> Report:
        """Read a report written by ``json()``; ArtifactError naming the bad field."""
        try:
            data = json_reader.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ArtifactError(f"Report.from_json: not valid JSON: {err}") from None
        if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
            raise ArtifactError("Report.from_json: expected an object with a 'calls' list")
        calls = [{k: _decode(v, f"calls[{i}][{k!r}]") for k, v in _obj(c, f"calls[{i}]").items()}
                 for i, c in enumerate(data["calls"])]
        devs = {d: {k: _decode(v, f"device_metrics[{d!r}][{k!r}]") for k, v in
                    _obj(m, f"device_metrics[{d!r}]").items()}
                for d, m in _obj(data.get("device_metrics", {}), "device_metrics").items()}
        conf = {k: _decode(v, f"configuration[{k!r}]") for k, v in
                _obj(data.get("configuration", {}), "configuration").items()}
        return cls(calls, devs, conf)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return (f"Report({len(self.calls)} calls, devices {list(self.device_metrics)}, "
                f"configuration {self.configuration})")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ArtifactError(f"Report.from_json: {where}: expected an object, got "
                            f"{type(value).__name__}")
    return value


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _raw(value: Any) -> Any:
    """A CSV cell: the bare number of a metric."""
    if value is None or isinstance(value, str):
        return value or ""
    return value.value if isinstance(value, Count) else float(value)


def _pad(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def _sum(calls: Iterable[Mapping[str, Any]], col: str) -> Any:
    values = [c[col] for c in calls if col in c]
    if values and all(isinstance(v, Duration) for v in values):
        return Duration(sum(v.microseconds for v in values))
    if values and all(isinstance(v, Percent) for v in values):
        return Percent(sum(v.percent for v in values))
    if values and all(isinstance(v, Count) for v in values):
        return Count(sum(v.value for v in values))
    return None


def _aggregate(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Merge calls whose string columns are all equal, summing their numeric metrics."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for call in calls:
        key = tuple(sorted((k, v) for k, v in call.items() if isinstance(v, str)))
        groups.setdefault(key, []).append(call)
    out = []
    for members in groups.values():
        merged = dict(members[0])
        if len(members) > 1:
            for col, value in members[0].items():
                if not isinstance(value, str):
                    merged[col] = _sum(members, col) or value
        out.append(merged)
    return out
