"""GPU-only ``tvm.contrib`` modules import (a script's imports succeed) and refuse to work
with a message that says why and what to do instead; availability predicates answer False."""
from __future__ import annotations

import pytest

import ember as tvm
from ember.contrib._unavailable import NotAvailableError


@pytest.mark.parametrize("module, name, args", [
    ("nvcc", "compile_cuda", ("__global__ void f() {}",)),
    ("nvcc", "have_fp16", ("8.0",)),
    ("nvcc", "get_target_compute_version", ()),
    ("cudnn", "conv_forward", (None, None, [1, 1], [1, 1], [1, 1], 0, 0, 1, "float32")),
    ("cublas", "matmul", (None, None)),
    ("cublaslt", "matmul", (None, None)),
    ("rocblas", "batch_matmul", (None, None)),
    ("miopen", "softmax", (None,)),
    ("rocm", "find_lld", ()),
    ("mps", "matmul", (None, None)),
])
def test_gpu_function_raises_not_available(module, name, args):
    mod = getattr(tvm.contrib, module)
    with pytest.raises(NotAvailableError, match=rf"ember\.contrib\.{module}\.{name}: not "
                                               r"available in ember: .*CPU only.*'llvm'"):
        getattr(mod, name)(*args)


def test_not_available_is_a_tvm_error_and_not_implemented():
    with pytest.raises(NotImplementedError):
        tvm.contrib.nvcc.compile_cuda("")
    with pytest.raises(tvm.TVMError):
        tvm.contrib.cublas.matmul(None, None)


def test_availability_predicates_say_no():
    from ember.contrib import cudnn, nvcc, rocm, thrust

    assert cudnn.exists() is False
    assert nvcc.have_cudagraph() is False
    assert thrust.can_use_thrust("cuda", "tvm.contrib.thrust.sort") is False
    assert rocm.have_matrixcore("gfx908") is False


def test_cuda_graph_executor_imports_and_refuses():
    from ember.contrib.cuda_graph import cuda_graph_executor

    with pytest.raises(NotAvailableError, match="graph_executor.GraphModule"):
        cuda_graph_executor.create("{}", None, tvm.cuda(0))
    with pytest.raises(NotAvailableError, match="GraphModuleCudaGraph"):
        cuda_graph_executor.GraphModuleCudaGraph(None)


def test_unknown_names_stay_attribute_errors():
    with pytest.raises(AttributeError):
        tvm.contrib.cudnn.no_such_function  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        tvm.contrib.no_such_module  # noqa: B018
