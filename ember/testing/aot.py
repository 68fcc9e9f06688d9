"""AOT test helpers (``tvm.testing.aot``): compile models with the AOT executor for the C
runtime, export them as Model Library Format, build a C test runner with ``make`` and check
its outputs.

    model = AOTTestModel(module=mod, inputs=inputs, outputs=generate_ref_data(mod, inputs, params),
                         params=params)
    compile_and_run(model, AOT_DEFAULT_RUNNER, interface_api="c", use_unpacked_api=True)

``compile_models`` -> ``AOTCompiledTestModel`` (the model and its AotExecutorFactoryModule);
``run_and_check`` exports each to ``<test_dir>/<name>.tar``, unpacks it to
``<test_dir>/models/<name>/``, writes ``build/test.c`` (``ember.testing._aot_c``) with the
inputs and the constant pool (params not linked) as headers, builds it with the default
Makefile (or the runner's) against the C runtime of the first MLF's ``runtime/``, runs it and
compares every output with the model's expected outputs (the dtype's tolerance from
``ember.testing.tolerance``, or ``output_tolerance`` as an absolute one). Needs a C compiler,
``make`` and ``ld``; raises TVMError naming what is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..runtime.errors import TVMError
from . import _aot_c, find_c_compiler, tolerance


class AOTTestModel(NamedTuple):
    """A model to test: its module, inputs and expected outputs (by name, in order)."""

    module: Any
    inputs: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    output_tolerance: float | None = None
    params: Mapping[str, Any] | None = None
    name: str = "default"
    pass_config: Mapping[str, Any] | None = None
    extra_memory_in_bytes: int = 0


class AOTCompiledTestModel(NamedTuple):
    """A test model and the AOT executor factory built from it."""

    model: AOTTestModel
    executor_factory: Any


class AOTTestRunner(NamedTuple):
    """How to build and run the test program: ``makefile`` ("default", or the path of a
    Makefile with the default one's variables and targets), C placed at the start
    (``prologue``) and end (``epilogue``) of ``main``, extra ``includes``, extra make
    variables (``parameters``) and PassContext config for the build (``pass_config``)."""

    makefile: str = "default"
    prologue: str = ""
    epilogue: str = ""
    includes: Sequence[str] = ()
    parameters: Mapping[str, str] = {}
    pass_config: Mapping[str, Any] = {}


class AOTRunResult(NamedTuple):
    """What ``run_and_check`` saw: outputs per model name, the runner's stdout, the build
    directory (gone unless ``test_dir`` was given), and ``bench`` seconds per run by model
    name (with ``-DAOT_BENCH_REPEAT=R -DAOT_BENCH_NUMBER=N`` in the runner's ``TEST_CFLAGS``
    parameter: the best of R batches of N runs)."""

    outputs: dict[str, list[np.ndarray]]
    stdout: str
    build_dir: str
    bench: dict[str, float]


def _output_names(main: Any, count: int) -> list[str]:
    names = main.attrs.get("output_tensor_names") if getattr(main, "attrs", None) else None
    if names:
        return [str(n) for n in names]
    return ["output"] if count == 1 else [f"output{i}" for i in range(count)]


def generate_ref_data(mod: Any, input_data: Mapping[str, Any], params: Mapping[str, Any] | None
                      = None, target: str = "llvm") -> dict[str, np.ndarray]:
    """The outputs of ``mod`` for ``input_data`` by the graph executor (by the reference
    interpreter when the graph executor refuses the model), named ``output`` (one output)
    or ``output0``, ``output1``... unless main has ``output_tensor_names``."""
    from .. import relay
    from ..contrib.graph_executor import GraphModule
    from ..ir import IRModule
    from ..ir.transform import PassContext
    from ..runtime.device import cpu

    if not isinstance(mod, IRModule):
        mod = IRModule.from_expr(mod)
    try:
        with PassContext(opt_level=3):
            factory = relay.build(mod, target=target, params=params)
    except TVMError:
        return _interpreter_ref(mod, input_data, params)
    graph = GraphModule(factory["default"](cpu(0)))
    graph.set_input(**input_data)
    graph.run()
    count = graph.get_num_outputs()
    outs = [graph.get_output(i).numpy() for i in range(count)]
    return dict(zip(_output_names(mod["main"], count), outs, strict=True))


def _interpreter_ref(mod: Any, input_data: Mapping[str, Any], params: Mapping[str, Any] | None
                     ) -> dict[str, np.ndarray]:
    from .. import relay

    value = relay.create_executor("debug", mod=mod).evaluate()(**input_data, **(params or {}))
    flat: list[np.ndarray] = []

    def walk(v: Any) -> None:
        if hasattr(v, "fields"):
            for f in v.fields:
                walk(f)
        else:
            flat.append(v.numpy() if hasattr(v, "numpy") else np.asarray(v))

    walk(value)
    return dict(zip(_output_names(mod["main"], len(flat)), flat, strict=True))


def compile_models(models: AOTTestModel | Sequence[AOTTestModel], interface_api: str,
                   use_unpacked_api: bool, workspace_byte_alignment: int = 8,
                   constant_byte_alignment: int = 8, enable_op_fusion: bool = True,
                   pass_config: Mapping[str, Any] | None = None, use_runtime_executor: bool = True,
                   target: Any = "c", workspace_memory_pools: Any = None,
                   constant_memory_pools: Any = None, schedule_name: str | None = None,
                   link_params: bool = True) -> list[AOTCompiledTestModel]:
    """Build each model with ``Executor("aot")`` for ``Runtime("crt")``.

    ``use_runtime_executor=False`` gives the same options as target-string flags
    (``-executor=aot -interface-api=...``); ``enable_op_fusion=False`` fuses nothing
    (``relay.FuseOps.max_depth = 1``). ``link_params`` (ember's addition) puts the params in the
    C as static arrays; otherwise the runner hands the model a constant pool.
    ``schedule_name`` is accepted for compatibility (ember picks schedules itself); memory
    pools go to ``relay.build`` (they need ``"tir.usmp.enable"`` in ``pass_config``), and the
    runner then provides the workspace pools as static buffers.
    """
    from .. import relay
    from ..ir.transform import PassContext
    from ..relay.backend import Executor, Runtime

    items = [models] if isinstance(models, AOTTestModel) else list(models)
    pools = {"workspace_memory_pools": workspace_memory_pools,
             "constant_memory_pools": constant_memory_pools}
    options = {"workspace-byte-alignment": workspace_byte_alignment,
               "constant-byte-alignment": constant_byte_alignment,
               "interface-api": interface_api, "unpacked-api": bool(use_unpacked_api),
               "link-params": bool(link_params)}
    compiled = []
    for model in items:
        config = {**(pass_config or {}), **(model.pass_config or {})}
        if not enable_op_fusion:
            config["relay.FuseOps.max_depth"] = 1
        with PassContext(opt_level=3, config=config):
            if use_runtime_executor:
                factory = relay.build(model.module, target, executor=Executor("aot", options),
                                      runtime=Runtime("crt"), params=model.params,
                                      mod_name=model.name, **pools)
            else:
                flags = (f" -executor=aot -runtime=c -interface-api={interface_api}"
                         f" -unpacked-api={int(bool(use_unpacked_api))}"
                         f" -workspace-byte-alignment={workspace_byte_alignment}"
                         + (" -link-params=1" if link_params else ""))
                factory = relay.build(model.module, str(target) + flags, params=model.params,
                                      mod_name=model.name, **pools)
        compiled.append(AOTCompiledTestModel(model, factory))
    return compiled


# -- building and running the C test runner --------------------------------------------------------
_BLOCK_SLACK = 4096  # crt block headers, guards and alignment padding of workspace blocks


def _runner_model(compiled: AOTCompiledTestModel) -> tuple[_aot_c.RunnerModel, int]:
    """The runner's view of one model, with its data, and the C-runtime arena it needs."""
    model, factory = compiled
    meta = factory.get_model_metadata()
    main = meta.main
    rm = _aot_c.RunnerModel(model.name, meta.prefix, meta.interface_api, list(main.inputs),
                            list(main.outputs), meta.needs_constant_pool)
    names = [p.relay_name_hint for p in main.inputs]
    unknown = sorted(set(model.inputs) - set(names))
    if unknown:
        raise TVMError(f"run_and_check: model {model.name!r} has no input named "
                       f"{', '.join(map(repr, unknown))}; its inputs are {names}")
    for i, p in enumerate(main.inputs):
        if p.relay_name_hint not in model.inputs:
            raise TVMError(f"run_and_check: model {model.name!r}: no value for input "
                           f"{p.relay_name_hint!r} ({p.dtype}{list(p.shape)})")
        arr = np.asarray(model.inputs[p.relay_name_hint])
        if arr.shape != tuple(p.shape) or str(arr.dtype) != p.dtype:
            raise TVMError(f"run_and_check: model {model.name!r}: input {p.relay_name_hint!r} "
                           f"is {arr.dtype}{list(arr.shape)}, expected {p.dtype}{list(p.shape)}")
        rm.arrays.append((rm.input_var(i), arr, f"input {p.relay_name_hint}"))
    for j, p in enumerate(main.outputs):
        rm.arrays.append((rm.output_var(j), p.nbytes, f"output {j} ({p.dtype}{list(p.shape)})"))
    if meta.interface_api == "c":  # USMP: the runner provides the workspace pools
        rm.pools, rm.io_in_pools = [q["pool_name"] for q in meta.pools], meta.use_workspace_io
        rm.arrays += [(rm.pool_var(q["pool_name"]), q["planned_bytes"],
                       f"workspace pool {q['pool_name']}") for q in meta.pools]
    if rm.constant_pool:
        pool = np.zeros(meta.constant_pool_bytes, np.uint8)
        params = factory.get_params()
        for c in meta.constants:
            data = np.frombuffer(params[c.name].numpy().tobytes(), np.uint8)
            pool[c.offset:c.offset + data.size] = data
        rm.arrays.append((f"{meta.prefix}_constants", pool, "the constant pool"))
    arena = meta.memory.get("backend_workspace_bytes", 0) + model.extra_memory_in_bytes
    if meta.interface_api == "packed":  # its entry takes the arena from the C runtime
        arena += main.workspace_size_bytes + meta.workspace_alignment
    return rm, arena + _BLOCK_SLACK


def _tool(name: str, found: str | None) -> str:
    if not found:
        raise TVMError(f"run_and_check: no {name} found; the AOT test runner is built with a C "
                       "compiler, make and ld")
    return found


def _run(cmd: list[str], cwd: str, log: Path, what: str, verbose: bool) -> str:
    proc = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=600)
    log.write_text(proc.stdout + proc.stderr)
    if verbose:
        print(" ".join(cmd), "\n", proc.stdout, proc.stderr, sep="")
    if proc.returncode != 0:
        raise TVMError(f"run_and_check: {what} failed (exit status {proc.returncode}); log in "
                       f"{log}\ncommand: {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout


def _makefile(runner: AOTTestRunner, build: Path) -> Path:
    if runner.makefile == "default":
        path = build / "default.mk"
        path.write_text(_aot_c.DEFAULT_MAKEFILE)
        return path
    if os.path.isfile(runner.makefile):
        return Path(runner.makefile)
    raise TVMError(f"AOTTestRunner: makefile {runner.makefile!r} is not available in ember: use "
                   "'default' or the path of a Makefile")


def _compare(compiled: AOTCompiledTestModel, got: dict[int, bytes]) -> list[np.ndarray]:
    model, factory = compiled
    outs = factory.get_model_metadata().main.outputs
    expected = list(model.outputs.values())
    if len(expected) != len(outs):
        raise AssertionError(f"model {model.name!r} has {len(outs)} outputs, the test expects "
                             f"{len(expected)}")
    result = []
    for j, (p, want) in enumerate(zip(outs, expected, strict=True)):
        if j not in got:
            raise AssertionError(f"model {model.name!r}: the runner printed no output {j}")
        arr = np.frombuffer(got[j], dtype=p.dtype).reshape(p.shape)
        tol = ({"rtol": 0.0, "atol": model.output_tolerance} if model.output_tolerance is not None
               else tolerance(p.dtype))
        np.testing.assert_allclose(arr, np.asarray(want), rtol=tol["rtol"], atol=tol["atol"],
                                   err_msg=f"model {model.name!r}, output {j}")
        result.append(arr)
    return result


def run_and_check(models: AOTCompiledTestModel | Sequence[AOTCompiledTestModel],
                  runner: AOTTestRunner, interface_api: str,
                  debug_calculated_workspaces: bool = False, workspace_byte_alignment: int = 8,
                  constant_byte_alignment: int = 8, data_linkage: Any = None,
                  test_dir: str | None = None, verbose: bool = False,
                  use_workspace_io: bool = False, debug_last_error: bool = False,
                  checker: Callable[[str], bool] | None = None) -> AOTRunResult:
    """Export, build, run and compare (see the module doc). ``debug_calculated_workspaces``
    prints the arena size given to the C runtime; ``checker(test_dir)`` may inspect the files
    before the build (False fails the test). ``data_linkage``, ``use_workspace_io`` and
    ``debug_last_error`` are accepted for compatibility (data are 64-byte aligned globals;
    a failing call always prints the runtime's last error). Raises AssertionError on a wrong
    output, TVMError when a build step or the program fails (with its log)."""
    items = [models] if isinstance(models, AOTCompiledTestModel) else list(models)
    cc = _tool("C compiler", find_c_compiler())
    make = _tool("make", shutil.which("make"))
    from ..contrib.utils import tempdir

    tmp = None if test_dir else tempdir()
    base = Path(test_dir or tmp.path)  # type: ignore[union-attr]
    build = base / "build"
    (build / "include").mkdir(parents=True, exist_ok=True)
    root = base / "models"
    runner_models, arena = [], 0
    for compiled in items:
        if compiled.executor_factory.get_model_metadata().interface_api != interface_api:
            raise TVMError(f"run_and_check: model {compiled.model.name!r} was built with another "
                           f"interface-api than {interface_api!r}")
        _unpack(compiled, base, root)
        rm, need = _runner_model(compiled)
        runner_models.append(rm)
        arena = max(arena, need)
        (build / "include" / f"{rm.prefix}_data.h").write_text(
            _aot_c.data_header(f"{rm.prefix.upper()}_DATA_H_", rm.arrays, build / "include"))
    if debug_calculated_workspaces:
        print(f"run_and_check: C runtime arena of {arena} bytes")
    (build / "test.c").write_text(_aot_c.test_main(runner_models, arena, runner.includes,
                                                   runner.prologue, runner.epilogue))
    if checker is not None and not checker(str(base)):
        raise AssertionError(f"run_and_check: the checker rejected {base}")
    crt = root / items[0].model.name / "runtime"
    cmd = [make, "-f", str(_makefile(runner, build)), f"build_dir={build}", f"CC={cc}",
           f"CODEGEN_ROOT={root}", f"STANDALONE_CRT_DIR={crt}",
           *[f"{k}={v}" for k, v in runner.parameters.items()]]
    _run(cmd + ["aot_test_runner"], str(base), build / "test_compile.log", "building the runner",
         verbose)
    out = _run([str(build / "aot_test_runner")], str(build), build / "test_run.log",
               "the test runner", verbose)
    if _aot_c.SUCCESS_TOKEN not in out:
        raise TVMError(f"run_and_check: the runner did not print {_aot_c.SUCCESS_TOKEN}:\n{out}")
    printed = _aot_c.parse_outputs(out)
    outputs = {c.model.name: _compare(c, printed.get(rm.prefix, {}))
               for c, rm in zip(items, runner_models, strict=True)}
    bench = {c.model.name: float(line.split()[2]) for line in out.splitlines()
             for c, rm in zip(items, runner_models, strict=True)
             if line.startswith(f"bench {rm.prefix} ")}
    return AOTRunResult(outputs, out, str(base), bench)


def _unpack(compiled: AOTCompiledTestModel, base: Path, root: Path) -> None:
    from ..micro import export_model_library_format

    name = compiled.model.name
    tar_path = base / f"{name}.tar"
    export_model_library_format(compiled.executor_factory, tar_path)
    dest = root / name
    shutil.rmtree(dest, ignore_errors=True)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")


def compile_and_run(models: AOTTestModel | Sequence[AOTTestModel], runner: AOTTestRunner,
                    interface_api: str, use_unpacked_api: bool,
                    debug_calculated_workspaces: bool = False, workspace_byte_alignment: int = 8,
                    constant_byte_alignment: int = 8, enable_op_fusion: bool = True,
                    data_linkage: Any = None, use_runtime_executor: bool = True,
                    target: Any = "c", target_opts: Mapping[str, Any] | None = None,
                    test_dir: str | None = None, verbose: bool = False,
                    schedule_name: str | None = None, debug_last_error: bool = False,
                    checker: Callable[[str], bool] | None = None,
                    link_params: bool = True) -> AOTRunResult:
    """``compile_models`` then ``run_and_check`` (``target_opts`` are appended to the target
    as ``key=value`` flags)."""
    target = str(target) + "".join(f" {k}={v}" for k, v in (target_opts or {}).items())
    compiled = compile_models(models, interface_api, use_unpacked_api, workspace_byte_alignment,
                              constant_byte_alignment, enable_op_fusion, runner.pass_config,
                              use_runtime_executor, target, schedule_name=schedule_name,
                              link_params=link_params)
    return run_and_check(compiled, runner, interface_api, debug_calculated_workspaces,
                         workspace_byte_alignment, constant_byte_alignment, data_linkage,
                         test_dir, verbose, checker=checker)


__all__ = ["AOTCompiledTestModel", "AOTRunResult", "AOTTestModel", "AOTTestRunner",
           "compile_and_run", "compile_models", "generate_ref_data", "run_and_check"]
