"""The TE compiler: Relay primitive functions (``Primitive=1``, FuseOps' groups) to C kernels.

For each primitive function: tensor expressions from the ops' compute rules
(:mod:`ember.relay.backend._lower_te`), the schedule ``topi.auto_schedule`` picks (an anchor's
template such as conv2d or dense with its elementwise epilogue, else injective or reduction),
a PrimFunc named ``tvmgen_<mod_name>_fused_<op>_<op>...`` and its C: an unpacked function and
a packed wrapper that checks its arguments, headed by a comment with the Relay source.

Lowered functions are cached by the primitive function's structural hash (and the target), so
identical groups compile once; names are unique per compiler (``_1``, ``_2``... on clashes).
Across processes, lowered kernels are also kept on disk (:mod:`.kernel_cache`): a rebuild of
an unchanged model skips lowering, and gives the same C as a fresh build.

Calling convention of a lowered kernel (packed): the flattened parameters (a tuple parameter
contributes its fields), then the lifted constants (``LoweredFunc.constants``, usually none:
FuseOps passes large constants as parameters), then the flattened outputs, all as tensors.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ... import topi
from ...ir.expr import Call, Function, GlobalVar
from ...ir.module import IRModule
from ...ir.structural import structural_equal, structural_hash
from ...ir.visitor import is_primitive, post_order
from ...runtime.env import debug_level
from ...runtime.errors import CompilerNotFoundError, TVMError
from ...runtime.module import CSourceModule, compiler_driver
from ...runtime.ndarray import array as nd_array
from ...target.simd import CpuChoice, cpu_choice
from ...te import tensor as te
from ...te.lower import lower as te_lower
from ...tir.arg_checks import checks_unit
from ...tir.codegen import FunctionC, function_c, join_c, kernel_entries, split_c
from ...tir.kernel_objects import object_sources
from ...tir.expr import IntImm
from ...tir.stmt import PrimFunc
from . import kernel_cache
from ..op._compute_common import tensor_types
from ._lower_te import TEGraph, guard, to_te
from .name_transforms import to_c_identifier
from .utils import mangle_module_name

MAX_NAME_LENGTH = 80  # longer op-derived names are cut and get a hash suffix (as TVM does)
_HOST_TARGETS = ("c", "llvm")


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape (ints; a symbolic dimension by its name) and dtype of a kernel argument."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str


@dataclass
class LoweredFunc:
    """One lowered primitive function: its kernel name, C, arguments and PrimFunc.

    ``code`` holds the C pieces (``c_source`` is them as a translation unit of their own);
    ``arch_flags`` the C compiler's instruction-set flags the kernel was lowered for. A kernel
    from the disk cache has no PrimFunc kept: ``prim_func`` lowers it again when asked."""

    name: str
    code: FunctionC
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    source_func: Function
    target: str
    constants: list[Any] = field(default_factory=list)  # NDArrays passed after the inputs
    kept_te_graph: TEGraph | None = field(default=None, repr=False)
    arch_flags: tuple[str, ...] = ()
    workspace_bytes: int = 0  # from TVMBackendAllocWorkspace, at most (Model Library Format)
    kept_prim_func: PrimFunc | None = field(default=None, repr=False)
    # BYOC: the module of a module codegen (relay.ext.<compiler>) defining ``name``; ``code``
    # is then empty and the module is imported into the model's library (``build``).
    external_module: Any = field(default=None, repr=False)

    @property
    def is_external(self) -> bool:
        """True for a partitioned function (``Compiler=...``) an external codegen built."""
        return self.source_func.get_attr("Compiler") is not None

    @property
    def prim_func(self) -> PrimFunc:
        """The kernel's loop IR (lowered again when it came from the cache)."""
        if self.kept_prim_func is None:
            lowering = _lower_graph(self.te_graph, _relay_text(self.source_func))
            self.kept_prim_func = lowering.prim_func.with_attr("global_symbol", self.name)
        return self.kept_prim_func

    @property
    def relay_func(self) -> Function:
        """The primitive function this kernel was lowered from (the first one, if shared)."""
        return self.source_func

    @property
    def c_source(self) -> str:
        """The kernel's C as a translation unit of its own."""
        return join_c([self.code])

    @property
    def te_graph(self) -> TEGraph:
        """The tensor expressions of the kernel (made again when it came from the cache)."""
        if self.kept_te_graph is None:
            self.kept_te_graph = to_te(self.source_func)
        return self.kept_te_graph

    @property
    def num_args(self) -> int:
        return len(self.inputs) + len(self.constants) + len(self.outputs)

    @property
    def is_dynamic(self) -> bool:
        """True when a dimension of some argument is only known at run time."""
        return any(isinstance(d, str) for t in self.inputs + self.outputs for d in t.shape)


