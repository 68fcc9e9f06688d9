/* Driver of benchmarks/bench_depthwise.py: times one call of ember's depthwise kernel
 * (ember/kernels/conv_nchwc.h, 8 lanes, clip epilogue) or of the NCHW <-> NCHW[L]c copy
 * (ember/kernels/layout_nchwc.h) on the calling thread, and prints the best per-call CPU time
 * in microseconds over 5 rounds (and a checksum of the output on stderr).
 *   dw C H W K S          depthwise KxK, stride S, padding K/2, C channels, H x W map
 *   layout C HW L DIR     DIR 1: NCHW -> NCHW[L]c, 0: back (needs layout_nchwc.h) */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/kernels/conv_nchwc.h"
#if defined(__has_include)
#if __has_include("ember/kernels/layout_nchwc.h")
#include "ember/kernels/layout_nchwc.h"
#define HAVE_LAYOUT 1
#endif
#endif

int TVMBackendParallelLaunch(FTVMParallelLambda f, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  (void)num_task;
  env.sync_handle = 0;
  env.num_task = 1;
  return f(0, &env, cdata);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static float* filled(size_t n) {
  float* p = malloc(n * sizeof(float) + 64);
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (float)(i % 7) * 0.1f;
  return p;
}

int main(int argc, char** argv) {
  double best = 1e30, work;
  int reps, r, round, a[4];
  float *in, *wt, *b, *out;
  if (argc < 6 || (strcmp(argv[1], "dw") == 0 && argc < 7)) return 2;
  for (r = 0; r < 4; ++r) a[r] = atoi(argv[2 + r]);
  if (strcmp(argv[1], "dw") == 0) {
    int c = a[0], h = a[1], w = a[2], k = a[3], s = atoi(argv[6]), p = k / 2;
    int oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    in = filled((size_t)c * h * w); wt = filled((size_t)c * k * k); b = filled(c);
    out = filled((size_t)c * oh * ow);
    work = (double)c * oh * ow * k * k;
    reps = (int)(1e8 / work) + 1;
    for (round = 0; round < 5; ++round) {
      double t0 = now_us(), t;
      for (r = 0; r < reps; ++r)
        ember_depthwise_nchwc_x8(in, wt, b, NULL, out, 1, c / 8, h, w, oh, ow, k, k, s, s, 1,
                                 1, p, p, 2, 0.0f, 6.0f, 0, ow, 0);
      t = (now_us() - t0) / reps;
      if (t < best) best = t;
    }
  } else {
#ifdef HAVE_LAYOUT
    size_t n = (size_t)a[0] * a[1];
    in = filled(n); out = filled(n);
    reps = (int)(2e7 / (double)n) + 1;
    for (round = 0; round < 5; ++round) {
      double t0 = now_us(), t;
      for (r = 0; r < reps; ++r) ember_layout_nchwc(in, out, 1, a[0], a[1], a[2], a[3], 0);
      t = (now_us() - t0) / reps;
      if (t < best) best = t;
    }
#else
    return 3;
#endif
  }
  /* the output is read, so that the compiler keeps the calls that write it */
  fprintf(stderr, "checksum %g\n", (double)out[0] + out[1]);
  printf("%.3f\n", best);
  return 0;
}
