"""The unified metadata of an AOT build (RFC 0046), filled from the compiled program.

One :class:`~ember.runtime.aot_format.ModelMetadata` is written three ways: as JSON (the
factory's executor config, and the string the library's ``tvmgen_<mod>_get_metadata``
PackedFunc returns), as a C struct ``tvmgen_<mod>_metadata`` (the RFC's ``Metadata`` /
``FunctionInfo`` / ``ParameterInfo``, defined in the generated source, its types in the
generated header) and as size macros in ``tvmgen_<mod>.h`` (``interface.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....runtime.aot_format import ConstantInfo, FunctionInfo, ModelMetadata
from ....tir.codegen_c import STACK_LIMIT
from ....tir.expr import IntImm, PrimExpr
from ....tir.functor import post_order
from ....tir.simplify import simplify
from ....tir.stmt import Allocate
from ..c_literals import c_string
from .calling_convention import AotOptions
from .codegen import AotProgram, itemsize

# The C types of the RFC's structures; the guard lets several models' headers share them.
METADATA_TYPES = """\
#ifndef EMBER_AOT_METADATA_TYPES_
#define EMBER_AOT_METADATA_TYPES_
/* One argument of run_model (RFC 0046 ParameterInfo). */
struct TVMParameterInfo {
  const char* relay_name_hint;
  const char* tir_name_hint;
  const int64_t* shape;
  int64_t ndim;
  DLDataType dtype;
};
/* A generated executor function: inputs, then outputs, and its sizes in bytes. */
struct TVMFunctionInfo {
  const char* function_name;
  const struct TVMParameterInfo* params;
  int32_t num_inputs;
  int32_t num_outputs;
  int64_t workspace_size_bytes;
  int64_t io_size_bytes;
  int64_t constant_size_bytes;
};
/* A memory pool of the model (USMP workspace pool, or constant pool): name, size in bytes. */
struct TVMPoolInfo {
  const char* pool_name;
  int64_t size_bytes;
};
/* A linked constant in a constant pool (TVM's TVMConstantInfo): where and how long. */
struct TVMConstantInfo {
  const char* name_hint;
  const char* pool_name;
  int64_t byte_offset;
  int64_t data_len;
};
/* The model: format version, functions, name (RFC 0046 Metadata), then its pools. */
struct TVMMetadata {
  int32_t version;
  const struct TVMFunctionInfo* functions;
  int32_t num_functions;
  const char* module_name;
  const struct TVMPoolInfo* workspace_pools;
  int32_t num_workspace_pools;
  const struct TVMPoolInfo* constant_pools;
  int32_t num_constant_pools;
  const struct TVMConstantInfo* pooled_constants;
  int32_t num_pooled_constants;
};
#endif  /* EMBER_AOT_METADATA_TYPES_ */"""

OPERATOR_WORKSPACE = "operator_workspace_bytes"  # memory key: the largest scratch (USMP)


def pool_memory_key(kind: str, pool: str) -> str:
    """The ``memory`` key of a pool's figure: ``"workspace_pool.<pool>.operator_workspace_bytes"``
    (its largest operator scratch) or ``"constant_pool.<pool>.planned_bytes"`` (its size).
    Flat integer keys, so that the metadata JSON keeps them through the runtime's reader."""
    what = OPERATOR_WORKSPACE if kind == "workspace_pool" else "planned_bytes"
    return f"{kind}.{pool}.{what}"


def kernel_workspace_bytes(prim_func: Any) -> int:
    """Bytes a kernel takes from TVMBackendAllocWorkspace, at most (its large buffers; the
    small ones live on the stack). An upper bound: nested and sequential blocks are summed."""
    total = 0
    for node in post_order(prim_func.body):
        if not isinstance(node, Allocate):
            continue
        count: PrimExpr = IntImm("int64", 1)
        for d in node.buffer.shape:
            count = count * d
        n = simplify(count)
        if isinstance(n, IntImm) and n.value * itemsize(node.buffer.dtype) > STACK_LIMIT:
            total += n.value * itemsize(node.buffer.dtype) + 64  # + an allocator's alignment
    return total


