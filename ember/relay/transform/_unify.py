"""Unification of Relay types, for type inference.

``IncompleteType``s are the unknowns. They live in a union-find: each class has a root, and a
root may carry a value (a type that is not itself an unknown, but may contain unknowns).
Unifying two tensor types merges them dimension by dimension: equal ints stay, ``Any()``
gives way to the other side (the concrete side wins), a ``ShapeVar`` only matches itself.
``unify`` returns the merged type; when an unknown was involved it returns the unknown's root,
so that merged composite types keep pointing at it and see later refinements.

Types nest as deeply as a program's tuples: every walk here is a loop (``fold_type``, explicit
stacks), and unification runs its rules as steps on ``ir.trampoline``.
"""
from __future__ import annotations

from collections.abc import Callable, Generator

from ...ir.trampoline import Step, run
from ...ir.types import (
    Any,
    Dim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RelayRefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
    fold_type,
    type_children,
)


class UnifyError(Exception):
    """Two types cannot be made equal; ``detail`` says where they first differ."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# -- printing and walking types -----------------------------------------------------------------
def show_dim(d: object) -> str:
    if isinstance(d, ShapeVar):
        return d.name
    return "?" if isinstance(d, Any) else str(d)


def show_type(ty: Type | None) -> str:
    """A type in the text format: ``Tensor[(3, 4), float32]``, ``(A, B)``, ``fn (A) -> B``."""
    return str(fold_type(ty, _show))


def _show(ty: Type | None, k: list[str]) -> str:
    if isinstance(ty, TensorType):
        if not ty.shape:
            return ty.dtype
        return f"Tensor[({', '.join(show_dim(d) for d in ty.shape)}), {ty.dtype}]"
    if isinstance(ty, TupleType):
        return f"({k[0]},)" if len(k) == 1 else f"({', '.join(k)})"
    if isinstance(ty, FuncType):
        tps = f"[{', '.join(v.name_hint for v in ty.type_params)}]" if ty.type_params else ""
        return f"fn {tps}({', '.join(k[:-1])}) -> {k[-1]}"
    if isinstance(ty, TypeCall):
        return k[0] if not ty.args else f"{k[0]}[{', '.join(k[1:])}]"
    if isinstance(ty, (TypeVar, GlobalTypeVar)):
        return ty.name_hint
    if isinstance(ty, RelayRefType):
        return f"Ref[{k[0]}]"
    if isinstance(ty, IncompleteType):
        return "_"
    return repr(ty)


def rebuild_type(ty: Type, kids: list[Type]) -> Type:
    """``ty`` on new child types (in ``type_children`` order); ``ty`` itself if none changed."""
    if all(a is b for a, b in zip(type_children(ty), kids)):
        return ty
    if isinstance(ty, TupleType):
        return TupleType(tuple(kids))
    if isinstance(ty, FuncType):
        return FuncType(tuple(kids[:-1]), kids[-1], ty.type_params, ty.type_constraints)
    if isinstance(ty, TypeCall):
        return TypeCall(kids[0], tuple(kids[1:]))
    if isinstance(ty, RelayRefType):
        return RelayRefType(kids[0])
    return ty


def substitute(ty: Type, mapping: dict[TypeVar, Type]) -> Type:
    """Replace type variables by types."""
    return fold_type(ty, lambda t, k: mapping.get(t, t) if isinstance(t, TypeVar)  # type: ignore
                     else rebuild_type(t, k))


def instantiate(fty: FuncType) -> tuple[FuncType, list[Type]]:
    """A monomorphic copy of a polymorphic function type, with fresh unknowns for its
    type parameters; also returns those unknowns (the call's type arguments)."""
    fresh: list[Type] = [IncompleteType(v.kind) for v in fty.type_params]
    mapping = dict(zip(fty.type_params, fresh))
    args = tuple(substitute(a, mapping) for a in fty.arg_types)
    return FuncType(args, substitute(fty.ret_type, mapping)), fresh


def type_vars_in(ty: Type, out: list[Type], kind: type) -> list[Type]:
    """Collect the nodes of class ``kind`` (e.g. IncompleteType) in ``ty``, first-seen order."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, kind):
            if not any(u is t for u in out):
                out.append(t)
        else:
            stack.extend(reversed(type_children(t)))
    return out


# -- the unifier --------------------------------------------------------------------------------
class Unifier:
    """Union-find over IncompleteTypes plus structural unification of everything else."""

    def __init__(self) -> None:
        self._link: dict[IncompleteType, IncompleteType] = {}
        self._value: dict[IncompleteType, Type] = {}
        # Roots that appear in some value (a superset: entries are never removed). A cycle
        # through r needs a value that holds r, so for any other root the occurs check is a
        # look at the new value's own structure, not at everything reachable from it.
        self._held: set[IncompleteType] = set()
        self._ground: dict[int, Type] = {}  # types with no unknown anywhere inside (pinned)

    def root(self, t: IncompleteType) -> IncompleteType:
        path = []
        while t in self._link:
            path.append(t)
            t = self._link[t]
        for p in path:  # path compression
            self._link[p] = t
        return t

    def shallow(self, ty: Type) -> Type:
        """``ty`` with a top-level unknown replaced by its value (or its root if unbound)."""
        if isinstance(ty, IncompleteType):
            r = self.root(ty)
            return self._value.get(r, r)
        return ty

    def resolve(self, ty: Type, memo: dict[int, Type] | None = None) -> Type:
        """``ty`` with every bound unknown replaced by its value, all the way down.

        ``memo`` (id of a type -> its resolution) may be shared by calls while no unknown is
        bound: then a type nested in many others is resolved once (InferType's last step
        resolves every node's type, and a deep tuple's types nest in each other)."""
        top = self.shallow(ty)
        if isinstance(top, (TensorType, IncompleteType, TypeVar, GlobalTypeVar)):
            return top  # the common case: nothing inside
        if memo is None:
            memo = {}
        elif id(ty) in memo:
            return memo[id(ty)]
        stack: list[tuple[Type, Type | None]] = [(ty, None)]
        while stack:
            t, value = stack.pop()
            if value is not None:  # the children of t's value are resolved: rebuild it
                memo[id(t)] = rebuild_type(value, [memo[id(k)] for k in type_children(value)])
                continue
            if id(t) in memo:
                continue
            value = self.shallow(t)
            kids = type_children(value)
            if not kids:
                memo[id(t)] = value
                continue
            stack.append((t, value))
            stack.extend((k, None) for k in reversed(kids))
        return memo[id(ty)]

    def bind(self, t: IncompleteType, ty: Type) -> None:
        """Force the (unbound) unknown ``t`` to ``ty`` (used to generalise leftovers)."""
        self._value[self.root(t)] = ty

    def unify(self, a: Type, b: Type) -> Type:
        """Make ``a`` and ``b`` equal; returns the merged type. Raises UnifyError."""
        if type(b) is TensorType:  # the common cases, directly
            if type(a) is TensorType:
                return _unify_tensor(self, a, b)
            if type(a) is IncompleteType:  # an op's result: nothing inside, no cycle
                return self._assign_tensor(a, b)
        return run(self.step(a, b))

    def _assign_tensor(self, a: IncompleteType, b: TensorType) -> Type:
        """``_unify_unknown(a, b)`` for a tensor ``b``: it holds no unknown, so there is no
        occurs check to make and nothing to mark held."""
        r = self.root(a)
        old = self._value.get(r)
        self._value[r] = b if old is None else run(self.step(old, b))
        return r

    def step(self, a: Type, b: Type) -> Step[Type]:
        """``unify`` as a step: composite types unify their children as nested steps."""
        if isinstance(a, IncompleteType) or isinstance(b, IncompleteType):
            return (yield self._unify_unknown(a, b))
        if a is b:
            return a
        rule = _RULES.get(type(a))
        if rule is not None and type(a) is type(b):
            merged = rule(self, a, b)
            return (yield merged) if isinstance(merged, Generator) else merged
        return _unify_adt_head(a, b)

    def _unify_unknown(self, a: Type, b: Type) -> Step[Type]:
        if not isinstance(a, IncompleteType):
            a, b = b, a
        ra = self.root(a)  # type: ignore[arg-type]
        if isinstance(b, IncompleteType):
            rb = self.root(b)
            if rb is ra:
                return ra
            va, vb = self._value.get(ra), self._value.get(rb)
            cyclic_a = va is not None and self._occurs(rb, va)
            if cyclic_a or (vb is not None and self._occurs(ra, vb)):
                raise UnifyError("a type cannot contain itself")
            self._value.pop(rb, None)
            self._link[rb] = ra
            if rb in self._held:
                self._held.add(ra)
            if vb is not None:
                # Checked above: neither value reaches the other root, so their merge
                # cannot reach ra (looking again would walk vb: rb may be held).
                yield self._assign(ra, vb, acyclic=True)
            return ra
        yield self._assign(ra, b)
        return ra

    def _assign(self, r: IncompleteType, ty: Type, acyclic: bool = False) -> Step[None]:
        old = self._value.get(r)
        merged = ty if old is None else (yield self.step(old, ty))
        held = self._unknowns_inside(merged)
        if not acyclic and self._occurs(r, merged, held):
            raise UnifyError(f"a type cannot contain itself ({show_type(self.resolve(merged))})")
        self._held.update(held)
        self._value[r] = merged

    def _occurs(self, r: IncompleteType, ty: Type, inside: set[IncompleteType] | None = None
                ) -> bool:
        """Whether the root ``r`` is reachable from ``ty`` (through the values of unknowns).
        ``inside``: the roots in ``ty``'s own structure, if already known."""
        inside = self._unknowns_inside(ty) if inside is None else inside
        if r in inside:
            return True
        if r not in self._held:  # no value holds r: only ty itself could
            return False
        seen: set[int] = set()
        stack = [self._value[u] for u in inside if u in self._value]
        while stack:
            t = stack.pop()
            if id(t) in seen or id(t) in self._ground:
                continue
            seen.add(id(t))
            if isinstance(t, IncompleteType):
                root = self.root(t)
                if root is r:
                    return True
                if root in self._value:
                    stack.append(self._value[root])
            else:
                stack.extend(type_children(t))
        return False

    def _unknowns_inside(self, ty: Type) -> set[IncompleteType]:
        """The roots of the unknowns in ``ty``'s structure (not looking into their values).
        Types found to hold none are remembered: a deep tuple type is walked once."""
        out: set[IncompleteType] = set()
        ground, memo = self._ground, {}  # memo: id -> holds an unknown
        stack: list[tuple[Type, bool]] = [(ty, False)]
        while stack:
            t, ready = stack.pop()
            key = id(t)
            if key in ground or key in memo:
                continue
            if isinstance(t, IncompleteType):
                out.add(self.root(t))
                memo[key] = True
                continue
            kids = type_children(t)
            if ready or not kids:
                if any(memo.get(id(k), False) for k in kids):
                    memo[key] = True
                else:
                    ground[key] = t
                continue
            stack.append((t, True))
            stack.extend((k, False) for k in kids)
        return out


def _unify_dim(i: int, x: Dim, y: Dim) -> Dim:
    if isinstance(x, Any):
        return y
    if isinstance(y, Any) or x is y or x == y:
        return x
    raise UnifyError(f"dimension {i} is {show_dim(x)} vs {show_dim(y)}")


def _unify_tensor(u: Unifier, a: TensorType, b: TensorType) -> Type:
    if a.dtype != b.dtype:
        raise UnifyError(f"dtype {a.dtype} vs {b.dtype}")
    if a.ndim != b.ndim:
        raise UnifyError(f"rank {a.ndim} vs {b.ndim}")
    if a == b:
        return a
    return TensorType(tuple(_unify_dim(i, x, y) for i, (x, y) in enumerate(zip(a.shape, b.shape))),
                      a.dtype)


def _unify_all(u: Unifier, what: str, xs: tuple[Type, ...], ys: tuple[Type, ...]
               ) -> Step[list[Type]]:
    out = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        try:
            out.append((yield u.step(x, y)))
        except UnifyError as err:
            raise UnifyError(f"{what} {i}: {err.detail}") from None
    return out


def _unify_tuple(u: Unifier, a: TupleType, b: TupleType) -> Step[Type]:
    if len(a.fields) != len(b.fields):
        raise UnifyError(f"a tuple of {len(a.fields)} fields vs one of {len(b.fields)}")
    return TupleType(tuple((yield _unify_all(u, "field", a.fields, b.fields))))


def _unify_func(u: Unifier, a: FuncType, b: FuncType) -> Step[Type]:
    if len(a.arg_types) != len(b.arg_types):
        raise UnifyError(f"a function of {len(a.arg_types)} parameters vs one of "
                         f"{len(b.arg_types)}")
    if len(a.type_params) != len(b.type_params):
        raise UnifyError(f"a function with {len(a.type_params)} type parameters vs one with "
                         f"{len(b.type_params)}")
    if b.type_params:  # alpha-rename b's type parameters to a's
        b = FuncType(*_renamed(b, a.type_params))
    args = yield _unify_all(u, "parameter", a.arg_types, b.arg_types)
    try:
        ret = yield u.step(a.ret_type, b.ret_type)
    except UnifyError as err:
        raise UnifyError(f"result: {err.detail}") from None
    return FuncType(tuple(args), ret, a.type_params)


def _renamed(f: FuncType, params: tuple[TypeVar, ...]) -> tuple[tuple[Type, ...], Type]:
    mapping: dict[TypeVar, Type] = dict(zip(f.type_params, params))
    return tuple(substitute(a, mapping) for a in f.arg_types), substitute(f.ret_type, mapping)


def _unify_call(u: Unifier, a: TypeCall, b: TypeCall) -> Step[Type]:
    if a.func is not b.func:
        raise UnifyError(f"type {show_type(a.func)} vs type {show_type(b.func)}")
    if len(a.args) != len(b.args):
        raise UnifyError(f"{show_type(a.func)} with {len(a.args)} vs {len(b.args)} arguments")
    return TypeCall(a.func, tuple((yield _unify_all(u, "type argument", a.args, b.args))))


def _unify_ref(u: Unifier, a: RelayRefType, b: RelayRefType) -> Step[Type]:
    return RelayRefType((yield u.step(a.value, b.value)))


def _unify_adt_head(a: Type, b: Type) -> Type:
    # ``List`` written without arguments names the same type as ``List[]`` (a TypeCall).
    for x, y in ((a, b), (b, a)):
        if isinstance(x, GlobalTypeVar) and isinstance(y, TypeCall) and y.func is x and not y.args:
            return y
    raise UnifyError(f"{show_type(a)} vs {show_type(b)}")


_RULES: dict[type, Callable[..., Type]] = {
    TensorType: _unify_tensor, TupleType: _unify_tuple, FuncType: _unify_func,
    TypeCall: _unify_call, RelayRefType: _unify_ref,
}
