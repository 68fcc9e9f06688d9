/*!
 * \file ember/kernels/conv_epilogue_impl.h
 * \brief The vector epilogue of the NCHW[L]c conv kernels for one lane count (EMBER_L): the
 *        activations in vectors (exp-based ones by a polynomial) and the residual add in the
 *        planned order. Included by conv_nchwc_impl.h and conv_winograd_impl.h (within their
 *        EMBER_KV parts) once per lane count; names end in _x<L>.
 */
#if !defined(EMBER_L) || !defined(EMBER_CAT) || !defined(EV)
#error "conv_epilogue_impl.h needs EMBER_L and the impl headers' EMBER_CAT and EV"
#endif

/* Once per lane count in a translation unit (both conv kernels' headers may be included). */
#if EMBER_L == 4 && !defined(EMBER_CONV_EPILOGUE_X4)
#define EMBER_CONV_EPILOGUE_X4
#define EMBER_CONV_EPILOGUE_BODY
#elif EMBER_L == 8 && !defined(EMBER_CONV_EPILOGUE_X8)
#define EMBER_CONV_EPILOGUE_X8
#define EMBER_CONV_EPILOGUE_BODY
#elif EMBER_L == 16 && !defined(EMBER_CONV_EPILOGUE_X16)
#define EMBER_CONV_EPILOGUE_X16
#define EMBER_CONV_EPILOGUE_BODY
#endif

#if defined(EMBER_CONV_EPILOGUE_BODY) && EMBER_KV
#define EMBER_EFN(name) EMBER_CAT(name, EMBER_CAT(_x, EMBER_L))

/* *x = exp(*x), x clamped to [-87.3, 88.37] (gemm_simd.h's ember_vexp for this lane count): x =
 * n ln2 + r, exp(r) by a degree-6 polynomial, times 2^n built in the exponent bits. By
 * pointer, as every vector argument here (a 16-lane vector by value changes the ABI without
 * AVX-512). */
static inline void EMBER_EFN(ember_conv_vexp)(EV* px) {
  typedef int32_t EVI __attribute__((vector_size(4 * EMBER_L)));
  const float magic = 12582912.0f; /* 1.5 * 2^23: v - magic is x / ln2 rounded */
  EV x = *px, v, n, r, p;
  x = EMBER_VMAX(EMBER_L, x, EMBER_VSPLAT(EMBER_L, -87.3f));
  x = EMBER_VMIN(EMBER_L, x, EMBER_VSPLAT(EMBER_L, 88.37f));
  v = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, magic), x,
                 EMBER_VSPLAT(EMBER_L, 1.44269504088896341f));
  n = v - magic;
  r = EMBER_VFMA(EMBER_L, x, n, EMBER_VSPLAT(EMBER_L, -0.693359375f));
  r = EMBER_VFMA(EMBER_L, r, n, EMBER_VSPLAT(EMBER_L, 2.12194440e-4f));
  p = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, 1.3981999507e-3f), r,
                 EMBER_VSPLAT(EMBER_L, 1.9875691500e-4f));
  p = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, 8.3334519073e-3f), p, r);
  p = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, 4.1665795894e-2f), p, r);
  p = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, 1.6666665459e-1f), p, r);
  p = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, 5.0000001201e-1f), p, r);
  p = EMBER_VFMA(EMBER_L, r + 1.0f, p, r * r);
  *px = p * (EV)((((EVI)v - (EVI)EMBER_VSPLAT(EMBER_L, magic)) + 127) << 23);
}

/* The activations built on exp (code >= EMBER_CONV_ACT_SIGMOID). */
static inline void EMBER_EFN(ember_conv_act_exp)(EV* v, int32_t act) {
  EV x = *v, e;
  switch (act) {
    case EMBER_CONV_ACT_SIGMOID:
      e = -x;
      EMBER_EFN(ember_conv_vexp)(&e);
      *v = 1.0f / (1.0f + e);
      return;
    case EMBER_CONV_ACT_SILU:
      e = -x;
      EMBER_EFN(ember_conv_vexp)(&e);
      *v = x / (1.0f + e);
      return;
    case EMBER_CONV_ACT_MISH: /* e^x clamped at e^20, where n / (n + 2) is 1 (no inf / inf) */
      e = EMBER_VMIN(EMBER_L, x, EMBER_VSPLAT(EMBER_L, 20.0f));
      EMBER_EFN(ember_conv_vexp)(&e);
      e = e * (e + 2.0f);
      *v = x * (e / (e + 2.0f));
      return;
    default:
      return;
  }
}

/* The activation, in place (vectors by pointer: passing a 16-lane vector by value would change
 * the ABI without AVX-512). */
