/* ctypes entry points for ember/kernels/qadd.h, built by tests/topi/test_qadd_kernel.py at
 * each SIMD level: the kernel on given bytes, its float-epilogue lane count, and a timing loop
 * (benchmarks only). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#include <stdint.h>
#include <time.h>
#include "ember/kernels/qadd.h"
#include "harness_backend.h"

int harness_qadd_lanes(void) {
#if defined(EMBER_QF_L)
  return EMBER_QF_L;
#else
  return 1;
#endif
}

/* r: ra rb; s: n a_zp b_zp y_zp y_lo y_hi a_signed b_signed parallel */
int harness_qadd(const void* a, const void* b, void* y, const float* r, const int64_t* s) {
  return ember_qadd(a, b, y, s[0], r[0], r[1], (int32_t)s[1], (int32_t)s[2], (int32_t)s[3],
                    (int32_t)s[4], (int32_t)s[5], (int32_t)s[6], (int32_t)s[7], (int32_t)s[8]);
}

/* Seconds per call of harness_qadd over `reps` calls (one task). */
double harness_qadd_time(const void* a, const void* b, void* y, const float* r,
                         const int64_t* s, int reps) {
  struct timespec t0, t1;
  int i;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < reps; ++i) harness_qadd(a, b, y, r, s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / reps;
}