@dataclass
class _Lowering:
    """What lowering a primitive function gives, under the placeholder name. The disk cache
    stores it without the PrimFunc (flat data only: deep loop IR would not pickle without
    recursing) and with constants as numpy arrays."""

    op_names: list[str]
    code: FunctionC
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    constants: list[Any]
    workspace_bytes: int
    prim_func: PrimFunc | None = None

    def without_prim_func(self) -> _Lowering:
        return _Lowering(self.op_names, self.code, self.inputs, self.outputs, self.constants,
                         self.workspace_bytes)


def target_kind(target: Any) -> str:
    """``"c"`` or ``"llvm"`` (the host CPU, compiled through C); other targets are refused."""
    if target is None:
        return "c"
    kind = getattr(target, "kind", None)
    text = str(getattr(kind, "name", kind) if kind is not None else target).split()[0]
    if text not in _HOST_TARGETS:
        raise TVMError(f"te compiler: target {text!r} is not supported; ember compiles for the "
                       "host CPU with target 'c' or 'llvm'")
    return text


def _info(t: te.Tensor, name: str) -> TensorInfo:
    shape = tuple(d.value if isinstance(d, IntImm) else str(d) for d in t.shape)
    return TensorInfo(name, shape, t.dtype)


def readable_name(op_names: list[str]) -> str:
    """``fused_<op>_<op>...`` with dots as underscores; cut with a hash when too long."""
    name = "_".join(["fused", *(n.replace(".", "_") for n in op_names)])
    if len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha1(name.encode()).hexdigest()[:16]
        name = f"{name[:MAX_NAME_LENGTH]}_{digest}"
    return name


def default_mangle(mod_name: str) -> Callable[[str], str]:
    """``name`` -> ``tvmgen_<mod_name>_<name>``."""
    prefix = mangle_module_name(mod_name)
    return lambda name: f"{prefix}_{name}"


