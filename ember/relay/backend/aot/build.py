"""``relay.build`` with ``Executor("aot")``: the pipeline that ends in an AotExecutorFactory.

    check (static shapes, no control flow) -> optimize + fuse (as for the graph executor)
    -> lower every fused operator to C (te_compiler) -> run_model as loop IR (codegen.py),
    with one planned arena -> metadata -> C (emit_c.py, interface.py) -> one library

The library's C is the kernels (``stdio``-free for the C runtime) followed by the executor
source; ``factory.sources`` keeps them apart (``<mod>_lib0.c`` kernels, ``<mod>_lib1.c``
executor; the second needs nothing of the first but its symbols) and ``factory.header`` is
``tvmgen_<mod>.h``, for Model Library Format.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from ....ir.adt import Constructor, Match
from ....ir.expr import Call, Function, GlobalVar, If, RefCreate, RefRead, RefWrite
from ....ir.module import IRModule
from ....ir.transform import PassContext
from ....ir.types import TensorType, TupleType, Type, is_dynamic
from ....ir.visitor import post_order
from ....runtime.aot_format import c_prefix
from ....runtime.env import debug_level
from ....runtime.errors import TVMError
from ....runtime.executor_factory import AotExecutorFactoryModule
from ....runtime.module import CSourceModule
from ....tir.codegen import join_c, split_c
from ...transform import DynamicToStatic, InferType, ToGraphNormalForm
from .. import te_compiler
from ..executor import Executor
from ..pipeline import optimize, stage
from ..runtime import Runtime
from .calling_convention import AotOptions, options_from
from .codegen import AotProgram, lower_main
from .emit_c import RunModelWriter, run_model_source
from .interface import c_entry, constant_pool_sizes, func_registry, header, packed_entry
from .metadata import build_metadata, c_metadata, pool_memory_key
from .scratch import with_planned_scratch
from .usmp import constant_pool_settings, usmp_settings

UNSUPPORTED = ("AOT needs static shapes and no control flow; use the VM: "
               "relay.vm.compile(mod, target)")


def _static_type(ty: Type | None) -> bool:
    """Tensors of static shape, or (nested) tuples of them."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif not (isinstance(t, TensorType) and not is_dynamic(t)):
            return False
    return True


def check_supported(mod: IRModule) -> None:
    """TVMError (with :data:`UNSUPPORTED` and what was found) unless ``main`` (typed) is a
    static dataflow graph of tensors: no If/Match/references/closures/calls of other
    Relay functions, no dynamic shapes."""
    from ....ir.printer import short_text

    main = mod["main"]

    def refuse(what: str) -> TVMError:
        return TVMError(f"relay.build: {UNSUPPORTED} ({what})")

    for p in main.params:
        if not isinstance(p.checked_type, TensorType) or is_dynamic(p.checked_type):
            raise refuse(f"input %{p.name_hint} has type {p.checked_type}")
    ret = main.checked_type.ret_type  # type: ignore[attr-defined]
    if not _static_type(ret):
        raise refuse(f"main returns {ret}")
    for node in post_order(main.body):
        if isinstance(node, (If, Match, RefCreate, RefRead, RefWrite, Constructor)):
            raise refuse(f"found {type(node).__name__}: {short_text(node)}")
        if isinstance(node, Function) and not node.get_attr("Primitive"):
            raise refuse(f"found a closure: {short_text(node)}")
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            callee = mod.functions.get(node.op)
            if not (isinstance(callee, Function) and callee.get_attr("Primitive")):
                raise refuse(f"calls the Relay function @{node.op.name_hint}")
        ty = node.checked_type_
        if ty is not None and isinstance(ty, (TensorType, TupleType)) and not _static_type(ty):
            raise refuse(f"{short_text(node)} has the dynamic type {ty}")


def lower_kernels(mod: IRModule, target: Any, mod_name: str) -> dict[Any, Any]:
    """callee (GlobalVar or primitive Function) -> LoweredFunc, for every primitive function
    reachable from main (``te_compiler.lower_module`` without its library: the AOT build
    makes its own, with the kernels in the runtime's codegen mode)."""
    compiler = te_compiler.TECompiler()
    return {gv if gv is not None else func: compiler.lower(func, target, mod_name)
            for gv, func in te_compiler.primitive_functions(mod)}


def memory_report(meta: Any) -> str:
    """The planned memory of an AOT build next to its liveness lower bound (per pool with the
    USMP), as ``EMBER_DEBUG=1`` prints it."""
    report = meta.memory
    lines = [f"[ember] relay.build: aot {'workspace pools' if meta.pools else 'arena'} "
             f"{report['planned_bytes']} bytes (lower bound {report['lower_bound']}, "
             f"{report['total_bytes']} without reuse)"]
    for q in meta.pools:
        limit = "no limit" if q["size_hint_bytes"] < 0 else f"limit {q['size_hint_bytes']}"
        scratch = report.get(pool_memory_key("workspace_pool", q["pool_name"]), 0)
        lines.append(f"[ember]   pool {q['pool_name']}: {q['planned_bytes']} bytes planned "
                     f"(lower bound {q['lower_bound']}, {limit}"
                     + (f"; operator scratch up to {scratch}" if scratch else "") + ")")
    for name, size in constant_pool_sizes(meta).items():
        lines.append(f"[ember]   constant pool {name}: {size} bytes")
    return "\n".join(lines)


