"""Getting a ModelProto (from a proto or a file, with external data) and its opset."""
from __future__ import annotations

import os
from typing import Any

from ....runtime.errors import FrontendError, OpNotImplemented
from ._proto import require_onnx

MIN_OPSET = 11
MAX_OPSET = 21
DEFAULT_DOMAINS = ("", "ai.onnx")


def load_model(model: Any) -> tuple[Any, str]:
    """(ModelProto, how to name it in messages) for a ModelProto or a path to a ``.onnx`` file.

    A file's external data is read from the file's directory. Raises FrontendError for a file
    that is not a (complete) ONNX model, FileNotFoundError for a missing one.
    """
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model, "the model"
    if isinstance(model, (bytes, bytearray)):
        return _parse(onnx, bytes(model), "the model bytes"), "the model"
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"from_onnx: expected an onnx.ModelProto or a path to a .onnx file, got "
                        f"{type(model).__name__}")
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"from_onnx: no such file: {path!r}")
    with open(path, "rb") as f:
        proto = _parse(onnx, f.read(), repr(path))
    try:
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
    except (OSError, ValueError) as err:
        raise FrontendError(f"{path!r}: cannot read the model's external data ({err})") from None
    return proto, repr(path)


def _parse(onnx: Any, data: bytes, where: str) -> Any:
    from google.protobuf.message import DecodeError

    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError) as err:
        raise FrontendError(f"{where} is not a readable ONNX model ({err}); the file is "
                            "truncated or not an ONNX model") from None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        missing = "graph" if not proto.HasField("graph") else "IR version"
        raise FrontendError(f"{where} is not an ONNX model: it has no {missing} (the file is "
                            "truncated, empty or of another format)")
    return proto


def model_opset(proto: Any, override: int | None, where: str) -> int:
    """The default-domain opset to import with (``override`` wins); OpNotImplemented when it
    is outside the range ember supports."""
    if override is not None:
        opset, source = int(override), "opset="
    else:
        found = [e.version for e in proto.opset_import if e.domain in DEFAULT_DOMAINS]
        if not found:
            raise FrontendError(f"{where} declares no opset for the default ONNX domain "
                                "(opset_import); pass opset= to say which one it uses")
        opset, source = int(found[0]), "the model's opset_import"
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OpNotImplemented(
            f"ONNX opset {opset} (from {source}) is not supported: ember imports opsets "
            f"{MIN_OPSET} to {MAX_OPSET} of the default domain (opset= overrides the model's "
            "declared opset, e.g. to import an opset-22 model whose operators did not change)")
    return opset
