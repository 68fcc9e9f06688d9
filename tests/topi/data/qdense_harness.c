/* ctypes entry point for ember/kernels/qdense.h, built by tests/topi/test_qdense_kernel.py at
 * each SIMD level; the workspace may be refused (a C runtime's arena without room). */
#include <stdint.h>
#include "ember/kernels/qdense.h"
#include "harness_backend.h"

const char* harness_simd_name(void) { return EMBER_Q_SIMD_NAME; }

/* s: m n k a_signed parallel no_workspace */
int harness_qdense(const void* a, const int8_t* w, const int32_t* colsum, const void* a_zp,
                   int32_t* y, const int64_t* s) {
  harness_no_workspace = (int)s[5];
  return ember_qdense(a, w, colsum, a_zp, y, s[0], s[1], s[2], (int32_t)s[3], (int32_t)s[4]);
}
