"""The Prelude: Relay's standard algebraic data types and list/tree functions.

``Prelude(mod)`` imports ``prelude.rly`` (ember/ir/std/, through
``IRModule.import_from_std``) into ``mod``, in place: the types

    type List[A] { Cons(A, List[A]), Nil }
    type Option[A] { Some(A), None }
    type Tree[A] { Rose(A, List[Tree[A]]) }

and the polymorphic global functions named in ``GLOBAL_DEFS`` (``@map``, ``@foldl``, ...),
each fully annotated so that type inference can check it. The text file is the one
definition; this module gives TVM's accessors to it.
"""
from __future__ import annotations

from typing import Callable

from ..ir.adt import Constructor
from ..ir.expr import GlobalVar
from ..ir.module import IRModule
from ..ir.types import GlobalTypeVar
from ..runtime.errors import TVMError

GLOBAL_DEFS = ("id", "compose", "flip", "hd", "tl", "nth", "update", "insert_at", "remove_at",
               "map", "foldl", "foldr", "foldr1", "concat", "filter", "zip", "rev", "map_accuml",
               "map_accumr", "unfoldl", "unfoldr", "sum", "length", "tmap", "size", "iterate")
TYPE_DEFS = ("List", "Option", "Tree")


def _install(mod: IRModule) -> None:
    """Add the Prelude's types and functions to ``mod`` (which has none of them yet)."""
    clash = [n for n in (*GLOBAL_DEFS, *TYPE_DEFS) if n in mod]
    if clash:
        raise TVMError(f"Prelude: the module already defines {', '.join(clash)} but not the "
                       "whole Prelude; rename these definitions or use a fresh module")
    mod.import_from_std("prelude.rly")


