"""The VM compiler's internal operators: explicit memory and kernel calls in Relay form.

ManifestAlloc (``memory_alloc.py``) rewrites every call of a fused primitive function into
these, and the code generator turns each into one instruction:

=======================================================  =====================================
``memory.alloc_storage(%size, alignment=, dtype_hint=)``  ``alloc_storage`` (``%size``: an int
                                                          constant or a scalar int64 tensor)
``memory.alloc_tensor(%storage, offset=, shape=, dtype=)``  ``alloc_tensor`` (static shape)
``memory.alloc_tensor_reg(%storage, %shape, offset=,      ``alloc_tensor_reg`` (shape from a
dtype=)``                                                 1-D int64 tensor)
``vm.shape_of(%t)``                                       ``shape_of``
``vm.invoke_tvm_op(%prim, (ins), (outs))``                ``invoke_packed`` of the kernel
``vm.shape_func(%prim, (in_shapes), (outs))``             ``invoke_packed`` of its shape function
``vm.reshape_tensor(%t, %shape)``                         ``reshape_tensor`` (a view, no copy)
``memory.kill(%x)``                                       ``kill_register``
=======================================================  =====================================

They are ``Op`` objects that are deliberately *not* in the operator registry: they have no
compute rule, numpy reference or type relation, exist only between ManifestAlloc and code
generation, and registry-wide invariants ("every op lowers") must not see them. The IR they
appear in prints (``mod.astext()``) for debugging, with ``EMBER_DEBUG=2``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ....ir.attrs import Attrs
from ....ir.expr import Call, RelayExpr, Tuple
from ....ir.op import Op

ALLOC_STORAGE = Op("memory.alloc_storage")
ALLOC_TENSOR = Op("memory.alloc_tensor")
ALLOC_TENSOR_REG = Op("memory.alloc_tensor_reg")
KILL = Op("memory.kill")
SHAPE_OF = Op("vm.shape_of")
INVOKE_TVM_OP = Op("vm.invoke_tvm_op")
SHAPE_FUNC = Op("vm.shape_func")
RESHAPE_TENSOR = Op("vm.reshape_tensor")
VM_OPS = frozenset({ALLOC_STORAGE, ALLOC_TENSOR, ALLOC_TENSOR_REG, KILL, SHAPE_OF,
                    INVOKE_TVM_OP, SHAPE_FUNC, RESHAPE_TENSOR})
ALIGNMENT = 64


@dataclass(frozen=True, slots=True)
class AllocStorageAttrs(Attrs):
    """memory.alloc_storage: byte alignment and the dtype the block will mostly hold."""

    alignment: int = ALIGNMENT
    dtype_hint: str = "uint8"


@dataclass(frozen=True, slots=True)
class AllocTensorAttrs(Attrs):
    """memory.alloc_tensor / alloc_tensor_reg: byte offset into the storage, dtype, and (for
    alloc_tensor) the static shape."""

    offset: int = 0
    dtype: str = "float32"
    shape: tuple[int, ...] = ()


def alloc_storage(size: RelayExpr, dtype_hint: str = "uint8") -> Call:
    return Call(ALLOC_STORAGE, (size,), AllocStorageAttrs(ALIGNMENT, dtype_hint))


def alloc_tensor(storage: RelayExpr, offset: int, shape: tuple[int, ...], dtype: str) -> Call:
    return Call(ALLOC_TENSOR, (storage,), AllocTensorAttrs(offset, dtype, tuple(shape)))


def alloc_tensor_reg(storage: RelayExpr, shape: RelayExpr, dtype: str) -> Call:
    return Call(ALLOC_TENSOR_REG, (storage, shape), AllocTensorAttrs(0, dtype, ()))


def invoke_tvm_op(prim: RelayExpr, ins: list[RelayExpr], outs: list[RelayExpr]) -> Call:
    return Call(INVOKE_TVM_OP, (prim, Tuple(tuple(ins)), Tuple(tuple(outs))))


def shape_func(prim: RelayExpr, in_shapes: list[RelayExpr], outs: list[RelayExpr]) -> Call:
    return Call(SHAPE_FUNC, (prim, Tuple(tuple(in_shapes)), Tuple(tuple(outs))))


def shape_of(tensor: RelayExpr) -> Call:
    return Call(SHAPE_OF, (tensor,))


def reshape_tensor(tensor: RelayExpr, shape: RelayExpr) -> Call:
    return Call(RESHAPE_TENSOR, (tensor, shape))


def kill(value: RelayExpr) -> Call:
    return Call(KILL, (value,))
