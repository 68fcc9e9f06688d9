"""Tuning records: tile sizes measured on this machine, used instead of the cost models'.

The C kernels take their tiles as run-time arguments (``gemm_kernel.gemm_tiles``,
``conv2d_nchwc.conv_tiles`` and ``depthwise_tiles``). Each of those asks :func:`lookup` with its kernel name, the
geometry of the call, the SIMD level and the cost model's tiles; when the active record file
holds an entry for exactly that key (and the thread count the build is for), the entry's tiles
are used, else the cost model's. A build is therefore deterministic given the record file.
``ember tune`` / ``ember.tune`` (``ember/tuning/``) measure tiles and write the entries.

Which file is active (first match):

- ``EMBER_TUNING_RECORDS=off``: none, every tile comes from the cost models;
- ``EMBER_TUNING_RECORDS=<path>``: that file (it may hold records of another CPU: for building
  on one machine what was tuned on another);
- else ``$EMBER_CACHE_DIR/tuning/<CPU model>.json``, the file ``ember tune`` writes by
  default. It must say it was measured on this CPU model.

A missing file means no records. A record of an older revision of its kernel (``REVISIONS``:
the kernel changed since it was measured) is skipped, as if absent. A file that is not JSON, not a record file, of another
format version, of another CPU (the default file only), or with an entry whose fields are
missing or of the wrong type raises :class:`TuningRecordError` naming the file and the entry:
records change the generated code, so a broken file is reported rather than silently skipped
(delete it, or set ``EMBER_TUNING_RECORDS=off``). Tiles are checked again at lookup by the
kernel's own rule (``check``), so a hand-edited entry cannot make a kernel read out of
bounds.

The thread count of the key is the PassContext option ``ember.tuning.threads`` when set
(``ember compile --threads`` sets it), else ``EMBER_NUM_THREADS``, else the physical cores.

File format (JSON)::

    {"format": "ember-tuning-records", "version": 1, "cpu": "<model name>",
     "records": [{"kernel": "conv2d_nchwc", "level": "avx512", "threads": 2,
                  "geometry": [...], "tiles": {"rb": 2, "rw": 12, ...},
                  "seconds": 1.2e-4, "model_seconds": 1.5e-4, "revision": 1}, ...]}

``geometry`` is the kernel's key as a list of integers (GEMM: batch, M, N, K; conv and
depthwise: ``conv2d_nchwc.conv_key``); ``seconds`` is the best measured time of one call,
``model_seconds`` that of the cost model's tiles.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..runtime.cache import atomic_write, cache_dir, content_hash
from ..runtime.cpu_features import host_cpu_name
from ..runtime.errors import TuningRecordError
from ..target.simd import LEVELS, SimdLevel

FORMAT = "ember-tuning-records"
VERSION = 1
ENV_VAR = "EMBER_TUNING_RECORDS"
THREADS_OPTION = "ember.tuning.threads"  # PassContext config: the thread count to look up
_FIELDS = ("kernel", "level", "threads", "geometry", "tiles", "seconds", "model_seconds")
# A kernel's revision goes up when its tiles change meaning or its timings go stale: a record
# of another revision is skipped at lookup (the cost model's tiles are used until ``ember
# tune`` measures again). An entry without "revision" is of revision 1.
# sgemm 2: AVX-512's 12-row register tile (mc a multiple of 12) and k blocks outermost.
REVISIONS = {"sgemm": 2}
T = TypeVar("T")
Key = tuple[str, str, int, tuple[int, ...]]


@dataclass(frozen=True)
class Record:
    """One measured kernel call: the key (kernel, SIMD level, threads, geometry), the best
    tiles found and the time of one call with them and with the cost model's tiles."""

    kernel: str
    level: str
    threads: int
    geometry: tuple[int, ...]
    tiles: tuple[tuple[str, int], ...]
    seconds: float
    model_seconds: float
    revision: int = 0  # 0: the kernel's current revision (REVISIONS)

    def __post_init__(self) -> None:
        if not self.revision:
            object.__setattr__(self, "revision", REVISIONS.get(self.kernel, 1))

    @property
    def current(self) -> bool:
        """Whether the record was measured with the kernel as this ember builds it."""
        return self.revision == REVISIONS.get(self.kernel, 1)

    @property
    def key(self) -> Key:
        return (self.kernel, self.level, self.threads, self.geometry)

    def to_json(self) -> dict[str, Any]:
        """The entry as the file stores it."""
        return {"kernel": self.kernel, "level": self.level, "threads": self.threads,
                "geometry": list(self.geometry), "tiles": dict(self.tiles),
                "seconds": self.seconds, "model_seconds": self.model_seconds,
                "revision": self.revision}


