"""Constraints that wait for their inputs: op type relations and tuple projections.

Each one re-runs whenever its (resolved) inputs have changed since its last run, so a
result computed from ``Tensor[(?, 4), float32]`` is refined once the ``?`` is known.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...ir.expr import Call, TupleGetItem, Var
from ...ir.op import Op, OpDef
from ...ir.types import Any as AnyDim
from ...ir.types import IncompleteType, TensorType, TupleType, Type
from ...runtime.errors import TypeInferenceError
from ._unify import show_type

if TYPE_CHECKING:
    from ._checker import ExprChecker, Owner


def _known(ty: Type) -> bool:
    """An op may look at this type: tensors, and tuples whose fields are all known."""
    if type(ty) is TensorType:  # the common case
        return True
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, IncompleteType):
            return False
    return True


class Deferred:
    """A constraint ``out = f(inputs)`` evaluated once the inputs are known."""

    __slots__ = ("inputs", "last", "node", "out", "owner")

    def __init__(self, node: Any, inputs: list[Type], out: Type, owner: Owner) -> None:
        self.node, self.inputs, self.out, self.owner = node, inputs, out, owner
        self.last: list[Type] | None = None

    def ready(self, args: list[Type]) -> bool:
        return all(_known(a) for a in args)

    def step(self, ck: ExprChecker) -> bool:
        """Run if the inputs are known and changed since the last run; True if it ran."""
        args = [ck.uf.resolve(t) for t in self.inputs]
        ready = self.ready(args)
        if not ready and self.fill(ck, args):
            args = [ck.uf.resolve(t) for t in self.inputs]
            ready = self.ready(args)
        if not ready or args == self.last:
            return False
        self.last = args
        result = self.apply(ck, args)
        fmt = (f"{self.label()}: the result has type {{actual}}, but it is used as "
               "{expected} ({detail})")
        ck.unify_at(self.node, result, self.out, fmt, self.owner)
        return True

    def apply(self, ck: ExprChecker, args: list[Type]) -> Type:
        raise NotImplementedError

    def fill(self, ck: ExprChecker, args: list[Type]) -> bool:
        """Give types to unknown inputs where the constraint can tell them; True if it did."""
        return False

    def label(self) -> str:
        raise NotImplementedError

    def unresolved(self, ck: ExprChecker) -> TypeInferenceError:
        """The error for a constraint whose inputs never became known."""
        raise NotImplementedError


class Relation(Deferred):
    """The type relation of an operator call."""

    __slots__ = ()

    def label(self) -> str:
        return _op_def(self.node).name

    def apply(self, ck: ExprChecker, args: list[Type]) -> Type:
        call: Call = self.node
        key = _relation_key(call, args)
        kept = _RESULTS.get(key) if key is not None else None
        if kept is not None and kept[0] is call.attrs:
            return kept[1]
        ty = self._run(ck, call, args)
        if key is not None and _static(ty):
            if len(_RESULTS) >= RELATION_RESULTS_KEPT:
                _RESULTS.clear()  # simplest bound: start again (a build refills it at once)
            _RESULTS[key] = (call.attrs, ty)
        return ty

    def _run(self, ck: ExprChecker, call: Call, args: list[Type]) -> Type:
        od = _op_def(call)
        assert od.type_rel is not None, "calls of ops without a relation are rejected earlier"
        try:
            ty = od.type_rel(args, call.attrs)
        except Exception as err:  # every failure of a relation is reported at the call
            msg = str(err)
            if not isinstance(err, (TypeInferenceError, ValueError, TypeError, AttributeError)):
                msg = f"type relation failed with {type(err).__name__}: {msg}"
            if not msg.startswith(f"{od.name}:"):
                msg = f"{od.name}: {msg}"
            raise ck.fail(call, msg, self.owner) from err
        if not isinstance(ty, Type):
            raise ck.fail(call, f"{od.name}: the type relation returned {ty!r}, not a type",
                          self.owner)
        return ty

    def fill(self, ck: ExprChecker, args: list[Type]) -> bool:
        # Unannotated weights (relay.var("w") fed to conv2d/dense/batch_norm...) get their type
        # from the data argument and the attrs, as in Relay: the op's infer_args hook.
        call: Call = self.node
        od = _op_def(call)
        infer_args = od.extra.get("infer_args")
        if infer_args is None or not args or not _known(args[0]):
            return False
        attrs = call.attrs if call.attrs is not None or od.attrs_type is None else od.attrs_type()
        try:
            guesses = infer_args([a if _known(a) else None for a in args], attrs)
        except Exception:  # noqa: BLE001 - the relation reports bad attrs/shapes better
            return False
        filled = False
        for i, (guess, arg) in enumerate(zip(guesses, args)):
            if guess is not None and not _known(arg):
                fmt = (f"{od.name}: argument {i} has type {{actual}}, but the op needs "
                       "{expected} ({detail})")
                ck.unify_at(call, guess, self.inputs[i], fmt, self.owner)
                filled = True
        return filled

    def unresolved(self, ck: ExprChecker) -> TypeInferenceError:
        call: Call = self.node
        od = _op_def(call)
        for i, (arg, ty) in enumerate(zip(call.args, self.inputs)):
            if not _known(ck.uf.resolve(ty)):
                name = od.arg_names[i] if i < len(od.arg_names) else None
                what = ", ".join(x for x in (name, _expr_name(arg)) if x)
                return ck.fail(call, f"{od.name}: cannot infer the type of argument {i}"
                                     f"{f' ({what})' if what else ''}; add a type annotation",
                               self.owner)
        return ck.fail(call, f"{od.name}: the type relation never ran", self.owner)


class Projection(Deferred):
    """``t.i``: the type of field ``i`` of a tuple."""

    __slots__ = ()

    def ready(self, args: list[Type]) -> bool:
        return not isinstance(args[0], IncompleteType)

    def label(self) -> str:
        return f"projection .{self.node.index}"

    def apply(self, ck: ExprChecker, args: list[Type]) -> Type:
        return Projection.field(ck, self.node, args[0], self.owner)

    @staticmethod
    def field(ck: ExprChecker, e: TupleGetItem, tup: Type, owner: Owner | None = None) -> Type:
        """Field ``e.index`` of the tuple type ``tup``, or an error naming the index."""
        if not isinstance(tup, TupleType):
            raise ck.fail(e, f"projection .{e.index}: expected a tuple, got "
                             f"{show_type(ck.uf.resolve(tup))}", owner)
        if not 0 <= e.index < len(tup.fields):
            raise ck.fail(e, f"projection .{e.index}: index out of range for a tuple of "
                             f"{len(tup.fields)} field(s) ({show_type(ck.uf.resolve(tup))})",
                          owner)
        return tup.fields[e.index]

    def unresolved(self, ck: ExprChecker) -> TypeInferenceError:
        what = _expr_name(self.node.tuple_value)
        return ck.fail(self.node, f"projection .{self.node.index}: cannot infer the type of the "
                                  f"tuple{f' {what}' if what else ''}; add a type annotation",
                       self.owner)


# -- results of type relations, kept across runs ----------------------------------------------
# A build runs InferType ~25 times over mostly the same calls: the same op, the same attrs
# object (a typed copy keeps its call's attrs) and the same argument types, and a type relation
# is a function of those. Its result is kept when the arguments and the result are tensors (or
# tuples of them) of static or ``?`` sizes: a result holding an unknown or a ShapeVar must be
# made afresh at each call (sharing it would tie two calls' types). Keyed by the attrs' id; the
# entry holds the attrs, so the id is not reused while the entry lives. Failures are not kept:
# the relation runs again and raises its error at the call.
RELATION_RESULTS_KEPT = 8192
_RESULTS: dict[tuple, tuple[Any, Type]] = {}


def _static(ty: Type) -> bool:
    """A tensor type with int or ``?`` sizes, or a tuple of such (nested)."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if type(t) is TensorType:
            if not all(type(d) is int or type(d) is AnyDim for d in t.shape):
                return False
        elif type(t) is TupleType:
            stack.extend(t.fields)
        else:
            return False
    return True


def _relation_key(call: Call, args: list[Type]) -> tuple | None:
    # Tensor arguments only: hashing and checking a deep tuple's type at each call would cost
    # time quadratic in its depth where a program nests tuples.
    if not all(type(a) is TensorType and _static(a) for a in args):
        return None
    return (call.op, id(call.attrs), *args)


def _op_def(call: Call) -> OpDef:
    op = call.op
    assert isinstance(op, Op), "a Relation is only made for calls of operators"
    return op.op_def


def _expr_name(e: Any) -> str:
    return f"%{e.name_hint}" if isinstance(e, Var) else ""

