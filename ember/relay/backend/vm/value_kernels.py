"""Which kernels a VM plan may run once per input signature (its *value phase*), and which of
their arguments they read only for the shape.

A plan runs a kernel call once per signature, not once per run, when everything it reads is
known from the arguments' shapes and the constants (``ember.runtime.vm.plan_phase``): T5's
relative-position buckets, causal masks, position ids. That is only sound for a kernel whose
result is a function of what it reads: no random numbers (``random.*`` keep their key in a
constant: the numbers repeat, but a program that draws them asks for a draw per run), no call
out of the kernel (a packed function, an external codegen's module) that could do anything.

The frontends build tensors of a symbolic shape from an input, as ``zeros_like`` of a slice of
it (``Range(0, L)`` of an ONNX export: a cumsum of ones shaped like the input): the kernel
takes the input but never reads its bytes. The C emitter marks such parameters unused
(``(void)p1;`` at the top of the unpacked function, ``codegen_packed._unused_params``, from
the loop IR): those positions are recorded, and the plan hands the kernel the argument's
shape alone.
"""
from __future__ import annotations

import re
from typing import Any

from ....ir.expr import Call
from ....ir.op import Op
from ....ir.visitor import post_order

# op-name prefixes whose kernels never join a value phase
IMPURE_PREFIXES = ("random.",)


def value_facts(low: Any) -> tuple[int, ...] | None:
    """For a lowered kernel (``te_compiler.LoweredFunc``): the positions of the arguments it
    reads only for their shape, or None when it must run on every call (an impure op, a call
    out of the kernel, an external codegen's function)."""
    if low.external_module is not None or low.code is None or low.code.call_packed:
        return None
    for e in post_order(low.source_func.body):
        if isinstance(e, Call) and (not isinstance(e.op, Op) or
                                    e.op.name.startswith(IMPURE_PREFIXES)):
            return None
    return unused_buffers(low.code.unpacked, low.name, len(low.inputs) + len(low.constants) +
                          len(low.outputs))


_VOID = re.compile(r"\(void\)(\w+);")


def unused_buffers(unpacked: str, name: str, count: int) -> tuple[int, ...]:
    """The positions, among the first ``count`` parameters of ``<name>_unpacked`` in the C text
    ``unpacked`` (its tensor arguments, in order), of those the body never mentions (the
    emitter's ``(void)`` line right after the signature); () where the text is not as
    expected."""
    head = f"{name}_unpacked("
    start = unpacked.rfind(head)
    if start < 0:
        return ()
    close = unpacked.find(") {\n", start)
    if close < 0:
        return ()
    params = unpacked[start + len(head):close].split(", ")
    names = [p.rsplit(" ", 1)[-1].lstrip("*") for p in params]
    if len(names) < count or any("*" not in p for p in params[:count]):
        return ()
    line = unpacked[close + 4:].split("\n", 1)[0]
    if not line.lstrip().startswith("(void)"):
        return ()
    unused = set(_VOID.findall(line))
    return tuple(k for k in range(count) if names[k] in unused)


__all__ = ["IMPURE_PREFIXES", "unused_buffers", "value_facts"]
