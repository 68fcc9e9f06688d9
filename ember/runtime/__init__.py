"""ember.runtime: everything needed to load and run a compiled model, and nothing of the compiler.

PackedFunc and the global registry, the object system and containers, NDArray/Device/DataType,
Module and its loaders, the ctypes bridge to the one C ABI, and the executors' run side.
"""
from __future__ import annotations

from . import ndarray as nd  # noqa: F401
from .device import (Device, cl, cpu, cuda, device, enabled, ext_dev, gpu,  # noqa: F401
                     hexagon, metal, mtl, opencl, rocm, vpi, vulkan, webgpu)
from .dtype import DataType, DataTypeCode  # noqa: F401
from .errors import TVMError  # noqa: F401
from .ndarray import NDArray  # noqa: F401
from .object import Object, register_object  # noqa: F401
from . import container  # noqa: F401
from .container import ADT, Array, Map, ShapeTuple, String, tuple_object  # noqa: F401
from .dlpack import from_dlpack  # noqa: F401
from .params import load_param_dict, save_param_dict  # noqa: F401
from .serialization import load_json, save_json  # noqa: F401

# The FFI: PackedFunc, the global registry, modules and their loaders.
from .packed_func import PackedFunc, convert  # noqa: F401,E402
from .registry import (  # noqa: F401,E402
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from .module import Module  # noqa: F401,E402
from .loaders import load_module, system_lib  # noqa: F401,E402
from .time_eval import BenchmarkResult  # noqa: F401,E402
from .threads import default_num_threads as num_threads  # noqa: F401,E402

# The executors' run side; importing executor_factory registers the loaders that rebuild a
# factory from an exported library (runtime.module.loadbinary_GraphExecutorFactory).
from . import executor_factory, profiling  # noqa: F401,E402


# The VM (tvm.runtime.vm, tvm.runtime.profiler_vm) is imported on first use; its loader is
# registered now, so load_module can rebuild an exported VM executable before that.
def _load_vm_exec(data: bytes) -> "Module":
    from .vm.executable import _load_binary

    return _load_binary(data)


register_func("runtime.module.loadbinary_vm_exec", _load_vm_exec, override=True)


def _load_vm_factory(data: bytes) -> "Module":
    from .executor_factory import _load_factory
    from .vm.factory import VMExecutorFactoryModule  # noqa: F401  (registers "vm")

    return _load_factory(data)


register_func("runtime.module.loadbinary_VMExecutorFactory", _load_vm_factory, override=True)


# The saved record of ember.compile's models (model_record.py), also imported on first use.
def _load_model_record(data: bytes) -> Module:
    from .model_record import ModelRecord

    return ModelRecord.load_binary(data)


register_func("runtime.module.loadbinary_EmberModel", _load_model_record, override=True)


def __getattr__(name: str) -> object:
    if name in ("vm", "profiler_vm", "executor", "aot_executor"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
