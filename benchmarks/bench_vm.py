"""Cost of the VM's dispatch loop and its allocations, on hand-assembled programs.

    python benchmarks/bench_vm.py [--count N] [--repeat R] [--json PATH]

Prints microseconds per executed instruction (best of R runs) and writes the figures as
JSON (default bench_results/vm.json in the cache directory). Cases:

- ``move``: a straight line of 1000 ``move`` instructions: the bare dispatch cost;
- ``loop_inplace``: counting to N with ``if`` / ``invoke_packed`` (a scalar int64 add that
  writes in place) / ``goto``: dispatch plus one compiled-kernel call every 3 instructions;
- ``loop_alloc``: the same loop, allocating a fresh storage block and tensor for every
  result (``alloc_storage``, ``alloc_tensor``, ``move``, ``kill_register`` added: 7
  instructions per iteration), as code without memory planning does;
- ``kernel_floor``: the compiled add called directly from Python (CPackedFunc), per call.

Then, for a small model-like program (two kernels, four tensors in two storage blocks) and
the recursive ``sum``: storage requests and fresh allocations per run in steady state
(pooled allocator; fresh allocations should be 0).

With ``--compiled`` (needs the compiler and a C compiler), programs made by
``relay.vm.compile`` (``compiled_cases`` below):

- ``zoo``: VM vs graph executor latency on static zoo models (resnet-18 at 224x224, mobilenet,
  mlp; best of R runs each), the VM's overhead in percent, and the VM's storage requests and
  fresh allocations per inference in steady state;
- ``loop``: a compiled ``while_loop`` (scalar compare + add per iteration, recursion through a
  lifted closure): microseconds per iteration and per executed instruction (instructions
  counted by an instrumented VM; each iteration also runs one ``invoke`` and one ``ret``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path  # noqa: E402
import ember  # noqa: E402
from ember.runtime.module import CSourceModule  # noqa: E402
from ember.runtime.vm import Executable, VirtualMachine  # noqa: E402

C_SOURCE = r"""
#include "ember/c_backend_api.h"

/* out = a + b for int64 tensors (checks the argument count and type codes, as generated
   code does) */
TVM_DLL int add_i64(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  int64_t i, len = 1;
  const DLTensor* a;
  if (n != 3) { TVMPackedFuncSetLastError("add_i64: expected 3 arguments"); return -1; }
  for (i = 0; i < 3; ++i)
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
      TVMPackedFuncSetLastError("add_i64: expected tensors");
      return -1;
    }
  a = (const DLTensor*)args[0].v_handle;
  for (i = 0; i < a->ndim; ++i) len *= a->shape[i];
  for (i = 0; i < len; ++i)
    ((int64_t*)((DLTensor*)args[2].v_handle)->data)[i] =
        ((int64_t*)a->data)[i] + ((int64_t*)((DLTensor*)args[1].v_handle)->data)[i];
  return 0;
}
"""

MOVES = "main(x):\n" + "    move $1 $0\n" * 1000 + "    ret $1\n"

LOOP_INPLACE = """
main(n):
    load_consti $1 1
    load_consti $2 8
    alloc_storage $3 $2 64 int64 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [] int64
    invoke_packed PackedFunc[0] (in: $4, $4, out: $5)
loop:
    if $5 $0 @done @body
body:
    invoke_packed PackedFunc[0] (in: $5, $1, out: $5)
    goto @loop
done:
    ret $5
"""

LOOP_ALLOC = """
main(n):
    load_consti $1 0
    load_consti $2 1
    load_consti $3 8
    move $4 $1
loop:
    if $4 $0 @done @body
body:
    alloc_storage $5 $3 64 int64 0
    alloc_tensor $6 $5 $1 [] int64
    invoke_packed PackedFunc[0] (in: $4, $2, out: $6)
    move $4 $6
    kill_register $5
    goto @loop
done:
    ret $4
"""

MODEL = """
main(x, y):
    load_consti $2 4096
    alloc_storage $3 $2 64 int64 0
    load_consti $4 0
    load_consti $5 2048
    alloc_tensor $6 $3 $4 [256] int64
    alloc_tensor $7 $3 $5 [256] int64
    invoke_packed PackedFunc[0] (in: $0, $1, out: $6)
    invoke_packed PackedFunc[0] (in: $6, $1, out: $7)
    alloc_storage $8 $5 64 int64 0
    alloc_tensor $9 $8 $4 [256] int64
    invoke_packed PackedFunc[0] (in: $7, $6, out: $9)
    alloc_data $10 tag(0) [$9, $6]
    ret $10
