"""Structural equality and hashing of IR nodes (``tvm.ir.structural_equal`` and friends).

Two nodes are structurally equal when they have the same shape up to a consistent renaming
of bound variables (Function params, Let vars, pattern vars, type params): a bound variable on
one side corresponds to exactly one on the other. Free variables are equal only if they are
the same object, unless ``map_free_vars=True`` maps them on first use.

As in TVM, non-constant Relay expressions and variables are *graph nodes*: a graph node on
the left matches one graph node on the right only, so ``%1 = f(%x); (%1, %1)`` differs from
``(f(%x), f(%x))``. Everything else (constants, types, attrs, ops, global vars, plain
values) compares by value. Spans and ``checked_type_`` are ignored.

Both walks are iterative, so a 10,000-long let chain cannot hit the recursion limit, and both
read the fields of a node from one table (``_entries``), which keeps hash and equality
consistent: equal nodes hash alike. Hashes come from blake2b over a canonical token stream,
so they are stable across processes (kernel-cache keys).
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..runtime.ndarray import NDArray
from .adt import Constructor, Match, PatternVar, TypeData
from .attrs import DictAttrs
from .base import Node
from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .module import IRModule, is_other_function
from .op import Op
from .types import FuncType, IncompleteType, ShapeVar, TensorType, TypeVar

_CHILD, _DEF = 0, 1  # how a field is compared: as a sub-node, or as a binding occurrence
Entry = tuple[str, int, Any]  # (path segment, mode, value)

_VAR_LIKE = (Var, TypeVar, ShapeVar, IncompleteType)
_GRAPH = (Call, Tuple, Let, If, TupleGetItem, Function, Match, RefCreate, RefRead, RefWrite)
_IGNORED_FIELDS = ("span", "checked_type_")


# -- what to compare, per node class ----------------------------------------------------------
def _function_entries(f: Function) -> list[Entry]:
    # Type params first: parameter annotations may mention them.
    return [("type_params", _DEF, f.type_params), ("params", _DEF, f.params),
            ("ret_type", _CHILD, f.ret_type), ("attrs", _CHILD, dict(f.attrs or {})),
            ("body", _CHILD, f.body)]


def _call_entries(c: Call) -> list[Entry]:
    # Type arguments of primitive ops are an inference artefact (TVM skips them too).
    type_args = () if isinstance(c.op, Op) else c.type_args
    return [("op", _CHILD, c.op), ("args", _CHILD, c.args), ("attrs", _CHILD, c.attrs),
            ("type_args", _CHILD, type_args)]


def _module_entries(mod: IRModule) -> list[Entry]:
    types = sorted(mod.type_definitions.items(), key=lambda kv: kv[0].name_hint)
    funcs = sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint)
    return ([(f"type {gtv.name_hint}", _CHILD, td) for gtv, td in types]
            # a PrimFunc compares by its printed loop IR (tir.structural_equal's rule)
            + [(gv.name_hint, _CHILD, str(fn) if is_other_function(fn) else fn)
               for gv, fn in funcs])


def _type_data_entries(td: TypeData) -> list[Entry]:
    return [("header", _CHILD, td.header), ("type_vars", _DEF, td.type_vars),
            ("constructors", _CHILD, td.constructors),
            ("constructor_inputs", _CHILD, tuple(c.inputs for c in td.constructors))]


_ENTRIES: dict[type, Callable[[Any], list[Entry]]] = {
    Function: _function_entries,
    Call: _call_entries,
    Let: lambda e: [("var", _DEF, e.var), ("value", _CHILD, e.value), ("body", _CHILD, e.body)],
    PatternVar: lambda p: [("var", _DEF, p.var)],
    FuncType: lambda t: [("type_params", _DEF, t.type_params), ("arg_types", _CHILD, t.arg_types),
                         ("ret_type", _CHILD, t.ret_type),
                         ("type_constraints", _CHILD, t.type_constraints)],
    # A constructor used in an expression is named by its definition; its input types (which
    # mention the definition's type vars) are compared with the TypeData itself.
    Constructor: lambda c: [("name_hint", _CHILD, c.name_hint), ("tag", _CHILD, c.tag),
                            ("belong_to", _CHILD, c.belong_to)],
    TypeData: _type_data_entries,
    IRModule: _module_entries,
    # What a variable carries besides its identity, compared where it is bound or mapped.
    Var: lambda v: [("type_annotation", _CHILD, v.type_annotation)],
    TypeVar: lambda v: [("kind", _CHILD, int(v.kind))],
    ShapeVar: lambda v: [("dtype", _CHILD, v.dtype)],
    IncompleteType: lambda v: [("kind", _CHILD, int(v.kind))],
}


def _generic_entries(node: Any) -> list[Entry]:
    if dataclasses.is_dataclass(node):
        names = [f.name for f in dataclasses.fields(node) if f.name not in _IGNORED_FIELDS]
    else:
        names = [n for n in node.field_names() if n not in _IGNORED_FIELDS]
    return [(n, _CHILD, getattr(node, n)) for n in names]


def _lookup(table: dict[type, Any], cls: type, default: Any) -> Any:
    for klass in cls.__mro__:
        if klass in table:
            return table[klass]
    return default


_entries_cache: dict[type, Callable[[Any], list[Entry]]] = {}


def _entries(node: Any) -> list[Entry]:
    fn = _entries_cache.get(type(node))
    if fn is None:
        fn = _entries_cache[type(node)] = _lookup(_ENTRIES, type(node), _generic_entries)
    return fn(node)


# -- categories of values: two values can only be equal within one category ------------------
_CATEGORY_TABLE: dict[type, str] = {
    bool: "num", int: "num", float: "num", np.integer: "num", np.floating: "num",
    np.bool_: "num", str: "str", type(None): "none", list: "seq", tuple: "seq", dict: "map",
    DictAttrs: "map", np.ndarray: "array", NDArray: "array", enum.Enum: "enum",
    Sequence: "seq", Mapping: "map",  # runtime containers (Array, Map) derive from these
}
_category_cache: dict[type, Any] = {}


def _category(x: Any) -> Any:
    """A label ("num", "seq", ...) for plain values; the class itself for IR nodes."""
    cls = type(x)
    cat = _category_cache.get(cls)
    if cat is None:
        cat = _lookup(_CATEGORY_TABLE, cls, None)
        if cat is None:
            cat = cls if issubclass(cls, Node) else "other"
        _category_cache[cls] = cat
    return cat


def _as_numpy(x: Any) -> np.ndarray:
    # Not ascontiguousarray: it turns 0-d arrays into 1-d ones, hiding a shape difference.
    return np.asarray(x.numpy() if isinstance(x, NDArray) else x, order="C")


def _arrays_equal(a: Any, b: Any) -> bool:
    x, y = _as_numpy(a), _as_numpy(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def _num_token(x: Any) -> str:
    # Canonical text of a number such that equal numbers (1 == 1.0 == True) share it.
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        return str(int(x))
    f = float(x)
    return str(int(f)) if f.is_integer() else f.hex()


def _map_items(m: Any) -> list[tuple[str, Any]]:
    return sorted(((str(k), v) for k, v in m.items()), key=lambda kv: kv[0])


def _key_segment(key: str) -> str:
    return key if key.isidentifier() else f"[{key!r}]"


# -- equality ---------------------------------------------------------------------------------
# A path is a linked list (parent, segment, lhs node, rhs node), rendered only on failure.
Path = tuple[Any, str, Any, Any]
_EqStack = list[tuple[Any, Any, Path, int]]  # (lhs, rhs, path, mode) still to compare


@dataclasses.dataclass
class _Mismatch:
    path: Path
    lhs: Any
    rhs: Any
    reason: str


class _Equal:
    """One comparison: the variable/graph-node bijection and the memo of compared pairs."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.l2r: dict[int, tuple[Any, Any]] = {}  # id(lhs) -> (lhs, rhs): vars, graph nodes
        self.r2l: dict[int, tuple[Any, Any]] = {}
        self.pairs: dict[tuple[int, int], tuple[Any, Any]] = {}  # other nodes already matched
        self.mismatch: _Mismatch | None = None

    def run(self, lhs: Any, rhs: Any, root: str) -> bool:
        stack: _EqStack = [(lhs, rhs, (None, root, lhs, rhs), _CHILD)]
        while stack:
            l, r, path, mode = stack.pop()
            if not self._step(l, r, path, mode, stack):
                return False
        return True

    def _fail(self, path: Path, l: Any, r: Any, reason: str) -> bool:
        self.mismatch = _Mismatch(path, l, r, reason)
        return False

    def _step(self, l: Any, r: Any, path: Path, mode: int, stack: _EqStack) -> bool:
        cat = _category(l)
        if cat != _category(r):
            return self._fail(path, l, r, f"lhs is {_kind(l)}, rhs is {_kind(r)}")
        if isinstance(cat, str):
            return self._plain(cat, l, r, path, mode, stack)
        if isinstance(l, _VAR_LIKE):
            return self._var(l, r, path, mode == _DEF, stack)
        if isinstance(l, _GRAPH):
            seen = self.l2r.get(id(l))
            if seen is not None and seen[1] is r:
                return True  # this pair's children were compared already: DAGs stay linear
            if not self._map_graph_node(l, r, path):
                return False
        elif l is r and isinstance(l, (Constant, Op)):
            return True
        else:
            key = (id(l), id(r))
            if key in self.pairs:
                return True
            self.pairs[key] = (l, r)
        return self._push_entries(l, r, path, stack)

    def _push_entries(self, l: Any, r: Any, path: Path, stack: _EqStack) -> bool:
        fl, fr = _entries(l), _entries(r)
        if [s for s, _, _ in fl] != [s for s, _, _ in fr]:
            return self._fail(path, l, r, f"lhs has {[s for s, _, _ in fl]}, "
                                          f"rhs has {[s for s, _, _ in fr]}")
        for (seg, mode, vl), (_, _, vr) in zip(reversed(fl), reversed(fr)):
            stack.append((vl, vr, (path, seg, l, r), mode))
        return True

    def _map_graph_node(self, l: Any, r: Any, path: Path) -> bool:
        seen = self.l2r.get(id(l))
        if seen is not None:
            return seen[1] is r or self._fail(
                path, l, r, "lhs node is shared, but rhs has two different nodes here")
        if id(r) in self.r2l:
            return self._fail(path, l, r,
                              "rhs node is shared, but lhs has two different nodes here")
        self.l2r[id(l)], self.r2l[id(r)] = (l, r), (r, l)
        return True

    def _var(self, l: Any, r: Any, path: Path, define: bool, stack: _EqStack) -> bool:
        seen = self.l2r.get(id(l))
        if seen is not None:
            return seen[1] is r or self._fail(path, l, r, f"lhs {_brief(l)} corresponds to rhs "
                                                          f"{_brief(seen[1])}, not {_brief(r)}")
        if id(r) in self.r2l:
            return self._fail(path, l, r, f"rhs {_brief(r)} corresponds to lhs "
                                          f"{_brief(self.r2l[id(r)][1])}, not {_brief(l)}")
        if not define and not self.map_free_vars and l is not r:
            return self._fail(path, l, r, "free variables differ (they are not the same object; "
                                          "pass map_free_vars=True to map free variables)")
        self.l2r[id(l)], self.r2l[id(r)] = (l, r), (r, l)
        return l is r or self._push_entries(l, r, path, stack)

    def _plain(self, cat: str, l: Any, r: Any, path: Path, mode: int, stack: _EqStack) -> bool:
        if cat == "seq":
            if len(l) != len(r):
                return self._fail(path, l, r, f"lengths differ: {len(l)} vs {len(r)}")
            for i in reversed(range(len(l))):
                stack.append((l[i], r[i], (path, f"[{i}]", l, r), mode))
            return True
        if cat == "map":
            il, ir = _map_items(l), _map_items(r)
            if [k for k, _ in il] != [k for k, _ in ir]:
                return self._fail(path, l, r, f"keys differ: {[k for k, _ in il]} vs "
                                              f"{[k for k, _ in ir]}")
            for (k, vl), (_, vr) in zip(reversed(il), reversed(ir)):
                stack.append((vl, vr, (path, _key_segment(k), l, r), _CHILD))
            return True
        if cat == "array":
            return _arrays_equal(l, r) or self._fail(path, l, r, "tensor contents differ")
        return bool(l is r or l == r) or self._fail(path, l, r, "values differ")


