/* The vector activations of ember/kernels/gemm_epilogue.h on the values given as arguments:
 * prints, per activation code 1..11, each value through ember_vact_block (a block of three
 * rows) and through ember_vact (one vector at a time), as hex floats. Built by
 * tests/topi/test_gemm_epilogue.py at each SIMD level (-march=...). */
#include <stdio.h>
#include <stdlib.h>
#include "ember/kernels/gemm_epilogue.h"
int main(int argc, char** argv) {
  int n = argc - 1, rows = 3, per_row = (n + rows - 1) / rows;
  int nvec = (per_row + EMBER_VL - 1) / EMBER_VL, ld = nvec * EMBER_VL;
  float* x = calloc((size_t)rows * ld, sizeof(float));
  float* blk = malloc((size_t)rows * ld * sizeof(float));
  float* one = malloc((size_t)rows * ld * sizeof(float));
  printf("%s\n", EMBER_SIMD_NAME);
  for (int i = 0; i < n; ++i) x[(i / per_row) * ld + i % per_row] = strtof(argv[i + 1], NULL);
  for (int act = 1; act <= 11; ++act) {
    float p0 = act == 4 ? 0.5f : act == 10 ? 0.2f : act == 6 ? 1.0f / 6 : 0.5f;
    float p1 = act == 3 ? 0.70710678f : act == 4 ? 0.7978845608f : act == 2 ? 6.0f : 0.5f;
    if (act == 2) p0 = -1.0f;
    for (int i = 0; i < rows * ld; ++i) blk[i] = x[i];
    ember_vact_block(blk, ld, rows, nvec, act, p0, p1);
    for (int i = 0; i < rows * ld; i += EMBER_VL) {
      ember_vstore(one + i, ember_vact(ember_vload(x + i), act, p0, p1));
    }
    for (int i = 0; i < n; ++i) {
      int at = (i / per_row) * ld + i % per_row;
      printf("%d %a %a\n", act, (double)blk[at], (double)one[at]);
    }
  }
  free(x); free(blk); free(one);
  return 0;
}
