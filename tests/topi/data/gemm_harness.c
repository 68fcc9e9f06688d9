/* Standalone check of ember/kernels/gemm.h against a double-precision reference: every
 * activation, bias and residual, both B layouts, edge shapes, serial and split into 3 tasks;
 * a transposed B in k blocks of whole vectors (the panel copy's register transposes).
 * Built by tests/topi/test_gemm_kernel.py at each SIMD level (-march=...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ember/kernels/gemm.h"
void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) { (void)a;(void)b;(void)c;(void)d; return malloc(n); }
int TVMBackendFreeWorkspace(int a, int b, void* p) { (void)a;(void)b; free(p); return 0; }
int TVMBackendParallelLaunch(FTVMParallelLambda f, void* c, int n) { TVMParallelGroupEnv e; (void)n; e.num_task = 3; e.sync_handle = 0;
  for (int i = 0; i < 3; ++i) { if (f(i, &e, c)) return -1; }
  return 0; }
static float ref_act(float x, int act) { return ember_act1(x, act, 0.5f, 0.70710678f); }
int main(void) {
  /* M tails of every length of either tile height (M % 6 and M % 12: 2 and 3 rows take the
   * 3-row tile, 4 rows 3 + 1; on AVX-512 7 and 8 rows 6 + the rest, 9 to 11 the 12-row
   * loop), odd K; mc is 12 or 24 rows */
  int shapes[][3] = {{1,1,1},{7,13,5},{6,16,32},{128,128,128},{5,33,17},{13,64,3},
                     {2,17,9},{9,40,7},{3,5,1},{8,19,33},{4,21,11},{16,7,5},
                     {20,33,9},{22,65,6},{23,31,19},{35,70,2},{30,3,4},{12,47,13}};
  int bad = 0;
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); ++s) for (int tb = 0; tb < 4; ++tb) for (int act = 0; act < 12; ++act) {
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    float *A = malloc(sizeof(float)*M*K), *B = malloc(sizeof(float)*N*K), *C = malloc(sizeof(float)*M*N), *bias = malloc(sizeof(float)*N), *R = malloc(sizeof(float)*M*N);
    for (int i = 0; i < M*K; ++i) A[i] = (float)((i*37)%11 - 5) / 7.0f;
    for (int i = 0; i < N*K; ++i) B[i] = (float)((i*53)%13 - 6) / 9.0f;
    for (int i = 0; i < N; ++i) bias[i] = i * 0.1f;
    for (int i = 0; i < M*N; ++i) R[i] = (i % 7) * 0.3f;
    /* tb 0: B is (K,N); 1: (N,K) (b_ks=1, b_ns=K); 2: B (K,N) packed in panels of
     * EMBER_GEMM_NR; 3: packed in panels of 4 (another SIMD width: the generic path) */
    int nr = tb == 2 ? EMBER_GEMM_NR : 4, panels = (N + nr - 1) / nr;
    float* P = calloc((size_t)panels * K * nr, sizeof(float));
    for (int k = 0; k < K; ++k) for (int n = 0; n < N; ++n) P[(n / nr) * K * nr + k * nr + n % nr] = B[k*N+n];
    if (tb >= 2) {
      ember_sgemm(1, M, N, K, A, 0, K, P, 0, 0, 0, nr, C, 0, N, 0.5f, 2, bias, 2, R, act, 0.5f, 0.70710678f, 0, 0, 0, s % 4 ? 12 : 24, (s % 3) + 2, s % 2, 1, 0, 0, 0);
    } else {
      ember_sgemm(1, M, N, K, A, 0, K, B, 0, tb ? 1 : N, tb ? K : 1, 0, C, 0, N, 0.5f, 2, bias, 2, R, act, 0.5f, 0.70710678f, 0, 0, 0, s % 4 ? 12 : 24, (s % 3) + 2, s % 2, 1, 0, 0, 0);
    }
    free(P);
    for (int m = 0; m < M; ++m) for (int n = 0; n < N; ++n) {
      double acc = 0; for (int k = 0; k < K; ++k) acc += A[m*K+k] * (tb == 1 ? B[n*K+k] : B[k*N+n]);
      float want = ref_act((float)acc * 0.5f + bias[n], act) + R[m*N+n];
      if (act == 2) want = (float)acc*0.5f + bias[n]; 
      if (act == 2) want = (want < 0.5f ? 0.5f : want > 0.70710678f ? 0.70710678f : want) + R[m*N+n];
      if (fabsf(want - C[m*N+n]) > 1e-4f * (1 + fabsf(want))) { if (bad < 10) printf("bad s=%d tb=%d act=%d m=%d n=%d %g %g\n", s, tb, act, m, n, want, C[m*N+n]); bad++; }
    }
    free(A); free(B); free(C); free(bias); free(R);
  }
  /* B stored transposed with rows longer than K (b_ks = 1, b_ns = K + 3: one head's columns
   * inside a wider row, as attention's K), k blocks of whole vectors and with a tail: the
   * panel copy's in-register transposes (gemm_simd.h) and its scalar edges */
  int tshapes[][4] = {{5,40,37,37},{13,67,64,64},{24,33,16,16},{3,16,48,20},{17,50,35,16},
                      {12,9,64,64},{7,32,17,17}};
  for (int s = 0; s < (int)(sizeof tshapes / sizeof tshapes[0]); ++s) {
    int M = tshapes[s][0], N = tshapes[s][1], K = tshapes[s][2], kc = tshapes[s][3], ld = K + 3;
    float *A = malloc(sizeof(float)*M*K), *B = malloc(sizeof(float)*N*ld), *C = malloc(sizeof(float)*M*N);
    for (int i = 0; i < M*K; ++i) A[i] = (float)((i*37)%11 - 5) / 7.0f;
    for (int i = 0; i < N*ld; ++i) B[i] = (float)((i*53)%13 - 6) / 9.0f;
    ember_sgemm(1, M, N, K, A, 0, K, B, 0, 1, ld, 0, C, 0, N, 1.0f, 0, NULL, 0, NULL, 0, 0, 0, 0, 0, 0, 12, kc, s % 2, 1, 0, 0, 0);
    for (int m = 0; m < M; ++m) for (int n = 0; n < N; ++n) {
      double acc = 0; for (int k = 0; k < K; ++k) acc += A[m*K+k] * B[n*ld+k];
      if (fabs(acc - C[m*N+n]) > 1e-4 * (1 + fabs(acc))) { if (bad < 10) printf("bad transposed s=%d m=%d n=%d %g %g\n", s, m, n, acc, C[m*N+n]); bad++; }
    }
    free(A); free(B); free(C);
  }
  printf("%s %s bad=%d\n", EMBER_SIMD_NAME, "done", bad);
  return bad != 0;
}