class Prelude:
    """The standard List / Option / Tree types and functions, added to ``mod`` in place.

    Accessors as in TVM: ``p.mod``, ``p.get_type("List")`` (the GlobalTypeVar),
    ``p.get_global_var("map")``, ``p.get_ctor("List", "Cons")``, and attributes ``p.map``,
    ``p.foldl``, ..., ``p.l``/``p.List``, ``p.cons``, ``p.nil``, ``p.optional``, ``p.some``,
    ``p.none``, ``p.tree``, ``p.rose``. Tensor arrays (``TensorArrayOps``) are per dtype:
    ``p.get_global_var("tensor_array_read", "float32")`` adds those of float32 on first use.
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = IRModule() if mod is None else mod
        self.load_prelude()

    def load_prelude(self) -> None:
        """Add the definitions unless ``mod`` has them already, then bind the accessors."""
        if "List" not in {g.name_hint for g in self.mod.type_definitions}:
            _install(self.mod)
        self.l, self.cons, self.nil = self.mod.get_type("List")
        self.List = self.l
        self.optional, self.some, self.none = self.mod.get_type("Option")
        self.tree, self.rose = self.mod.get_type("Tree")
        for name in GLOBAL_DEFS:
            setattr(self, name, self.get_global_var(name))

    @staticmethod
    def get_name(canonical: str, dtype: str | None = None) -> str:
        """The name of a definition; dtype-specific names are ``<canonical>_<dtype>``."""
        if dtype is None:
            return canonical
        return f"tensor_{dtype}_t" if canonical == "tensor_t" else f"{canonical}_{dtype}"

    def _missing(self, what: str, name: str, dtype: str | None) -> TVMError:
        note = f" (the tensor-array definitions are {', '.join(TENSOR_ARRAY_DEFS)})" \
            if dtype else ""
        return TVMError(f"Prelude: no {what} named {name!r}{note}")

    def _with_dtype(self, dtype: str | None) -> None:
        """Register the tensor arrays of ``dtype`` (if any) before a lookup."""
        if dtype is not None:
            TensorArrayOps(self, dtype).register()

    def get_global_var(self, canonical: str, dtype: str | None = None) -> GlobalVar:
        """The GlobalVar of the Prelude function ``canonical`` (``"map"``, ``"foldl"``, ...),
        or of the tensor-array function ``canonical`` of ``dtype``."""
        self._with_dtype(dtype)
        name = self.get_name(canonical, dtype)
        if name not in {g.name_hint for g in self.mod.functions}:
            raise self._missing("function", name, dtype)
        return self.mod.get_global_var(name)

    def get_type(self, canonical: str, dtype: str | None = None) -> GlobalTypeVar:
        """The GlobalTypeVar of a Prelude type (``"List"``, ...); ``get_type("tensor_t",
        "float32")`` is the tensor-array element type of float32 (``tensor_float32_t``)."""
        self._with_dtype(dtype)
        name = self.get_name(canonical, dtype)
        if name not in {g.name_hint for g in self.mod.type_definitions}:
            raise self._missing("type", name, dtype)
        return self.mod.get_global_type_var(name)

    def get_ctor(self, ty_name: str, canonical: str, dtype: str | None = None) -> Constructor:
        """The constructor ``canonical`` of the type ``ty_name``, given by its canonical name
        (``get_ctor("tensor_t", "tensor2", "float32")``) or, as TVM's tensor-array code does,
        by its full name (``get_ctor("tensor_float32_t", "tensor2", "float32")``)."""
        self._with_dtype(dtype)
        name = self.get_name(canonical, dtype)
        full = self.get_name(ty_name, dtype)
        gtv = self.get_type(ty_name, dtype) if full in self.mod else self.get_type(ty_name)
        for ctor in self.mod[gtv].constructors:
            if ctor.name_hint == name:
                return ctor
        raise self._missing(f"constructor of {ty_name}", name, dtype)

    def get_tensor_ctor(self, canonical: str, dtype: str) -> Constructor:
        """The tensor-array constructor ``canonical`` (``"tensor2"``, ``"tensor_nil"``) of
        ``dtype``."""
        return self.get_ctor("tensor_t", canonical, dtype)


# -- tensor arrays: a List of tensors of any rank (0 to 6) of one dtype ---------------------------
TENSOR_ARRAY_DTYPES = ("float32", "float16", "float64", "int32", "int64", "int16", "int8",
                       "uint8", "uint16", "bool")
MAX_RANK = 6
TENSOR_ARRAY_DEFS = ("tensor_take", "tensor_expand_dims", "tensor_concatenate", "tensor_array",
                     "tensor_array_read", "tensor_array_write", "tensor_array_scatter",
                     "tensor_array_split", "tensor_array_concat", "tensor_array_stack",
                     "tensor_array_gather",
                     *(f"tensor_array_unstack_tensor{r}" for r in range(1, MAX_RANK + 1)))


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

    def __init__(self, prelude: "Prelude", dtype: str) -> None:
        if dtype not in TENSOR_ARRAY_DTYPES:
            raise TVMError(f"TensorArrayOps: no tensor arrays of dtype {dtype!r}; the dtypes "
                           f"are {', '.join(TENSOR_ARRAY_DTYPES)}")
        self.prelude, self.dtype = prelude, dtype

    def get_name(self, canonical: str) -> str:
        return Prelude.get_name(canonical, self.dtype)

    def register(self) -> None:
        """Add the definitions to the Prelude's module unless it has them already."""
        mod = self.prelude.mod
        if self.get_name("tensor_t") in mod:
            return
        from ..ir.parser import parse

        text = tensor_array_text(self.dtype)
        mod.update(parse(text, f"<tensor arrays of {self.dtype}>", init_module=mod))

    def get_global_var(self, canonical: str) -> GlobalVar:
        return self.prelude.get_global_var(canonical, self.dtype)

    def get_type(self, canonical: str) -> GlobalTypeVar:
        return self.prelude.get_type(canonical, self.dtype)

    def get_ctor(self, canonical: str) -> Constructor:
        return self.prelude.get_tensor_ctor(canonical, self.dtype)


# -- GradCell: lazily initialised gradients (LazyGradientInit) -----------------------------------
GRAD_CELL_DEFS = ("GradCell", "FromGradCell", "AddGradCell", "MultiplyGradCell")


def with_grad_cell(mod: IRModule) -> IRModule:
    """A copy of ``mod`` with the GradCell type and its functions of ``gradient.rly`` (unless
    it has them):

    ``type GradCell[T] { Raw(T), One(fn () -> T), Zero(fn () -> T) }`` holds a tensor that is
    known (Raw), or all ones or all zeros, made only when needed; ``@FromGradCell`` forces
    one, ``@AddGradCell(add, l, r)`` skips adding a Zero, ``@MultiplyGradCell(mul, l, r)``
    skips multiplying by a One and gives the Zero for a Zero factor.
    """
    if "GradCell" in mod:
        missing = [n for n in GRAD_CELL_DEFS if n not in mod]
        if missing:
            raise TVMError(f"GradCell: the module defines GradCell but not {', '.join(missing)}")
        return mod
    clash = [n for n in GRAD_CELL_DEFS if n in mod]
    if clash:
        raise TVMError(f"GradCell: the module already defines {', '.join(clash)}")
    return mod.copy().import_from_std("gradient.rly")
