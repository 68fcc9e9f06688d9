/*
 * ember kernels: the elementwise epilogue of a GEMM (and of other row kernels), applied to an
 * output vector while it is in registers:
 *
 *   y = act2(act1(alpha * acc + bias) + residual)
 *
 * bias: none, one scalar, or one value per output column; residual: none, one scalar, or a
 * tensor laid out like the output. Activation codes (EMBER_ACT_*), with parameters p0, p1:
 *   RELU       max(x, 0)
 *   CLIP       min(max(x, p0), p1)
 *   GELU_ERF   p0 * x * (1 + erf(p1 * x))          (p0 = 0.5, p1 = 1/sqrt(2): exact GELU)
 *   GELU_TANH  p0 * x * (1 + tanh(p1 * (x + 0.044715 x^3)))   (p0 = 0.5, p1 = sqrt(2/pi))
 *   SIGMOID    1 / (1 + exp(-x))
 *   HARDSWISH  p0 * x * min(max(x + 3, 0), 6)           (p0 = 1/6: hardswish)
 *   TANH       tanh(x)
 *   LEAKY_RELU x > 0 ? x : p0 * x
 *   SILU       x / (1 + exp(-x))
 *   HARDSIGMOID min(max(p0 * x + p1, 0), 1)
 *   MISH       x * tanh(log(1 + exp(x))) = x * n / (n + 2), n = e^x (e^x + 2)
 * The vector forms use gemm_simd.h's exp/erf/tanh approximations, the scalar forms libm: both
 * within ~2e-7 of the exact value. A kernel applies the cheap epilogues (activations none or
 * ReLU) per vector in registers (ember_epi_vec), the others to a stored block of outputs
 * (ember_epi_block), where many vectors' exp/erf chains overlap.
 */
#ifndef EMBER_KERNELS_GEMM_EPILOGUE_H_
#define EMBER_KERNELS_GEMM_EPILOGUE_H_

#include "ember/kernels/gemm_simd.h"
#include "ember/kernels/linkage.h" /* EMBER_ALWAYS_INLINE, EMBER_NOINLINE */

enum {
  EMBER_ACT_NONE = 0,
  EMBER_ACT_RELU = 1,
  EMBER_ACT_CLIP = 2,
  EMBER_ACT_GELU_ERF = 3,
  EMBER_ACT_GELU_TANH = 4,
  EMBER_ACT_SIGMOID = 5,
  EMBER_ACT_HARDSWISH = 6,
  EMBER_ACT_TANH = 7,
  EMBER_ACT_LEAKY_RELU = 8,
  EMBER_ACT_SILU = 9,
  EMBER_ACT_HARDSIGMOID = 10,
  EMBER_ACT_MISH = 11
};

/* bias_mode / res_mode */
enum { EMBER_EPI_NONE = 0, EMBER_EPI_SCALAR = 1, EMBER_EPI_VECTOR = 2 };

typedef struct {
  float alpha;
  int32_t bias_mode;
  const float* bias; /* bias[n] (VECTOR) or bias[0] (SCALAR) */
  int32_t res_mode;
  const float* res; /* res[0] (SCALAR), or laid out like the output (VECTOR) */
  int32_t act1, act2;
  float p1a, p1b, p2a, p2b;
} ember_epilogue;

#define EMBER_GELU_TANH_CUBIC 0.044715f

/* The vector form of each activation, as `case CODE: APPLY(expression of x)`: one table for
 * the one-vector function and the block loop below. GELU_TANH is written as
 * 2 p0 x sigmoid(2 u) (= p0 x (1 + tanh(u))): one exp and one division, and no cancellation
 * in 1 + tanh(u) for u << 0. */