@dataclass(frozen=True)
class RecordFile:
    """The records of one file, by key (with each entry's index, for error messages)."""

    path: Path
    cpu: str
    records: dict[Key, tuple[int, Record]]

    @property
    def digest(self) -> str:
        return content_hash(*(json.dumps(r.to_json(), sort_keys=True)
                              for _, r in sorted(self.records.values(), key=lambda e: e[0])))


@dataclass(frozen=True)
class Query:
    """A tile question asked while recording (:func:`recording`): what ``ember tune``
    measures. ``model`` is the cost model's answer."""

    kernel: str
    geometry: tuple[int, ...]
    level: SimdLevel
    model: Any


# ---------------------------------------------------------------------------- the file
def default_path() -> Path:
    """``$EMBER_CACHE_DIR/tuning/<CPU model>.json``: this machine's record file."""
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "_", host_cpu_name()).strip("_") or "cpu"
    return cache_dir("tuning", create=False) / f"{slug}.json"


def records_path() -> Path | None:
    """The record file builds read (see the module docstring), None when records are off."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env.lower() == "off":
        return None
    return Path(env) if env else default_path()


def _fail(path: Path, what: str) -> TuningRecordError:
    return TuningRecordError(f"tuning records {path}: {what} (delete or fix the file, or set "
                             f"{ENV_VAR}=off to build without records)")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(path: Path, index: int, raw: Any) -> Record:
    where = f"records[{index}]"
    if not isinstance(raw, dict) or not set(_FIELDS) <= set(raw) <= {*_FIELDS, "revision"}:
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise _fail(path, f"{where}: expected an object with the fields {', '.join(_FIELDS)}, "
                          f"got {got}")
    geometry, tiles = raw["geometry"], raw["tiles"]
    problems = [
        (not isinstance(raw["kernel"], str), "kernel must be a string"),
        (raw["level"] not in LEVELS, f"level must be one of {', '.join(LEVELS)}"),
        (not _int(raw["threads"]) or raw["threads"] < 1, "threads must be a positive integer"),
        (not isinstance(geometry, list) or not all(_int(g) for g in geometry),
         "geometry must be a list of integers"),
        (not isinstance(tiles, dict) or not all(isinstance(k, str) and isinstance(v, int)
                                                for k, v in tiles.items()),
         "tiles must map names to integers"),
        (not all(isinstance(raw[f], (int, float)) and raw[f] > 0
                 for f in ("seconds", "model_seconds")),
         "seconds and model_seconds must be positive numbers"),
        (not _int(raw.get("revision", 1)) or raw.get("revision", 1) < 1,
         "revision must be a positive integer"),
    ]
    for bad, what in problems:
        if bad:
            raise _fail(path, f"{where}: {what}, got {json.dumps(raw)[:200]}")
    return Record(raw["kernel"], raw["level"], raw["threads"], tuple(geometry),
                  tuple(sorted((k, int(v)) for k, v in tiles.items())),
                  float(raw["seconds"]), float(raw["model_seconds"]), raw.get("revision", 1))


def load(path: str | os.PathLike, expect_cpu: str | None = None) -> RecordFile:
    """The records of ``path`` (none if it does not exist), checked entry by entry; with
    ``expect_cpu``, the file must have been measured on that CPU model.
    Raises TuningRecordError naming the file and the entry."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return RecordFile(path, expect_cpu or "", {})
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(path, f"cannot be read: {err}") from None
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise _fail(path, f"not JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _fail(path, f"not an ember tuning record file (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise _fail(path, f"format version {doc.get('version')!r}, this ember reads {VERSION}")
    if not isinstance(doc.get("cpu"), str) or not isinstance(doc.get("records"), list):
        raise _fail(path, "expected a \"cpu\" string and a \"records\" list")
    if expect_cpu is not None and doc["cpu"] != expect_cpu:
        raise _fail(path, f"measured on {doc['cpu']!r}, this CPU is {expect_cpu!r}")
    records: dict[Key, tuple[int, Record]] = {}
    for index, raw in enumerate(doc["records"]):
        record = _entry(path, index, raw)
        records[record.key] = (index, record)
    return RecordFile(path, doc["cpu"], records)


def save(path: str | os.PathLike, new: list[Record], cpu: str | None = None) -> Path:
    """Merge ``new``, measured on ``cpu`` (default: this one), into the file at ``path`` (an
    entry with the same key is replaced), written atomically; the path. Raises
    TuningRecordError when the file holds records of another CPU (one file, one CPU)."""
    path = Path(path)
    cpu = cpu or host_cpu_name()
    old = load(path)
    if old.records and old.cpu != cpu:
        raise _fail(path, f"holds records measured on {old.cpu!r}; these are from {cpu!r} "
                          "(write them to another file)")
    merged = {key: record for key, (_, record) in old.records.items()}
    merged.update((r.key, r) for r in new)
    doc = {"format": FORMAT, "version": VERSION, "cpu": cpu,
           "records": [merged[k].to_json() for k in sorted(merged, key=repr)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode())
    _CACHE.clear()
    return path


_CACHE: dict[tuple[str, int, int], RecordFile] = {}


def active() -> RecordFile | None:
    """The records builds use now (re-read when the file changes), None when off or empty."""
    path = records_path()
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (str(path), st.st_mtime_ns, st.st_size)
    if stamp not in _CACHE:
        _CACHE.clear()
        expect = host_cpu_name() if path == default_path() else None
        _CACHE[stamp] = load(path, expect)
    found = _CACHE[stamp]
    return found if found.records else None


def build_threads() -> int:
    """The thread count a build looks records up for (module docstring)."""
    from ..ir.transform import PassContext
    from ..runtime.threads import default_num_threads

    configured = PassContext.current().config.get(THREADS_OPTION)
    return int(configured) if configured is not None else default_num_threads()


def fingerprint() -> str:
    """What the kernel cache key needs of the records: their digest and the thread count
    looked up ('' without records)."""
    found = active()
    return "" if found is None else f"{found.digest}:{build_threads()}"


# ---------------------------------------------------------------------------- lookup
_RECORDERS: list[list[Query]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Query]]:
    """Within the block, every :func:`lookup` appends its question to the yielded list."""
    queries: list[Query] = []
    _RECORDERS.append(queries)
    try:
        yield queries
    finally:
        _RECORDERS.remove(queries)


def lookup(kernel: str, geometry: tuple[int, ...], level: SimdLevel, model: T,
           check: Callable[[T], str | None]) -> T:
    """The recorded tiles of this call if the active file has them, else ``model`` (the cost
    model's, a dataclass of int/bool fields). ``check(tiles)`` returns why tiles cannot run
    (None if they can); a record it rejects raises TuningRecordError."""
    for queries in _RECORDERS:
        queries.append(Query(kernel, geometry, level, model))
    found = active()
    hit = None if found is None else found.records.get(
        (kernel, level.name, build_threads(), geometry))
    if hit is None or not hit[1].current:
        return model
    index, record = hit
    return _checked_tiles(model, dict(record.tiles), check,
                         lambda what: _fail(found.path, f"records[{index}] ({kernel} "
                                                        f"{list(geometry)}): {what}"))


def _checked_tiles(model: T, tiles: dict[str, int], check: Callable[[T], str | None],
                  fail: Callable[[str], Exception]) -> T:
    """``model`` with the fields of ``tiles`` (exactly its fields), if ``check`` accepts it;
    else ``fail(what)`` is raised."""
    names = [f.name for f in dataclasses.fields(model)]  # type: ignore[arg-type]
    if sorted(tiles) != sorted(names):
        raise fail(f"tiles must have the fields {', '.join(names)}, got {', '.join(tiles)}")
    tiles_of = dataclasses.replace(model, **{  # type: ignore[type-var]
        k: type(getattr(model, k))(v) for k, v in tiles.items()})
    problem = check(tiles_of)
    if problem:
        raise fail(f"tiles {tiles} cannot be used: {problem}")
    return tiles_of