static inline void EMBER_EFN(ember_conv_act)(EV* v, int32_t act, float lo, float hi) {
  EV zero = EMBER_VZERO(EMBER_L), t, x = *v;
  switch (act) {
    case EMBER_CONV_ACT_RELU:
      *v = EMBER_VMAX(EMBER_L, x, zero);
      return;
    case EMBER_CONV_ACT_CLIP: {
      EV vlo = EMBER_VSPLAT(EMBER_L, lo), vhi = EMBER_VSPLAT(EMBER_L, hi);
      t = EMBER_VMAX(EMBER_L, x, vlo);
      *v = EMBER_VMIN(EMBER_L, t, vhi);
      return;
    }
    case EMBER_CONV_ACT_HARDSWISH: {
      EV six = EMBER_VSPLAT(EMBER_L, 6.0f);
      t = x + 3.0f;
      t = EMBER_VMAX(EMBER_L, t, zero);
      t = EMBER_VMIN(EMBER_L, t, six);
      *v = x * t * (1.0f / 6.0f);
      return;
    }
    case EMBER_CONV_ACT_HARDSIGMOID: {
      EV one = EMBER_VSPLAT(EMBER_L, 1.0f);
      t = EMBER_VFMA(EMBER_L, EMBER_VSPLAT(EMBER_L, hi), x, EMBER_VSPLAT(EMBER_L, lo));
      t = EMBER_VMAX(EMBER_L, t, zero);
      *v = EMBER_VMIN(EMBER_L, t, one);
      return;
    }
    case EMBER_CONV_ACT_LEAKY_RELU:
      *v = EMBER_VMAX(EMBER_L, x, zero) + EMBER_VMIN(EMBER_L, x, zero) * lo;
      return;
    default: /* none; the exp-based ones run in ember_conv_act_pass */
      return;
  }
}

/* Store *v (accumulator + bias) after the residual add and the activation, in the planned
 * order; the epilogue's fields as values (see EMBER_CONV_STORE_TILE). */
static inline void EMBER_EFN(ember_conv_store_with)(int32_t act, int32_t flags, float lo,
                                                   float hi, EV* v, float* out,
                                                   const float* res) {
  if (flags & EMBER_EPI_RESIDUAL) {
    if (flags & EMBER_EPI_ACT_AFTER_ADD) {
      *v += EMBER_VLOAD(EMBER_L, res);
      EMBER_EFN(ember_conv_act)(v, act, lo, hi);
    } else if (act < EMBER_CONV_ACT_SIGMOID) { /* a late one adds the residual after it */
      EMBER_EFN(ember_conv_act)(v, act, lo, hi);
      *v += EMBER_VLOAD(EMBER_L, res);
    }
  } else if (act && act < EMBER_CONV_ACT_SIGMOID) { /* a late one: no switch per vector */
    EMBER_EFN(ember_conv_act)(v, act, lo, hi);
  }
  if (flags & EMBER_EPI_STREAM) {
    EMBER_VSTREAM(EMBER_L, out, *v);
  } else {
    EMBER_VSTORE(EMBER_L, out, *v);
  }
}


/* The late activations (exp-based, GELU, tanh) over the n floats just stored at out (whole
 * vectors), then the residual where the activation comes before the add: a second pass over
 * a stored strip, in L1, where the polynomials run back to back (per stored vector they would
 * be a call each). GELU and tanh use gemm_epilogue.h's vector forms at the target's width
 * EMBER_VL, their last n % EMBER_VL floats (a 4-lane block on an 8-lane target) the scalar
 * ones; the exp-based ones are specialised per activation. */
#define EMBER_LATE_PASS(ACT)                                                                    \
  for (i = 0; i < n; i += EMBER_L) {                                                            \
    EV v = EMBER_VLOAD(EMBER_L, out + i);                                                       \
    EMBER_EFN(ember_conv_act_exp)(&v, ACT);                                                     \
    if (add) v += EMBER_VLOAD(EMBER_L, res + i);                                                \
    EMBER_VSTORE(EMBER_L, out + i, v);                                                          \
  }
static inline void EMBER_EFN(ember_conv_late_pass)(float* out, const float* res, size_t n,
                                                   int32_t act, int32_t flags, float lo,
                                                   float hi) {
  const int add = (flags & EMBER_EPI_RESIDUAL) && !(flags & EMBER_EPI_ACT_AFTER_ADD);
  size_t i;
  if (act >= EMBER_CONV_ACT_GELU_ERF) {
    const int32_t code = act == EMBER_CONV_ACT_GELU_ERF    ? EMBER_ACT_GELU_ERF
                         : act == EMBER_CONV_ACT_GELU_TANH ? EMBER_ACT_GELU_TANH
                                                           : EMBER_ACT_TANH;
    const size_t whole = n - n % EMBER_VL;
    ember_vact_block(out, 0, 1, (int32_t)(whole / EMBER_VL), code, lo, hi);
    for (i = whole; i < n; ++i) out[i] = ember_act1(out[i], code, lo, hi);
    for (i = 0; add && i < n; i += EMBER_L) {
      EV v = EMBER_VLOAD(EMBER_L, out + i) + EMBER_VLOAD(EMBER_L, res + i);
      EMBER_VSTORE(EMBER_L, out + i, v);
    }
  } else if (act == EMBER_CONV_ACT_SIGMOID) {
    EMBER_LATE_PASS(EMBER_CONV_ACT_SIGMOID)
  } else if (act == EMBER_CONV_ACT_SILU) {
    EMBER_LATE_PASS(EMBER_CONV_ACT_SILU)
  } else {
    EMBER_LATE_PASS(EMBER_CONV_ACT_MISH)
  }
}
#undef EMBER_LATE_PASS

#undef EMBER_EFN
#endif /* EMBER_CONV_EPILOGUE_BODY && EMBER_KV */
#undef EMBER_CONV_EPILOGUE_BODY
