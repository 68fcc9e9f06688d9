"""Tensor arrays of the Prelude (TVM's dynamic ``TensorArrayOps``): per dtype, a type
``tensor_<dtype>_t`` holding one tensor of rank 0 to 6 (every dimension ``?``) or none, and the
functions over Lists of them, written in the text format and parsed into the Prelude's module
when a dtype is first used.
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir.adt import Constructor
from ...ir.expr import GlobalVar
from ...ir.types import GlobalTypeVar
from ...runtime.errors import TVMError

TENSOR_ARRAY_DTYPES = ("float32", "float16", "float64", "int32", "int64", "int16", "int8",
                       "uint8", "uint16", "bool")
MAX_RANK = 6
TENSOR_ARRAY_DEFS = ("tensor_take", "tensor_expand_dims", "tensor_concatenate", "tensor_array",
                     "tensor_array_read", "tensor_array_write", "tensor_array_scatter",
                     "tensor_array_split", "tensor_array_concat", "tensor_array_stack",
                     "tensor_array_gather",
                     *(f"tensor_array_unstack_tensor{r}" for r in range(1, MAX_RANK + 1)))


def tensor_array_name(canonical: str, dtype: str | None) -> str:
    """TVM's names: ``tensor_<dtype>_t`` for the type, ``<canonical>_<dtype>`` otherwise."""
    if dtype is None:
        return canonical
    return f"tensor_{dtype}_t" if canonical == "tensor_t" else f"{canonical}_{dtype}"


def _dims(rank: int) -> str:
    return "(" + ", ".join("?" * rank) + ("," if rank == 1 else "") + ")"


def _clauses(rank_range: range, clause: Callable[[int], str]) -> str:
    return "\n".join(f"    {clause(r)}," for r in rank_range)


def tensor_array_text(dtype: str) -> str:
    """The tensor-array definitions for ``dtype`` in the text format (TVM's dynamic
    ``TensorArrayOps``). ``tensor_<dtype>_t`` holds one tensor of rank 0 to 6 (``tensor<r>_<d>``)
    or none (``tensor_nil_<d>``); a tensor array is a ``List`` of them. Every name ends in
    ``_<dtype>`` (the type is ``tensor_<dtype>_t``), so several dtypes live in one module."""
    d, t = dtype, f"tensor_{dtype}_t"
    ta = f"List[{t}]"
    ctors = "\n".join([f"  tensor_nil_{d},", f"  tensor0_{d}({d}),"]
                      + [f"  tensor{r}_{d}(Tensor[{_dims(r)}, {d}])," for r in
                         range(1, MAX_RANK + 1)])
    ranks = range(1, MAX_RANK + 1)
    take = _clauses(ranks, lambda r: f"tensor{r}_{d}(%x) => tensor{r}_{d}(take(%x, "
                                     'arange(%lower, %upper, 1, dtype="int32"), axis=0))')
    expand = _clauses(range(MAX_RANK), lambda r: f"tensor{r}_{d}(%x) => "
                                                 f"tensor{r + 1}_{d}(expand_dims(%x, axis=0))")
    concat = _clauses(ranks, lambda r: f"(tensor{r}_{d}(%x), tensor{r}_{d}(%y)) => "
                                       f"tensor{r}_{d}(concatenate((%x, %y), axis=0))")
    unstack = "\n\n".join(_unstack_text(d, t, r) for r in ranks)
    return f"""#[version = "0.0.5"]
type {t} {{
{ctors}
}}

// Rows %lower to %upper (exclusive) of a tensor of rank 1 or more.
def @tensor_take_{d}(%t: {t}, %lower: int32, %upper: int32) -> {t} {{
  match? (%t) {{
{take}
  }}
}}

// The tensor with a new leading axis of extent 1 (rank 0 to 5).
def @tensor_expand_dims_{d}(%t: {t}) -> {t} {{
  match? (%t) {{
{expand}
  }}
}}

// Two tensors of one rank (1 or more) joined along axis 0.
def @tensor_concatenate_{d}(%a: {t}, %b: {t}) -> {t} {{
  match? (%a, %b) {{
{concat}
  }}
}}

// An array of %n empty slots.
def @tensor_array_{d}(%n: int32) -> {ta} {{
  if (%n == 0) {{
    Nil
  }} else {{
    Cons(tensor_nil_{d}, @tensor_array_{d}(%n - 1))
  }}
}}

def @tensor_array_read_{d}(%ta: {ta}, %n: int32) -> {t} {{
  @nth(%ta, %n)
}}

def @tensor_array_write_{d}(%ta: {ta}, %n: int32, %v: {t}) -> {ta} {{
  @update(%ta, %n, %v)
}}

// Write %values[i] at slot %indices[i], for each i.
def @tensor_array_scatter_helper_{d}(%ta: {ta}, %i: int32, %n: int32, %indices: Tensor[(?), int32], %values: {ta}) -> {ta} {{
  if (%i == %n) {{
    %ta
  }} else {{
    %0 = @tensor_array_write_{d}(%ta, take(%indices, %i), @tensor_array_read_{d}(%values, %i));
    @tensor_array_scatter_helper_{d}(%0, %i + 1, %n, %indices, %values)
  }}
}}

def @tensor_array_scatter_{d}(%ta: {ta}, %indices: Tensor[(?), int32], %values: {ta}) -> {ta} {{
  @tensor_array_scatter_helper_{d}(%ta, 0, take(shape_of(%indices, dtype="int32"), 0), %indices, %values)
}}

// Cut %value along axis 0 into pieces of %lengths rows; piece i goes to slot i.
def @tensor_array_split_helper_{d}(%ta: {ta}, %value: {t}, %offset: int32, %i: int32, %n: int32, %lengths: Tensor[(?), int32]) -> {ta} {{
  if (%i == %n) {{
    %ta
  }} else {{
    let %end: int32 = %offset + take(%lengths, %i);
    %0 = @tensor_array_write_{d}(%ta, %i, @tensor_take_{d}(%value, %offset, %end));
    @tensor_array_split_helper_{d}(%0, %value, %end, %i + 1, %n, %lengths)
  }}
}}

def @tensor_array_split_{d}(%ta: {ta}, %value: {t}, %lengths: Tensor[(?), int32]) -> {ta} {{
  @tensor_array_split_helper_{d}(%ta, %value, 0, 0, take(shape_of(%lengths, dtype="int32"), 0), %lengths)
}}

// The slots joined along axis 0 (tensor_nil for an empty array).
def @tensor_array_concat_{d}(%ta: {ta}) -> {t} {{
  match (%ta) {{
    Nil => tensor_nil_{d},
    Cons(%hd, Nil) => %hd,
    Cons(%hd, %tl) => @tensor_concatenate_{d}(%hd, @tensor_array_concat_{d}(%tl)),
  }}
}}

// The slots stacked along a new axis 0.
def @tensor_array_stack_{d}(%ta: {ta}) -> {t} {{
  @tensor_array_concat_{d}(@map(@tensor_expand_dims_{d}, %ta))
}}

// Slots %indices[0], %indices[1], ... stacked along a new axis 0.
def @tensor_array_gather_helper_{d}(%ta: {ta}, %i: int32, %n: int32, %indices: Tensor[(?), int32]) -> {ta} {{
  if (%i == %n) {{
    Nil
  }} else {{
    Cons(@tensor_array_read_{d}(%ta, take(%indices, %i)), @tensor_array_gather_helper_{d}(%ta, %i + 1, %n, %indices))
  }}
}}

def @tensor_array_gather_{d}(%ta: {ta}, %indices: Tensor[(?), int32]) -> {t} {{
  %0 = take(shape_of(%indices, dtype="int32"), 0);
  @tensor_array_stack_{d}(@tensor_array_gather_helper_{d}(%ta, 0, %0, %indices))
}}

{unstack}
"""


