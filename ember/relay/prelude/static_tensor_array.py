"""Static tensor arrays (TVM's ``StaticTensorArrayOps``): tensor arrays whose elements all
have one shape (dimensions may be ``Any``), so that type inference knows the shapes.

For a dtype and a shape, ``StaticTensorArrayOps(p, dtype, shape).register()`` adds to the
Prelude's module, in the text format, the type

    type static_tensor_<dtype>_<shape>_t { tensor_nil_<dtype>_<shape>,
                                           tensor_constructor_<dtype>_<shape>(Tensor[shape]) }

(``<shape>`` is the dimensions joined by ``_``, ``any`` for ``Any``, ``scalar`` for ``()``) and
the functions below, each named ``<canonical>_<dtype>_<shape>``. Results whose first axis may
change (take, concatenate, concat, split) are arrays of the shape ``(?, *shape[1:])``; stacking
(expand_dims, stack, gather) gives ``(?, *shape)``; unstack gives arrays of ``shape[1:]``. The
types of those shapes are registered with them. A tensor array of rank 0 has no take,
concatenate, unstack, split or concat.

``batch_dim=1`` (TVM's option for a TensorList known to hold one element, from the TensorFlow
importer) registers a second set of functions, named ``<canonical>_<dtype>_batch1_<shape>``
(types and constructors keep their names): expand_dims gives a first axis of 1 instead of
``?``, and stack (so gather) gives ``(1, *shape)`` made of the array's first element alone, as
TVM's does (a longer array is not an error: its other elements are dropped). Any other
``batch_dim`` names and behaves as ``None``, as in TVM.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.adt import Constructor
from ...ir.expr import GlobalVar
from ...ir.types import Any as AnyDim
from ...ir.types import GlobalTypeVar
from ...runtime.errors import TVMError
from .tensor_array import TENSOR_ARRAY_DTYPES

Shape = tuple[Any, ...]  # ints and Any dimensions
STATIC_DEFS = ("tensor_array", "tensor_array_read", "tensor_array_write", "tensor_expand_dims",
               "tensor_array_stack", "tensor_array_gather", "tensor_array_scatter",
               "tensor_get_data")
STATIC_DEFS_RANK_1 = ("tensor_take", "tensor_concatenate", "tensor_array_unstack",
                      "tensor_array_split", "tensor_array_concat")


def _is_any(dim: Any) -> bool:
    return isinstance(dim, AnyDim) or dim is None or dim == "?"


def _check_shape(shape: Any) -> Shape:
    if not isinstance(shape, (tuple, list)):
        raise TVMError(f"StaticTensorArrayOps: shape must be a tuple of ints and Any, got "
                       f"{type(shape).__name__}")
    for i, dim in enumerate(shape):
        if not _is_any(dim) and not (isinstance(dim, int) and dim >= 0):
            raise TVMError(f"StaticTensorArrayOps: dimension {i} of shape {tuple(shape)} must be "
                           f"a non-negative int or Any, got {dim!r}")
    return tuple(shape)


def shape_name(shape: Sequence[Any]) -> str:
    """``2_any_3`` for ``(2, Any, 3)``; ``scalar`` for ``()`` (TVM's spelling)."""
    return "_".join("any" if _is_any(d) else str(int(d)) for d in shape) or "scalar"


def static_name(canonical: str, dtype: str, shape: Sequence[Any],
                batch_dim: int | None = None) -> str:
    """``static_tensor_<dtype>_<shape>_t`` for the type, ``<canonical>_<dtype>_<shape>``
    otherwise (``<canonical>_<dtype>_batch1_<shape>`` for a function of ``batch_dim=1``)."""
    if canonical == "tensor_t":
        return f"static_tensor_{dtype}_{shape_name(shape)}_t"
    if batch_dim == 1 and canonical not in ("tensor_constructor", "tensor_nil"):
        return f"{canonical}_{dtype}_batch1_{shape_name(shape)}"
    return f"{canonical}_{dtype}_{shape_name(shape)}"


def _check_batch_dim(batch_dim: Any) -> int | None:
    if batch_dim is not None and (isinstance(batch_dim, bool) or not isinstance(batch_dim, int)
                                  or batch_dim < 0):
        raise TVMError(f"StaticTensorArrayOps: batch_dim must be None or a non-negative int (1: "
                       f"the array holds one element), got {batch_dim!r}")
    return batch_dim


def _tensor(dtype: str, shape: Sequence[Any]) -> str:
    dims = ", ".join("?" if _is_any(d) else str(int(d)) for d in shape)
    return f"Tensor[({dims}{',' if len(shape) == 1 else ''}), {dtype}]"


def _adt_text(dtype: str, shape: Shape) -> str:
    n = lambda canonical: static_name(canonical, dtype, shape)  # noqa: E731
    return (f"type {n('tensor_t')} {{\n  {n('tensor_nil')},\n"
            f"  {n('tensor_constructor')}({_tensor(dtype, shape)}),\n}}\n")


class _Names:
    """The names the text of one (dtype, shape) refers to: its own (``t``, ``nil``, ``ctor``,
    ``fn(canonical)``), and those of the shapes its results have (``first_any``, ``stacked``,
    ``row``)."""

    def __init__(self, dtype: str, shape: Shape, batch_dim: int | None = None) -> None:
        self.dtype, self.shape, self.batch_dim = dtype, shape, batch_dim
        self.t = static_name("tensor_t", dtype, shape)
        self.ta = f"List[{self.t}]"
        self.nil = static_name("tensor_nil", dtype, shape)
        self.ctor = static_name("tensor_constructor", dtype, shape)
        self.data = _tensor(dtype, shape)

    def fn(self, canonical: str) -> str:
        return "@" + static_name(canonical, self.dtype, self.shape, self.batch_dim)

    def other(self, shape: Shape) -> "_Names":
        return _Names(self.dtype, shape)


def _stacked_axis(batch_dim: int | None) -> Any:
    """The first axis of a stacked array: 1 for ``batch_dim=1`` (one element), else ``?``."""
    return 1 if batch_dim == 1 else AnyDim()


def _shapes_used(shape: Shape, batch_dim: int | None) -> list[Shape]:
    """The shapes whose types the functions of ``shape`` return."""
    shapes = [shape, (_stacked_axis(batch_dim), *shape)]
    if shape:
        shapes += [(AnyDim(), *shape[1:]), shape[1:]]
    return shapes


def _stack_text(me: _Names, st: _Names) -> str:
    if me.batch_dim == 1:
        return f"""
// batch_dim=1: the array holds one element; its first element gets a first axis of 1.
def {me.fn("tensor_array_stack")}(%ta: {me.ta}) -> {st.t} {{
  match? (%ta) {{ Cons(%x, _) => {me.fn("tensor_expand_dims")}(%x) }}
}}
"""
    return f"""
// The elements stacked along a new axis 0 (nil for an empty array).
def {me.fn("tensor_array_stack")}(%ta: {me.ta}) -> {st.t} {{
  match? (%ta) {{
    Nil => {st.nil},
    Cons({me.ctor}(%x), %rest) => {{
      let %row = expand_dims(%x, axis=0);
      match ({me.fn("tensor_array_stack")}(%rest)) {{
        {st.ctor}(%y) => {st.ctor}(concatenate((%row, %y), axis=0)),
        _ => {st.ctor}(%row),
      }}
    }},
  }}
}}
"""


def _functions_text(dtype: str, shape: Shape, batch_dim: int | None) -> str:
    me = _Names(dtype, shape, batch_dim)
    st = _Names(dtype, (_stacked_axis(batch_dim), *shape))
    text = f"""
def {me.fn("tensor_array")}(%n: int32) -> {me.ta} {{
  if (%n == 0) {{ Nil }} else {{ Cons({me.nil}, {me.fn("tensor_array")}(%n - 1)) }}
}}

def {me.fn("tensor_array_read")}(%ta: {me.ta}, %n: int32) -> {me.t} {{
  @nth(%ta, %n)
}}

def {me.fn("tensor_array_write")}(%ta: {me.ta}, %n: int32, %v: {me.t}) -> {me.ta} {{
  @update(%ta, %n, %v)
}}

def {me.fn("tensor_get_data")}(%t: {me.t}) -> {me.data} {{
  match? (%t) {{ {me.ctor}(%x) => %x }}
}}

def {me.fn("tensor_expand_dims")}(%t: {me.t}) -> {st.t} {{
  match? (%t) {{ {me.ctor}(%x) => {st.ctor}(expand_dims(%x, axis=0)) }}
}}
{_stack_text(me, st)}
def {me.fn("tensor_array_gather_helper")}(%ta: {me.ta}, %i: int32, %n: int32, %indices: Tensor[(?), int32]) -> {me.ta} {{
  if (%i == %n) {{
    Nil
  }} else {{
    %0 = {me.fn("tensor_array_read")}(%ta, take(%indices, %i));
    Cons(%0, {me.fn("tensor_array_gather_helper")}(%ta, %i + 1, %n, %indices))
  }}
}}

// Elements %indices[0], %indices[1], ... stacked along a new axis 0.
def {me.fn("tensor_array_gather")}(%ta: {me.ta}, %indices: Tensor[(?), int32]) -> {st.t} {{
  %0 = take(shape_of(%indices, dtype="int32"), 0);
  {me.fn("tensor_array_stack")}({me.fn("tensor_array_gather_helper")}(%ta, 0, %0, %indices))
}}

def {me.fn("tensor_array_scatter_helper")}(%ta: {me.ta}, %i: int32, %n: int32, %indices: Tensor[(?), int32], %values: {me.ta}) -> {me.ta} {{
  if (%i == %n) {{
    %ta
  }} else {{
    %0 = {me.fn("tensor_array_write")}(%ta, take(%indices, %i), {me.fn("tensor_array_read")}(%values, %i));
    {me.fn("tensor_array_scatter_helper")}(%0, %i + 1, %n, %indices, %values)
  }}
}}

// Write %values[i] at slot %indices[i], for each i.
def {me.fn("tensor_array_scatter")}(%ta: {me.ta}, %indices: Tensor[(?), int32], %values: {me.ta}) -> {me.ta} {{
  %0 = take(shape_of(%indices, dtype="int32"), 0);
  {me.fn("tensor_array_scatter_helper")}(%ta, 0, %0, %indices, %values)
}}
"""
    return text + (_rank_1_text(me, me.other((AnyDim(), *shape[1:])), me.other(shape[1:]))
                   if shape else "")


def _rank_1_text(me: _Names, part: _Names, row: _Names) -> str:
    """The functions that cut or join along axis 0: none for a rank-0 array."""
    return f"""
// Rows %lower to %upper (exclusive).
def {me.fn("tensor_take")}(%t: {me.t}, %lower: int32, %upper: int32) -> {part.t} {{
  match? (%t) {{
    {me.ctor}(%x) => {part.ctor}(take(%x, arange(%lower, %upper, 1, dtype="int32"), axis=0))
  }}
}}

def {me.fn("tensor_concatenate")}(%a: {me.t}, %b: {me.t}) -> {part.t} {{
  match? (%a, %b) {{
    ({me.ctor}(%x), {me.ctor}(%y)) => {part.ctor}(concatenate((%x, %y), axis=0)),
  }}
}}

def {me.fn("tensor_array_unstack_helper")}(%i: int32, %n: int32, %t: {me.data}) -> List[{row.t}] {{
  if (%i == %n) {{
    Nil
  }} else {{
    Cons({row.ctor}(take(%t, %i, axis=0)), {me.fn("tensor_array_unstack_helper")}(%i + 1, %n, %t))
  }}
}}

// The rows of a tensor, one element each.
def {me.fn("tensor_array_unstack")}(%t: {me.data}) -> List[{row.t}] {{
  {me.fn("tensor_array_unstack_helper")}(0, take(shape_of(%t, dtype="int32"), 0), %t)
}}

def {me.fn("tensor_array_split_helper")}(%ta: List[{part.t}], %value: {me.t}, %offset: int32, %i: int32, %n: int32, %lengths: Tensor[(?), int32]) -> List[{part.t}] {{
  if (%i == %n) {{
    %ta
  }} else {{
    let %end: int32 = %offset + take(%lengths, %i);
    %0 = @update(%ta, %i, {me.fn("tensor_take")}(%value, %offset, %end));
    {me.fn("tensor_array_split_helper")}(%0, %value, %end, %i + 1, %n, %lengths)
  }}
}}

// Cut %value along axis 0 into pieces of %lengths rows; piece i goes to slot i.
def {me.fn("tensor_array_split")}(%ta: List[{part.t}], %value: {me.t}, %lengths: Tensor[(?), int32]) -> List[{part.t}] {{
  %0 = take(shape_of(%lengths, dtype="int32"), 0);
  {me.fn("tensor_array_split_helper")}(%ta, %value, 0, 0, %0, %lengths)
}}

// The elements joined along axis 0 (nil for an empty array).
def {me.fn("tensor_array_concat")}(%ta: {me.ta}) -> {part.t} {{
  match? (%ta) {{
    Nil => {part.nil},
    Cons({me.ctor}(%x), %rest) => match ({me.fn("tensor_array_concat")}(%rest)) {{
      {part.ctor}(%y) => {part.ctor}(concatenate((%x, %y), axis=0)),
      _ => {part.ctor}(%x),
    }},
  }}
}}
"""


class StaticTensorArrayOps:
    """The static tensor-array definitions of one dtype and shape in a Prelude's module (TVM's
    ``StaticTensorArrayOps``): ``register()`` adds them once; ``get_global_var``,
    ``get_type`` and ``get_ctor`` (``"tensor_nil"``, ``"tensor_constructor"``) find them."""

    def __init__(self, prelude: Any, dtype: str, shape: Sequence[Any],
                 batch_dim: int | None = None) -> None:
        if dtype not in TENSOR_ARRAY_DTYPES:
            raise TVMError(f"StaticTensorArrayOps: no tensor arrays of dtype {dtype!r}; the "
                           f"dtypes are {', '.join(TENSOR_ARRAY_DTYPES)}")
        self.prelude, self.dtype, self.shape = prelude, dtype, _check_shape(shape)
        self.batch_dim = _check_batch_dim(batch_dim)

    def get_name(self, canonical: str) -> str:
        return static_name(canonical, self.dtype, self.shape, self.batch_dim)

    def register(self) -> None:
        """Add the type and functions (and the types of their results) unless present."""
        mod = self.prelude.mod
        if self.get_name("tensor_array") in mod:
            return
        shapes = {static_name("tensor_t", self.dtype, s): s
                  for s in _shapes_used(self.shape, self.batch_dim)}
        types = "".join(_adt_text(self.dtype, s) for name, s in shapes.items() if name not in mod)
        from ...ir.parser import parse

        text = '#[version = "0.0.5"]\n' + types + _functions_text(self.dtype, self.shape,
                                                                  self.batch_dim)
        name = f"<static tensor arrays of {self.dtype}{list(self.shape)}>"
        mod.update(parse(text, name, init_module=mod))

    def get_global_var(self, canonical: str) -> GlobalVar:
        return self.prelude.get_global_var_static(canonical, self.dtype, self.shape,
                                                  self.batch_dim)

    def get_type(self, canonical: str = "tensor_t") -> GlobalTypeVar:
        return self.prelude.get_type_static(canonical, self.dtype, self.shape)

    def get_ctor(self, canonical: str) -> Constructor:
        return self.prelude.get_ctor_static("tensor_t", canonical, self.dtype, self.shape)
