"""Linked params for the graph executor (``Executor("graph", {"link-params": True})``).

The params become ``static const`` arrays in the library (section ``.rodata.tvm``, aligned to
16 bytes or their element size), and the library gains the PackedFunc
``_lookup_linked_param(name, tensor)``: it copies the param called ``name`` into ``tensor``
and returns 1, or returns 0 for a name that is not a linked param (an ordinary input). The
graph executor calls it for each of its inputs when it is created, so the factory carries no
params and a library exported alone still runs. A copy, not a pointer into the library: the
executor's entries are writable (``set_input`` may overwrite a param), read-only data is not.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..c_literals import c_string, rodata_array

LOOKUP_LINKED_PARAM = "_lookup_linked_param"  # TVM's symbol name
ALIGNMENT = 16


def linked_params_source(params: Mapping[str, Any], prefix: str) -> str:
    """The C of the linked arrays and of ``_lookup_linked_param`` for ``params``
    (name -> NDArray); ``prefix`` (``tvmgen_<mod>``) names the arrays."""
    lines = ["/* Linked params (graph executor): copied into the executor by "
             f"{LOOKUP_LINKED_PARAM}. */"]
    table = []
    for k, (name, value) in enumerate(params.items()):
        data = value.numpy().tobytes()
        align = max(ALIGNMENT, value.numpy().dtype.itemsize)
        var = f"{prefix}_linked_param_{k}"
        lines += [f"/* {name}: {value.dtype}{list(value.shape)} */",
                  *rodata_array(var, data, align)]
        table.append(f"  {{{c_string(name)}, {var}, {len(data)}ULL}},")
    lines += [f"static const struct {{ const char* name; const unsigned char* data; uint64_t "
              f"nbytes; }} {prefix}_linked_params[] = {{", *table,
              "  {NULL, NULL, 0ULL}", "};", "", _LOOKUP.format(p=prefix, f=LOOKUP_LINKED_PARAM)]
    return "\n".join(lines)


_LOOKUP = r"""TVM_DLL int32_t {f}(TVMValue* args, int* type_codes, int num_args,
                              TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle) {{
  const char* name;
  DLTensor* dst;
  uint64_t nbytes = 1, i;
  int k, d;
  (void)resource_handle;
  if (num_args != 2 || type_codes[0] != kTVMStr ||
      (type_codes[1] != kTVMDLTensorHandle && type_codes[1] != kTVMNDArrayHandle)) {{
    TVMPackedFuncSetLastError("{f}: expected (name: str, destination: tensor)");
    return -1;
  }}
  name = args[0].v_str;
  dst = (DLTensor*)args[1].v_handle;
  out_ret_value->v_int64 = 0;
  *out_ret_tcode = kTVMArgInt;
  for (k = 0; {p}_linked_params[k].name != NULL; ++k) {{
    const char* a = {p}_linked_params[k].name;
    const char* b = name;
    while (*a != '\0' && *a == *b) {{ ++a; ++b; }}
    if (*a != *b) continue;
    for (d = 0; d < dst->ndim; ++d) nbytes *= (uint64_t)dst->shape[d];
    nbytes *= (uint64_t)((dst->dtype.bits * dst->dtype.lanes + 7) / 8);
    if (dst->data == NULL || nbytes != {p}_linked_params[k].nbytes) {{
      TVMPackedFuncSetLastError("{f}: the destination tensor does not match the linked param");
      return -1;
    }}
    for (i = 0; i < nbytes; ++i) {{
      ((uint8_t*)dst->data + dst->byte_offset)[i] = {p}_linked_params[k].data[i];
    }}
    out_ret_value->v_int64 = 1;
    return 0;
  }}
  return 0;
}}"""
