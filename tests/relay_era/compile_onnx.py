# "Compile ONNX Models" (Relay era), with a small model made here instead of a download
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
import ember as tvm
from ember import relay
import ember.relay
import onnxruntime

w = np.random.rand(4, 1, 3, 3).astype("float32")
graph = helper.make_graph(
    [helper.make_node("Conv", ["1", "w"], ["c"], pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["c"], ["r"]),
     helper.make_node("Reshape", ["r", "shape"], ["rs"]),
     helper.make_node("Transpose", ["rs"], ["out"], perm=[0, 2, 1])],
    "sr", [helper.make_tensor_value_info("1", TensorProto.FLOAT, [1, 1, 8, 8])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 64, 4])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1, 4, 64], "int64"), "shape")])
onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(onnx_model)

x = np.random.rand(1, 1, 8, 8).astype("float32")
target = "llvm"
input_name = "1"
shape_dict = {input_name: x.shape}
mod, params = relay.frontend.from_onnx(onnx_model, shape_dict)
with tvm.transform.PassContext(opt_level=1):
    executor = relay.build_module.create_executor(
        "graph", mod, tvm.cpu(0), target, params
    ).evaluate()
dtype = "float32"
tvm_output = executor(tvm.nd.array(x.astype(dtype))).numpy()
sess = onnxruntime.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
ref = sess.run(None, {"1": x})[0]
np.testing.assert_allclose(tvm_output, ref, rtol=1e-5, atol=1e-5)
# the same with relay.build and the graph executor, and vm
with tvm.transform.PassContext(opt_level=3):
    lib = relay.build(mod, target=target, params=params)
from ember.contrib import graph_executor
m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
m.set_input(input_name, tvm.nd.array(x))
m.run()
np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-5, atol=1e-5)
vm_out = relay.create_executor("vm", mod=mod, device=tvm.cpu(0), target=target).evaluate()(x, **params)
np.testing.assert_allclose(vm_out.numpy(), ref, rtol=1e-5, atol=1e-5)
print(mod.astext(show_meta_data=False)[:200])
print("OK")
