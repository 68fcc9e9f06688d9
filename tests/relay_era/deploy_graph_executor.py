# "Quick Start Tutorial for Compiling Deep Learning Models" and deploying with the graph
# executor (Relay era), unchanged but the import and the model
import numpy as np
from ember import relay
import ember as tvm
from ember.contrib import graph_executor
import ember.testing

batch_size = 1
num_class = 10
image_shape = (1, 28, 28)
data_shape = (batch_size,) + image_shape
out_shape = (batch_size, num_class)
# the tutorial's resnet-18 takes minutes to compile on 2 cores; the MLP goes the same way
mod, params = relay.testing.mlp.get_workload(
    batch_size=batch_size, num_classes=num_class, image_shape=image_shape)
print(mod.astext(show_meta_data=False)[:300])
opt_level = 3
target = tvm.target.Target("llvm")
with tvm.transform.PassContext(opt_level=opt_level):
    lib = relay.build(mod, target, params=params)
dev = tvm.cpu()
data = np.random.uniform(-1, 1, size=data_shape).astype("float32")
module = graph_executor.GraphModule(lib["default"](dev))
module.set_input("data", data)
module.run()
out = module.get_output(0, tvm.nd.empty(out_shape)).numpy()
print(out.flatten()[0:10])

from ember.contrib import utils
temp = utils.tempdir()
path_lib = temp.relpath("deploy_lib.tar")
lib.export_library(path_lib)
print(temp.listdir())
loaded_lib = tvm.runtime.load_module(path_lib)
input_data = tvm.nd.array(data)
module = graph_executor.GraphModule(loaded_lib["default"](dev))
module.run(data=input_data)
out_deploy = module.get_output(0).numpy()
tvm.testing.assert_allclose(out_deploy, out, atol=1e-5)
# legacy triple
with tvm.transform.PassContext(opt_level=3):
    graph, lib2, params2 = relay.build(mod, target, params=params)
m2 = graph_executor.create(graph, lib2, dev)
m2.set_input(**params2)
m2.set_input("data", data)
m2.run()
tvm.testing.assert_allclose(m2.get_output(0).numpy(), out, atol=1e-5)
print(module.benchmark(dev, number=2, repeat=2))
print("OK")
