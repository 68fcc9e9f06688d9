/* Test harness of the depthwise entry points of ember/kernels/conv_nchwc.h alone, built as
 * that entry's kernel object (the dense conv tiles are not compiled) and, with
 * -DEMBER_KERNEL_LANES=L, for one lane count: a quick build per SIMD level. Same C interface
 * as conv_nchwc_harness.c's harness_depthwise; a lane count not built returns -1. */
#define EMBER_KERNEL_OBJECT 1
#define EMBER_KOBJ_ember_depthwise_nchwc 1
#include "ember/kernels/conv_nchwc.h"

#include "harness_tasks.h"

/* s: n cblocks h w oh ow kh kw sh sw dh dw pt pl act flags strip thr */
int harness_depthwise(int lanes, const float* in, const float* w, const float* b,
                      const float* res, float* out, const int32_t* s, float lo, float hi) {
#define HARNESS_CALL(L)                                                                      \
  ember_depthwise_nchwc_x##L(in, w, b, res, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6],    \
                             s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], lo, hi,     \
                             s[15], s[16], s[17])
  switch (lanes) {
#if EMBER_KERNEL_WANTS_LANES(4)
    case 4: return HARNESS_CALL(4);
#endif
#if EMBER_KERNEL_WANTS_LANES(8)
    case 8: return HARNESS_CALL(8);
#endif
#if EMBER_KERNEL_WANTS_LANES(16)
    case 16: return HARNESS_CALL(16);
#endif
    default: return -1;
  }
#undef HARNESS_CALL
}
