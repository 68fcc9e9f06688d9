"""DataType: a parsed dtype string such as ``float32``, ``int8``, ``bool`` or ``float32x4``."""
from __future__ import annotations

import re
from enum import IntEnum

import numpy as np

from ._abi import DLDataType


class DataTypeCode(IntEnum):
    INT = 0
    UINT = 1
    FLOAT = 2
    HANDLE = 3
    BFLOAT = 4
    COMPLEX = 5
    BOOL = 6


_NAMES = {"int": DataTypeCode.INT, "uint": DataTypeCode.UINT, "float": DataTypeCode.FLOAT,
          "handle": DataTypeCode.HANDLE, "bfloat": DataTypeCode.BFLOAT}
_PATTERN = re.compile(r"^(int|uint|float|bfloat|handle|bool)(\d+)?(?:x(\d+))?$")


class DataType:
    """A scalar or vector dtype: ``DataType("float32x4")`` has code FLOAT, 32 bits, 4 lanes.

    ``bool`` is stored as ``uint1`` in DLPack terms for the C ABI but prints as ``bool``;
    its numpy form is ``np.bool_`` (one byte per element).
    """

    __slots__ = ("type_code", "bits", "lanes")
    type_code: DataTypeCode
    bits: int
    lanes: int
    NUMPY2STR = {np.dtype(n): n for n in ("bool", "int8", "int16", "int32", "int64", "uint8",
                                          "uint16", "uint32", "uint64", "float16", "float32",
                                          "float64")}

    def __init__(self, type_str: "str | DataType | np.dtype | type") -> None:
        if isinstance(type_str, DataType):
            self.type_code, self.bits = type_str.type_code, type_str.bits
            self.lanes = type_str.lanes
            return
        if type_str is None:
            raise TypeError("DataType: expected a dtype string such as 'float32', got None")
        if not isinstance(type_str, str):
            try:
                type_str = np.dtype(type_str).name
            except TypeError:
                raise TypeError(f"DataType: cannot make a dtype from {type_str!r}") from None
        m = _PATTERN.match(type_str.strip())
        if m is None:
            raise ValueError(f"DataType: cannot parse {type_str!r}; expected e.g. 'float32', "
                             "'int8', 'bool' or 'float32x4'")
        name, bits, lanes = m.group(1), m.group(2), m.group(3)
        if name == "bool":
            if bits is not None:
                raise ValueError(f"DataType: cannot parse {type_str!r}: 'bool' takes no bit width")
            self.type_code, self.bits = DataTypeCode.BOOL, 8
        else:
            self.type_code = _NAMES[name]
            self.bits = int(bits) if bits else (64 if name == "handle" else 32)
        self.lanes = int(lanes) if lanes else 1
        # DLDataType stores bits in a uint8 and lanes in a uint16.
        if not (0 < self.bits < 256 and 0 < self.lanes < 65536):
            raise ValueError(f"DataType: cannot parse {type_str!r}: bits must be in [1, 255] "
                             "and lanes in [1, 65535]")

    @classmethod
    def from_dl(cls, code: int, bits: int, lanes: int = 1) -> "DataType":
        """Build from the DLPack triple; ``(uint, 1)`` and ``(bool, 8)`` both mean bool."""
        obj = cls.__new__(cls)
        if (code == DataTypeCode.UINT and bits == 1) or code == DataTypeCode.BOOL:
            code, bits = DataTypeCode.BOOL, 8
        obj.type_code, obj.bits, obj.lanes = DataTypeCode(code), bits, lanes
        return obj

    def to_dl(self) -> DLDataType:
        if self.type_code == DataTypeCode.BOOL:
            return DLDataType(DataTypeCode.BOOL, 8, self.lanes)
        return DLDataType(int(self.type_code), self.bits, self.lanes)

    @property
    def scalar(self) -> str:
        """The element dtype without lanes, e.g. 'float32' for 'float32x4'."""
        if self.type_code == DataTypeCode.BOOL:
            return "bool"
        if self.type_code == DataTypeCode.HANDLE and self.bits == 64:
            return "handle"
        return f"{self.type_code.name.lower()}{self.bits}"

    @property
    def itemsize(self) -> int:
        return (self.bits * self.lanes + 7) // 8

    @property
    def numpy_dtype(self) -> np.dtype:
        if self.lanes != 1:
            raise TypeError(f"DataType {self}: vector dtypes have no numpy equivalent")
        try:
            return np.dtype(self.scalar)
        except TypeError:
            raise TypeError(f"DataType {self}: no numpy equivalent") from None

    def __str__(self) -> str:
        return self.scalar if self.lanes == 1 else f"{self.scalar}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (DataType, (str(self),))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, np.dtype)) or (isinstance(other, type)
                                                  and issubclass(other, np.generic)):
            try:
                other = DataType(other)
            except (ValueError, TypeError):
                return False
        if not isinstance(other, DataType):
            return NotImplemented
        return (self.type_code, self.bits, self.lanes) == (other.type_code, other.bits, other.lanes)

    def __hash__(self) -> int:
        return hash((int(self.type_code), self.bits, self.lanes))
