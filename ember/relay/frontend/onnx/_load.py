"""THE ONNX loader: a ModelProto from a proto, the bytes of a file, or a path (external data
included), and the model's default-domain opset. Every entry point reads models through
``load_model`` (``relay.frontend.from_onnx``, ``ember.compile``, the ``ember`` command), so a
bad file gets the same one-line message everywhere, naming the file and what is wrong:

    bad.onnx: truncated: it ends at byte 512 inside graph.initializer[0], which needs 4800
        more byte(s)
    m.onnx: initializer 'w': its external data file 'w.bin' (/models/w.bin) is missing
"""
from __future__ import annotations

import os
from typing import Any

from ....runtime.errors import FrontendError, OpNotImplemented
from ._file_check import diagnose, text_start, undecodable_string
from ._proto import require_onnx

DEFAULT_DOMAINS = ("", "ai.onnx")
# protobuf refuses messages of 2 GiB or more; larger models keep their weights in external
# data files (onnx.save_model(..., save_as_external_data=True)).
PROTOBUF_LIMIT = 2**31 - 1
EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


def load_model(model: Any) -> tuple[Any, str]:
    """(ModelProto, how to name it in messages) for a ModelProto, the bytes of a ``.onnx``
    file, or a path to one.

    A file's external data is read from the file's directory. Raises FileNotFoundError for a
    missing path, IsADirectoryError for a directory, FrontendError (a ValueError) for a file
    that is not a (complete) ONNX model or whose external data cannot be read, TypeError for
    anything else; every message starts with the path.
    """
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model, "the model"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(onnx, bytes(model), "the model bytes"), "the model"
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"from_onnx: expected an onnx.ModelProto, a path to a .onnx file or "
                        f"its bytes, got {type(model).__name__}")
    path = os.fspath(model)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: a directory, not an ONNX model file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    proto = _parse(onnx, data, path)
    load_external_data(proto, path)
    return proto, path


def _parse(onnx: Any, data: bytes, where: str) -> Any:
    """``data`` parsed as a ModelProto that has a graph; FrontendError saying why not."""
    from google.protobuf.message import DecodeError

    if len(data) > PROTOBUF_LIMIT:
        raise FrontendError(f"{where}: {len(data)} bytes, more than protobuf reads (2 GiB); "
                            "save the model with its weights as external data "
                            "(onnx.save_model(..., save_as_external_data=True))")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        why = diagnose(data, proto.DESCRIPTOR)
        raise FrontendError(f"{where}: {why}" if why else
                            f"{where}: not a readable ONNX model ({err})") from None
    if not proto.HasField("graph"):
        why = diagnose(data, None) if not data or text_start(data) is not None else None
        raise FrontendError(f"{where}: {why}" if why else f"{where}: no graph in its "
                            f"{len(data)} bytes: not an ONNX model, or a truncated one")
    if proto.ir_version <= 0:
        raise FrontendError(f"{where}: not an ONNX model: it has no IR version (ir_version "
                            f"{proto.ir_version})")
    bad = undecodable_string(proto)
    if bad is not None:
        raise FrontendError(f"{where}: not a readable ONNX model: {bad}")
    return proto


def _tensors(proto: Any) -> list[tuple[Any, str]]:
    """Every TensorProto of the model that may hold external data, with its name in
    messages: initializers and tensor attributes, in every graph and subgraph."""
    out: list[tuple[Any, str]] = []
    graphs = [proto.graph]
    while graphs:
        g = graphs.pop()
        out += [(t, f"initializer {t.name!r}") for t in g.initializer]
        for node in g.node:
            label = f"{node.op_type} node {node.name!r}" if node.name else f"a {node.op_type} node"
            for a in node.attribute:
                if a.HasField("t"):
                    out.append((a.t, f"{label}: attribute {a.name}"))
                out += [(t, f"{label}: attribute {a.name}") for t in a.tensors]
                graphs += ([a.g] if a.HasField("g") else []) + list(a.graphs)
    return out


def load_external_data(proto: Any, path: str) -> None:
    """Read the external data of ``proto`` (loaded from ``path``) from the files next to it;
    FrontendError naming the tensor and the file that is missing, short or outside the
    model's directory."""
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

    base = os.path.dirname(os.path.abspath(path))
    for tensor, what in _tensors(proto):
        if tensor.data_location != EXTERNAL:
            continue
        info = ExternalDataInfo(tensor)
        full = os.path.join(base, info.location or "")
        if not info.location:
            raise FrontendError(f"{path}: {what}: its data is external but names no file")
        if not os.path.isabs(info.location) and not os.path.exists(full):
            raise FrontendError(f"{path}: {what}: its external data file {info.location!r} "
                                f"({full}) is missing; keep the data files next to the model")
        try:
            load_external_data_for_tensor(tensor, base)
        except Exception as err:  # noqa: BLE001  onnx raises ValidationError (no builtin base)
            raise FrontendError(f"{path}: {what}: cannot read its external data from "
                                f"{info.location!r}: {err}") from None
        tensor.data_location = 0
        del tensor.external_data[:]


def model_opset(proto: Any, override: int | None, where: str) -> int:
    """The default-domain opset to import with (``override`` wins): FrontendError when the
    model declares none, OpNotImplemented when it is newer than the installed ``onnx``
    package defines (operators are then judged at their own versions, ``_versions.py``)."""
    from ._versions import newest_opset

    if override is not None:
        if isinstance(override, bool) or not isinstance(override, int):
            raise TypeError(f"from_onnx: opset must be an int, got {override!r}")
        opset, source = int(override), "opset="
    else:
        found = [e.version for e in proto.opset_import if e.domain in DEFAULT_DOMAINS]
        if not found:
            if proto.graph.node:
                raise FrontendError(f"{where}: the model declares no opset for the default "
                                    "ONNX domain (opset_import); pass opset= to say which "
                                    "one it uses")
            found = [newest_opset()]  # no nodes: nothing depends on the opset
        opset, source = int(found[0]), "the model's opset_import"
    newest = newest_opset()
    if opset < 1:
        raise FrontendError(f"{where}: opset {opset} (from {source}) is not an ONNX opset "
                            "(they start at 1)")
    if opset > newest:
        import onnx

        raise OpNotImplemented(
            f"{where}: ONNX opset {opset} (from {source}) is newer than the installed onnx "
            f"package ({onnx.__version__}) defines ({newest}): upgrade onnx, or pass "
            f"opset={newest} to import the model as opset {newest}")
    return opset