#define EMBER_VACT_CASES(APPLY)                                                                 \
  case EMBER_ACT_RELU: APPLY(ember_vmax(x, ember_vzero()))                                     \
  case EMBER_ACT_CLIP: APPLY(ember_vmin(ember_vmax(x, ember_vset1(p0)), ember_vset1(p1)))       \
  case EMBER_ACT_GELU_ERF:                                                                      \
    APPLY(ember_vmul(ember_vmul(ember_vset1(p0), x),                                            \
                     ember_vadd(one, ember_verf(ember_vmul(ember_vset1(p1), x)))))              \
  case EMBER_ACT_GELU_TANH:                                                                     \
    APPLY(ember_vdiv(ember_vmul(ember_vset1(p0 + p0), x),                                       \
                     ember_vadd(one, ember_vexp(ember_vmul(                                     \
                         ember_vset1(-2.0f * p1),                                               \
                         ember_vfma(ember_vmul(ember_vset1(EMBER_GELU_TANH_CUBIC), x),          \
                                    ember_vmul(x, x), x))))))                                   \
  case EMBER_ACT_SIGMOID:                                                                       \
    APPLY(ember_vdiv(one, ember_vadd(one, ember_vexp(ember_vsub(ember_vzero(), x)))))           \
  case EMBER_ACT_HARDSWISH:                                                                     \
    APPLY(ember_vmul(x, ember_vmul(ember_vmin(ember_vmax(ember_vadd(x, ember_vset1(3.0f)),      \
                                                         ember_vzero()),                        \
                                              ember_vset1(6.0f)),                               \
                                   ember_vset1(p0))))                                           \
  case EMBER_ACT_TANH: APPLY(ember_vtanh(x))                                                    \
  case EMBER_ACT_LEAKY_RELU:                                                                    \
    APPLY(ember_vfma(ember_vset1(p0), ember_vmin(x, ember_vzero()), ember_vmax(x, ember_vzero())))\
  case EMBER_ACT_SILU:                                                                          \
    APPLY(ember_vdiv(x, ember_vadd(one, ember_vexp(ember_vsub(ember_vzero(), x)))))             \
  case EMBER_ACT_HARDSIGMOID:                                                                   \
    APPLY(ember_vmin(ember_vmax(ember_vfma(ember_vset1(p0), x, ember_vset1(p1)), ember_vzero()),\
                     one))                                                                      \
  case EMBER_ACT_MISH: /* e^x clamped at e^20, where n / (n + 2) is 1 in float (no inf/inf) */ \
    APPLY(ember_vmish(x))

EMBER_ALWAYS_INLINE ember_vf ember_vmish(ember_vf x) {
  ember_vf e = ember_vexp(ember_vmin(x, ember_vset1(20.0f)));
  ember_vf n = ember_vmul(e, ember_vadd(e, ember_vset1(2.0f)));
  return ember_vmul(x, ember_vdiv(n, ember_vadd(n, ember_vset1(2.0f))));
}

/* Out of line: called once per output vector, too big to copy into every store. */
EMBER_NOINLINE ember_vf ember_vact(ember_vf x, int32_t act, float p0, float p1) {
  ember_vf one = ember_vset1(1.0f);
#define EMBER_VACT_RETURN(expr) return (expr);
  switch (act) {
    EMBER_VACT_CASES(EMBER_VACT_RETURN)
    default:
      return x;
  }
#undef EMBER_VACT_RETURN
}

/* The activation in place over `rows` rows of `nvec` vectors at c (row stride ldc): the
 * switch taken once, and independent vectors in flight together (one vector's exp and erf
 * is a long dependent chain; its latency, not the arithmetic, bounds the one-vector form). */
EMBER_NOINLINE void ember_vact_block(float* c, int64_t ldc, int32_t rows, int32_t nvec,
                                     int32_t act, float p0, float p1) {
  ember_vf one = ember_vset1(1.0f), x;
  int32_t i, j;
#define EMBER_VACT_LOOP(expr)                                            \
  for (i = 0; i < rows; ++i) {                                           \
    for (j = 0; j < nvec; ++j) {                                         \
      x = ember_vload(c + i * ldc + j * EMBER_VL);                       \
      ember_vstore(c + i * ldc + j * EMBER_VL, (expr));                  \
    }                                                                    \
  }                                                                      \
  break;
  switch (act) {
    EMBER_VACT_CASES(EMBER_VACT_LOOP)
    default:
      break;
  }
#undef EMBER_VACT_LOOP
}

