"""Rules shared by the text printer and parser: scalar literals, names, attribute values and
the metadata section. Keeping both directions side by side keeps them consistent.

Scalar literal suffixes (see docs/text_format.md):

    bool: True / False        int32: 3       int8/16/64: 3i8, 3i16, 3i64
    uint8/16/32/64: 3u8 ...   float32: 1f, 1.5f, 1e-07f (a suffix-less 1.5 is float32 too)
    float16: 1f16             float64: -1.5f64
"""
from __future__ import annotations

import base64
import json
import re
from typing import Any

import numpy as np

_INT_SUFFIX = {"int8": "i8", "int16": "i16", "int32": "", "int64": "i64",
               "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64"}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64"}
SUFFIX_DTYPES = {**{s: d for d, s in _INT_SUFFIX.items() if s}, "i32": "int32",
                 **{s: d for d, s in _FLOAT_SUFFIX.items()}, "f32": "float32"}
# A name may hold '/' between name characters (TensorFlow-style ``%conv1/weight``), never at
# either end nor doubled, so that ``%a/%b``, ``//`` and ``/*`` keep their meaning.
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)*"
IDENT_RE = re.compile(NAME_PATTERN + r"\Z")


# -- scalar literals --------------------------------------------------------------------------
def scalar_literal(arr: np.ndarray) -> str | None:
    """The inline literal of a 0-d array (``1f``, ``3i64``, ``True``), or None when the dtype
    or value has no literal form (the constant then goes to the metadata section)."""
    dtype = str(arr.dtype)
    value = arr[()]
    if dtype == "bool":
        return "True" if value else "False"
    if dtype in _INT_SUFFIX:
        return f"{int(value)}{_INT_SUFFIX[dtype]}"
    if dtype in _FLOAT_SUFFIX and np.isfinite(value):
        text = str(value)  # numpy's shortest repr that round-trips in this dtype
        if text.endswith(".0"):
            text = text[:-2]
        return text + _FLOAT_SUFFIX[dtype]
    return None


def literal_value(number: str, suffix: str) -> np.ndarray:
    """The 0-d array that ``number`` with ``suffix`` denotes. ValueError says why not."""
    is_float = any(c in number for c in ".eE")
    if suffix:
        dtype = SUFFIX_DTYPES.get(suffix)
        if dtype is None:
            known = ", ".join(sorted(SUFFIX_DTYPES))
            raise ValueError(f"unknown literal suffix {suffix!r} (known: {known})")
    else:
        dtype = "float32" if is_float else "int32"
    if dtype.startswith(("int", "uint")):
        if is_float:
            raise ValueError(f"{number} is not an integer, but the suffix {suffix!r} "
                             f"makes it {dtype}")
        info = np.iinfo(dtype)
        value = int(number)
        if not info.min <= value <= info.max:
            raise ValueError(f"{value} is out of range for {dtype} "
                             f"(it holds {info.min} to {info.max})")
        return np.array(value, dtype=dtype)
    with np.errstate(over="ignore"):
        arr = np.array(np.float64(number), dtype=dtype)
    if not np.isfinite(arr):
        raise ValueError(f"{number} is out of range for {dtype}")
    return arr


# -- names ------------------------------------------------------------------------------------
def sanitize_name(name: str) -> str:
    """A name the lexer reads back as one identifier: invalid characters (and a ``/`` that is
    not between name characters) become ``_`` and a name that does not start with a letter
    gets a ``v`` prefix (``%0`` would be a temporary)."""
    if IDENT_RE.match(name):
        return name
    name = re.sub(r"[^A-Za-z0-9_/]", "_", name)
    name = re.sub(r"(?<![A-Za-z0-9_])/|/(?![A-Za-z0-9_])", "_", name)
    return name if name and (name[0].isalpha() or name[0] == "_") else "v" + name


class NameTable:
    """Gives each object a unique name based on its hint: ``x``, then ``x1``, ``x2``, ..."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set(reserved)  # names that would read back as something else
        self._keep: list[Any] = []  # keeps named objects alive so their ids stay unique
        # The last suffix given per hint: the next search starts there (every smaller one is
        # taken), so n variables all called x cost n steps, not n*n/2.
        self._suffix: dict[str, int] = {}

    def get(self, obj: Any, hint: str) -> str:
        name = self.names.get(id(obj))
        if name is not None:
            return name
        base = sanitize_name(hint)
        name, k = base, 0
        if name in self.used:
            k = self._suffix.get(base, 0) + 1
            name = f"{base}{k}"
            while name in self.used:
                k += 1
                name = f"{base}{k}"
            self._suffix[base] = k
        self.used.add(name)
        self.names[id(obj)] = name
        self._keep.append(obj)
        return name


# -- attribute values -------------------------------------------------------------------------
def attr_value_text(value: Any) -> str:
    """An attribute value as text: ints, floats (always with a '.' or exponent), quoted
    strings, True/False/None and nested lists. Other objects print as a quoted repr (lossy)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return str(None if value is None else bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # 'inf', '-inf' and 'nan' read back as words
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(attr_value_text(v) for v in value) + "]"
    if hasattr(value, "value") and isinstance(value.value, (int, float)):
        return attr_value_text(value.value)  # IntImm-like wrappers
    return json.dumps(str(value))


# -- metadata section -------------------------------------------------------------------------
CONSTANT_KIND = "relay.Constant"


def encode_array(arr: np.ndarray) -> dict[str, Any]:
    """A self-contained JSON record of an array: dtype, shape and little-endian base64 bytes."""
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return {"dtype": str(arr.dtype), "shape": list(arr.shape),
            "data": base64.b64encode(data.tobytes()).decode("ascii")}


def decode_array(record: Any) -> np.ndarray:
    """The array of an ``encode_array`` record; ValueError names the problem."""
    if not isinstance(record, dict) or not {"dtype", "shape", "data"} <= record.keys():
        raise ValueError("each constant must be an object with 'dtype', 'shape' and 'data'")
    dtype = np.dtype(record["dtype"]).newbyteorder("<")
    raw = base64.b64decode(record["data"], validate=True)
    shape = tuple(int(d) for d in record["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) != count * dtype.itemsize:
        raise ValueError(f"{len(raw)} data bytes do not fit shape {shape} of {record['dtype']}")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("=")).reshape(shape)


def encode_metadata(arrays: list[np.ndarray]) -> str:
    """The JSON text after ``#[metadata]``: one record per line, in index order."""
    rows = [json.dumps(encode_array(a), sort_keys=True) for a in arrays]
    body = ",\n    ".join(rows)
    return f'{{\n  "{CONSTANT_KIND}": [\n    {body}\n  ]\n}}'
