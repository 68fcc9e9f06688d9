"""Saying what is wrong with bytes that do not parse as an ONNX model.

protobuf's own error is one sentence for every failure ("Wire format was corrupt"). When
parsing fails, ``diagnose(data, descriptor)`` looks again and names the problem:

    empty (0 bytes)
    a text file (starts with 'hello'), not a binary ONNX model
    a ZIP archive (a PyTorch checkpoint?), not an ONNX model
    truncated: the file ends at byte 512 inside graph.initializer[0], which needs 4800
        more byte(s)
    not a readable ONNX model: corrupt at byte 77 (in graph.node[1]): invalid wire type 7

The wire scan reads the protobuf encoding (tag varints, lengths) field by field, descending
into the fields that ``ModelProto``'s descriptor says are messages, with an explicit stack (no
recursion however deep the nesting). It only runs after a failed parse, so it costs nothing on
good files.
"""
from __future__ import annotations

from typing import Any

# Leading bytes of files people mistake for ONNX models: (magic, offset, what it is).
MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x7fELF", 0, "an ELF binary (a compiled library: run it with `ember run`)"),
    (b"PK\x03\x04", 0, "a ZIP archive (a PyTorch checkpoint or a zipped model?)"),
    (b"\x1f\x8b", 0, "a gzip file (decompress it first)"),
    (b"\x89HDF\r\n\x1a\n", 0, "an HDF5 file (a Keras model?)"),
    (b"TFL3", 4, "a TensorFlow Lite model"),
    (b"\x93NUMPY", 0, "a NumPy array file"),
    (b"ustar", 257, "a tar archive (Model Library Format? run it with `ember run`)"),
)
_WIRE_NAMES = {3: "start-group", 4: "end-group", 6: "invalid wire type 6",
               7: "invalid wire type 7"}
TEXT_SAMPLE = 512  # bytes looked at to decide that a file is text


def diagnose(data: bytes, descriptor: Any) -> str | None:
    """Why ``data`` is not a readable message of ``descriptor`` (a sentence fragment after the
    file's name), or None when nothing specific is found."""
    if not data:
        return "empty (0 bytes), not an ONNX model"
    for magic, offset, what in MAGIC:
        if data[offset:offset + len(magic)] == magic:
            return f"{what}, not an ONNX model"
    text = text_start(data)
    if text is not None:
        hint = (" (it looks like ONNX in protobuf text format: convert it with "
                "onnx.save(onnx.load(path, format='textproto'), 'model.onnx'))"
                if "ir_version" in text or "graph {" in text else "")
        return f"a text file (starts with {text[:40]!r}), not a binary ONNX model{hint}"
    return scan_wire(data, descriptor)


def text_start(data: bytes) -> str | None:
    """The start of ``data`` as text if it reads as UTF-8 text (tabs and newlines allowed), else
    None. A binary ONNX model starts with a field tag (0x08), a control character."""
    sample = data[:TEXT_SAMPLE]
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError as err:  # a multi-byte character cut at the sample's end is fine
        if err.start < len(sample) - 3:
            return None
        text = sample[:err.start].decode("utf-8")
    if not text or any(not (c.isprintable() or c in "\t\r\n") for c in text):
        return None
    return text.strip()


def _corrupt(at: int, where: str, what: str) -> str:
    place = f"in {where}" if where else "at the top level"
    return f"not a readable ONNX model: corrupt at byte {at} ({place}): {what}"


