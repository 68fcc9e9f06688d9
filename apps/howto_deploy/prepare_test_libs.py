"""Build the models that cpp_deploy runs, and Python's answers to compare with.

    python prepare_test_libs.py OUT_DIR [--model mlp|resnet]

writes into OUT_DIR:
  deploy_graph.so    the model for the graph executor (export_library)
  deploy_aot.so      the same model for the AOT executor
  deploy_sys.o       its kernels as an object, registered in the system library at start-up
  deploy_graph.json  the graph of deploy_sys.o, and deploy.params its params
  input.bin          an input (float32, raw bytes) and expected.bin Python's output for it
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import ember
from ember import relay
from ember.relay import testing
from ember.relay.backend import Executor, Runtime


def workload(name: str) -> tuple[ember.IRModule, dict, tuple[int, ...]]:
    if name == "resnet":
        mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1,
                                                  image_shape=(3, 32, 32))
        return mod, params, (1, 3, 32, 32)
    mod, params = testing.mlp.get_workload(batch_size=1)
    return mod, params, (1, 1, 28, 28)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--model", default="mlp", choices=("mlp", "resnet"))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    def path(name: str) -> str:
        return os.path.join(args.out_dir, name)

    mod, params, shape = workload(args.model)

    graph = relay.build(mod, "llvm", params=params)
    graph.export_library(path("deploy_graph.so"))
    relay.build(mod, "llvm", params=params, executor=Executor("aot")).export_library(
        path("deploy_aot.so"))
    syslib = relay.build(mod, "llvm", params=params, runtime=Runtime("cpp", {"system-lib": True}))
    syslib.get_lib().save(path("deploy_sys.o"))
    with open(path("deploy_graph.json"), "w") as f:
        f.write(syslib.get_graph_json())
    with open(path("deploy.params"), "wb") as f:
        f.write(ember.runtime.save_param_dict(syslib.get_params()))

    data = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    data.tofile(path("input.bin"))
    m = graph["default"](ember.cpu(0))
    m.set_input("data", data)
    m.run()
    m.get_output(0).numpy().tofile(path("expected.bin"))


if __name__ == "__main__":
    main()
