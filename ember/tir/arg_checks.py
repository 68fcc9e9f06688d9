"""The argument checks of packed wrappers (``ember_fail``, ``ember_check_tensor``,
``ember_check_shape``), and where their bodies live.

A self-contained translation unit (``codegen.join_c``: Model Library Format, C source exports,
firmware) defines them ``static`` in its prelude (``HOSTED``, or ``FIRMWARE`` without stdio).
The units of a hosted build (``codegen.split_c``) only declare them (``linked_declarations``):
their bodies compile once per flag set into one more object (``checks_unit``), cached by
content like the kernel objects. Why: inlined into every packed wrapper, the checks were
about half of a model unit's compile time (resnet18's units 0.48 -> 0.25 s CPU each).

The two variants define the same names with other signatures; the firmware one renames its
functions (``ember_fail`` -> ``ember_fail_fw``) with macros in both the declaring units and its
object, so both variants may link into one library.
"""
from __future__ import annotations

import re

# Both variants: whether a tensor is dense row-major (strides absent or matching its shape).
_IS_COMPACT = r"""static int ember_is_compact(const DLTensor* t) {
  if (t->strides == NULL) return 1;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
    expect *= t->shape[i];
  }
  return 1;
}
"""

HOSTED = r"""
static int ember_fail(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  TVMPackedFuncSetLastError(msg);
  return -1;
}

static void ember_dtype_str(DLDataType t, char* out) {
  static const char* names[] = {"int", "uint", "float", "handle", "bfloat", "complex", "bool"};
  const char* n = t.code < 7 ? names[t.code] : "unknown";
  if (t.code == 6) snprintf(out, 32, "bool");
  else if (t.lanes != 1) snprintf(out, 32, "%s%dx%d", n, (int)t.bits, (int)t.lanes);
  else snprintf(out, 32, "%s%d", n, (int)t.bits);
}

static void ember_shape_str(const DLTensor* t, char* out) {
  int pos = snprintf(out, 256, "(");
  for (int i = 0; i < t->ndim && pos < 200; ++i) {
    pos += snprintf(out + pos, 256 - pos, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  }
  snprintf(out + pos, 256 - pos, t->ndim == 1 ? ",)" : ")");
}

""" + _IS_COMPACT + r"""
/* Check one tensor argument: type code, device, ndim, dtype, layout, alignment. */
static int ember_check_tensor(const char* label, int type_code, TVMValue v, int ndim, int code,
                              int bits, const char* dtype, int align, DLTensor** out) {
  if (type_code != kTVMDLTensorHandle && type_code != kTVMNDArrayHandle) {
    return ember_fail("%s: expected a tensor, got type code %d", label, type_code);
  }
  DLTensor* t = (DLTensor*)v.v_handle;
  if (t == NULL) return ember_fail("%s: expected a tensor, got NULL", label);
  if (t->device.device_type != kDLCPU) {
    return ember_fail("%s: expected a cpu tensor, got device type %d", label,
                      (int)t->device.device_type);
  }
  if (t->ndim != ndim) return ember_fail("%s: expected ndim %d, got %d", label, ndim, t->ndim);
  int ok = t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1;
  if (code == 6) ok = ok || (t->dtype.code == 1 && t->dtype.bits == 1 && t->dtype.lanes == 1);
  if (!ok) {
    char got[32];
    ember_dtype_str(t->dtype, got);
    return ember_fail("%s: expected dtype %s, got %s", label, dtype, got);
  }
  if (!ember_is_compact(t)) {
    return ember_fail("%s: expected a compact row-major tensor, got strides", label);
  }
  if ((uintptr_t)((char*)t->data + t->byte_offset) % align != 0) {
    return ember_fail("%s: data pointer is not aligned to %d bytes", label, align);
  }
  *out = t;
  return 0;
}

/* Check a tensor's shape against the expected one (symbolic dims already bound). */
static int ember_check_shape(const char* label, const DLTensor* t, const int64_t* expect) {
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] != expect[i]) {
      char want[256], got[256];
      DLTensor e = *t;
      e.shape = (int64_t*)expect;
      ember_shape_str(&e, want);
      ember_shape_str(t, got);
      return ember_fail("%s: expected shape %s, got %s", label, want, got);
    }
  }
  return 0;
}"""