"""

SUM = """
sum(n):
    load_consti $1 0
    if $0 $1 @base @step
base:
    ret $1
step:
    load_consti $2 -1
    load_consti $3 8
    alloc_storage $4 $3 64 int64 0
    alloc_tensor $5 $4 $1 [] int64
    invoke_packed PackedFunc[0] (in: $0, $2, out: $5)
    invoke $6 VMFunc[0]($5)
    alloc_storage $7 $3 64 int64 0
    alloc_tensor $8 $7 $1 [] int64
    invoke_packed PackedFunc[0] (in: $0, $6, out: $8)
    ret $8
"""


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def allocations(vm: VirtualMachine, args: tuple[object, ...], func: str) -> dict[str, float]:
    """Requests and fresh allocations per run, measured over 10 runs after 3 warm-up runs."""
    for _ in range(3):
        vm.invoke(func, *args)
    before = dict(vm.allocator.stats())
    for _ in range(10):
        vm.invoke(func, *args)
    after = vm.allocator.stats()
    return {k: (after[k] - before[k]) / 10 for k in ("requests", "fresh_allocations")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="loop iterations (N)")
    parser.add_argument("--repeat", type=int, default=7, help="runs per case (the best is kept)")
    default_json = results_path("vm.json")
    parser.add_argument("--json", default=str(default_json), help="where to write results")
    parser.add_argument("--compiled", action="store_true",
                        help="also time programs compiled by relay.vm.compile (zoo, loop)")
    parser.add_argument("--models", nargs="*", default=["resnet", "mobilenet", "mlp"])
    opts = parser.parse_args()

    lib, cpu, n = CSourceModule(C_SOURCE), ember.cpu(), np.int64(opts.count)

    def make(text: str) -> VirtualMachine:
        return VirtualMachine(Executable.from_functions(text, primitive_ops=["add_i64"],
                                                        lib=lib), cpu)

    one = ember.nd.array(np.int64(1))
    vms = {name: make(text) for name, text in
           (("move", MOVES), ("loop_inplace", LOOP_INPLACE), ("loop_alloc", LOOP_ALLOC))}
    # (run, instructions executed per run)
    cases = {"move": (lambda: vms["move"].run(one), 1001),
             "loop_inplace": (lambda: vms["loop_inplace"].run(n), 6 + 3 * opts.count + 2),
             "loop_alloc": (lambda: vms["loop_alloc"].run(n), 4 + 7 * opts.count + 2)}
    add, a, b = lib["add_i64"], ember.nd.array(np.int64(1)), ember.nd.array(np.int64(2))
    kernel = best_seconds(lambda: [add(a, b, a) for _ in range(10_000)], opts.repeat) / 1e4
    results = {name: best_seconds(run, opts.repeat) / count * 1e6
               for name, (run, count) in cases.items()}
    results["kernel_floor"] = kernel * 1e6
    args = (ember.nd.array(np.arange(256, dtype="int64")), ember.nd.array(np.ones(256, "int64")))
    allocs = {"model": allocations(make(MODEL), args, "main"),
              "sum(100)": allocations(make(SUM), (np.int64(100),), "sum")}

    print(f"{'case':<14} {'us/instruction':>15}")
    for name, us in results.items():
        unit = "  (per call)" if name == "kernel_floor" else ""
        print(f"{name:<14} {us:>15.3f}{unit}")
    print(f"\n{'program':<14} {'requests/run':>13} {'fresh allocs/run':>17}")
    for name, a_ in allocs.items():
        print(f"{name:<14} {a_['requests']:>13.1f} {a_['fresh_allocations']:>17.1f}")
    report = {"benchmark": "vm", "unit": "us_per_instruction", "count": opts.count,
              "repeat": opts.repeat, "python": platform.python_version(),
              "machine": platform.machine(), "results": results,
              "allocations_per_run": allocs}
    if opts.compiled:
        report["compiled"] = compiled_cases(opts.models, opts.repeat)
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open_results(opts.json) as f:
        json.dump(report, f, indent=2)
    print(f"wrote {opts.json}")



# -- programs made by the VM compiler ----------------------------------------------------------
_ZOO_ARGS = {"resnet": {"batch_size": 1, "num_layers": 18}, "mobilenet": {"batch_size": 1},
             "mlp": {"batch_size": 1}}


def _zoo(name: str, repeat: int) -> dict[str, float]:
    from ember import relay
    from ember.contrib.graph_executor import GraphModule
    from ember.relay import testing

    mod, params = getattr(testing, name).get_workload(**_ZOO_ARGS[name])
    data = {p.name_hint: ember.nd.array(np.random.default_rng(0).standard_normal(
        [int(d) for d in p.type_annotation.shape]).astype(p.type_annotation.dtype))
        for p in mod["main"].params if p.name_hint not in params}
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
        factory = relay.build(mod, target="llvm", params=params)
    graph = GraphModule(factory["default"](ember.cpu()))
    graph.set_input(**data)
    vm = VirtualMachine(exe, ember.cpu())
    vm.set_input("main", **data)
    # Interleaved, best of many: the machine is shared, and load comes in bursts.
    t_graph = t_vm = float("inf")
    for _ in range(3 + max(repeat, 10)):
        t_graph = min(t_graph, best_seconds(graph.run, 1))
        t_vm = min(t_vm, best_seconds(lambda: vm.invoke_stateful("main"), 1))
    before = dict(vm.allocator.stats())
    for _ in range(5):
        vm.invoke_stateful("main")
    after = vm.allocator.stats()
    per = {k: (after[k] - before[k]) / 5 for k in ("requests", "fresh_allocations")}
    return {"graph_ms": t_graph * 1e3, "vm_ms": t_vm * 1e3,
            "vm_overhead_percent": 100 * (t_vm - t_graph) / t_graph,
            "instructions": sum(len(f.instructions) for f in exe.functions),
            "kernels": len(exe.primitive_ops), "storage_requests_per_run": per["requests"],
            "fresh_allocations_per_run": per["fresh_allocations"]}


def _loop(repeat: int) -> dict[str, float]:
    from ember import relay
    from ember.relay.loops import while_loop

    i, acc = relay.var("i", shape=(), dtype="int32"), relay.var("acc", shape=(), dtype="int32")
    n = relay.var("n", shape=(), dtype="int32")
    loop = while_loop(lambda i, acc: relay.less(i, n), [i, acc],
                      lambda i, acc: [relay.add(i, relay.const(1, "int32")), relay.add(acc, i)])
    zero = relay.const(0, "int32")
    body = relay.TupleGetItem(relay.Call(loop, [zero, zero]), 1)
    exe = relay.vm.compile(ember.IRModule.from_expr(relay.Function([n], body)), target="llvm")

    class Counting(VirtualMachine):
        executed = 0

        def _decode(self, ins, func, pc):  # type: ignore[no-untyped-def]
            step = super()._decode(ins, func, pc)
            if step is None:
                return None

            def counted(regs, _step=step):  # type: ignore[no-untyped-def]
                Counting.executed += 1
                return _step(regs)
            return counted

    iters = (1000, 3000)
    counter = Counting(exe, ember.cpu())
    counts = []
    for k in iters:
        Counting.executed = 0
        counter.invoke("main", np.int32(k))
        counts.append(Counting.executed + 2 * k)  # + one invoke and one ret per iteration
    vm = VirtualMachine(exe, ember.cpu())
    times = [best_seconds(lambda k=k: vm.invoke("main", np.int32(k)), repeat) for k in iters]
    per_iter = (times[1] - times[0]) / (iters[1] - iters[0])
    per_ins = (times[1] - times[0]) / (counts[1] - counts[0])
    return {"us_per_iteration": per_iter * 1e6, "us_per_instruction": per_ins * 1e6,
            "instructions_per_iteration": (counts[1] - counts[0]) / (iters[1] - iters[0])}


def compiled_cases(models: list[str], repeat: int) -> dict[str, object]:
    """Figures for programs compiled by relay.vm.compile (printed and returned)."""
    zoo = {name: _zoo(name, repeat) for name in models}
    print(f"\n{'model':<10} {'graph ms':>9} {'vm ms':>9} {'vm overhead':>12} "
          f"{'requests/run':>13} {'fresh/run':>10}")
    for name, r in zoo.items():
        print(f"{name:<10} {r['graph_ms']:>9.3f} {r['vm_ms']:>9.3f} "
              f"{r['vm_overhead_percent']:>11.1f}% {r['storage_requests_per_run']:>13.1f} "
              f"{r['fresh_allocations_per_run']:>10.1f}")
    loop = _loop(repeat)
    print(f"\ncompiled while_loop: {loop['us_per_iteration']:.2f} us/iteration, "
          f"{loop['instructions_per_iteration']:.0f} instructions/iteration, "
          f"{loop['us_per_instruction']:.3f} us/instruction")
    return {"zoo": zoo, "loop": loop}


if __name__ == "__main__":
    main()
