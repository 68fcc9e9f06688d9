"""The VM compiler: a Relay module (control flow, recursion, closures, ADTs, ``?`` shapes)
to a VM Executable (bytecode + constants + one C kernel library).

Pipeline (``VMCompiler.lower``):

1. ``optimize``: InferType, bind params, the optimisation passes of ``relay.build`` under the
   current PassContext (SimplifyInference, FoldConstant, ... ``relay.backend.pipeline.optimize_passes``),
   FuseOps, InferType (the same code as ``relay.optimize``; lets are first dissolved with
   ToGraphNormalForm so they do not split fusion groups);
2. ToANormalForm + InferType, InlinePrimitives: fused functions in call position;
3. ManifestAlloc: explicit storage and destination-passing kernel calls, storage shared
   within a scope where lifetimes allow (``memory_alloc.py``);
4. LambdaLift: local functions to globals, closures capturing their free variables;
5. code generation per global function (``_codegen.py``, ``_match.py``), constants pooled;
   every distinct fused function lowered once (TECompiler, names ``vm_mod_fused_<ops>``),
   plus a shape function for each one called with ``?`` output shapes (``shape_func.py``);
   all of it one C translation unit, compiled (cached by content hash) by ``codegen()``.

``EMBER_DEBUG=1`` prints each stage's time, ``=2`` also the IR after every pass (including the
VM-specific ones) and the bytecode.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from ....ir.expr import Function
from ....ir.module import IRModule
from ....runtime.env import debug_level
from ....runtime.errors import TVMError
from ....runtime.module import CSourceModule
from ....runtime.ndarray import NDArray
from ....runtime.ndarray import array as nd_array
from ....runtime.vm.executable import Executable
from ....target import Target
from ....tir.codegen import FunctionC, function_c, join_c, split_c
from ...transform.to_a_normal_form import ToANormalForm
from ...transform.to_graph_normal_form import ToGraphNormalForm
from ...transform.type_infer import InferType
from .. import te_compiler
from ..interpreter import Executor as _EvaluatorBase
from ..pipeline import as_module, canon_target, evaluated_module, optimize, stage
from ..te_compiler import LoweredFunc, TECompiler
from ._codegen import CodegenContext, FunctionCodegen
from .inline_primitives import InlinePrimitives
from .lambda_lift import LambdaLift
from .memory_alloc import ManifestAlloc, run_time_concat_order
from .shape_func import lower_shape_func
from .value_kernels import value_facts

KERNEL_PREFIX = "vm_mod_"


def _vm_symbol(readable: str, mod_name: str) -> str:
    return f"{KERNEL_PREFIX}{readable}"


class _Kernels:
    """The kernels and shape functions an executable calls, in first-use order."""

    def __init__(self, target: Any) -> None:
        self.kind = te_compiler.target_kind(target)
        self.arch_options = te_compiler.arch_options(target if target is not None else self.kind)
        self.tec = TECompiler(mangle=_vm_symbol)
        self.names: list[str] = []
        self.parts: list[FunctionC] = []  # the C of each kernel and shape function
        self.externals: list[Any] = []  # modules of external codegens (BYOC), imported
        self._index: dict[str, int] = {}
        # kernel index -> the arguments it reads only for their shape, for the kernels a
        # plan may run once per input signature (value_kernels.py)
        self.value_kernels: dict[int, tuple[int, ...]] = {}
        # kernel index -> its params in output order, for the concatenations of run-time
        # size a plan may make in place (memory_alloc.run_time_concat_order)
        self.concat_kernels: dict[int, tuple[int, ...]] = {}

    def _add(self, name: str, make: Any) -> int:
        idx = self._index.get(name)
        if idx is None:
            self.parts.append(make())
            idx = self._index[name] = len(self.names)
            self.names.append(name)
        return idx

    def lowered(self, prim: Function) -> LoweredFunc:
        return self.tec.lower(prim, self.kind, "vm_mod")

    def kernel(self, prim: Function) -> tuple[int, list[NDArray]]:
        low = self.lowered(prim)
        if low.external_module is not None:  # BYOC: the function lives in an imported module
            if low.name not in self._index:
                self._index[low.name] = len(self.names)
                self.names.append(low.name)
                self.externals.append(low.external_module)
            return self._index[low.name], []
        index = self._add(low.name, lambda: low.code)
        facts = value_facts(low)
        if facts is not None:
            self.value_kernels[index] = facts
        order = run_time_concat_order(prim)
        if order is not None:
            self.concat_kernels[index] = order
        return index, list(low.constants)

    def shape_kernel(self, prim: Function) -> int:
        low = self.lowered(prim)
        name = f"{low.name}_shape_func"
        return self._add(name, lambda: function_c(lower_shape_func(low, name)))

    def library(self) -> CSourceModule | None:
        if not self.names:
            return None
        lib = CSourceModule(join_c(self.parts), "c", list(self.names),
                            compile_options=self.arch_options, units=split_c(self.parts))
        for module in self.externals:
            lib.import_module(module)
        return lib


class VMCompiler:
    """Compile a Relay module for the VM (``tvm.relay.vm.VMCompiler``)::

        compiler = VMCompiler()
        compiler.set_params(params)          # optional: bound as constants
        compiler.lower(mod, target="llvm")
        compiler.codegen()
        exe = compiler.get_exec()
    """

    def __init__(self) -> None:
        self._params: dict[str, NDArray] = {}
        self._exec: Executable | None = None
        self._lowered_mod: IRModule | None = None

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Parameters of ``main`` to bind by name (they become constants)."""
        self._params = {k: v if isinstance(v, NDArray) else nd_array(v)
                        for k, v in params.items()}

    def get_params(self) -> dict[str, NDArray]:
        """The parameters set with ``set_params`` (by name)."""
        return dict(self._params)

    def optimize(self, mod: Any, target: Any = None, target_host: Any = None,
                 params: Mapping[str, Any] | None = None) -> tuple[IRModule, dict[str, NDArray]]:
        """The optimised, fused module (and the params bound into it), before the VM passes."""
        mod = as_module(mod, "relay.vm.compile")
        canon = canon_target(target, target_host, "relay.vm.compile")
        with canon:
            mod = ToGraphNormalForm()(InferType()(mod))
            return optimize(mod, canon, None, params)

    def lower(self, mod: Any, target: Any = None, target_host: Any = None) -> None:
        """Run the VM pipeline on ``mod`` and generate the executable (kernels not yet
        compiled: ``codegen`` compiles them)."""
        canon = canon_target(target, target_host, "relay.vm.compile")
        opt, _ = self.optimize(mod, canon, None, self._params)
        with canon:
            with stage("vm passes"):
                mod = InferType()(ToANormalForm()(opt))
                mod = LambdaLift()(ManifestAlloc()(InlinePrimitives()(mod)))
            self._lowered_mod = mod
            with stage("vm codegen + lower kernels"):
                self._exec = _generate(mod, canon)
        if debug_level() >= 2:
            print(self._exec.bytecode, file=sys.stderr)

    def codegen(self) -> None:
        """Compile the kernel library (C, cached by content hash)."""
        exe = self.get_exec()
        if exe.lib is not None:
            if not isinstance(exe.lib, CSourceModule):  # already compiled and loaded
                return
            missing = sorted(set(exe.primitive_ops) - set(exe.lib.func_names))
            if missing:
                raise TVMError(f"VMCompiler.codegen: kernels {missing} are called but missing "
                               "from the kernel library")
            with stage("compile"):
                exe.lib.compile()  # not loaded: the target may be another CPU

    def get_exec(self) -> Executable:
        """The executable made by ``lower``."""
        if self._exec is None:
            raise TVMError("VMCompiler.get_exec: nothing compiled yet; call lower(mod, target) "
                           "first")
        return self._exec