# The same checks for builds without stdio (the C runtime, firmware): messages are the
# argument's label joined with a fixed text, e.g. "f: argument 1 (b): ndim mismatch".
FIRMWARE = r"""
static int ember_fail3(const char* a, const char* b, const char* c) {
  const char* parts[3];
  char msg[384];
  int n = 0, k;
  parts[0] = a; parts[1] = b; parts[2] = c;
  for (k = 0; k < 3; ++k) {
    const char* s = parts[k];
    while (s != NULL && *s != '\0' && n < (int)sizeof(msg) - 1) msg[n++] = *s++;
  }
  msg[n] = '\0';
  TVMPackedFuncSetLastError(msg);
  return -1;
}

static int ember_fail(const char* msg) { return ember_fail3(msg, "", ""); }

""" + _IS_COMPACT + r"""
/* Check one tensor argument: type code, device, ndim, dtype, layout, alignment. */
static int ember_check_tensor(const char* label, int type_code, TVMValue v, int ndim, int code,
                              int bits, const char* dtype, int align, DLTensor** out) {
  if (type_code != kTVMDLTensorHandle && type_code != kTVMNDArrayHandle) {
    return ember_fail3(label, ": expected a tensor", "");
  }
  DLTensor* t = (DLTensor*)v.v_handle;
  if (t == NULL) return ember_fail3(label, ": expected a tensor, got NULL", "");
  if (t->device.device_type != kDLCPU) return ember_fail3(label, ": not a cpu tensor", "");
  if (t->ndim != ndim) return ember_fail3(label, ": ndim mismatch", "");
  int ok = t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1;
  if (code == 6) ok = ok || (t->dtype.code == 1 && t->dtype.bits == 1 && t->dtype.lanes == 1);
  if (!ok) return ember_fail3(label, ": dtype mismatch, expected ", dtype);
  if (!ember_is_compact(t)) return ember_fail3(label, ": not a compact row-major tensor", "");
  if ((uintptr_t)((char*)t->data + t->byte_offset) % align != 0) {
    return ember_fail3(label, ": data pointer is not aligned", "");
  }
  *out = t;
  return 0;
}

/* Check a tensor's shape against the expected one (symbolic dims already bound). */
static int ember_check_shape(const char* label, const DLTensor* t, const int64_t* expect) {
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] != expect[i]) return ember_fail3(label, ": shape mismatch", "");
  }
  return 0;
}"""

# A definition at the start of a line: its return type, name and parameters.
_DEFINITION = re.compile(r"^static (\w+) (ember_\w+)\(([^)]*)\) \{", re.MULTILINE)
_HIDDEN = """\
#if defined(__GNUC__)
#define EMBER_CHECKS_API __attribute__((visibility("hidden")))
#else
#define EMBER_CHECKS_API
#endif"""
_INCLUDES = {True: ("math.h", "stdarg.h", "stdint.h", "stdio.h", "string.h"),
             False: ("math.h", "stdint.h", "string.h")}


def _text(stdio: bool) -> str:
    return HOSTED if stdio else FIRMWARE


def _renames(stdio: bool) -> list[str]:
    """The firmware variant's macros giving its functions names of their own."""
    if stdio:
        return []
    return [f"#define {name} {name}_fw" for _, name, _ in _DEFINITION.findall(FIRMWARE)]


def linked_declarations(stdio: bool = True) -> str:
    """What a split unit has instead of the definitions: hidden external declarations."""
    decls = [f"EMBER_CHECKS_API {ret} {name}({' '.join(params.split())});"
             for ret, name, params in _DEFINITION.findall(_text(stdio))]
    return "\n".join(["", _HIDDEN, *_renames(stdio), *decls])


def checks_unit(stdio: bool = True) -> tuple[str, str]:
    """``(file name, C)`` of the object defining the checks for split units: the same for every
    model (so its object comes from the cache), hidden so libraries do not share it."""
    name = "kernel_ember_arg_checks.c" if stdio else "kernel_ember_arg_checks_fw.c"
    lines = ["/* Generated by ember: the packed wrappers' argument checks (tir/arg_checks.py). */",
             *(f"#include <{h}>" for h in _INCLUDES[stdio]), '#include "ember/c_packed_func.h"',
             _HIDDEN, *_renames(stdio)]
    body = re.sub(r"^static ", "EMBER_CHECKS_API ", _text(stdio), flags=re.MULTILINE)
    return name, "\n".join(lines) + body + "\n"
