"""JSON without recursion: ``loads`` reads documents nested as deeply as their length allows.

``json.loads`` recurses once per level of nesting (a RecursionError at about a thousand), so
a hostile artifact (graph JSON, metadata, a VM header, the text format's ``#[metadata]``)
could end a load with a RecursionError instead of an error naming the file. ``loads`` takes
the json module's fast path and, only for a document nested too deeply for it, this module's
reader, which keeps the open arrays and objects on a list. Strings are read by the json
module's own ``scanstring``, and values, error messages and error positions are those of
``json.loads`` (errors are ``json.JSONDecodeError``, a ValueError, with ``msg``, ``lineno``
and ``colno``)::

    loads("[" * 100_000 + "]" * 100_000)   # a list in a list in ... 100,000 deep
"""
from __future__ import annotations

import json
import re
from json import JSONDecodeError
from json.decoder import scanstring
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_WORDS = {"n": ("null", None), "t": ("true", True), "f": ("false", False),
          "N": ("NaN", float("nan")), "I": ("Infinity", float("inf")),
          "-": ("-Infinity", float("-inf"))}
_CLOSE = {list: "]", dict: "}"}


def loads(s: str | bytes | bytearray | memoryview) -> Any:
    """The value of the JSON document ``s`` (bytes are UTF-8), as ``json.loads(s)`` gives it,
    at any depth."""
    if not isinstance(s, str):
        s = bytes(s).decode("utf-8")  # a UnicodeDecodeError is a ValueError too
    try:
        return json.loads(s)
    except RecursionError:
        return deep_loads(s)


def deep_loads(s: str) -> Any:
    """``loads`` without the json module's recursive fast path."""
    if s.startswith("\ufeff"):
        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", s, 0)
    value, end = _value(s, _WS.match(s, 0).end())  # type: ignore[union-attr]
    end = _WS.match(s, end).end()  # type: ignore[union-attr]
    if end != len(s):
        raise JSONDecodeError("Extra data", s, end)
    return value


def _value(s: str, idx: int) -> tuple[Any, int]:
    """The value that starts at ``idx``, and the index after it."""
    # The open containers, innermost last: [the list or dict, the key of the member being
    # read (None in a list)].
    open_: list[list[Any]] = []
    while True:
        value, idx, opened = _start(s, idx)
        if opened is not None:  # a non-empty array or object: read its first member next
            open_.append(opened)
            continue
        while open_:  # put the value in its container; close every container that ends
            top = open_[-1]
            container, key = top
            if key is None:
                container.append(value)
            else:
                container[key] = value
            idx = _WS.match(s, idx).end()  # type: ignore[union-attr]
            char = s[idx:idx + 1]
            if char == _CLOSE[type(container)]:
                value, idx = open_.pop()[0], idx + 1
                continue
            if char != ",":
                raise JSONDecodeError("Expecting ',' delimiter", s, idx)
            idx = _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
            if key is not None:
                top[1], idx = _key(s, idx)
            break  # the next member starts at idx
        else:
            return value, idx


def _start(s: str, idx: int) -> tuple[Any, int, list[Any] | None]:
    """A scalar or an empty container at ``idx`` as (value, end, None); for a non-empty
    container, (None, index of its first member, the container to fill)."""
    char = s[idx:idx + 1]
    if char == '"':
        text, end = scanstring(s, idx + 1, True)
        return text, end, None
    if char == "[":
        idx = _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
        if s[idx:idx + 1] == "]":
            return [], idx + 1, None
        return None, idx, [[], None]
    if char == "{":
        idx = _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
        if s[idx:idx + 1] == "}":
            return {}, idx + 1, None
        key, idx = _key(s, idx)
        return None, idx, [{}, key]
    word = _WORDS.get(char)
    if word is not None and s.startswith(word[0], idx):
        return word[1], idx + len(word[0]), None
    m = _NUMBER.match(s, idx)
    if m is None:
        raise JSONDecodeError("Expecting value", s, idx)
    integer, frac, exp = m.groups()
    try:
        number = float(m.group()) if frac or exp else int(integer)
    except ValueError as err:  # an integer of more digits than Python converts
        raise JSONDecodeError(str(err), s, idx) from None
    return number, m.end(), None


def _key(s: str, idx: int) -> tuple[str, int]:
    """An object's ``"key":`` at ``idx``: the key and the index where its value starts."""
    if s[idx:idx + 1] != '"':
        raise JSONDecodeError("Expecting property name enclosed in double quotes", s, idx)
    key, idx = scanstring(s, idx + 1, True)
    idx = _WS.match(s, idx).end()  # type: ignore[union-attr]
    if s[idx:idx + 1] != ":":
        raise JSONDecodeError("Expecting ':' delimiter", s, idx)
    return key, _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