def _ordered_functions(mod: IRModule) -> dict[str, Function]:
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, Function) and not te_compiler.is_primitive(f)}
    if "main" not in funcs:
        raise TVMError("relay.vm.compile: the module has no main function")
    return {"main": funcs["main"], **{k: v for k, v in funcs.items() if k != "main"}}


def _generate(mod: IRModule, target: Target) -> Executable:
    kernels = _Kernels(target)
    funcs = _ordered_functions(mod)
    ctx = CodegenContext(funcs, kernels.kernel, kernels.shape_kernel)
    ctx.type_defs = dict(mod.type_definitions)
    vm_funcs = [FunctionCodegen(ctx, name, func).run() for name, func in funcs.items()]
    return Executable.from_functions(vm_funcs, ctx.constants, kernels.names, kernels.library(),
                                     value_kernels=kernels.value_kernels,
                                     concat_kernels=kernels.concat_kernels)


def compile(mod: Any, target: Any = None, target_host: Any = None,
            params: Mapping[str, Any] | None = None) -> Executable:
    """Compile ``mod`` (an IRModule with ``main``, or a Function) into a VM Executable.

    ``target`` defaults to the current ``with Target(...)`` or ``"llvm"`` (the host CPU);
    ``params`` binds parameters of ``main`` by name. Run it with
    ``ember.runtime.vm.VirtualMachine(exe, ember.cpu())``. Raises TVMError for a non-CPU
    target or an unsupported construct (references), CompileError for data-dependent shapes.
    """
    compiler = VMCompiler()
    if params:
        compiler.set_params(params)
    compiler.lower(mod, target, target_host)
    compiler.codegen()
    return compiler.get_exec()


class VMExecutor(_EvaluatorBase):
    """``create_executor("vm", mod, device, target)``: ``evaluate()`` compiles ``main`` (or
    the given function) with ``relay.vm.compile`` once and returns a callable running it on
    a VirtualMachine. Results are NDArrays, or ADTs for tuples and data types."""

    def _make_executor(self, expr: Any = None) -> Callable[..., Any]:
        from ....runtime.vm.interpreter import VirtualMachine
        from .._values import convert_args

        mod = evaluated_module(self.mod, expr)
        main = mod["main"]
        exe = compile(mod, self.target)
        vm = VirtualMachine(exe, self.device)

        def run(*args: Any, **kwargs: Any) -> Any:
            return vm.invoke("main", *convert_args(main, args, kwargs, "vm executor"))

        return run


def build_vm(mod: IRModule, target: Target, executor: Any, runtime: Any,
             params: Mapping[str, Any] | None, mod_name: str) -> Any:
    """``relay.build(..., executor=Executor("vm"))``: the VM executor factory."""
    from ....runtime.vm.factory import VMExecutorFactoryModule

    exe = compile(mod, target, None, params)
    return VMExecutorFactoryModule(exe, mod_name, target=target)
