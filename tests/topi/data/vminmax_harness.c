/* ember_vmax / ember_vmin (ember/kernels/gemm_simd.h) on every pair of special floats, one
 * pair per lane: prints the SIMD path's name, then per pair "max_bits min_bits" in hex.
 * Built by tests/topi/test_gemm_epilogue.py at each SIMD level (-march=...). */
#include <stdio.h>
#include <string.h>
#include "ember/kernels/gemm_simd.h"
static const float SPECIAL[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.37f, -87.3f, 1e30f, -1e30f,
                                1e-45f, -1e-45f, INFINITY, -INFINITY, NAN, -NAN};
#define NS ((int)(sizeof SPECIAL / sizeof SPECIAL[0]))
int main(void) {
  float a[EMBER_VL], b[EMBER_VL], hi[EMBER_VL], lo[EMBER_VL];
  int pair = 0, lane;
  printf("%s\n", EMBER_SIMD_NAME);
  while (pair < NS * NS) {
    for (lane = 0; lane < EMBER_VL; ++lane, ++pair) { /* pairs past the last repeat pair 0 */
      int p = pair < NS * NS ? pair : 0;
      a[lane] = SPECIAL[p / NS];
      b[lane] = SPECIAL[p % NS];
    }
    ember_vstore(hi, ember_vmax(ember_vload(a), ember_vload(b)));
    ember_vstore(lo, ember_vmin(ember_vload(a), ember_vload(b)));
    for (lane = 0; lane < EMBER_VL && pair - EMBER_VL + lane < NS * NS; ++lane) {
      unsigned int x, y;
      memcpy(&x, &hi[lane], 4);
      memcpy(&y, &lo[lane], 4);
      printf("%08x %08x\n", x, y);
    }
  }
  return 0;
}