_PLAIN_KINDS = {"num": "a number", "str": "a string", "none": "None", "seq": "a sequence",
                "map": "a mapping", "array": "an array"}


def _kind(x: Any) -> str:
    cat = _category(x)
    plain = _PLAIN_KINDS.get(cat) if isinstance(cat, str) else None
    return plain or f"a {type(x).__name__}"


def _path_text(path: Path) -> str:
    segs: list[str] = []
    node: Path | None = path
    while node is not None:
        segs.append(node[1])
        node = node[0]
    segs.reverse()
    text, i = segs[0], 1
    while i < len(segs):
        j = i
        while j < len(segs) and segs[j] == segs[i]:
            j += 1
        part = segs[i] if segs[i].startswith("[") or not text else "." + segs[i]
        # A let chain gives thousands of ".body": print the run once with its length.
        text += f"({part})*{j - i}" if j - i > 3 else part * (j - i)
        i = j
    return text


def _enclosing_exprs(path: Path) -> tuple[Any, Any] | None:
    node: Path | None = path
    while node is not None:
        if isinstance(node[2], RelayExpr) and not isinstance(node[2], _VAR_LIKE + (Constant,)):
            return node[2], node[3]
        node = node[0]
    return None


def _message(m: _Mismatch) -> str:
    lines = [f"not structurally equal at {_path_text(m.path)}: {m.reason}",
             f"  lhs: {_brief(m.lhs)}", f"  rhs: {_brief(m.rhs)}"]
    outer = _enclosing_exprs(m.path)
    if outer is not None and outer[0] is not m.lhs:
        lines += [f"  in lhs: {_brief(outer[0])}", f"  in rhs: {_brief(outer[1])}"]
    return "\n".join(lines)


