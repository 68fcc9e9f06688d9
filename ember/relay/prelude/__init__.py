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

from collections.abc import Sequence
from typing import Any

from ...ir.adt import Constructor
from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.types import GlobalTypeVar
from ...runtime.errors import TVMError
from .static_tensor_array import StaticTensorArrayOps, static_name
from .tensor_array import (MAX_RANK, TENSOR_ARRAY_DEFS, TENSOR_ARRAY_DTYPES, TensorArrayOps,
                           tensor_array_name, tensor_array_text)

__all__ = ["GLOBAL_DEFS", "GRAD_CELL_DEFS", "MAX_RANK", "Prelude", "StaticTensorArrayOps", "TENSOR_ARRAY_DEFS",
           "TENSOR_ARRAY_DTYPES", "TYPE_DEFS", "TensorArrayOps", "tensor_array_text",
           "with_grad_cell"]

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
    Static tensor arrays (``StaticTensorArrayOps(p, dtype, shape).register()``) are found with
    ``get_global_var_static``, ``get_type_static`` and ``get_ctor_static``.
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
        return tensor_array_name(canonical, dtype)

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

    # -- static tensor arrays (StaticTensorArrayOps registers them) ----------------------------
    @staticmethod
    def get_name_static(canonical: str, dtype: str, shape: Sequence[Any],
                        batch_dim: int | None = None) -> str:
        """``<canonical>_<dtype>_<shape>`` (``static_tensor_<dtype>_<shape>_t`` for the type,
        ``<canonical>_<dtype>_batch1_<shape>`` for a function of ``batch_dim=1``)."""
        return static_name(canonical, dtype, shape, batch_dim)

    def _registered(self, what: str, name: str, dtype: str, shape: Sequence[Any],
                    batch_dim: int | None = None) -> None:
        if name not in self.mod:
            batch = "" if batch_dim is None else f", batch_dim={batch_dim}"
            raise TVMError(f"Prelude: no {what} named {name!r}; add the static tensor arrays of "
                           f"{dtype}{list(shape)} with StaticTensorArrayOps(p, {dtype!r}, "
                           f"{tuple(shape)}{batch}).register()")

    def get_global_var_static(self, canonical: str, dtype: str, shape: Sequence[Any],
                              batch_dim: int | None = None) -> GlobalVar:
        name = self.get_name_static(canonical, dtype, shape, batch_dim)
        self._registered("function", name, dtype, shape, batch_dim)
        return self.mod.get_global_var(name)

    def get_type_static(self, canonical: str, dtype: str, shape: Sequence[Any]) -> GlobalTypeVar:
        name = self.get_name_static(canonical, dtype, shape)
        self._registered("type", name, dtype, shape)
        return self.mod.get_global_type_var(name)

    def get_ctor_static(self, ty_name: str, name: str, dtype: str,
                        shape: Sequence[Any]) -> Constructor:
        """The constructor ``name`` (``"tensor_nil"``, ``"tensor_constructor"``) of the
        static type ``ty_name`` (``"tensor_t"``) of ``dtype`` and ``shape``."""
        gtv = self.get_type_static(ty_name, dtype, shape)
        full = self.get_name_static(name, dtype, shape)
        for ctor in self.mod[gtv].constructors:
            if ctor.name_hint == full:
                return ctor
        raise TVMError(f"Prelude: no constructor of {gtv.name_hint} named {full!r}")

    def get_tensor_ctor_static(self, name: str, dtype: str, shape: Sequence[Any]) -> Constructor:
        return self.get_ctor_static("tensor_t", name, dtype, shape)

    def get_tensor_ctor(self, canonical: str, dtype: str) -> Constructor:
        """The tensor-array constructor ``canonical`` (``"tensor2"``, ``"tensor_nil"``) of
        ``dtype``."""
        return self.get_ctor("tensor_t", canonical, dtype)


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
