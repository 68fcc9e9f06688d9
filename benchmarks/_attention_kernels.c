/* Times ember's GEMM epilogues, softmax and a wide GEMM straight from the kernel headers, on
 * the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: steady while other processes load
 * the machine). Prints "<case> <best microseconds>" per line. Built and run by
 * benchmarks/bench_attention_kernels.py; argv[1] = repetitions per case, argv[2] = 1 to add
 * the 128x384x16384 LM-head GEMM. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ember/kernels/gemm.h"
#include "ember/kernels/softmax.h"

void* TVMBackendAllocWorkspace(int a, int b, uint64_t n, int c, int d) {
  (void)a; (void)b; (void)c; (void)d;
  return malloc(n);
}
int TVMBackendFreeWorkspace(int a, int b, void* p) {
  (void)a; (void)b;
  free(p);
  return 0;
}
int TVMBackendParallelLaunch(FTVMParallelLambda f, void* c, int n) {
  TVMParallelGroupEnv e;
  (void)n;
  e.num_task = 1;
  e.sync_handle = 0;
  return f(0, &e, c);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* C (M x N) = act(A (M x K) B + bias), B packed in panels of EMBER_GEMM_NR (as ember packs
 * constant weights), kc/mc as the tile model picks for AVX2 (kc: K up to 960, else 768). */
static double time_gemm(int M, int N, int K, int act, int reps) {
  size_t panels = (size_t)(N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR;
  float* A = malloc(sizeof(float) * (size_t)M * K);
  float* B = calloc(panels * K * EMBER_GEMM_NR, sizeof(float));
  float* C = malloc(sizeof(float) * (size_t)M * N);
  float* bias = malloc(sizeof(float) * (size_t)N);
  int kc = K <= 960 ? K : 768, mc = 512 * 1024 / 16 / kc / 6 * 6, r;
  double best = 1e30;
  size_t i;
  for (i = 0; i < (size_t)M * K; ++i) A[i] = (float)((i * 37) % 11) / 7.0f - 0.7f;
  for (i = 0; i < panels * K * EMBER_GEMM_NR; ++i) B[i] = (float)((i * 53) % 13) / 30.0f - 0.2f;
  for (i = 0; i < (size_t)N; ++i) bias[i] = 0.01f * (float)(i % 50);
  if (mc < 6) mc = 6;
  for (r = 0; r < reps; ++r) {
    double t0 = now(), t;
    ember_sgemm(1, M, N, K, A, 0, K, B, 0, 0, 0, EMBER_GEMM_NR, C, 0, N, 1.0f, 2, bias, 0, NULL,
                act, 0.5f, act == EMBER_ACT_GELU_TANH ? 0.7978845608f : 0.70710678f, 0, 0.0f,
                0.0f, mc, kc, 0, 1, 0, 0, 0);
    t = now() - t0;
    best = t < best ? t : best;
  }
  free(A); free(B); free(C); free(bias);
  return best * 1e6;
}

static double time_softmax(int outer, int n, int reps) {
  float* x = malloc(sizeof(float) * (size_t)outer * n);
  float* y = malloc(sizeof(float) * (size_t)outer * n);
  double best = 1e30;
  size_t i;
  int r;
  for (i = 0; i < (size_t)outer * n; ++i) x[i] = (float)((i * 37) % 101) / 13.0f;
  for (r = 0; r < reps; ++r) {
    double t0 = now(), t;
    ember_softmax(x, y, outer, n, 1, 0, 0);
    t = now() - t0;
    best = t < best ? t : best;
  }
  free(x); free(y);
  return best * 1e6;
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50, big = argc > 2 && atoi(argv[2]);
  static const struct { const char* name; int act; } acts[] = {
      {"none", EMBER_ACT_NONE}, {"gelu_erf", EMBER_ACT_GELU_ERF},
      {"gelu_tanh", EMBER_ACT_GELU_TANH}, {"sigmoid", EMBER_ACT_SIGMOID},
      {"silu", EMBER_ACT_SILU}, {"tanh", EMBER_ACT_TANH}};
  size_t a;
  for (a = 0; a < sizeof acts / sizeof acts[0]; ++a) {
    printf("gemm_197x192x768_%s %.1f\n", acts[a].name, time_gemm(197, 768, 192, acts[a].act, reps));
  }
  printf("gemm_128x768x3072_gelu_tanh %.1f\n",
         time_gemm(128, 3072, 768, EMBER_ACT_GELU_TANH, reps / 5 + 1));
  printf("softmax_3x197x197 %.1f\n", time_softmax(3 * 197, 197, reps * 4));
  printf("softmax_6x128x128 %.1f\n", time_softmax(6 * 128, 128, reps * 4));
  printf("softmax_12x50x50 %.1f\n", time_softmax(12 * 50, 50, reps * 4));
  if (big) printf("gemm_128x384x16384 %.1f\n", time_gemm(128, 16384, 384, EMBER_ACT_NONE, 5));
  return 0;
}
