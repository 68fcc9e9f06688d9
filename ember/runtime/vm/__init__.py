"""The Relay virtual machine, run side: ``ember.runtime.vm`` (``tvm.runtime.vm``).

Running::

    exe = relay.vm.compile(mod, target="llvm")        # or Executable.load_exec(code, lib)
    vm = VirtualMachine(exe, ember.cpu())
    out = vm.invoke("main", x, y)                      # NDArray, or ADT for tuples
    code, lib = exe.save()                             # bytes + kernel library

Building an executable (the contract with the VM compiler)
----------------------------------------------------------
An executable is a list of :class:`VMFunction` s, a constant pool, the names of the kernels,
and the kernel library::

    Executable.from_functions(
        [VMFunction(name="main", params=("x", "y"), instructions=(...,),
                    register_file_size=5,
                    param_types=(TensorInfo("float32", (-1, 3)), None))],   # optional
        constants=[nd.array(...)], primitive_ops=["vm_mod_fused_add"], lib=lib)

``from_functions`` also accepts assembly text (``assembler.py``; the same syntax as the
``bytecode`` listing). It runs the verifier, which rejects out-of-range registers, function /
constant / kernel / device indices, jump targets, arities, dtypes, code that falls off the
end of a function, and reads of registers not written on every path to them, with a message
naming ``functions['f'].instructions[pc]``. So the interpreter never reads an empty register.

Calling convention. Function ``f`` with ``n`` parameters starts with its arguments in
registers ``$0 .. $n-1``, the other registers empty; ``ret $r`` returns register ``$r`` into
the caller's destination register. A closure made by ``alloc_closure`` over ``k`` free
variables calls its function with the captured values first (parameters ``0..k-1``), then
the ``invoke_closure`` arguments. The whole frame dies on return.

Instructions (``instructions.py``; ``$r`` is a register, ``storage`` a Storage block):

======================================================  ======================================
``Move(src, dst)``                                      ``$dst = $src``
``Ret(result)``                                         return ``$result``
``Fatal()``                                             raise VMError
``InvokePacked(packed_index, arity, output_size,        call kernel ``primitive_ops[k]`` with
args)``                                                 ``args`` (inputs then outputs, the
                                                        outputs already allocated: destination
                                                        passing); ADT args are flattened
``AllocStorage(size, alignment, dtype_hint,             ``$dst`` = a block of ``$size`` bytes
device_index, dst)``                                    (``$size`` a scalar tensor)
``AllocTensor(storage, offset, shape, dtype, dst)``     ``$dst`` = tensor of the immediate
                                                        ``shape`` at byte offset ``$offset``
``AllocTensorReg(storage, offset, shape_register,       the same with the shape read from a
dtype, dst)``                                           1-D int64 tensor register
``ReshapeTensor(tensor, newshape, dst)``                a view with the shape in ``$newshape``
``ShapeOf(tensor, dst)``                                ``$dst`` = shape as 1-D int64 tensor
``AllocADT(tag, num_fields, fields, dst)``              ``$dst = ADT(tag, [$f...])``
``AllocClosure(func_index, num_free_vars, free_vars,    ``$dst`` = closure of a function
dst)``
``GetField(object, field_index, dst)``                  ``$dst = $object.fields[i]``
``GetTag(object, dst)``                                 ``$dst`` = tag, int32 scalar tensor
``If(test, target, true_offset, false_offset)``         jump by ``true_offset`` if the scalar
                                                        values of ``$test`` and ``$target`` are
                                                        equal, else by ``false_offset``
``Goto(pc_offset)``                                     relative jump
``Invoke(func_index, args, dst)``                       call a function
``InvokeClosure(closure, args, dst)``                   call a closure
``LoadConst(const_index, dst)``                         ``$dst`` = constant pool entry
``LoadConsti(val, dst)``                                ``$dst`` = int64 scalar tensor ``val``
``DeviceCopy(src, src_device_index,                     the same tensor (CPU only)
dst_device_index, dst)``
``KillRegister(dst)``                                   empty ``$dst`` (frees it early)
======================================================  ======================================

Memory: storage comes from a pooled allocator (``memory.py``); a block returns to the pool
when neither it nor any tensor carved from it is referenced, so steady-state runs allocate
nothing (``vm.allocator.fresh_allocations`` stops growing).

Plans: a function that is straight-line code (a compiled model's ``main`` without control
flow, calls or closures), its shapes static or symbolic, runs as a few native calls over
buffers planned at its first call (``static_plan.py``, ``plan_walk.py``): the shape functions,
then the kernels; its result blocks still come from the allocator on every run. Anything
else, and the profiler, goes through the interpreter.

Files: ``program.py`` (data), ``instructions.py``, ``verifier.py`` and ``regflow.py`` (its
register dataflow), ``serialize.py`` (byte format, checksummed), ``assembler.py`` (listing and
assembler), ``executable.py``, ``memory.py``, ``steps.py`` (what each instruction does),
``arguments.py`` (binding and checking arguments), ``interpreter.py`` (the loop and the API),
``plan_walk.py`` and ``static_plan.py`` (straight-line functions as a few native calls),
``executor.py`` (``VMModule``: the module-based interface, set_input/run/get_output, for a VM
executor factory), ``factory.py`` (``VMExecutorFactoryModule``: what ``relay.build(...,
executor=Executor("vm"))`` returns), ``profiler.py``. The compile side is
``ember.relay.backend.vm``.
"""
from __future__ import annotations

from .assembler import AssemblyError, parse_functions, parse_instruction  # noqa: F401
from .executable import Executable, ExecutableModule  # noqa: F401
from .executor import VMModule  # noqa: F401
from .instructions import (  # noqa: F401
    AllocADT,
    AllocClosure,
    AllocStorage,
    AllocTensor,
    AllocTensorReg,
    DeviceCopy,
    Fatal,
    GetField,
    GetTag,
    Goto,
    If,
    Instruction,
    Invoke,
    InvokeClosure,
    InvokePacked,
    KillRegister,
    LoadConst,
    LoadConsti,
    Move,
    Opcode,
    ReshapeTensor,
    Ret,
    ShapeOf,
)
from .interpreter import VirtualMachine, VMError  # noqa: F401
from .memory import NaiveAllocator, PooledAllocator, Storage  # noqa: F401
from .program import Program, TensorInfo, VMFunction  # noqa: F401
from .steps import VMClosure  # noqa: F401
from .verifier import VerificationError  # noqa: F401