def build_metadata(program: AotProgram, opts: AotOptions, mod_name: str) -> ModelMetadata:
    """The metadata of ``program`` compiled with ``opts`` for module ``mod_name``."""
    params = tuple(program.inputs + program.outputs)
    io_bytes = sum(p.nbytes for p in params)
    run_model = FunctionInfo(program.run_model.name, params, len(program.inputs),
                             len(program.outputs), program.arena.total, io_bytes,
                             program.constant_pool_bytes)
    constants = tuple(ConstantInfo(c.name, tuple(c.value.shape), c.value.dtype, c.offset)
                      for c in program.constants)
    workspaces = {name: low.workspace_bytes for name, low in program.kernels.items()}
    operators = tuple({"function_name": name, "workspace_size_bytes": ws}
                      for name, ws in workspaces.items())
    memory = {"planned_bytes": program.arena.total, "lower_bound": program.arena.lower_bound,
              "total_bytes": program.intermediate_bytes,
              "backend_workspace_bytes": max(workspaces.values(), default=0)}
    plan = program.pool_plan
    pools = () if plan is None else tuple(u.as_dict() for u in plan.pools)
    if plan is not None:  # USMP: the kernels' scratch lives in the pools
        memory[OPERATOR_WORKSPACE] = max(program.scratch_by_pool.values(), default=0)
        for q in pools:
            key = pool_memory_key("workspace_pool", q["pool_name"])
            memory[key] = program.scratch_by_pool.get(q["pool_name"], 0)
    for cp in program.constant_pools:
        memory[pool_memory_key("constant_pool", cp["pool_name"])] = cp["planned_bytes"]
    return ModelMetadata(mod_name, program.prefix, (run_model,), opts.interface_api,
                         opts.unpacked_api, opts.link_params, opts.operator_convention,
                         opts.workspace_alignment, opts.constant_alignment, constants,
                         operators, memory, pools=pools,
                         use_workspace_io=program.io_locations is not None)


@dataclass(frozen=True)
class _Tables:
    lines: list[str]
    fields: str  # the pool members of the TVMMetadata initialiser


def _pool_tables(meta: ModelMetadata, constant_pools: list[dict[str, Any]]) -> _Tables:
    """The static arrays of workspace pools, constant pools and pooled constants (NULL, 0
    where there are none: ISO C has no empty arrays)."""
    p = meta.prefix
    rows = {"workspace_pools": [f"{{{c_string(q['pool_name'])}, {q['planned_bytes']}LL}}"
                                for q in meta.pools],
            "constant_pools": [f"{{{c_string(q['pool_name'])}, {q['planned_bytes']}LL}}"
                               for q in constant_pools],
            "pooled_constants": [f"{{{c_string(c['name_hint'])}, {c_string(q['pool_name'])}, "
                                 f"{c['byte_offset']}LL, {c['data_len']}LL}}"
                                 for q in constant_pools for c in q["constants"]]}
    types = {"workspace_pools": "TVMPoolInfo", "constant_pools": "TVMPoolInfo",
             "pooled_constants": "TVMConstantInfo"}
    lines, fields = [], []
    for key, items in rows.items():
        if not items:
            fields.append("NULL, 0")
            continue
        lines += [f"static const struct {types[key]} {p}_{key}[] = {{",
                  *[f"  {r}," for r in items], "};"]
        fields.append(f"{p}_{key}, {len(items)}")
    return _Tables(lines, ", ".join(fields))


def c_metadata(meta: ModelMetadata, constant_pools: list[dict[str, Any]] | None = None) -> str:
    """C definitions of ``<prefix>_metadata`` (the struct, with its workspace pools and the
    ``constant_pools`` of the program) and the JSON getter PackedFunc."""
    constant_pools = constant_pools or []
    p = meta.prefix
    lines = []
    main = meta.main
    for i, param in enumerate(main.params):
        dims = ", ".join(f"{d}LL" for d in param.shape) or "0"
        lines.append(f"static const int64_t {p}_shape_{i}[] = {{{dims}}};")
    lines.append(f"static const struct TVMParameterInfo {p}_params[] = {{")
    for i, param in enumerate(main.params):
        code, bits = _dl_type(param.dtype)
        lines.append(f"  {{{c_string(param.relay_name_hint)}, {c_string(param.tir_name_hint)}, "
                     f"{p}_shape_{i}, {len(param.shape)}, {{{code}, {bits}, 1}}}},")
    lines += ["};", f"static const struct TVMFunctionInfo {p}_functions[] = {{",
              (f"  {{{c_string(main.function_name)}, {p}_params, {main.num_inputs}, "
              f"{main.num_outputs}, {main.workspace_size_bytes}LL, {main.io_size_bytes}LL, "
              f"{main.constant_size_bytes}LL}},"), "};"]
    tables = _pool_tables(meta, constant_pools)
    lines += tables.lines
    lines += [(f"TVM_DLL const struct TVMMetadata {p}_metadata = {{{meta.version}, {p}_functions, "
              f"1, {c_string(meta.module_name)}, {tables.fields}}};"), "",
              "/* The same metadata as JSON, for hosts: a PackedFunc returning a string. */",
              f"static const char {p}_metadata_json[] =",
              "  " + c_string(meta.to_json()) + ";",
              (f"TVM_DLL int32_t {p}_get_metadata(TVMValue* args, int* type_codes, int num_args, "
              "TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle) {"),
              "  (void)args; (void)type_codes; (void)num_args; (void)resource_handle;",
              f"  out_ret_value->v_str = {p}_metadata_json;",
              "  *out_ret_tcode = kTVMStr;", "  return 0;", "}"]
    return "\n".join(lines)


def _dl_type(dtype: str) -> tuple[int, int]:
    from ....tir.codegen_packed import dl_type

    return dl_type(dtype)
