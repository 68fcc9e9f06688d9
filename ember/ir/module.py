"""IRModule: the global functions and type definitions of a program."""
from __future__ import annotations

from typing import Any, ItemsView, Iterator, Mapping

from ..runtime.object import register_object
from .adt import Constructor, TypeData
from .base import Node
from .expr import BaseFunc, Function, GlobalVar, RelayExpr
from .types import GlobalTypeVar

# Function kinds a module holds besides Relay functions: ``tir.PrimFunc`` registers itself here
# (the IR layer cannot import the loop IR above it). Relay passes see a module without them,
# as TVM's skip every function that is not a ``relay.Function`` (see ember.ir.transform).
_OTHER_FUNCTION_KINDS: list[type] = []


def register_function_kind(cls: type) -> type:
    """Let ``IRModule`` hold functions of class ``cls`` (a non-Relay kind, e.g. PrimFunc)."""
    if cls not in _OTHER_FUNCTION_KINDS:
        _OTHER_FUNCTION_KINDS.append(cls)
    return cls


def is_other_function(func: object) -> bool:
    """True for a function of a registered non-Relay kind (a PrimFunc)."""
    return isinstance(func, tuple(_OTHER_FUNCTION_KINDS))


@register_object("IRModule")
class IRModule(Node):
    """A map from GlobalVar to function and from GlobalTypeVar to type definition.

    ``mod["main"] = f`` adds or replaces a function by name; ``mod["main"]`` reads it.
    Passes never edit a module in place: they return a new one. A function is a Relay
    function or a lowered ``tir.PrimFunc`` (what ``ember.lower`` returns); Relay passes
    leave PrimFuncs as they are.
    """

    # __weakref__: InferType remembers the modules it typed without keeping them alive
    __slots__ = ("functions", "type_definitions", "attrs", "_gvars", "_gtvars", "__weakref__")

    def __init__(self, functions: Mapping[GlobalVar, BaseFunc] | Mapping[str, BaseFunc] | None
                 = None,
                 type_definitions: Mapping[GlobalTypeVar, TypeData] | None = None,
                 attrs: Mapping[str, Any] | None = None) -> None:
        self.functions: dict[GlobalVar, BaseFunc] = {}
        self.type_definitions: dict[GlobalTypeVar, TypeData] = {}
        self.attrs: dict[str, Any] = dict(attrs or {})
        self._gvars: dict[str, GlobalVar] = {}
        self._gtvars: dict[str, GlobalTypeVar] = {}
        for gtv, td in (type_definitions or {}).items():
            self.add_type_def(gtv, td)
        for gv, fn in (functions or {}).items():
            self.add(gv, fn)

    def field_names(self) -> list[str]:
        return ["functions", "type_definitions", "attrs"]

    def __getstate__(self) -> dict[str, Any]:
        return {"functions": self.functions, "type_definitions": self.type_definitions,
                "attrs": self.attrs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        IRModule.__init__(self, state["functions"], state["type_definitions"], state["attrs"])

    # -- functions ----------------------------------------------------------------------------
    def _resolve(self, key: GlobalVar | str, create: bool = False) -> GlobalVar:
        if isinstance(key, GlobalVar):
            # A GlobalVar of an earlier version of this module (passes such as InferType
            # return new, typed GlobalVars) finds its function by name: names are unique.
            if key not in self.functions:
                return self._gvars.get(key.name_hint, key)
            return key
        gv = self._gvars.get(key)
        if gv is None:
            if not create:
                names = ", ".join(sorted(self._gvars)) or "none"
                raise KeyError(f"IRModule has no function named {key!r}; it has: {names}")
            gv = GlobalVar(key)
        return gv

    def add(self, var: GlobalVar | str, func: BaseFunc, update: bool = True) -> "IRModule":
        """Add (or with ``update`` replace) a global function."""
        gv = self._resolve(var, create=True)
        existing = self._gvars.get(gv.name_hint)
        if existing is not None and existing is not gv:
            if not update:
                raise ValueError(f"IRModule already has a function named {gv.name_hint!r}")
            del self.functions[existing]
            gv = existing
        if not isinstance(func, RelayExpr) and not is_other_function(func):
            raise TypeError(f"IRModule: expected a relay.Function or a tir.PrimFunc for "
                            f"{gv.name_hint!r}, got {type(func).__name__}")
        self._gvars[gv.name_hint] = gv
        self.functions[gv] = func
        return self

    def update_func(self, var: GlobalVar | str, func: BaseFunc) -> None:
        self.add(var, func, update=True)

    def remove(self, var: GlobalVar | str) -> None:
        gv = self._resolve(var)
        del self.functions[gv]
        del self._gvars[gv.name_hint]

    def get_global_var(self, name: str) -> GlobalVar:
        return self._resolve(name)

    def get_global_vars(self) -> list[GlobalVar]:
        return list(self.functions)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._gvars or key in self._gtvars
        return key in self.functions or key in self.type_definitions

    def __getitem__(self, key: GlobalVar | GlobalTypeVar | str) -> Any:
        if isinstance(key, GlobalTypeVar):
            return self.type_definitions[key]
        if isinstance(key, str) and key not in self._gvars and key in self._gtvars:
            return self.type_definitions[self._gtvars[key]]
        return self.functions[self._resolve(key)]

    def __setitem__(self, key: GlobalVar | GlobalTypeVar | str, value: Any) -> None:
        if isinstance(value, TypeData):
            gtv = key if isinstance(key, GlobalTypeVar) else value.header
            self.add_type_def(gtv, value)
        else:
            self.add(key, value)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self.functions)

    def items(self) -> ItemsView[GlobalVar, BaseFunc]:
        return self.functions.items()

    def other_functions(self) -> dict[GlobalVar, Any]:
        """The functions that are not Relay functions (PrimFuncs), by GlobalVar."""
        return {gv: f for gv, f in self.functions.items() if is_other_function(f)}

    def relay_part(self) -> "IRModule":
        """This module without its PrimFuncs: what a Relay pass sees (the same object when
        there are none)."""
        if not any(is_other_function(f) for f in self.functions.values()):
            return self
        relay_funcs = {gv: f for gv, f in self.functions.items() if not is_other_function(f)}
        return IRModule(relay_funcs, self.type_definitions, self.attrs)

    # -- type definitions ---------------------------------------------------------------------
    def add_type_def(self, gtv: GlobalTypeVar, td: TypeData, update: bool = True) -> None:
        old = self._gtvars.get(gtv.name_hint)
        if old is not None and old is not gtv:
            if not update:
                raise ValueError(f"IRModule already defines type {gtv.name_hint!r}")
            del self.type_definitions[old]
        self._gtvars[gtv.name_hint] = gtv
        self.type_definitions[gtv] = td

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        try:
            return self._gtvars[name]
        except KeyError:
            raise KeyError(f"IRModule defines no type named {name!r}") from None

    def get_global_type_vars(self) -> list[GlobalTypeVar]:
        return list(self.type_definitions)

    def get_type(self, name: str) -> tuple[Any, ...]:
        """``(GlobalTypeVar, *constructors)`` of the type definition called ``name``."""
        gtv = self.get_global_type_var(name)
        return (gtv, *self.type_definitions[gtv].constructors)

    def get_constructor(self, name_or_tag: str | int) -> Constructor:
        for td in self.type_definitions.values():
            for c in td.constructors:
                if c.name_hint == name_or_tag:
                    return c
        raise KeyError(f"IRModule has no constructor {name_or_tag!r}")

    # -- whole module -------------------------------------------------------------------------
    @staticmethod
    def from_expr(expr: RelayExpr, functions: Mapping[GlobalVar, BaseFunc] | None = None,
                  type_defs: Mapping[GlobalTypeVar, TypeData] | None = None) -> "IRModule":
        """A module whose ``main`` is ``expr`` (wrapped in a Function over its free vars)."""
        mod = IRModule(functions, type_defs)
        if is_other_function(expr):  # TVM's from_expr(prim_func): it becomes main
            mod.add("main", expr)
            return mod
        if not isinstance(expr, Function):
            from .visitor import free_vars

            expr = Function(tuple(free_vars(expr)), expr)
        mod.add("main", expr)
        return mod

    def copy(self) -> "IRModule":
        return IRModule(self.functions, self.type_definitions, self.attrs)

    def update(self, other: "IRModule") -> None:
        for gtv, td in other.type_definitions.items():
            self.add_type_def(gtv, td)
        for gv, fn in other.functions.items():
            self.add(gv, fn)

    def import_from_std(self, file_to_import: str) -> "IRModule":
        """Add the definitions of a standard library file (``prelude.rly``, ``core.rly``,
        ``gradient.rly``; see ``std_files()``) to this module, in place, and return it.

        A module that has all of the file's definitions already is left as it is (importing
        twice is harmless); one that has some of them but not all is an error (TVMError)
        naming the clashes. Unlike TVM, the module is returned as it is, not type-inferred:
        run ``relay.transform.InferType()`` on it for that.
        """
        from .std import parsed_std_file

        std = parsed_std_file(file_to_import)
        names = [gv.name_hint for gv in std.functions] + \
            [gtv.name_hint for gtv in std.type_definitions]
        present = [n for n in names if n in self]
        if present and len(present) == len(names):
            return self
        if present:
            from ..runtime.errors import TVMError

            raise TVMError(f"import_from_std({file_to_import!r}): the module already defines "
                           f"{', '.join(sorted(present))} but not the rest of the file; rename "
                           "these definitions or import into a fresh module")
        self.update(std)
        return self

    def with_attr(self, key: str, value: Any) -> "IRModule":
        return IRModule(self.functions, self.type_definitions, {**self.attrs, key: value})

    def script(self) -> str:
        """The module's text: Relay functions in the text format, PrimFuncs as loop IR."""
        return self.astext(show_meta_data=False)

    def __repr__(self) -> str:
        return f"IRModule(functions={sorted(self._gvars)}, types={sorted(self._gtvars)})"
