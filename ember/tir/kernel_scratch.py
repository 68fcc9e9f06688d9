"""A kernel's scratch: the large allocations it would take from TVMBackendAllocWorkspace, laid
out at build time in one block that the caller provides.

The C emitter puts an allocation on the stack when it is small (``STACK_LIMIT``) or inside a
parallel loop, and otherwise asks ``TVMBackendAllocWorkspace`` at run time. With the unified
static memory planner (USMP) the AOT build plans those bytes too, as one buffer per kernel call
in the user's pools: :func:`scratch_layout` gives each such allocation a byte offset in that
block (nested allocations stack, siblings reuse, as the run-time allocator's stack discipline
would), and ``function_c(func, scratch)`` emits the kernel with the block as its last
parameter (``uint8_t* ember_workspace``; the packed wrapper takes it as one more uint8
tensor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .codegen_c import SCRATCH_ALIGNMENT, STACK_LIMIT
from .codegen_packed import _numel
from .expr import IntImm
from .functor import children
from .op import bits
from .simplify import simplify
from .stmt import Allocate, For, ForKind, PrimFunc, Stmt


@dataclass(frozen=True)
class KernelScratch:
    """Byte offsets (by ``id`` of the Allocate node of one PrimFunc object) and the block size."""

    offsets: dict[int, int] = field(default_factory=dict)
    nbytes: int = 0


def _align(n: int) -> int:
    return (n + SCRATCH_ALIGNMENT - 1) // SCRATCH_ALIGNMENT * SCRATCH_ALIGNMENT


def _static_bytes(node: Allocate) -> int | None:
    n = simplify(_numel(node.buffer))
    if not isinstance(n, IntImm):
        return None  # dynamic: stays with TVMBackendAllocWorkspace
    return n.value * max(1, bits(node.buffer.dtype) // 8)


def scratch_layout(func: PrimFunc) -> KernelScratch:
    """Where each allocation of ``func`` that the C emitter would take from the run-time
    workspace lives in one scratch block (an iterative walk: nesting depth is not a limit)."""
    offsets: dict[int, int] = {}
    total = 0
    stack: list[tuple[Stmt, int, bool]] = [(func.body, 0, False)]
    while stack:
        node, base, in_parallel = stack.pop()
        if isinstance(node, For) and node.kind == ForKind.PARALLEL:
            in_parallel = True  # allocations in a parallel loop live on each task's stack
        if isinstance(node, Allocate) and not in_parallel:
            nbytes = _static_bytes(node)
            if nbytes is not None and nbytes > STACK_LIMIT:
                offsets[id(node)] = base
                base = _align(base + nbytes)
                total = max(total, base)
        stack.extend((c, base, in_parallel) for c in children(node) if isinstance(c, Stmt))
    return KernelScratch(offsets, total)