class TECompiler:
    """Lowers primitive functions to C kernels, once per distinct function and target.

    ``mangle(name, mod_name)`` maps the op-derived name (``fused_add``) to the symbol; the
    default gives ``tvmgen_<mod_name>_fused_add``, the VM passes its own (``vm_mod_fused_add``).
    ``EMBER_DEBUG=2`` prints each kernel's loop IR as it is lowered, ``=3`` also its C.
    """

    def __init__(self, mangle: Callable[[str, str], str] | None = None) -> None:
        self._mangle = mangle
        self._cache: dict[tuple[int, str, str, str], list[tuple[Function, LoweredFunc]]] = {}
        self._order: list[LoweredFunc] = []
        self._names: dict[str, int] = {}

    # -- lowering ---------------------------------------------------------------------------
    def lower(self, func: Function, target: Any = "c", mod_name: str = "default"
              ) -> LoweredFunc:
        """The kernel of primitive function ``func`` (cached by structure and target)."""
        if not isinstance(func, Function):
            raise TVMError(f"te compiler: expected a relay Function, got {type(func).__name__}")
        kind = target_kind(target)
        if func.get_attr("Compiler") is not None:
            return self._lower_external(_ensure_typed(func), kind)
        cpu = _cpu_of(str(target if target is not None else kind),
                      os.environ.get("EMBER_MARCH", ""))
        func = _ensure_typed(func)
        func_hash = structural_hash(func)
        key = (func_hash, kind, cpu.key, mod_name)
        for seen, lowered in self._cache.get(key, []):
            if structural_equal(seen, func):
                return lowered
        lowered = self._lower(func, func_hash, kind, cpu, mod_name)
        self._cache.setdefault(key, []).append((func, lowered))
        self._order.append(lowered)
        return lowered

    def _lower(self, func: Function, func_hash: int, kind: str, cpu: CpuChoice,
               mod_name: str) -> LoweredFunc:
        text = _relay_text(func)
        disk_key = kernel_cache.kernel_key(func_hash, text, kind, cpu.key)
        graph = None
        found = kernel_cache.load(disk_key)
        if isinstance(found, _Lowering):
            result = found
        else:
            graph = to_te(func)
            result = _lower_graph(graph, text)
            kernel_cache.store(disk_key, result.without_prim_func())
        name = self._unique(self._symbol(readable_name(result.op_names), mod_name))
        prim = None if result.prim_func is None else result.prim_func.with_attr(
            "global_symbol", name)
        code = result.code.renamed(kernel_cache.PLACEHOLDER, name)
        _prefetch_objects(code, cpu.arch_flags)
        _debug(name, prim, code)
        constants = [nd_array(c) for c in result.constants]
        return LoweredFunc(name, code, result.inputs, result.outputs, func, kind, constants,
                           graph, cpu.arch_flags, result.workspace_bytes, prim)

    def _lower_external(self, func: Function, kind: str) -> LoweredFunc:
        """A partitioned function through its compiler's codegen (``relay/backend/contrib``),
        under its ``global_symbol``; the same symbol lowered again gives the same kernel."""
        compiler, symbol = str(func.get_attr("Compiler")), func.get_attr("global_symbol")
        if not symbol:
            raise TVMError(f"te compiler: a function with Compiler={compiler!r} has no "
                           f"global_symbol attribute (run PartitionGraph): {_relay_text(func)}")
        symbol = str(symbol)
        for done in self._order:
            if done.name == symbol and done.is_external:
                if not structural_equal(done.source_func, func):
                    raise TVMError(f"te compiler: two different partitioned functions are "
                                   f"named {symbol!r}")
                return done
        if symbol in self._names:
            raise TVMError(f"te compiler: the external function {symbol!r} clashes with a "
                           "kernel of the same name")
        lowered = _external_lowered(func, compiler, symbol, kind)
        self._names[symbol] = 1
        self._order.append(lowered)
        return lowered

    def _symbol(self, readable: str, mod_name: str) -> str:
        if self._mangle is not None:
            return to_c_identifier(self._mangle(readable, mod_name))
        return to_c_identifier(default_mangle(mod_name)(readable))

    def _unique(self, name: str) -> str:
        # TVM's rule: the first use keeps the name, later ones get _1, _2, ...
        while name in self._names:
            k = self._names[name]
            self._names[name] = k + 1
            name = f"{name}_{k}"
        self._names[name] = 1
        return name

    # -- results ----------------------------------------------------------------------------
    def items(self) -> list[LoweredFunc]:
        """Every function lowered so far, in lowering order."""
        return list(self._order)

    def clear(self) -> None:
        """Forget every lowered function (and the names they took)."""
        self._cache.clear()
        self._order.clear()
        self._names.clear()

    def get_source(self, funcs: list[LoweredFunc] | None = None, stdio: bool = True) -> str:
        """One C translation unit holding ``funcs`` (default: all lowered so far);
        ``stdio=False``: constant error messages, for firmware (see ``generate_c``)."""
        funcs = self._order if funcs is None else funcs
        return join_c([f.code for f in funcs if f.external_module is None], stdio)

    def build(self, funcs: list[LoweredFunc] | None = None, target: Any = None
              ) -> CSourceModule:
        """A CSourceModule of ``funcs`` (compiled, cached by content hash, on first call),
        compiled for ``target``'s CPU (``compile_options``; default: the first function's)."""
        funcs = self._order if funcs is None else funcs
        flags = arch_options(target) if target is not None else list(
            funcs[0].arch_flags if funcs else ())
        parts = [f.code for f in funcs if f.external_module is None]
        lib = CSourceModule(join_c(parts), "c",
                            [f.name for f in funcs if f.external_module is None],
                            compile_options=flags, units=split_c(parts))
        for f in funcs:
            if f.external_module is not None:
                lib.import_module(f.external_module)
        return lib

    def jit(self, func: Function, target: Any = "c", mod_name: str = "default") -> Any:
        """The compiled packed function of ``func``."""
        lowered = self.lower(func, target, mod_name)
        return self.build([lowered])[lowered.name]


_GLOBAL: TECompiler | None = None


def get() -> TECompiler:
    """A process-wide TECompiler (as ``relay.backend.te_compiler.get()``)."""
    global _GLOBAL
    if _GLOBAL is None:
        _GLOBAL = TECompiler()
    return _GLOBAL


def lower_function(func: Function, mod_name: str = "default", target: Any = "c",
                   compiler: TECompiler | None = None) -> LoweredFunc:
    """Lower one primitive function (with a fresh compiler unless one is given)."""
    return (compiler or TECompiler()).lower(func, target, mod_name)


def primitive_functions(mod: IRModule) -> Iterator[tuple[GlobalVar | None, Function]]:
    """Every primitive function reachable from ``main`` (inline ones with None), each once."""
    if "main" not in mod:
        raise TVMError("te compiler: the module has no 'main' function")
    todo, seen_globals, seen = [mod.get_global_var("main")], set(), set()
    while todo:
        gv = todo.pop(0)
        if gv.name_hint in seen_globals:
            continue
        seen_globals.add(gv.name_hint)
        func = mod[gv]
        if is_primitive(func):
            yield gv, func
            continue
        for node in post_order(func):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, GlobalVar) and node.name_hint in mod:
                todo.append(node)
            elif isinstance(node, Call) and isinstance(node.op, Function) and is_primitive(
                    node.op):
                yield None, node.op


