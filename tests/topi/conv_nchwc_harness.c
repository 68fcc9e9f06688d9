/* Test harness of ember/kernels/conv_nchwc.h: every entry point behind one C function that
 * takes its sizes as an array, so that one compiled library serves every test shape. The
 * parallel launch runs `tasks` tasks one after another, which exercises the work split. */
#include "ember/kernels/conv_nchwc.h"

#include "harness_tasks.h"
#include "harness_workspace.h"

/* -DHARNESS_LANES=L builds lane count L only (a third of the compile); other counts return -1 */
#ifdef HARNESS_LANES
#define HARNESS_WANTS(L) (HARNESS_LANES == (L))
#else
#define HARNESS_WANTS(L) 1
#endif

/* s: n icb cb h w ocb groups oh ow kh kw sh sw dh dw pt pl act flags rb rw strip order thr */
int harness_conv(int lanes, const float* in, const float* w, const float* b, const float* res,
                 float* out, const int32_t* s, float lo, float hi) {
#define HARNESS_CALL(L)                                                                      \
  ember_conv2d_nchwc_x##L(in, w, b, res, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], \
                          s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15], s[16], s[17], \
                          lo, hi, s[18], s[19], s[20], s[21], s[22], s[23])
  switch (lanes) {
#if HARNESS_WANTS(4)
    case 4: return HARNESS_CALL(4);
#endif
#if HARNESS_WANTS(8)
    case 8: return HARNESS_CALL(8);
#endif
#if HARNESS_WANTS(16)
    case 16: return HARNESS_CALL(16);
#endif
    default: return -1;
  }
#undef HARNESS_CALL
}

/* s: n cblocks h w oh ow kh kw sh sw dh dw pt pl act flags strip thr */
int harness_depthwise(int lanes, const float* in, const float* w, const float* b,
                      const float* res, float* out, const int32_t* s, float lo, float hi) {
#define HARNESS_CALL(L)                                                                      \
  ember_depthwise_nchwc_x##L(in, w, b, res, out, s[0], s[1], s[2], s[3], s[4], s[5], s[6],    \
                             s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], lo, hi,     \
                             s[15], s[16], s[17])
  switch (lanes) {
#if HARNESS_WANTS(4)
    case 4: return HARNESS_CALL(4);
#endif
#if HARNESS_WANTS(8)
    case 8: return HARNESS_CALL(8);
#endif
#if HARNESS_WANTS(16)
    case 16: return HARNESS_CALL(16);
#endif
    default: return -1;
  }
#undef HARNESS_CALL
}