def _varint(data: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """(value, next position); value None when the varint runs past ``end`` (position then
    says where), or -1 when it is longer than 10 bytes."""
    value, shift, start = 0, 0, pos
    while pos < end:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if pos - start >= 10:
            return -1, pos
    return None, pos


def _past_end(data: bytes, at: int, end: int, where: str, need: int) -> str:
    """A field that runs past ``end``: truncation when ``end`` is the end of the file, else a
    length that overruns the enclosing message (corruption)."""
    if end == len(data):
        return (f"truncated: the file ends at byte {len(data)} inside {where or 'the model'}, "
                f"which needs {need} more byte(s)")
    return _corrupt(at, where, "a length runs past the end of the enclosing message")


def _repeated(field: Any) -> bool:
    """Whether a FieldDescriptor is repeated (``is_repeated`` on protobuf >= 6, ``label``
    before)."""
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _bad_tag(tag: int) -> str | None:
    if tag == -1:
        return "a field tag longer than 10 bytes"
    if tag >> 3 == 0:
        return "field number 0"
    return _WIRE_NAMES.get(tag & 7)


def _value_end(data: bytes, pos: int, end: int, wire: int) -> tuple[int | None, int]:
    """(where the value starting at ``pos`` ends, or None if it runs past ``end`` or is
    malformed; for a length-delimited value, where its payload starts)."""
    if wire == 0:
        value, pos = _varint(data, pos, end)
        return (None if value is None or value == -1 else pos), pos
    if wire in (1, 5):
        stop = pos + (8 if wire == 1 else 4)
        return (stop if stop <= end else None), pos
    length, start = _varint(data, pos, end)
    if length is None or length == -1 or start + length > end:
        return None, start
    return start + length, start


def scan_wire(data: bytes, descriptor: Any) -> str | None:
    """The first structural problem of ``data`` as an encoded ``descriptor`` message."""
    stack: list[tuple[int, int, Any, str]] = [(0, len(data), descriptor, "")]
    while stack:
        pos, end, desc, path = stack.pop()
        seen: dict[str, int] = {}
        nested: list[tuple[int, int, Any, str]] = []
        while pos < end:
            at = pos
            tag, pos = _varint(data, pos, end)
            if tag is None:
                return _past_end(data, at, end, path, 1)
            bad = _bad_tag(tag)
            if bad is not None:
                return _corrupt(at, path, bad)
            field = desc.fields_by_number.get(tag >> 3) if desc is not None else None
            name = field.name if field is not None else f"<field {tag >> 3}>"
            seen[name] = seen.get(name, -1) + 1
            where = f"{path}.{name}" if path else name
            if field is not None and _repeated(field):
                where += f"[{seen[name]}]"
            stop, start = _value_end(data, pos, end, tag & 7)
            if stop is None:
                return _value_problem(data, at, pos, end, where, tag & 7)
            if tag & 7 == 2 and field is not None and field.message_type is not None:
                nested.append((start, stop, field.message_type, where))
            elif tag & 7 == 2 and field is not None and _repeated(field):
                bad = _packed_problem(data, start, stop, field)
                if bad is not None:
                    return _corrupt(at, where, bad)
            pos = stop
        stack.extend(reversed(nested))  # first field first
    return None


def _packed_problem(data: bytes, start: int, stop: int, field: Any) -> str | None:
    """Why a packed repeated number field's payload is malformed, or None."""
    width = {field.TYPE_DOUBLE: 8, field.TYPE_FIXED64: 8, field.TYPE_SFIXED64: 8,
             field.TYPE_FLOAT: 4, field.TYPE_FIXED32: 4, field.TYPE_SFIXED32: 4}.get(field.type)
    if width is not None:
        if (stop - start) % width:
            return f"{stop - start} bytes of packed {width}-byte numbers"
        return None
    if field.type in (field.TYPE_STRING, field.TYPE_BYTES):
        return None
    pos = start
    while pos < stop:
        value, pos = _varint(data, pos, stop)
        if value is None or value == -1:
            return "a packed list of numbers with a broken varint"
    return None


def _value_problem(data: bytes, at: int, pos: int, end: int, where: str, wire: int) -> str:
    """Why the value of the field at ``at`` (its value starting at ``pos``) does not fit."""
    first, after = _varint(data, pos, end)
    if wire in (0, 2) and first == -1:
        return _corrupt(at, where, f"a {'varint' if wire == 0 else 'length'} longer than 10 "
                        "bytes")
    if wire in (0, 2) and first is None:
        return _past_end(data, at, end, where, 1)
    need = (pos + (8 if wire == 1 else 4) if wire in (1, 5) else after + (first or 0)) - end
    return _past_end(data, at, end, where, need)


def undecodable_string(proto: Any) -> str | None:
    """Where a string field of a parsed message is not UTF-8 (protobuf then hands it back
    as bytes; a flipped bit in a node's op type does that), e.g.
    ``graph.node[1].op_type is not UTF-8 text (b'R\\xe5lu')``; None when every one is.

    Runs on every model loaded, so the per-value test is C's (``"".join`` of a repeated
    field fails on a bytes value) and a message's path is spelled out only for the culprit.
    """
    # a stack item: (message, its parent item, field name, index or None)
    stack: list[tuple[Any, Any, str, int | None]] = [(proto, None, "", None)]
    while stack:
        item = stack.pop()
        msg = item[0]
        strings, messages = _layout(msg.DESCRIPTOR)
        for name, repeated in strings:
            value = getattr(msg, name)
            if repeated:
                try:
                    "".join(value)
                    continue
                except TypeError:
                    k = next(k for k, v in enumerate(value) if isinstance(v, bytes))
                    value = value[k]
            elif not isinstance(value, bytes):
                continue
            return (f"{_path((None, item, name, k if repeated else None))} is not UTF-8 text "
                    f"({value[:40]!r})")
        for name, repeated in messages:
            if repeated:
                stack.extend((m, item, name, k) for k, m in enumerate(getattr(msg, name)))
            elif msg.HasField(name):
                stack.append((getattr(msg, name), item, name, None))
    return None


def _path(item: tuple[Any, Any, str, int | None]) -> str:
    """``graph.node[3].op_type`` for a stack item of ``undecodable_string``."""
    parts = []
    while item is not None and item[2]:
        parts.append(item[2] + ("" if item[3] is None else f"[{item[3]}]"))
        item = item[1]
    return ".".join(reversed(parts))


_LAYOUTS: dict[str, tuple[list[tuple[str, bool]], list[tuple[str, bool]]]] = {}


def _layout(desc: Any) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """(string fields, message fields) of a message type as (name, repeated), computed once
    per type."""
    layout = _LAYOUTS.get(desc.full_name)
    if layout is None:
        strings = [(f.name, _repeated(f)) for f in desc.fields if f.type == f.TYPE_STRING]
        messages = [(f.name, _repeated(f)) for f in desc.fields if f.type == f.TYPE_MESSAGE]
        layout = _LAYOUTS[desc.full_name] = (strings, messages)
    return layout
