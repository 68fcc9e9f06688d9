/* ctypes entry point for ember/kernels/attention.h, built by tests/topi/test_attention_kernel.py
 * at each SIMD level (-march=..., -DEMBER_KERNELS_PORTABLE). The parallel launch runs its tasks
 * one after the other (harness_backend.h), so the work split is exercised. */
#include <stdint.h>
#include "ember/kernels/attention.h"
#include "harness_backend.h"

const char* harness_simd_name(void) { return EMBER_SIMD_NAME; }

/* ints: batch, heads, M, N, D, DV, q (bs, hs, ld), k (bs, hs, ks, ns), v (bs, hs, ks, ns),
 * o (bs, hs, ld), bias_mode, mask (bs, hs, rs, cs), mb, kc1, kc2, parallel */
int harness_attention(const float* q, const float* k, const float* v, float* o,
                      const float* bias, const float* mask, float alpha, const int32_t* i) {
  return ember_attention(i[0], i[1], i[2], i[3], i[4], i[5], q, i[6], i[7], i[8], k, i[9],
                         i[10], i[11], i[12], v, i[13], i[14], i[15], i[16], o, i[17], i[18],
                         i[19], alpha, i[20], bias, mask, i[21], i[22], i[23], i[24], 0,
                         i[25], i[26], i[27], i[28]);
}