static inline float ember_act1(float x, int32_t act, float p0, float p1) {
  switch (act) {
    case EMBER_ACT_RELU:
      return x > 0.0f ? x : 0.0f;
    case EMBER_ACT_CLIP:
      return x < p0 ? p0 : (x > p1 ? p1 : x);
    case EMBER_ACT_GELU_ERF:
      return p0 * x * (1.0f + erff(p1 * x));
    case EMBER_ACT_GELU_TANH:
      return p0 * x * (1.0f + tanhf(p1 * (x + EMBER_GELU_TANH_CUBIC * x * x * x)));
    case EMBER_ACT_SIGMOID:
      return 1.0f / (1.0f + expf(-x));
    case EMBER_ACT_HARDSWISH: {
      float g = x + 3.0f;
      g = g < 0.0f ? 0.0f : (g > 6.0f ? 6.0f : g);
      return p0 * x * g;
    }
    case EMBER_ACT_TANH:
      return tanhf(x);
    case EMBER_ACT_LEAKY_RELU:
      return x > 0.0f ? x : p0 * x;
    case EMBER_ACT_SILU:
      return x / (1.0f + expf(-x));
    case EMBER_ACT_HARDSIGMOID: {
      float g = p0 * x + p1;
      return g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
    }
    case EMBER_ACT_MISH: {
      float e = expf(x < 20.0f ? x : 20.0f), n = e * (e + 2.0f);
      return x * (n / (n + 2.0f));
    }
    default:
      return x;
  }
}

/* An activation: ReLU inline, the others through ember_vact. */
EMBER_ALWAYS_INLINE ember_vf ember_vact_fast(ember_vf x, int32_t act, float p0, float p1) {
  return act == EMBER_ACT_RELU ? ember_vmax(x, ember_vzero()) : ember_vact(x, act, p0, p1);
}

/* alpha and the bias on EMBER_VL outputs of one row, columns n.. */
EMBER_ALWAYS_INLINE ember_vf ember_epi_scale_bias(ember_vf v, const ember_epilogue* e,
                                                  int64_t n) {
  if (e->alpha != 1.0f) v = ember_vmul(v, ember_vset1(e->alpha));
  if (e->bias_mode == EMBER_EPI_VECTOR) {
    v = ember_vadd(v, ember_vload(e->bias + n));
  } else if (e->bias_mode == EMBER_EPI_SCALAR) {
    v = ember_vadd(v, ember_vset1(e->bias[0]));
  }
  return v;
}

/* The epilogue of EMBER_VL outputs of one row: columns n.., residual at res_off. */
EMBER_ALWAYS_INLINE ember_vf ember_epi_vec(ember_vf v, const ember_epilogue* e, int64_t n,
                                     int64_t res_off) {
  v = ember_epi_scale_bias(v, e, n);
  if (e->act1 != EMBER_ACT_NONE) v = ember_vact_fast(v, e->act1, e->p1a, e->p1b);
  if (e->res_mode == EMBER_EPI_VECTOR) {
    v = ember_vadd(v, ember_vload(e->res + res_off));
  } else if (e->res_mode == EMBER_EPI_SCALAR) {
    v = ember_vadd(v, ember_vset1(e->res[0]));
  }
  if (e->act2 != EMBER_ACT_NONE) v = ember_vact_fast(v, e->act2, e->p2a, e->p2b);
  return v;
}

/* The same for one output. */
static inline float ember_epi_one(float v, const ember_epilogue* e, int64_t n, int64_t res_off) {
  v *= e->alpha;
  if (e->bias_mode == EMBER_EPI_VECTOR) {
    v += e->bias[n];
  } else if (e->bias_mode == EMBER_EPI_SCALAR) {
    v += e->bias[0];
  }
  v = ember_act1(v, e->act1, e->p1a, e->p1b);
  if (e->res_mode == EMBER_EPI_VECTOR) {
    v += e->res[res_off];
  } else if (e->res_mode == EMBER_EPI_SCALAR) {
    v += e->res[0];
  }
  return ember_act1(v, e->act2, e->p2a, e->p2b);
}

