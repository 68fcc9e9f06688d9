"""ScopeBuilder: write nested ``let`` / ``if`` code in Python with ``with`` blocks.

    sb = ScopeBuilder()
    t = sb.let("t", relay.add(x, y))
    with sb.if_scope(cond):
        sb.ret(t)
    with sb.else_scope():
        sb.ret(relay.multiply(t, t))
    body = sb.get()   # let %t = add(%x, %y); if (%cond) { %t } else { multiply(%t, %t) }

Each scope collects its ``let`` bindings and one returned value; leaving an ``if`` scope
turns them into the true branch of an ``If`` that the following ``else`` scope completes.
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.expr import If, Let, RelayExpr, Var, _as_expr, var as _var
from ..ir.types import IncompleteType, Type
from ..runtime.errors import TVMError


class _PartialIf:
    """An ``if`` whose else branch is still to come (only ever held by the builder)."""

    __slots__ = ("cond", "true_branch")

    def __init__(self, cond: RelayExpr, true_branch: RelayExpr) -> None:
        self.cond, self.true_branch = cond, true_branch


class WithScope:
    """A context manager that runs ``exit_cb`` when the ``with`` block ends normally."""

    def __init__(self, enter_value: Any, exit_cb: Callable[[], None],
                 abort_cb: Callable[[], None]) -> None:
        self._enter_value = enter_value
        self._exit_cb = exit_cb
        self._abort_cb = abort_cb

    def __enter__(self) -> Any:
        return self._enter_value

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # On an exception just drop the scope, so the user's error is the one reported.
        if exc_type is not None:
            self._abort_cb()
        else:
            self._exit_cb()


def _make_lets(bindings: list[tuple[Var, RelayExpr]], ret_value: RelayExpr) -> RelayExpr:
    for v, value in reversed(bindings):
        ret_value = Let(v, value, ret_value)
    return ret_value


class ScopeBuilder:
    """Build a Relay expression of nested ``let`` and ``if`` scopes (TVM's ScopeBuilder).

    ``let(name_or_var, value)`` adds a binding to the current scope and returns its Var;
    ``if_scope(cond)`` / ``else_scope()`` open the branches of an ``If``; ``ret(value)`` sets
    the current scope's result; ``get()`` returns the whole expression.
    """

    def __init__(self) -> None:
        self._bindings: list[list[tuple[Var, RelayExpr]]] = [[]]
        self._ret_values: list[Any] = [None]

    def _enter_scope(self) -> None:
        self._bindings.append([])
        self._ret_values.append(None)

    def _exit_scope(self) -> tuple[list[tuple[Var, RelayExpr]], Any]:
        return self._bindings.pop(), self._ret_values.pop()

    def _abort_scope(self) -> None:
        self._exit_scope()

    def let(self, var: Var | str | tuple[Any, ...] | list[Any], value: Any) -> Var:
        """Bind ``value`` to a variable in the current scope and return the Var.

        ``var`` is a Var, a name, or a ``(name, type)`` pair (as for ``relay.var``).
        """
        if isinstance(var, (tuple, list)):
            if not 1 <= len(var) <= 2:
                raise TVMError("ScopeBuilder.let: expected a Var, a name or (name, type), "
                               f"got a sequence of {len(var)} items")
            var = _var(*var)
        elif isinstance(var, str):
            var = _var(var)
        elif not isinstance(var, Var):
            raise TVMError(f"ScopeBuilder.let: expected a Var, a name or (name, type), "
                           f"got {type(var).__name__}")
        self._bindings[-1].append((var, _as_expr(value)))
        return var

    def if_scope(self, cond: RelayExpr) -> WithScope:
        """Open the true branch of ``if (cond)``; an ``else_scope`` must follow."""
        cond = _as_expr(cond)
        self._enter_scope()

        def _on_exit() -> None:
            bindings, ret_value = self._exit_scope()
            if isinstance(self._ret_values[-1], _PartialIf):
                raise TVMError("ScopeBuilder.if_scope: the previous if_scope has no else_scope")
            if self._ret_values[-1] is not None:
                raise TVMError("ScopeBuilder.if_scope: this scope already returned a value "
                               "before the if")
            if ret_value is None:
                raise TVMError("ScopeBuilder.if_scope: the true branch returned nothing; "
                               "call sb.ret(value) inside the with block")
            self._ret_values[-1] = _PartialIf(cond, _make_lets(bindings, ret_value))

        return WithScope(None, _on_exit, self._abort_scope)

    def else_scope(self) -> WithScope:
        """Open the false branch of the ``if_scope`` that just closed."""
        self._enter_scope()

        def _on_exit() -> None:
            bindings, ret_value = self._exit_scope()
            partial = self._ret_values[-1]
            if not isinstance(partial, _PartialIf):
                raise TVMError("ScopeBuilder.else_scope: must directly follow an if_scope")
            if ret_value is None:
                raise TVMError("ScopeBuilder.else_scope: the false branch returned nothing; "
                               "call sb.ret(value) inside the with block")
            false_branch = _make_lets(bindings, ret_value)
            self._ret_values[-1] = If(partial.cond, partial.true_branch, false_branch)

        return WithScope(None, _on_exit, self._abort_scope)

    def type_of(self, expr: RelayExpr) -> Type:
        """The type of ``expr`` as far as known now: a Var's annotation (maybe None), or a
        new IncompleteType tied to ``expr`` through a ``let`` (type inference fills it in)."""
        if isinstance(expr, Var):
            return expr.type_annotation  # type: ignore[return-value]
        ty = IncompleteType()
        self.let(Var("unify", ty), expr)
        return ty

    def ret(self, value: Any) -> None:
        """Set the result of the current scope (once per scope)."""
        if self._ret_values[-1] is not None:
            raise TVMError("ScopeBuilder.ret: this scope already returned a value")
        self._ret_values[-1] = _as_expr(value)

    def get(self) -> RelayExpr:
        """The built expression; only at the outermost scope, after ``ret``."""
        if len(self._bindings) != 1:
            raise TVMError("ScopeBuilder.get: can only be called at the outermost scope "
                           f"({len(self._bindings) - 1} scope(s) still open)")
        ret_value = self._ret_values[-1]
        if isinstance(ret_value, _PartialIf):
            raise TVMError("ScopeBuilder.get: an if_scope has no else_scope")
        if ret_value is None:
            raise TVMError("ScopeBuilder.get: no value returned; call sb.ret(value) first")
        return _make_lets(self._bindings[-1], ret_value)
