"""Where a type error happened: the source location, the function and the nearby IR."""
from __future__ import annotations

from typing import Any

from ...ir.adt import Constructor
from ...ir.expr import Function, GlobalVar, Var
from ...ir.module import IRModule

CONTEXT_LINES = 3  # lines of IR shown on each side of the failing node
MAX_LINE = 120


def callee_name(e: Any) -> str:
    """How a callee is named in messages: ``@f``, ``%f``, ``Cons`` or ``fn``."""
    if isinstance(e, GlobalVar):
        return f"@{e.name_hint}"
    if isinstance(e, Var):
        return f"%{e.name_hint}"
    if isinstance(e, Constructor):
        return e.name_hint
    if isinstance(e, Function):
        return "fn"
    return type(e).__name__


def global_by_name(mod: IRModule, gv: GlobalVar) -> GlobalVar | None:
    """The module's own GlobalVar called like ``gv``, if any."""
    try:
        return mod.get_global_var(gv.name_hint)
    except KeyError:
        return None


def located(msg: str, node: Any, owner: str, func: Any) -> str:
    """``msg`` with the node's source location, the enclosing function and nearby IR."""
    span = getattr(node, "span", None)
    head = f"{span}: {msg}" if span is not None else msg
    where = f"  in {owner}"
    context = ir_context(func, node, owner) if isinstance(func, Function) else ""
    return "\n".join(x for x in (head, where, context) if x)


def ir_context(func: Function, node: Any, owner: str = "") -> str:
    """A few lines of the printed function around ``node``, the node's line marked ``>``.

    ``owner`` is the function's global name (``@main``) if it has one. Empty when the printer
    cannot print the function.
    """
    try:
        from ...ir.printer import astext, short_text

        # A global prints as ``def @name(...)``; temporaries are numbered as for ``func``.
        shown = IRModule({owner[1:]: func}) if owner.startswith("@") else func
        text = astext(shown, show_meta_data=False, show_types=False)
        key = short_text(node, within=func).strip()
    except Exception:  # the printer must not hide the type error itself
        return ""
    lines = [line for line in text.splitlines() if not line.startswith("#[")]
    hits = [i for i, line in enumerate(lines) if key and key in line]
    if not hits:  # a multi-line node (if, match): show it on one line
        return f"  > {key}" if key else ""
    at = hits[0]
    lo, hi = max(0, at - CONTEXT_LINES), min(len(lines), at + CONTEXT_LINES + 1)
    out = []
    for i in range(lo, hi):
        line = lines[i] if len(lines[i]) <= MAX_LINE else lines[i][: MAX_LINE - 3] + "..."
        out.append(f"  {'>' if i == at else ' '} {line}")
    return "\n".join(out)
