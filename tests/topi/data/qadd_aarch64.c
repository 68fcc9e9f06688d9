/* ember_qadd on aarch64 (NEON) without a C library, run under qemu by
 * tests/topi/test_qadd_kernel.py: parameter sets read from stdin (float ra, rb, then int32
 * a_zp, b_zp, y_zp, y_lo, y_hi, a_signed, b_signed; 36 bytes each, up to 16), and for each
 * the outputs over all 65536 byte pairs (a = i >> 8, b = i & 255; 3 tasks) and then over 999
 * of them from pair 1 (unaligned, one call) written to stdout. */
#include "ember/kernels/qadd.h"

#undef memcpy
#undef memset
void* memcpy(void* d, const void* s, size_t n) {
  volatile char* dd = d;
  const volatile char* ss = s;
  while (n--) *dd++ = *ss++;
  return d;
}
void* memset(void* d, int c, size_t n) {
  volatile char* dd = d;
  while (n--) *dd++ = (char)c;
  return d;
}

int TVMBackendParallelLaunch(FTVMParallelLambda f, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  int i, rc = 0;
  (void)num_task;
  env.sync_handle = 0;
  env.num_task = 3;
  for (i = 0; i < 3; ++i) rc |= f(i, &env, cdata);
  return rc;
}

static long sys3(long nr, long a, long b, long c) {
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
}

typedef struct {
  float ra, rb;
  int32_t a_zp, b_zp, y_zp, lo, hi, as, bs;
} params;

static uint8_t A[65536], B[65536], Y[65536];
static params P[16];

static void put(const uint8_t* p, long n) {
  while (n > 0) {
    const long w = sys3(64, 1, (long)p, n); /* write */
    if (w <= 0) break;
    p += w;
    n -= w;
  }
}

void _start(void) {
  long got = 0, r;
  unsigned i, k;
  while ((r = sys3(63, 0, (long)((char*)P + got), (long)sizeof P - got)) > 0) got += r; /* read */
  for (i = 0; i < 65536; ++i) {
    A[i] = (uint8_t)(i >> 8);
    B[i] = (uint8_t)i;
  }
  for (k = 0; k < got / sizeof(params); ++k) {
    const params p = P[k];
    ember_qadd(A, B, Y, 65536, p.ra, p.rb, p.a_zp, p.b_zp, p.y_zp, p.lo, p.hi, p.as, p.bs, 1);
    put(Y, 65536);
    ember_qadd(A + 1, B + 1, Y, 999, p.ra, p.rb, p.a_zp, p.b_zp, p.y_zp, p.lo, p.hi, p.as, p.bs,
               0);
    put(Y, 999);
  }
  sys3(93, 0, 0, 0); /* exit */
  for (;;) {
  }
}