def executor_source(program: AotProgram, meta: Any, opts: AotOptions, head: str) -> str:
    """The executor's C: header, run_model, metadata, the entry, the registry (crt)."""
    parts = [f"/* Generated by ember: the AOT executor of model {meta.module_name!r}. */",
             head, '#include "ember/c_backend_api.h"', "", run_model_source(program, opts), "",
             c_metadata(meta, program.constant_pools), "",
             c_entry(program, meta) if opts.interface_api == "c" else packed_entry(program, meta)]
    if opts.runtime == "crt":
        parts += ["", func_registry(program, meta)]
    return "\n".join(parts) + "\n"


def build_aot(mod: IRModule, target: Any, executor: Executor, runtime: Runtime,
              params: Mapping[str, Any] | None, mod_name: str, workspace_pools: Any = None,
              constant_pools: Any = None) -> AotExecutorFactoryModule:
    """The AOT executor factory for ``mod`` (the ``"aot"`` builder of ``relay.build``).

    ``workspace_pools`` (WorkspaceMemoryPools) are planned by the USMP (``usmp.py``) when the
    PassContext enables it; ``constant_pools`` (ConstantMemoryPools, with link-params) hold
    the linked constants, one static array per pool."""
    config = PassContext.current().config
    opts = options_from(executor, runtime, config)
    opts = replace(opts, usmp=usmp_settings(config, workspace_pools, target, opts.interface_api),
                   constant_pools=constant_pool_settings(constant_pools, target,
                                                         opts.link_params))
    source = mod
    mod = DynamicToStatic()(InferType()(mod))  # dyn ops with known values are static ops
    check_supported(mod)
    mod, _ = optimize(ToGraphNormalForm()(mod), target, None, params)
    prefix = c_prefix(mod_name)
    with stage("lower"):
        kernels = lower_kernels(mod, target, mod_name)
    scratch: dict[str, int] = {}
    if opts.usmp is not None:  # the kernels' workspaces go into the pools too
        kernels, scratch = with_planned_scratch(kernels)
    with stage("aot codegen"):
        try:
            program = lower_main(mod, kernels, opts, prefix, scratch)
        except TVMError as err:
            if "use the VM" in str(err) and UNSUPPORTED not in str(err):
                raise TVMError(f"relay.build: {UNSUPPORTED} ({err})") from None
            raise
        meta = build_metadata(program, opts, mod_name)
        head = header(meta, RunModelWriter(program).signature())
        parts = [k.code for k in program.kernels.values() if k.external_module is None]
        kernels_c = join_c(parts, stdio=opts.hosted)
        aot_c = executor_source(program, meta, opts, head)
    if debug_level() >= 1:
        print(memory_report(meta), file=sys.stderr)
    if debug_level() >= 2:
        print(str(program.run_model), file=sys.stderr)
    names = list(program.kernels) + [meta.symbol("run"), meta.symbol("get_metadata")]
    if opts.system_lib and opts.runtime == "cpp":  # the C runtime has its registry already
        from ..system_lib import constructor_source

        aot_c += "\n" + constructor_source(names, prefix)
    # Hosted builds compile the kernels as linked units and the executor as one more unit.
    units = split_c(parts, stdio=opts.hosted) + [("executor.c", aot_c)]
    lib = CSourceModule(kernels_c + "\n" + aot_c, "c", names,
                        compile_options=te_compiler.arch_options(target), units=units)
    sources = _Sources(lib, {f"{mod_name}_lib0.c": (0, len(kernels_c)),
                             f"{mod_name}_lib1.c": (len(kernels_c) + 1, len(lib.code))})
    for k in program.kernels.values():  # BYOC: external codegens' modules travel as imports
        if k.external_module is not None and k.external_module not in lib.imported_modules:
            lib.import_module(k.external_module)
            if k.external_module.is_dso_exportable:
                sources.extra[f"{mod_name}_lib{len(sources)}.c"] = k.external_module.get_source()
    del kernels_c, aot_c  # linked weights make these large: the library's copy is enough
    with stage("compile"):
        lib.compile()  # cached by content hash; not loaded (the target may be another CPU)
        if opts.system_lib and opts.runtime == "cpp":
            lib.get_function(meta.symbol("get_metadata"))  # loading registers the system lib
    params_out = {} if opts.link_params else {c.name: c.value for c in program.constants}
    return AotExecutorFactoryModule(
        meta, lib, mod_name, params_out, ir_mod=source, target=target, executor=executor,
        runtime=runtime, header=head, sources=sources)


class _Sources(Mapping[str, str]):
    """``{file name: C}`` as slices of the library's one source, cut when read."""

    def __init__(self, lib: CSourceModule, spans: dict[str, tuple[int, int]]) -> None:
        self.lib, self.spans = lib, spans
        self.extra: dict[str, str] = {}  # whole files: external codegens' C modules

    def __getitem__(self, name: str) -> str:
        if name in self.extra:
            return self.extra[name]
        start, end = self.spans[name]
        return self.lib.code[start:end]

    def __iter__(self) -> Iterator[str]:
        return iter([*self.spans, *self.extra])

    def __len__(self) -> int:
        return len(self.spans) + len(self.extra)
