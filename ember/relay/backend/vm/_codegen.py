"""Relay function (after ManifestAlloc and LambdaLift) -> VM instructions.

One ``FunctionCodegen`` per global function. Every value gets a register of its own (a frame
is a Python list, so registers are cheap and never reused); parameters are ``$0 .. $n-1``, and
for a closure global the captured values come first. The walk is iterative over ``let``
chains (A-normal form makes them long); nested scopes (``if`` branches, ``match`` clauses) and
nested expressions are steps on ``ir.trampoline``, so their depth is not limited either.

What each expression becomes:

- variable: its register (no code); constant: ``load_const`` from the pool;
- tuple: ``alloc_data`` tag 0; projection: ``get_field``; constructor call: ``alloc_data``
  with the constructor's tag; ``match``: see ``_match.py``;
- ``if``: ``load_consti 1`` (true), ``if $cond $true`` jumping over the then-branch, each
  branch ending with a ``move`` into the result register (and the then-branch with a
  ``goto`` past the else-branch);
- call of a global: ``invoke``; of a closure global ``@f(captured)``: ``alloc_closure``; of
  ``@f(captured)(args)`` (a lifted function calling itself): ``invoke`` with the captured
  values prepended; of anything else: ``invoke_closure``; a global used as a value: a closure
  capturing nothing;
- VM ops (``_ops.py``): ``alloc_storage``, ``alloc_tensor(_reg)``, ``shape_of``,
  ``reshape_tensor``,
  ``invoke_packed`` (kernel or shape function), ``kill_register``.

Small integer immediates (offsets, sizes, tags, ``true``) are loaded with ``load_consti``
once per scope and reused while the scope lasts.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, cast

from ....ir import trampoline
from ....ir.adt import Constructor, Match
from ....ir.expr import (
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
from ....ir.op import Op
from ....ir.trampoline import Step
from ....ir.types import TensorType, TypeCall
from ....runtime.errors import InternalError, TVMError
from ....runtime.ndarray import NDArray
from ....runtime.vm import instructions as I
from ....runtime.vm.program import ListInfo, TensorInfo, VMFunction
from . import _ops
from .lambda_lift import is_closure_global

UNIT = -1  # the "register" of a value nobody reads (the result of a kernel call)


class CodegenContext:
    """What function code generation shares across a module: global indices, the constant
    pool and the kernel table (filled by the compiler's callbacks)."""

    def __init__(self, functions: dict[str, Function],
                 kernel: Callable[[Function], tuple[int, list[NDArray]]],
                 shape_kernel: Callable[[Function], int]) -> None:
        self.functions = functions
        self.type_defs: dict[Any, Any] = {}  # GlobalTypeVar -> TypeData, for list parameters
        self.global_index = {name: i for i, name in enumerate(functions)}
        self.constants: list[NDArray] = []
        self._const_index: dict[int, int] = {}
        self.kernel, self.shape_kernel = kernel, shape_kernel

    def constant(self, data: NDArray) -> int:
        """The pool index of ``data`` (each NDArray stored once)."""
        idx = self._const_index.get(id(data))
        if idx is None:
            idx = self._const_index[id(data)] = len(self.constants)
            self.constants.append(data)
        return idx

    def index_of(self, gv: GlobalVar) -> int:
        try:
            return self.global_index[gv.name_hint]
        except KeyError:
            raise TVMError(f"vm compiler: call of @{gv.name_hint}, which the module does not "
                           "define") from None


class FunctionCodegen:
    """Instructions of one function."""

    def __init__(self, ctx: CodegenContext, name: str, func: Function) -> None:
        self.ctx, self.name = ctx, name
        self.code: list[I.Instruction] = []
        self.var_reg: dict[Var, int] = {}
        self.num_regs = 0
        self.consti: dict[int, int] = {}
        self.params: list[Var] = list(func.params)
        self.body = func.body
        if is_closure_global(func):  # captured values first, then the closure's own params
            inner = func.body
            assert isinstance(inner, Function), "a closure global returns a function literal"
            self.params += list(inner.params)
            self.body = inner.body

    # -- helpers ------------------------------------------------------------------------------
    def new_reg(self) -> int:
        self.num_regs += 1
        return self.num_regs - 1

    def emit(self, ins: I.Instruction) -> int:
        self.code.append(ins)
        return len(self.code) - 1

    def load_int(self, value: int) -> int:
        reg = self.consti.get(value)
        if reg is None:
            reg = self.consti[value] = self.new_reg()
            self.emit(I.LoadConsti(int(value), reg))
        return reg

    def scoped(self, expr: RelayExpr) -> Step[int]:
        """Compile a nested scope (a branch or clause): its immediates do not leak out."""
        saved = dict(self.consti)
        try:
            return (yield self.compile(expr))
        finally:
            self.consti = saved

    def compile_all(self, exprs: Any) -> Step[list[int]]:
        out = []
        for e in exprs:
            out.append((yield self.compile(e)))
        return out

    # -- entry --------------------------------------------------------------------------------
    def run(self) -> VMFunction:
        for p in self.params:
            self.var_reg[p] = self.new_reg()
        result = trampoline.run(self.compile(self.body))
        self.emit(I.Ret(result))
        return VMFunction(self.name, _unique_names(self.params), tuple(self.code),
                          max(self.num_regs, 1),
                          param_types=tuple(_param_info(p, self.ctx.type_defs)
                                            for p in self.params))

    def compile(self, e: RelayExpr) -> Step[int]:
        """The code of ``e``; the step's value is the register holding its value."""
        while isinstance(e, Let):  # a loop over let chains
            value = e.value
            if isinstance(value, Var):
                self.var_reg[e.var] = self.var_reg[value]
            else:
                self.var_reg[e.var] = yield self.compile(value)
            e = e.body
        method = _DISPATCH.get(type(e))
        if method is None:
            raise TVMError(f"vm compiler: cannot compile a {type(e).__name__} in @{self.name}"
                           + (" (references are not supported by the VM)"
                              if isinstance(e, (RefCreate, RefRead, RefWrite)) else ""))
        reg = method(self, e)  # a register, or a step for nodes with operands
        return (yield reg) if isinstance(reg, Generator) else reg

    # -- expressions --------------------------------------------------------------------------
    def c_var(self, e: Var) -> int:
        reg = self.var_reg.get(e)
        if reg is None:
            raise InternalError(f"vm compiler: %{e.name_hint} is used in @{self.name} before it "
                                "is bound")
        return reg

    def c_constant(self, e: Constant) -> int:
        dst = self.new_reg()
        self.emit(I.LoadConst(self.ctx.constant(e.data), dst))
        return dst

    def c_tuple(self, e: Tuple) -> Step[int]:
        fields = yield self.compile_all(e.fields)
        dst = self.new_reg()
        self.emit(I.AllocADT(0, len(fields), tuple(fields), dst))
        return dst

    def c_get_item(self, e: TupleGetItem) -> Step[int]:
        obj = yield self.compile(e.tuple_value)
        dst = self.new_reg()
        self.emit(I.GetField(obj, e.index, dst))
        return dst

    def c_global(self, e: GlobalVar) -> int:
        dst = self.new_reg()  # a global used as a value: a closure capturing nothing
        self.emit(I.AllocClosure(self.ctx.index_of(e), 0, (), dst))
        return dst

    def c_constructor(self, e: Constructor) -> int:
        if e.inputs:
            raise TVMError(f"vm compiler: constructor {e.name_hint} used as a function value in "
                           f"@{self.name}; call it instead")
        dst = self.new_reg()
        self.emit(I.AllocADT(e.tag, 0, (), dst))
        return dst

    def c_if(self, e: If) -> Step[int]:
        cond = yield self.compile(e.cond)
        true = self.load_int(1)
        at_if = self.emit(I.If(cond, true, 1, 0))
        result = self.new_reg()
        self.emit(I.Move((yield self.scoped(e.true_branch)), result))
        at_goto = self.emit(I.Goto(0))
        self.code[at_if] = I.If(cond, true, 1, len(self.code) - at_if)
        self.emit(I.Move((yield self.scoped(e.false_branch)), result))
        self.code[at_goto] = I.Goto(len(self.code) - at_goto)
        return result

    def c_match(self, e: Match) -> Step[int]:
        from ._match import compile_match

        return (yield compile_match(self, e))

    def c_function(self, e: Function) -> int:
        raise InternalError(f"vm compiler: a function literal is left in @{self.name}; "
                            "LambdaLift (or InlinePrimitives, for fused ones) should have "
                            "removed it")

    def c_call(self, e: Call) -> Step[int]:
        op = e.op
        if isinstance(op, Op):
            return (yield self.c_vm_op(e))
        if isinstance(op, Constructor):
            fields = yield self.compile_all(e.args)
            dst = self.new_reg()
            self.emit(I.AllocADT(op.tag, len(fields), tuple(fields), dst))
            return dst
        if isinstance(op, GlobalVar):
            args = yield self.compile_all(e.args)
            dst = self.new_reg()
            if is_closure_global(self.ctx.functions.get(op.name_hint)):
                self.emit(I.AllocClosure(self.ctx.index_of(op), len(args), tuple(args), dst))
            else:
                self.emit(I.Invoke(self.ctx.index_of(op), tuple(args), dst))
            return dst
        if (isinstance(op, Call) and isinstance(op.op, GlobalVar)
                and is_closure_global(self.ctx.functions.get(op.op.name_hint))):
            args = yield self.compile_all((*op.args, *e.args))  # direct self call
            dst = self.new_reg()
            self.emit(I.Invoke(self.ctx.index_of(op.op), tuple(args), dst))
            return dst
        if isinstance(op, Function):
            raise InternalError(f"vm compiler: a fused function is called in @{self.name} "
                                "without ManifestAlloc")
        closure = yield self.compile(op)
        args = yield self.compile_all(e.args)
        dst = self.new_reg()
        self.emit(I.InvokeClosure(closure, tuple(args), dst))
        return dst

    def c_vm_op(self, e: Call) -> Step[int]:
        op, args, attrs = e.op, e.args, cast(Any, e.attrs)
        assert isinstance(op, Op), "a VM op"
        if op is _ops.INVOKE_TVM_OP or op is _ops.SHAPE_FUNC:
            prim = args[0]
            assert isinstance(prim, Function), "invoke_tvm_op calls a fused function"
            ins = yield self.compile_all(args[1].fields)  # type: ignore[attr-defined]
            outs = yield self.compile_all(args[2].fields)  # type: ignore[attr-defined]
            if op is _ops.SHAPE_FUNC:
                index = self.ctx.shape_kernel(prim)
            else:
                index, consts = self.ctx.kernel(prim)
                for c in consts:  # constants the lowering lifted out of the kernel body
                    reg = self.new_reg()
                    self.emit(I.LoadConst(self.ctx.constant(c), reg))
                    ins.append(reg)
            self.emit(I.InvokePacked(index, len(ins) + len(outs), len(outs), tuple(ins + outs)))
            return UNIT
        if op is _ops.ALLOC_STORAGE:
            size = yield self._int_operand(args[0])
            dst = self.new_reg()
            self.emit(I.AllocStorage(size, attrs.alignment, attrs.dtype_hint, 0, dst))
            return dst
        if op is _ops.ALLOC_TENSOR:
            storage, offset = (yield self.compile(args[0])), self.load_int(attrs.offset)
            dst = self.new_reg()
            self.emit(I.AllocTensor(storage, offset, attrs.shape, attrs.dtype, dst))
            return dst
        if op is _ops.ALLOC_TENSOR_REG:
            storage, shape = yield self.compile_all(args[:2])
            dst = self.new_reg()
            self.emit(I.AllocTensorReg(storage, self.load_int(attrs.offset), shape,
                                       attrs.dtype, dst))
            return dst
        if op is _ops.RESHAPE_TENSOR:
            src, shape = yield self.compile_all(args[:2])
            dst = self.new_reg()
            self.emit(I.ReshapeTensor(src, shape, dst))
            return dst
        if op is _ops.SHAPE_OF:
            src, dst = (yield self.compile(args[0])), self.new_reg()
            self.emit(I.ShapeOf(src, dst))
            return dst
        if op is _ops.KILL:
            self.emit(I.KillRegister((yield self.compile(args[0]))))
            return UNIT
        raise TVMError(f"vm compiler: operator {op.name} is called directly in @{self.name}; "
                       "the VM runs fused functions only (run FuseOps first)")

    def _int_operand(self, e: RelayExpr) -> Step[int]:
        if isinstance(e, Constant) and e.data.ndim == 0 and e.data.dtype.startswith(("int",
                                                                                    "uint")):
            return self.load_int(int(e.data.numpy()))
        return (yield self.compile(e))


_DISPATCH: dict[type, Callable[[FunctionCodegen, Any], Any]] = {
    Var: FunctionCodegen.c_var, Constant: FunctionCodegen.c_constant,
    Tuple: FunctionCodegen.c_tuple, TupleGetItem: FunctionCodegen.c_get_item,
    GlobalVar: FunctionCodegen.c_global, Constructor: FunctionCodegen.c_constructor,
    If: FunctionCodegen.c_if, Match: FunctionCodegen.c_match,
    Function: FunctionCodegen.c_function, Call: FunctionCodegen.c_call,
}


def _unique_names(params: list[Var]) -> tuple[str, ...]:
    """Parameter names, distinct (two captured variables may share a name hint)."""
    names: list[str] = []
    for p in params:
        name, k = p.name_hint, 1
        while name in names:
            name, k = f"{p.name_hint}_{k}", k + 1
        names.append(name)
    return tuple(names)


def _param_info(p: Var, type_defs: dict[Any, Any]) -> TensorInfo | ListInfo | None:
    ty = p.checked_type_ if p.checked_type_ is not None else p.type_annotation
    if isinstance(ty, TypeCall):
        return _list_info(type_defs.get(ty.func))
    if not isinstance(ty, TensorType):
        return None
    return TensorInfo(ty.dtype, tuple(d if isinstance(d, int) else -1 for d in ty.shape))


def _list_info(td: Any) -> ListInfo | None:
    """ListInfo for a list-shaped ADT (a nullary constructor and one taking (A, itself)), so
    callers may pass Python lists for it; None for any other type."""
    if td is None or len(td.constructors) != 2:
        return None
    nil = next((c for c in td.constructors if not c.inputs), None)
    cons = next((c for c in td.constructors if len(c.inputs) == 2), None)
    if nil is None or cons is None:
        return None
    tail = cons.inputs[1]
    if not (isinstance(tail, TypeCall) and tail.func is td.header):
        return None
    return ListInfo(cons.tag, nil.tag)
