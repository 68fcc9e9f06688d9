"""The virtual machine: frames of registers, a dispatch loop, and the Relay-era VM API.

On creation the VM looks every kernel up in the executable's library, and decodes every
instruction into a step closure (``steps.py``). Running a function is then a loop over the
current frame's steps: ``pc += steps[pc](regs)``. Calls push a frame (the caller's steps,
registers, return pc and destination register) on a Python list, so VM recursion never
recurses in Python. An error anywhere is re-raised as a VMError that says which instruction
of which function failed and the chain of calls that led there.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..container import ADT
from ..device import Device
from ..errors import ArgumentError, ArgumentTypeError, TVMError
from ..executor_common import check_name, check_output_index, check_timing
from ..executor_guard import UseGuard
from ..module import Module
from ..packed_func import PackedFunc, as_packed_func
from ..time_eval import BenchmarkResult, time_evaluator
from . import arguments as A
from . import instructions as I
from . import static_plan
from .executable import Executable, ExecutableModule
from .memory import Allocator, make_allocator
from .program import VMFunction
from .static_plan import NOT_RUN, StaticPlan
from .steps import DecodeContext, Step, VMClosure, decode


class VMError(TVMError):
    """An error while running VM code; the message names the instruction and the calls.
    ``kernel`` is the name of the kernel that failed (None when no kernel did): a name
    ending in ``_shape_func`` means the arguments' shapes were rejected before any
    computation on them."""

    kernel: str | None = None


class VirtualMachine(Module):
    """Runs an Executable: ``VirtualMachine(exe, ember.cpu()).invoke("main", x, y)``.

    ``memory_cfg`` is "pooled" (default: storage is reused between runs), "naive" or an
    Allocator, e.g. one shared between VMs. Arguments may be NDArrays, numpy arrays, Python
    scalars (int -> int32, float -> float32, bool), tuples/lists (-> ADT tuples) or ADTs.
    Threads may share a VM: its calls take turns, and ``invoke(func, *args)`` returns each
    caller its own result. The stored inputs and outputs of ``set_input``/``invoke_stateful``/
    ``get_outputs`` are the VM's, one set for all threads: a thread whose inputs or outputs
    another thread replaced between its calls gets ConcurrentUseError (``executor_guard``).
    """

    type_key = "VirtualMachine"
    max_call_depth = 100_000
    # Run straight-line functions as a few native calls (the profiler times steps, so
    # it turns this off; so may a test that wants the interpreter).
    static_plans = True

    def __new__(cls, exe: Any, device: Any = None, memory_cfg: Any = None) -> Any:
        if getattr(exe, "rpc_session", None) is not None:  # loaded on an RPC server: run there
            from ..rpc.remote_vm import RemoteVirtualMachine

            return RemoteVirtualMachine(exe, device, memory_cfg)
        return super().__new__(cls)

    def __init__(self, exe: Executable | Module, device: Device | Sequence[Device],
                 memory_cfg: str | Allocator | None = None) -> None:
        super().__init__()
        if isinstance(exe, ExecutableModule):
            exe = Executable(exe)
        if not isinstance(exe, Executable):
            raise ArgumentTypeError(f"VirtualMachine: expected an Executable, got "
                                    f"{type(exe).__name__}")
        self.exe = exe
        self.device = _cpu_device(device)
        self.allocator = make_allocator(memory_cfg)
        prog = exe._program
        for i, dev in enumerate(prog.virtual_devices):
            if dev.device_type != self.device.device_type:
                raise TVMError(f"VirtualMachine: virtual device {i} is {dev}, but ember runs "
                               "on the CPU only")
        self._functions: list[VMFunction] = list(prog.functions)
        self._index = {f.name: i for i, f in enumerate(self._functions)}
        kernels = [self._find_kernel(i, name) for i, name in enumerate(prog.primitive_ops)]
        self._ctx = DecodeContext(kernels, list(prog.primitive_ops), list(prog.constants),
                                  [self.device] * len(prog.virtual_devices), self.allocator,
                                  prog.value_kernels, prog.concat_kernels)
        self._steps: list[list[Step | None]] = [
            [self._decode(ins, func, pc) for pc, ins in enumerate(func.instructions)]
            for func in self._functions]
        self._inputs: dict[str, list[Any]] = {}
        self._outputs: Any = None
        # One call at a time: the stored inputs, the decoded steps' argument buffers and the
        # plans' blocks belong to the VM, so threads sharing a VM take turns (reentrant: a
        # packed function called from VM code may call back in).
        self._lock = threading.RLock()
        self._guard = UseGuard("VirtualMachine")  # the stored inputs/outputs' sequence checks
        # function index -> its StaticPlan, or why it has none
        self._plans: dict[int, StaticPlan | str] = {}

    def _find_kernel(self, index: int, name: str) -> PackedFunc:
        lib = self.exe.lib
        try:
            if lib is not None:
                return lib.get_function(name, query_imports=True)
        except AttributeError:
            pass
        where = f"the kernel library {lib!r}" if lib is not None else \
            "a kernel library (the executable has none)"
        raise TVMError(f"VirtualMachine: kernel {name!r} (PackedFunc[{index}]) not found in "
                       f"{where}")

    def _decode(self, ins: I.Instruction, func: VMFunction, pc: int) -> Step | None:
        try:
            return decode(ins, self._ctx)
        except TVMError as err:
            raise TVMError(f"VirtualMachine: functions[{func.name!r}].instructions[{pc}] "
                           f"({ins}): {err}") from None

    # -- running --------------------------------------------------------------------------------
    def _execute(self, func_index: int, args: Sequence[Any]) -> Any:
        """Run function ``func_index`` on ``args`` (already checked) and return its result:
        through its static plan when it has one (``static_plan.py``), else interpreted."""
        if self.static_plans:
            plan = self._plans.get(func_index)
            if plan is None:  # built on the first call, for arguments like these
                plan = self._plans[func_index] = static_plan.build(
                    self._functions[func_index], self._ctx, args, self.allocator)
            if type(plan) is StaticPlan:
                result = plan.run(args)
                if result is not NOT_RUN:
                    return result
        return self._interpret(func_index, args)

    def _interpret(self, func_index: int, args: Sequence[Any]) -> Any:
        funcs, all_steps = self._functions, self._steps
        entry, entry_args = funcs[func_index], args
        steps, regs = all_steps[func_index], [None] * funcs[func_index].register_file_size
        regs[:len(args)] = args
        frames: list[tuple[int, list[Step | None], list[Any], int, int]] = []
        pc = 0
        ret, invoke, invoke_closure = I.Ret, I.Invoke, I.InvokeClosure
        try:
            while True:
                step = steps[pc]
                if step is not None:
                    pc += step(regs)
                    continue
                ins: Any = funcs[func_index].instructions[pc]  # Ret, Invoke, ...
                kind = type(ins)
                if kind is ret:
                    value = regs[ins.result]
                    if not frames:
                        return value
                    func_index, steps, regs, pc, dst = frames.pop()
                    regs[dst] = value
                    continue
                if kind is invoke:
                    callee, args = ins.func_index, [regs[r] for r in ins.args]
                elif kind is invoke_closure:
                    callee, args = self._closure_call(regs[ins.closure], ins.args, regs)
                else:
                    raise VMError(f"fatal instruction reached in functions["
                                  f"{funcs[func_index].name!r}].instructions[{pc}] (no match "
                                  "clause applied, or the program marked this path invalid)")
                if len(frames) >= self.max_call_depth:
                    raise VMError(f"call depth exceeds {self.max_call_depth} frames (runaway "
                                  "recursion?); raise VirtualMachine.max_call_depth if needed")
                frames.append((func_index, steps, regs, pc + 1, ins.dst))
                func_index, steps, pc = callee, all_steps[callee], 0
                regs = [None] * funcs[callee].register_file_size
                regs[:len(args)] = args
        except VMError:
            raise
        except Exception as err:
            context = self._context(err, func_index, pc, regs, frames)
            dynamic = A.dynamic_arguments(entry, entry_args)
            if dynamic:  # the only arguments the entry check could not fully check
                context += (f"\n  arguments of {entry.name!r} not fully checked on entry "
                            f"(check their shapes): {'; '.join(dynamic)}")
            error = VMError(context)
            ins = funcs[func_index].instructions[pc]
            if isinstance(ins, I.InvokePacked):
                error.kernel = self._ctx.kernel_names[ins.packed_index]
            raise error from err

    def _closure_call(self, clo: Any, arg_regs: tuple[int, ...], regs: list[Any]
                      ) -> tuple[int, list[Any]]:
        if type(clo) is not VMClosure:
            raise TVMError(f"invoke_closure: expected a closure, got "
                           f"{type(clo).__name__ if clo is not None else 'an empty register'}")
        args = [*clo.free_vars, *(regs[r] for r in arg_regs)]
        callee = self._functions[clo.func_index]
        if len(args) != callee.arity:
            raise TVMError(f"invoke_closure: function {callee.name!r} takes {callee.arity} "
                           f"arguments, the closure gives {len(clo.free_vars)} captured + "
                           f"{len(arg_regs)} passed")
        return clo.func_index, args

    def _context(self, err: Exception, func_index: int, pc: int, regs: list[Any],
                 frames: list[tuple[Any, ...]]) -> str:
        func = self._functions[func_index]
        ins = func.instructions[pc]
        msg = str(err) if isinstance(err, TVMError) else f"{type(err).__name__}: {err}"
        lines = [msg, f"  while executing functions[{func.name!r}].instructions[{pc}]: {ins}"]
        if isinstance(ins, I.InvokePacked):
            lines[-1] += f"  (kernel {self._ctx.kernel_names[ins.packed_index]!r})"
        for r in dict.fromkeys(ins.reads()):
            lines.append(f"    ${r} = {A.summary(regs[r])}")
        for caller, _, _, ret_pc, _ in reversed(frames):
            lines.append(f"  called from functions[{self._functions[caller].name!r}]."
                         f"instructions[{ret_pc - 1}]")
        return "\n".join(lines)

    # -- arguments ------------------------------------------------------------------------------
    def _function_index(self, func_name: str, where: str = "invoke") -> int:
        if not isinstance(func_name, str):
            raise ArgumentTypeError(f"{where}: the function is named by a str, got "
                                    f"{type(func_name).__name__}")
        index = self._index.get(func_name)
        if index is None:
            raise ArgumentError(f"{where}: no function {func_name!r}; the executable has "
                                f"{', '.join(repr(n) for n in self._index)}")
        return index

    def _prepared(self, func_name: str, args: Sequence[Any], kwargs: dict[str, Any],
                  caller: str) -> list[Any]:
        """``args``/``kwargs`` bound to the parameters of ``func_name``, checked and converted
        (nothing is stored or allocated before every argument passed its check)."""
        func = self._functions[self._function_index(func_name, caller)]
        where = f"{caller}({func_name!r})"
        return A.convert_all(func, A.bind(func, args, kwargs, where), where)

    def _stored_inputs(self, func_name: str) -> list[Any]:
        inputs = self._inputs.get(func_name)
        if inputs is not None and A.UNSET not in inputs:  # VM values compare by identity
            return inputs
        func = self._functions[self._function_index(func_name)]
        inputs = inputs or [A.UNSET] * func.arity
        missing = [func.params[i] for i, v in enumerate(inputs) if v is A.UNSET]
        if missing:
            raise ArgumentError(f"invoke({func_name!r}): inputs not set: {', '.join(missing)} "
                                "(pass them, or call set_input first)")
        return inputs

    # -- the Relay-era API ---------------------------------------------------------------------
    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Store the inputs of ``func_name`` for ``invoke``/``invoke_stateful`` without args.
        They are checked and converted here, once, not on every run."""
        prepared = self._prepared(func_name, args, kwargs, "set_input")
        with self._lock:
            self._inputs[func_name] = prepared
            for k in range(len(prepared)):
                self._guard.wrote(k)

    def set_one_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Set one input: ``set_one_input("main", "x", value)`` (or an index), or
        ``set_one_input("main", x=value)``."""
        func = self._functions[self._function_index(func_name, "set_one_input")]
        if kwargs and not args and len(kwargs) == 1:
            ((key, value),) = kwargs.items()
        elif len(args) == 2 and not kwargs:
            key, value = args
        else:
            raise ArgumentError("set_one_input: pass (name_or_index, value) or one name=value")
        where = f"set_one_input({func_name!r})"
        index = A.checked_key(func, key, where)
        value = A.convert(func, index, value, f"{where}: argument {index} "
                                              f"({func.params[index]})")
        with self._lock:
            self._inputs.setdefault(func_name, [A.UNSET] * func.arity)[index] = value
            self._guard.wrote(index)

    def invoke(self, func_name: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``func_name`` and return its result (NDArray, ADT or closure). Arguments
        given here are stored as with ``set_input``; without any, the stored ones are used."""
        index = self._function_index(func_name)
        prepared = self._prepared(func_name, args, kwargs, "invoke") if args or kwargs else None
        with self._lock:
            if prepared is not None:
                self._inputs[func_name] = prepared
                return self._execute(index, prepared)
            self._guard.inputs_intact("invoke")  # the stored inputs: this thread's?
            return self._execute(index, self._stored_inputs(func_name))

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``invoke("main", ...)``."""
        return self.invoke("main", *args, **kwargs)

    def invoke_stateful(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Run ``func_name`` on the stored inputs and keep the result for ``get_outputs``."""
        index = self._function_index(func_name, "invoke_stateful")
        prepared = (self._prepared(func_name, args, kwargs, "invoke_stateful")
                    if args or kwargs else None)
        with self._lock:
            if prepared is not None:
                self._inputs[func_name] = prepared
                for k in range(len(prepared)):
                    self._guard.wrote(k)
            inputs = self._stored_inputs(func_name)
            self._guard.run()
            self._outputs = None  # let the previous result's storage go back to the pool first
            self._outputs = self._execute(index, inputs)

    def get_outputs(self) -> list[Any]:
        """The outputs of the last ``invoke_stateful``: an ADT result's fields, else [result]."""
        with self._lock:
            self._guard.read("get_outputs")
            outputs = self._outputs
        if outputs is None:
            raise TVMError("get_outputs: no outputs; call invoke_stateful first (or the last "
                           "one failed)")
        return list(outputs.fields) if type(outputs) is ADT else [outputs]

    def get_num_outputs(self) -> int:
        return len(self.get_outputs())

    def get_output(self, index: int) -> Any:
        outputs = self.get_outputs()
        return outputs[check_output_index(index, len(outputs))]

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        """The position of parameter ``input_name`` of ``func_name``, or -1."""
        check_name(input_name, "get_input_index")
        params = self._functions[self._function_index(func_name, "get_input_index")].params
        return params.index(input_name) if input_name in params else -1

    def benchmark(self, device: Device, *args: Any, func_name: str = "main", repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                  **kwargs: Any) -> BenchmarkResult:
        """Time ``invoke_stateful(func_name)``: ``repeat`` measurements, each the mean of
        ``number`` runs (grown until a measurement lasts ``min_repeat_ms``). Inputs given here
        are set first; ``end_to_end`` changes nothing on the CPU."""
        check_timing(number, repeat, min_repeat_ms, "benchmark")
        _cpu_device(device)
        self._function_index(func_name, "benchmark")
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        timer = time_evaluator(lambda: self.invoke_stateful(func_name), device, number, repeat,
                               min_repeat_ms or 0, cooldown_interval_ms, repeats_to_cooldown)
        return timer()

    # -- Module interface -----------------------------------------------------------------------
    _EXPORTED = ("invoke", "run", "set_input", "set_one_input", "invoke_stateful",
                 "get_output", "get_num_outputs", "get_input_index", "get_outputs")

    def _get_local(self, name: str) -> PackedFunc | None:
        return as_packed_func(getattr(self, name), name) if name in self._EXPORTED else None

    def __repr__(self) -> str:
        return f"VirtualMachine({self.exe!r}, {self.device})"


def _cpu_device(device: Device | Sequence[Device]) -> Device:
    devices = [device] if isinstance(device, Device) else \
        list(device) if isinstance(device, (list, tuple)) else []
    if not devices or not all(isinstance(d, Device) for d in devices):
        raise ArgumentTypeError(f"VirtualMachine: expected a Device or a list of them, got "
                                f"{type(device).__name__} {device!r}")
    for d in devices:
        try:
            d.check_supported()
        except TVMError as err:
            raise ArgumentError(f"VirtualMachine: {err}") from None
    return devices[0]
