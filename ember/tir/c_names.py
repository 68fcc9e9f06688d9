"""Names generated C must not take for its own identifiers: the C keywords and the C library
functions generated code calls. The one list of them (C codegen, AOT interface, kernel names).
"""
from __future__ import annotations

# C99 keywords, and C99's underscore ones.
C_KEYWORDS = frozenset([
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
])

# The C library names generated code calls or a host program defines (math.h, stdlib.h,
# string.h, stdio.h, main).
C_LIBRARY_NAMES = frozenset([
    "exp", "exp2", "expf", "log", "log2", "log10", "logf", "sqrt", "sqrtf", "tanh", "erf",
    "sin", "cos", "tan", "floor", "ceil", "round", "trunc", "fabs", "fabsf", "pow", "powf",
    "fmod", "atan", "asin", "acos", "sinh", "cosh", "log1p", "expm1", "isnan", "isinf", "abs",
    "malloc", "free", "memcpy", "memset", "printf", "snprintf", "main",
])

# Parameters and locals of the packed-function signature every generated entry point has.
PACKED_SIGNATURE_NAMES = frozenset([
    "args", "type_codes", "num_args", "out_ret_value", "out_ret_tcode", "resource_handle",
    "err", "ember_err",
    # the parallel-task functions' own names (codegen_parallel.py)
    "ember_task", "ember_penv", "ember_cdata", "ember_c", "ember_n", "ember_chunk", "ember_lo",
    "ember_hi", "ember_end", "ember_begin", "ember_extent",
])
