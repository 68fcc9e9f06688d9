"""BindParams: turn named parameters of ``main`` into constants (weights known at compile
time), so FoldConstant, SimplifyInference and FoldScaleAxis can fold them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...ir.expr import Function
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext
from ._helpers import infer

__all__ = ["BindParams"]


@dataclass(frozen=True, eq=False)
class BindParams(ModulePass):
    """Bind ``params`` (name -> array) to the parameters of ``func_name`` with those names.

    Names that are not parameters are ignored (a params dict may hold more weights than one
    function uses), as in ``relay.build_module.bind_params_by_name``, which this wraps.
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
        from ..build_module import bind_params_by_name  # the driver's helper, one layer down

        if not self.params:
            return mod
        func = mod[self.func_name]
        if not isinstance(func, Function):
            raise TypeError(f"BindParams: @{self.func_name} is not a relay.Function")
        out = mod.copy()
        out[self.func_name] = bind_params_by_name(func, self.params)
        return infer(out)
