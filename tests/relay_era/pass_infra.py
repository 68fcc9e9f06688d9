# "How to Use TVM Pass Infra" (Relay era). One change: ember has no
# relay.op.register_alter_op_layout hook (its AlterOpLayout plans blocked conv layouts itself),
# so the tutorial's alter_conv2d is defined but not registered.
import numpy as np
import ember as tvm
import ember.relay as relay

def example():
    shape = (1, 64, 54, 54)
    c_data = np.empty(shape).astype("float32")
    c = relay.const(c_data)
    weight = relay.var("weight", shape=(64, 64, 3, 3))
    x = relay.var("x", relay.TensorType((1, 64, 56, 56), "float32"))
    conv = relay.nn.conv2d(x, weight)
    y = relay.add(c, c)
    y = relay.multiply(y, relay.const(2, "float32"))
    y = relay.add(conv, y)
    z = relay.add(y, c)
    z1 = relay.add(y, c)
    z2 = relay.add(z, z1)
    return relay.Function([x, weight], z2)

def alter_conv2d(attrs, inputs, tinfos, out_type):
    data, weight = inputs
    new_attrs = dict(attrs)
    new_attrs["data_layout"] = "NCHW16c"
    return relay.nn.conv2d(data, weight, **new_attrs)

f = example()
mod = tvm.IRModule.from_expr(f)
fold_const = relay.transform.FoldConstant()
mod = fold_const(mod)
print(mod)
mod = relay.transform.EliminateCommonSubexpr()(mod)
print(mod)
mod = relay.transform.FuseOps(fuse_opt_level=0)(mod)
print(mod)
f = example()
mod = tvm.IRModule.from_expr(f)
seq = tvm.transform.Sequential([relay.transform.FoldConstant(), relay.transform.EliminateCommonSubexpr(), relay.transform.FuseOps(fuse_opt_level=2)])
mod1 = seq(mod)
print(mod1)
with tvm.transform.PassContext(opt_level=3):
    mod2 = seq(mod)
print(mod2)
with tvm.transform.PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]):
    mod3 = seq(mod)
print(mod3)
with tvm.transform.PassContext(opt_level=3):
    mod4 = seq(mod)
print(mod4)
seq1 = tvm.transform.Sequential([relay.transform.AlterOpLayout()])
with tvm.transform.PassContext(opt_level=3):
    with tvm.target.Target("llvm"):
        mod5 = seq1(mod)
print(mod5)

@relay.transform.function_pass(opt_level=1)
class CustomPipeline:
    """Simple test function to replace one argument to another."""
    def __init__(self, multiplier):
        self.multiplier = multiplier
    def transform_function(self, func, mod, ctx):
        obj = self
        class ReplaceConstant(tvm.relay.ExprMutator):
            def visit_constant(self, c):
                return relay.multiply(obj.multiplier, c)
        return ReplaceConstant().visit(func)

f = example()
mod = tvm.IRModule.from_expr(f)
custom_pass = CustomPipeline(multiplier=relay.const(3, "float32"))
assert custom_pass.info.name == "CustomPipeline"
mod3 = custom_pass(mod)
print(mod3)
f = example()
mod = tvm.IRModule.from_expr(f)
seq = tvm.transform.Sequential([relay.transform.FoldConstant(), tvm.transform.PrintIR(),
    relay.transform.EliminateCommonSubexpr(), relay.transform.FuseOps(), tvm.transform.PrintIR()])
with tvm.transform.PassContext(opt_level=3):
    mod = seq(mod)

@tvm.instrument.pass_instrument
class PrintIR:
    """Print the name of the pass, the IR, only before passes execute."""
    def run_before_pass(self, mod, info):
        print("Running pass: {}", info)
        print(mod)

with tvm.transform.PassContext(opt_level=3, instruments=[PrintIR()]):
    with tvm.target.Target("llvm"):
        mod = seq(mod)
print(mod)
print("OK")