def _unstack_text(d: str, t: str, rank: int) -> str:
    """``tensor_array_unstack_tensor<rank>``: the rows of a rank-``rank`` tensor as an array."""
    arg = f"Tensor[{_dims(rank)}, {d}]"
    name = f"tensor_array_unstack_tensor{rank}_{d}"
    return f"""// The rows of a rank-{rank} tensor, one slot each.
def @{name}_helper(%i: int32, %n: int32, %t: {arg}) -> List[{t}] {{
  if (%i == %n) {{
    Nil
  }} else {{
    Cons(tensor{rank - 1}_{d}(take(%t, %i, axis=0)), @{name}_helper(%i + 1, %n, %t))
  }}
}}

def @{name}(%t: {arg}) -> List[{t}] {{
  @{name}_helper(0, take(shape_of(%t, dtype="int32"), 0), %t)
}}"""


class TensorArrayOps:
    """The tensor-array definitions of one dtype in a Prelude's module (TVM's
    ``TensorArrayOps``): ``TensorArrayOps(p, "float32").register()`` adds them once;
    ``get_global_var("tensor_array_read")``, ``get_type("tensor_t")`` and
    ``get_ctor("tensor2")`` find them. ``Prelude.get_global_var(name, dtype)`` registers the
    dtype on first use, so a Prelude that never uses tensor arrays carries none.
    """

    def __init__(self, prelude: Any, dtype: str) -> None:
        if dtype not in TENSOR_ARRAY_DTYPES:
            raise TVMError(f"TensorArrayOps: no tensor arrays of dtype {dtype!r}; the dtypes "
                           f"are {', '.join(TENSOR_ARRAY_DTYPES)}")
        self.prelude, self.dtype = prelude, dtype

    def get_name(self, canonical: str) -> str:
        return tensor_array_name(canonical, self.dtype)

    def register(self) -> None:
        """Add the definitions to the Prelude's module unless it has them already."""
        mod = self.prelude.mod
        if self.get_name("tensor_t") in mod:
            return
        from ...ir.parser import parse

        text = tensor_array_text(self.dtype)
        mod.update(parse(text, f"<tensor arrays of {self.dtype}>", init_module=mod))

    def get_global_var(self, canonical: str) -> GlobalVar:
        return self.prelude.get_global_var(canonical, self.dtype)

    def get_type(self, canonical: str) -> GlobalTypeVar:
        return self.prelude.get_type(canonical, self.dtype)

    def get_ctor(self, canonical: str) -> Constructor:
        return self.prelude.get_tensor_ctor(canonical, self.dtype)