static inline int ember_epi_is_identity(const ember_epilogue* e) {
  return e->alpha == 1.0f && e->bias_mode == EMBER_EPI_NONE && e->res_mode == EMBER_EPI_NONE &&
         e->act1 == EMBER_ACT_NONE && e->act2 == EMBER_ACT_NONE;
}

/* True when the epilogue's activations are cheap enough to apply per vector in registers. */
static inline int ember_epi_in_registers(const ember_epilogue* e) {
  return (e->act1 == EMBER_ACT_NONE || e->act1 == EMBER_ACT_RELU) &&
         (e->act2 == EMBER_ACT_NONE || e->act2 == EMBER_ACT_RELU);
}

/* The epilogue after alpha and the bias, in place on a block: `rows` rows of `cols` outputs
 * at c (row stride ldc; every row readable and writable up to cols rounded up to EMBER_VL),
 * the residual of (i, j) at res_off + i * res_ld + j. Stage by stage over the block (it is in
 * L1), so each activation runs through ember_vact_block. */
EMBER_NOINLINE void ember_epi_block_acts(float* c, int64_t ldc, int32_t rows, int32_t cols,
                                         const ember_epilogue* e, int64_t res_off,
                                         int64_t res_ld) {
  int32_t nvec = (cols + EMBER_VL - 1) / EMBER_VL, i, j;
  if (e->act1 != EMBER_ACT_NONE) ember_vact_block(c, ldc, rows, nvec, e->act1, e->p1a, e->p1b);
  if (e->res_mode != EMBER_EPI_NONE) {
    for (i = 0; i < rows; ++i) {
      for (j = 0; j < cols; j += EMBER_VL) {
        const float* r = e->res + res_off + i * res_ld + j;
        int64_t w = cols - j < EMBER_VL ? cols - j : EMBER_VL;
        ember_vf v = e->res_mode == EMBER_EPI_SCALAR ? ember_vset1(e->res[0])
                     : w == EMBER_VL                 ? ember_vload(r)
                                                     : ember_vload_part(r, w, 0.0f);
        ember_vstore(c + i * ldc + j, ember_vadd(ember_vload(c + i * ldc + j), v));
      }
    }
  }
  if (e->act2 != EMBER_ACT_NONE) ember_vact_block(c, ldc, rows, nvec, e->act2, e->p2a, e->p2b);
}

/* The whole epilogue in place on a block of raw sums (as ember_epi_block_acts), columns
 * n0..: alpha and the bias first. */
EMBER_NOINLINE void ember_epi_block(float* c, int64_t ldc, int32_t rows, int32_t cols,
                                    const ember_epilogue* e, int64_t n0, int64_t res_off,
                                    int64_t res_ld) {
  int32_t i, j;
  for (i = 0; i < rows; ++i) {
    for (j = 0; j < cols; j += EMBER_VL) {
      float* p = c + i * ldc + j;
      int64_t w = cols - j < EMBER_VL ? cols - j : EMBER_VL;
      ember_vf v = ember_vmul(ember_vload(p), ember_vset1(e->alpha));
      if (e->bias_mode == EMBER_EPI_VECTOR) {
        v = ember_vadd(v, w == EMBER_VL ? ember_vload(e->bias + n0 + j)
                                        : ember_vload_part(e->bias + n0 + j, w, 0.0f));
      } else if (e->bias_mode == EMBER_EPI_SCALAR) {
        v = ember_vadd(v, ember_vset1(e->bias[0]));
      }
      ember_vstore(p, v);
    }
  }
  ember_epi_block_acts(c, ldc, rows, cols, e, res_off, res_ld);
}

#endif /* EMBER_KERNELS_GEMM_EPILOGUE_H_ */