def lower_module(mod: IRModule, target: Any = "c", mod_name: str = "default",
                 compiler: TECompiler | None = None
                 ) -> tuple[dict[Any, LoweredFunc], CSourceModule]:
    """Lower every primitive function reachable from ``main``.

    Returns ``({key: LoweredFunc}, CSourceModule)``. Global primitive functions are keyed by
    their GlobalVar; inline ones (``Call(fn(...), args)``) by their kernel name and by the
    Function node itself, so a code generator can look up each call site's callee.
    Structurally equal functions share one kernel; the C holds each kernel once.
    """
    compiler = compiler or TECompiler()
    if "main" in mod and mod["main"].checked_type_ is None:
        from ..transform import InferType

        mod = InferType()(mod)
    found: dict[Any, LoweredFunc] = {}
    kernels: dict[str, LoweredFunc] = {}
    for gv, func in primitive_functions(mod):
        lowered = compiler.lower(func, target, mod_name)
        if gv is not None:
            found[gv] = lowered
        else:
            found[lowered.name] = found[func] = lowered
        kernels.setdefault(lowered.name, lowered)
    return found, compiler.build(list(kernels.values()), target)


@functools.lru_cache(maxsize=64)
def _cpu_of(target: str, ember_march: str) -> CpuChoice:
    """``cpu_choice`` of a target's text (and the ``$EMBER_MARCH`` it reads), memoised."""
    return cpu_choice(target)


def _prefetch_objects(code: FunctionC, arch_flags: tuple[str, ...]) -> None:
    """Start compiling the kernel objects ``code`` calls (and the argument checks every split
    build links) while lowering goes on: in a cold cache they are most of the C compile."""
    entries = kernel_entries([code])
    if entries:
        sources = object_sources(entries) + [checks_unit()]
        with contextlib.suppress(CompilerNotFoundError):  # the build reports it, if it builds
            compiler_driver().prefetch_objects(sources, list(arch_flags))


def arch_options(target: Any) -> list[str]:
    """The C compiler's instruction-set options for ``target`` (``-march=skylake-avx512``
    for ``llvm -mcpu=skylake-avx512``): the one choice kernels take their SIMD level from."""
    return list(cpu_choice(target).arch_flags)


def _lower_graph(graph: TEGraph, relay_text: str) -> _Lowering:
    """Schedule, lower and generate C for ``graph`` under the placeholder name."""
    from .aot.metadata import kernel_workspace_bytes

    sch = topi.auto_schedule(graph.outputs)
    args = graph.inputs + graph.constants + graph.outputs
    prim = guard(te_lower(sch, args, kernel_cache.PLACEHOLDER),
                 graph.requirements)  # run-time size checks
    prim = prim.with_attr("from_relay", relay_text)
    inputs = [_info(t, t.op.name) for t in graph.inputs]
    outputs = [_info(t, f"output{i}") for i, t in enumerate(graph.outputs)]
    constants = [c.numpy() if hasattr(c, "numpy") else c for c in graph.constant_values]
    return _Lowering(list(graph.op_names), function_c(prim), inputs, outputs, constants,
                     kernel_workspace_bytes(prim), prim)


def _external_lowered(func: Function, compiler: str, symbol: str, kind: str) -> LoweredFunc:
    """The LoweredFunc of a partitioned function: C in ember's kernel ABI from a kernel
    codegen (joins the model's C), else the module of ``relay.ext.<compiler>``."""
    from .contrib import codegen_module, kernel_codegen

    def infos(types: list[Any], prefix: str) -> list[TensorInfo]:
        return [TensorInfo(f"{prefix}{i}", tuple(t.shape), t.dtype) for i, t in
                enumerate(types)]

    ty = func.checked_type_
    inputs = infos([t for a in ty.arg_types for t in tensor_types(a)], "input")
    outputs = infos(tensor_types(ty.ret_type), "output")
    codegen = kernel_codegen(compiler)
    if codegen is not None:
        kernel = codegen(func, symbol)
        _debug(symbol, None, kernel.code)
        return LoweredFunc(symbol, kernel.code, inputs, outputs, func, kind,
                           kept_prim_func=kernel.prim_func)
    module = codegen_module(func, compiler, symbol)
    return LoweredFunc(symbol, FunctionC(symbol, "", "", "", frozenset(), False), inputs,
                       outputs, func, kind, external_module=module)


def _debug(name: str, prim: PrimFunc | None, code: FunctionC) -> None:
    level = debug_level()
    if level >= 2:
        print(f"ember: lowered {name}\n{prim if prim is not None else '(from the cache)'}",
              file=sys.stderr)
    if level >= 3:
        print(f"ember: C of {name}\n{join_c([code])}", file=sys.stderr)


def _ensure_typed(func: Function) -> Function:
    if func.checked_type_ is None or func.body.checked_type_ is None:
        from ..transform.type_infer import infer_type

        return infer_type(func)  # type: ignore[return-value]
    return func


def _relay_text(func: Function) -> str:
    lines = func.astext(show_meta_data=False).strip().splitlines()
    return "\n".join(ln for ln in lines if not ln.startswith("#[version"))
