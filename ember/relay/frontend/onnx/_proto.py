"""Reading ONNX protobuf messages: element types, tensors, attributes, value infos.

Only this module, ``_load.py`` and ``_versions.py`` touch the ``onnx`` package, which is
imported on first use: ``onnx`` is the optional ``[onnx]`` extra and ember must import without
it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....runtime.errors import FrontendError

INSTALL_HINT = "pip install 'ember[onnx]'"

# TensorProto.DataType -> ember dtype (the element types ember stores).
DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}
# The narrow floats, computed in float32 (ember's kernels are float32 ones; a float16 kernel
# stores each partial sum back in float16, slower and less exact): weights are widened at
# import, a graph input of such a type is cast up as it enters and a graph output cast back
# down. float16 inputs and outputs stay float16 for callers; bfloat16 ones are float32 (numpy
# has no bfloat16). Each is stored in 2 bytes.
NARROW: dict[int, str] = {10: "float16", 16: "bfloat16"}
BFLOAT16 = 16
COMPUTE_DTYPE = "float32"
# the names of the others, for messages
_OTHER_TYPES = {0: "UNDEFINED", 8: "STRING", 14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16"}


def require_onnx() -> Any:
    """The ``onnx`` module, or an ImportError telling how to install it."""
    try:
        import onnx
    except ImportError as err:
        raise ImportError(f"the ONNX frontend needs the 'onnx' package: {INSTALL_HINT}") from err
    return onnx


def type_name(elem_type: int) -> str:
    """``FLOAT``, ``BFLOAT16``, ... for an element type code."""
    onnx = require_onnx()
    try:
        return str(onnx.TensorProto.DataType.Name(elem_type))
    except ValueError:
        return _OTHER_TYPES.get(elem_type, f"type code {elem_type}")


def type_code(name: str, where: str) -> int:
    """The element type code of a type name (``"FLOAT"``, ``"int64"``); FrontendError naming
    ``where`` if it is none."""
    onnx = require_onnx()
    try:
        return int(onnx.TensorProto.DataType.Value(name.upper()))
    except ValueError:
        raise FrontendError(f"{where}: {name!r} is not an ONNX element type") from None


def dtype_of(elem_type: int, where: str) -> str:
    """The ember dtype that values of an ONNX element type are computed in (float32 for the
    narrow floats); FrontendError naming ``where`` if none."""
    return COMPUTE_DTYPE if elem_type in NARROW else interface_dtype(elem_type, where)


def interface_dtype(elem_type: int, where: str) -> str:
    """The ember dtype of a graph input or output of an ONNX element type: what callers pass
    and get (float16 stays float16; bfloat16 is float32); FrontendError naming ``where`` if
    none."""
    if elem_type == BFLOAT16:
        return COMPUTE_DTYPE
    dtype = DTYPES.get(elem_type)
    if dtype is None:
        what = "an undefined element type" if elem_type == 0 else (
            f"element type {type_name(elem_type)}, which ember does not support")
        raise FrontendError(f"{where} has {what}")
    return dtype


def _expected_size(tensor: Any) -> int:
    n = 1
    for d in tensor.dims:
        n *= int(d)
    return n


def _stored_count(tensor: Any, itemsize: int) -> int | None:
    """How many elements the message actually holds (None if stored externally)."""
    if tensor.data_location == 1:  # EXTERNAL: checked by numpy_helper after loading
        return None
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data) // itemsize if len(tensor.raw_data) % itemsize == 0 else -1
    for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        values = getattr(tensor, field)  # (int32_data holds one small int or float16 each)
        if len(values):
            return len(values)
    return 0


def tensor_to_numpy(tensor: Any, where: str) -> np.ndarray:
    """The value of a TensorProto (float16 and bfloat16 ones widened to float32, exactly);
    FrontendError if its data does not match its dims."""
    onnx = require_onnx()
    dtype = dtype_of(tensor.data_type, where)
    if any(d < 0 for d in tensor.dims):
        raise FrontendError(f"{where}: negative dimension in dims {list(tensor.dims)}")
    expected = _expected_size(tensor)
    stored_as = NARROW.get(tensor.data_type, dtype)
    stored = _stored_count(tensor, 2 if tensor.data_type in NARROW else np.dtype(dtype).itemsize)
    if stored is not None and stored != expected:
        raise FrontendError(
            f"{where}: dims {list(tensor.dims)} need {expected} element(s) of {stored_as}, but "
            f"the tensor holds {'a partial element' if stored < 0 else stored}")
    if tensor.data_location == 1 and not tensor.HasField("raw_data"):
        files = [e.value for e in tensor.external_data if e.key == "location"]
        raise FrontendError(
            f"{where}: the data is stored in an external file ({', '.join(files) or '?'}) that "
            "was not loaded; pass the model's file path to from_onnx (or load it with "
            "onnx.load(path)) so the data is read from the model's directory")
    if tensor.data_type == BFLOAT16:
        return _bfloat16_to_float32(tensor).reshape(tuple(tensor.dims))
    try:
        arr = onnx.numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as err:
        raise FrontendError(f"{where}: cannot read the tensor data ({err})") from None
    return np.asarray(arr).astype(dtype, copy=False)


def _bfloat16_to_float32(tensor: Any) -> np.ndarray:
    """A bfloat16 tensor's values: its 16-bit words (little-endian ``raw_data``, or one per
    ``int32_data`` entry) are the high halves of float32s. Read here rather than through
    ``numpy_helper``, whose bfloat16 result type depends on the onnx version."""
    if tensor.HasField("raw_data"):
        words = np.frombuffer(tensor.raw_data, dtype="<u2")
    else:
        words = np.asarray(tensor.int32_data, dtype=np.uint32) & 0xFFFF
    return (words.astype(np.uint32) << 16).view(np.float32)


def attribute_type_name(kind: int) -> str:
    """``FLOAT``, ``INTS``, ... for an AttributeProto type code."""
    try:
        return str(require_onnx().AttributeProto.AttributeType.Name(kind))
    except ValueError:
        return f"type code {kind}"


def attribute_value(attr: Any, where: str) -> Any:
    """An AttributeProto as Python: int, float, str, list, numpy array or GraphProto."""
    onnx = require_onnx()
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.INT:
        return int(attr.i)
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if kind == A.INTS:
        return [int(v) for v in attr.ints]
    if kind == A.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == A.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in attr.strings]
    if kind == A.TENSOR:
        return tensor_to_numpy(attr.t, f"{where}: attribute {attr.name}")
    if kind == A.GRAPH:
        return attr.g
    raise FrontendError(f"{where}: attribute {attr.name} has a kind ember does not read "
                        f"({A.AttributeType.Name(kind)})")


def value_info_type(vi: Any, where: str) -> tuple[str | None, list[int | str | None] | None]:
    """(dtype, dims) of a ValueInfoProto (the dtype callers pass or get, ``interface_dtype``):
    a dim is an int, a ``dim_param`` name, or None (unknown). dims is None when the shape is
    not given; dtype None when not a tensor."""
    ty = vi.type
    if not ty.HasField("tensor_type"):
        kind = ty.WhichOneof("value")
        if kind is None:
            return None, None
        raise FrontendError(f"{where} is a {kind.replace('_type', '')}, not a tensor; ember "
                            "imports tensors, sequences of tensors and optionals")
    tt = ty.tensor_type
    dtype = interface_dtype(tt.elem_type, where)
    if not tt.HasField("shape"):
        return dtype, None
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(str(d.dim_param))
        else:
            dims.append(None)
    return dtype, dims
