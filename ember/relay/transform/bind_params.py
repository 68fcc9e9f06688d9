"""BindParams: turn named parameters of ``main`` into constants (weights known at compile
time), so FoldConstant, SimplifyInference and FoldScaleAxis can fold them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Constant, Function, Var, bind
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext
from ...runtime.errors import TVMError
from ...runtime.ndarray import NDArray
from ...runtime.ndarray import array as _nd_array
from ._helpers import infer

__all__ = ["BindParams", "bind_params_by_name"]


def bind_params_by_name(func: Function, params: Mapping[str, Any]) -> Function:
    """Replace the parameters of ``func`` named in ``params`` by constants.

    Names that are not parameters of ``func`` are ignored (a params dict may hold more
    weights than one function uses); a name shared by several parameters is an error.
    """
    by_name: dict[str, list[Var]] = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, []).append(p)
    binds: dict[Var, Any] = {}
    for name, value in params.items():
        found = by_name.get(name, [])
        if len(found) > 1:
            raise TVMError(f"bind_params_by_name: {len(found)} parameters are named {name!r}; "
                           "cannot tell which one to bind")
        if found:
            arr = value if isinstance(value, NDArray) else _nd_array(np.asarray(value))
            binds[found[0]] = Constant(arr)
    return bind(func, binds) if binds else func  # type: ignore[return-value]


@dataclass(frozen=True, eq=False)
class BindParams(ModulePass):
    """Bind ``params`` (name -> array) to the parameters of ``func_name`` with those names.

    Names that are not parameters are ignored (a params dict may hold more weights than one
    function uses), as in ``bind_params_by_name`` (also ``relay.build_module``'s), which
    this wraps.
    """

    name: ClassVar[str] = "BindParams"
    opt_level: ClassVar[int] = 0
    params: Mapping[str, Any] = field(default_factory=dict)
    func_name: str = "main"

    def __post_init__(self) -> None:
        if not isinstance(self.params, Mapping):
            raise TypeError(f"BindParams: params must map names to arrays, got "
                            f"{type(self.params).__name__}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not self.params:
            return mod
        func = mod[self.func_name]
        if not isinstance(func, Function):
            raise TypeError(f"BindParams: @{self.func_name} is not a relay.Function")
        out = mod.copy()
        out[self.func_name] = bind_params_by_name(func, self.params)
        return infer(out)
