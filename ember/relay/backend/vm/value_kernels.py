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
takes the input but never reads its bytes. The C emitter finds such parameters in the loop IR
(``FunctionC.unused_params``, ``codegen_packed.unused_params``): those positions are recorded,
and the plan hands the kernel the argument's shape alone.
"""
from __future__ import annotations

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
    count = len(low.inputs) + len(low.constants) + len(low.outputs)
    return tuple(k for k in low.code.unused_params if k < count)


__all__ = ["IMPURE_PREFIXES", "value_facts"]
