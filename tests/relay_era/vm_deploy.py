# Compile and run with the Relay VM, save and load the executable (Relay-era API)
import numpy as np
import ember as tvm
from ember import relay
from ember.runtime import vm as vm_rt
from ember.relay import testing
from ember.contrib import utils

mod, params = testing.mlp.get_workload(batch_size=1, num_classes=10, image_shape=(1, 8, 8))
target = "llvm"
dev = tvm.cpu()
with tvm.transform.PassContext(opt_level=3):
    exe = relay.vm.compile(mod, target, params=params)
data = np.random.rand(1, 1, 8, 8).astype("float32")
vm = vm_rt.VirtualMachine(exe, dev)
out = vm.run(data).numpy()
ref = relay.create_executor("debug", mod=mod, device=dev, target=target).evaluate()(data, **params).numpy()
np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
code, lib = exe.save()
tmp = utils.tempdir()
path_lib = tmp.relpath("lib.so")
lib.export_library(path_lib)
with open(tmp.relpath("code.ro"), "wb") as fo:
    fo.write(code)
loaded_lib = tvm.runtime.load_module(path_lib)
loaded_code = bytearray(open(tmp.relpath("code.ro"), "rb").read())
des_exec = vm_rt.Executable.load_exec(loaded_code, loaded_lib)
des_vm = vm_rt.VirtualMachine(des_exec, dev)
res = des_vm.run(data)
np.testing.assert_allclose(res.numpy(), out, rtol=1e-6)
vm.set_input("main", data)
np.testing.assert_allclose(vm.invoke("main").numpy(), out, rtol=1e-6)
print(exe.bytecode[:200])
print("OK")