def _brief(x: Any, limit: int = 160) -> str:
    """A one-line description of ``x`` for messages (never deep: IR may be 10,000 lets deep)."""
    text = " ".join(_text(x, 2).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(x: Any, depth: int) -> str:
    if isinstance(x, Node):
        return _node_text(x)
    cat = _category(x)
    if cat == "seq":
        items = [_text(v, depth - 1) if depth > 0 else "..." for v in list(x)[:8]]
        return "(" + ", ".join(items + (["..."] if len(x) > 8 else [])) + ")"
    if cat == "array":
        return _array_text(_as_numpy(x))
    return repr(x)


def _array_text(arr: np.ndarray) -> str:
    values = f" {arr.tolist()}" if arr.size <= 8 else ""
    return f"{arr.dtype}{list(arr.shape)}{values}"


def _node_text(x: Node) -> str:
    if isinstance(x, RelayExpr):
        try:
            from .printer import short_text

            text = short_text(x)
            if not text.startswith("<"):  # "<Call (unprintable: ...)>"
                return text
        except Exception:  # noqa: BLE001, S110 - a diff must still print if the printer cannot
            pass
    return _fallback_text(x)


def _fallback_text(x: Any, depth: int = 3) -> str:
    """Shallow text of a node, used until (or if) the printer cannot render it."""
    if isinstance(x, Var):
        return f"%{x.name_hint}"
    if isinstance(x, GlobalVar):
        return f"@{x.name_hint}"
    if isinstance(x, Op):
        return x.name
    if isinstance(x, Constant):
        return f"constant {_array_text(_as_numpy(x.data))}"
    if isinstance(x, Call):
        args = ", ".join(_fallback_text(a) if isinstance(a, (Var, Constant)) else "..."
                         for a in x.args)
        return f"{_fallback_text(x.op)}({args})"
    if isinstance(x, (TypeVar, Constructor)):
        return x.name_hint
    if isinstance(x, TensorType):
        return f"Tensor[{tuple(x.shape)}, {x.dtype}]"
    if isinstance(x, Let):
        value = _fallback_text(x.value, depth - 1) if depth > 0 else "..."
        return f"let %{x.var.name_hint} = {value}; ..."
    return f"{type(x).__name__}(...)"


def _root_label(x: Any) -> str:
    return "" if isinstance(x, IRModule) else "<root>"


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """True if ``lhs`` and ``rhs`` are equal up to consistent renaming of bound variables.

    Works on IRModules, expressions, types, attrs, patterns and plain values. Free variables
    must be the same object unless ``map_free_vars`` is True.
    """
    return _Equal(map_free_vars).run(lhs, rhs, _root_label(lhs))


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise ValueError naming the first place where ``lhs`` and ``rhs`` differ.

    The message gives the path (``main.body.args[1].attrs.padding``), the reason and both
    sides' values, plus the enclosing expression when the difference is inside attrs or types.
    """
    eq = _Equal(map_free_vars)
    if not eq.run(lhs, rhs, _root_label(lhs)):
        assert eq.mismatch is not None, "a failed comparison records its mismatch"
        raise ValueError(_message(eq.mismatch))


# -- hashing ----------------------------------------------------------------------------------
class _Hasher:
    """Feeds a canonical token stream of a node to blake2b, mirroring ``_Equal``'s walk."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.digest = hashlib.blake2b(digest_size=8)
        self.seen: dict[int, int] = {}  # id(var or graph node) -> index of first occurrence
        self.keep: list[Any] = []  # keeps ids in ``seen`` unique while hashing

    def emit(self, tag: str, payload: str | bytes = b"") -> None:
        data = payload.encode() if isinstance(payload, str) else payload
        self.digest.update(f"{tag}:{len(data)}:".encode())
        self.digest.update(data)

    def run(self, node: Any) -> int:
        stack: list[tuple[Any, int]] = [(node, _CHILD)]
        while stack:
            x, mode = stack.pop()
            cat = _category(x)
            if isinstance(cat, str):
                self._plain(cat, x, mode, stack)
            elif not self._reference(x, mode):
                self.emit("node", type(x).__name__)
                for seg, m, v in reversed(_entries(x)):
                    stack.append((v, m))
                    stack.append((seg, _CHILD))
        return int.from_bytes(self.digest.digest(), "little") >> 1  # fits in an int64

    def _reference(self, x: Any, mode: int) -> bool:
        """Emit a back-reference for a var or graph node seen before; True if done with x."""
        if not isinstance(x, _VAR_LIKE + _GRAPH):
            return False
        index = self.seen.get(id(x))
        if index is not None:
            self.emit("ref", str(index))
            return True
        self.seen[id(x)] = len(self.seen)
        self.keep.append(x)
        if isinstance(x, _VAR_LIKE) and mode != _DEF and not self.map_free_vars:
            # A free var equals only itself; its name (not its address) keeps hashes stable.
            self.emit("free", getattr(x, "name_hint", getattr(x, "name", "")))
        return False

    def _plain(self, cat: str, x: Any, mode: int, stack: list[tuple[Any, int]]) -> None:
        if cat == "seq":
            self.emit("seq", str(len(x)))
            stack.extend((v, mode) for v in reversed(x))
        elif cat == "map":
            items = _map_items(x)
            self.emit("map", str(len(items)))
            for k, v in reversed(items):
                stack.append((v, _CHILD))
                stack.append((k, _CHILD))
        elif cat == "array":
            arr = _as_numpy(x)
            self.emit("array", f"{arr.dtype.str}{arr.shape}")
            self.emit("bytes", hashlib.blake2b(arr.tobytes(), digest_size=16).digest())
        elif cat == "num":
            self.emit("num", _num_token(x))
        elif cat == "str":
            self.emit("str", x)
        elif cat == "enum":
            self.emit("enum", f"{type(x).__name__}.{x.name}")
        else:  # None, or a value of an unknown type: equal ones at least share the type name
            self.emit(cat, type(x).__qualname__)


def structural_hash(node: Any, map_free_vars: bool = False) -> int:
    """A hash consistent with ``structural_equal`` and stable across processes.

    Equal nodes have equal hashes. The value is a non-negative int below 2**63.
    """
    return _Hasher(map_free_vars).run(node)
