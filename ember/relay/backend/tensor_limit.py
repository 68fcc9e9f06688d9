"""Refusing, before any C is generated, a model with a tensor this machine could not allocate.

A model may declare sizes no machine has memory for (an ONNX input of 2**40 rows, a shape
bound with a typo). Without this check the C compiles and the executor then fails to allocate
terabytes when it is created. ``check_tensor_sizes`` runs in ``optimize`` (the pipeline every
executor's build shares, ``pipeline.py``) right after the first type inference: every tensor
of every function (parameters, the result of every call) whose size is known must fit in
``max_tensor_bytes()``; for a tensor with symbolic axes the known axes alone (one row of it)
must fit. The message names the input or the operator, the shape, the dtype and the bytes.

The limit is this machine's RAM plus swap: Linux's default overcommit heuristic refuses any
single allocation larger than that, so such a tensor could not be allocated when the executor
is created here. The build machine stands for the target (``llvm`` is this CPU); to build for
a machine with more memory, set the PassContext option ``relay.build.max_tensor_bytes`` (an
int; 0 turns the check off). Where the memory size cannot be read, the limit is 2**47 bytes,
the user address space of x86-64 and AArch64 (48-bit virtual addresses), which no tensor can
exceed on any machine ember targets.
"""
from __future__ import annotations

import os

from ...ir.expr import Call, Function
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import PassContext
from ...ir.types import TensorType, TupleType, Type
from ...ir.visitor import post_order
from ...runtime.dtype import DataType
from ...runtime.errors import TensorTooLargeError

CONFIG_KEY = "relay.build.max_tensor_bytes"
ADDRESS_SPACE = 2**47


def machine_memory() -> int | None:
    """RAM plus swap in bytes (``/proc/meminfo``; RAM alone from ``sysconf`` elsewhere), or
    None when neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return sum(int(fields[k].split()[0]) * 1024 for k in ("MemTotal", "SwapTotal"))
    except (OSError, KeyError, ValueError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def max_tensor_bytes() -> tuple[int, str]:
    """(the largest tensor a build accepts in bytes, 0 for no limit; where the number comes
    from, for the message)."""
    value = PassContext.current().config.get(CONFIG_KEY)
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TensorTooLargeError(f"PassContext config {CONFIG_KEY} must be an int >= 0 "
                                      f"(bytes; 0: no limit), got {value!r}")
        return value, f"PassContext config {CONFIG_KEY}"
    memory = machine_memory()
    if memory is None:
        return ADDRESS_SPACE, "the 48-bit address space"
    return memory, "this machine's RAM + swap"


def fmt_bytes(n: int) -> str:
    """``13194139533312`` -> ``12.0 TiB``."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            break
        size /= 1024
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"


def _known_bytes(ty: TensorType) -> int:
    """The bytes of ``ty`` counting each symbolic axis as 1 (exact for a static shape)."""
    n = DataType(ty.dtype).itemsize
    for d in ty.shape:
        if isinstance(d, int):
            n *= d
    return n


def _tensors(ty: Type | None) -> list[TensorType]:
    stack, out = [ty], []
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType):
            out.append(t)
    return out


def check_tensor_sizes(mod: IRModule, where: str = "relay.build") -> None:
    """TensorTooLargeError naming the first tensor of typed ``mod`` larger than
    ``max_tensor_bytes()`` (see the module doc)."""
    limit, source = max_tensor_bytes()
    if limit == 0:
        return
    for gv, func in mod.functions.items():
        if not isinstance(func, Function):
            continue
        for label, ty in _labelled_types(gv.name_hint, func):
            for t in _tensors(ty):
                n = _known_bytes(t)
                if n > limit:
                    _refuse(where, label, t, n, limit, source)


def _labelled_types(fname: str, func: Function) -> list[tuple[str, Type | None]]:
    """(how to name it, type) for the parameters of ``func`` and the result of every call."""
    out: list[tuple[str, Type | None]] = [
        (f"input {p.name_hint!r}" if fname == "main" else f"parameter %{p.name_hint} of "
         f"@{fname}", p.checked_type_ or p.type_annotation) for p in func.params]
    for node in post_order(func.body):
        if isinstance(node, Call):
            name = node.op.name if isinstance(node.op, Op) else "a function call"
            out.append((f"the result of {name} in @{fname}", node.checked_type_))
    return out


def _refuse(where: str, label: str, ty: TensorType, n: int, limit: int, source: str) -> None:
    from ..op._shape import fmt_shape

    static = all(isinstance(d, int) for d in ty.shape)
    size = f"{fmt_bytes(n)} ({n} bytes)" if static else (
        f"at least {fmt_bytes(n)} ({n} bytes) for each value of its symbolic axes")
    raise TensorTooLargeError(
        f"{where}: {label} has shape {fmt_shape(ty.shape)} of {ty.dtype}: {size}, more than "
        f"the {fmt_bytes(limit)} of {source}; check the declared sizes (ONNX: shape= / "
        f"input_shapes= bind an input's dims), or set the PassContext config {CONFIG_KEY} "
        "to build for a larger machine")
