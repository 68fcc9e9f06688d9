/*!
 * \file ember/kernels/conv_simd.h
 * \brief The vector layer of ember's conv/pool kernels: float vectors of 4, 8 or 16 lanes.
 *
 * With GCC/Clang the vectors are the compilers' vector extensions, which lower to the widest
 * registers the -march allows (a 16-lane vector is one zmm with AVX-512, two ymm with AVX2);
 * the multiply-adds use the FMA intrinsics where the target has them (AVX-512F, FMA), so they
 * do not depend on -ffp-contract. Other compilers (or -DEMBER_KERNELS_PORTABLE) get none of
 * this: the kernels then use their plain C99 loops.
 */
#ifndef EMBER_KERNELS_CONV_SIMD_H_
#define EMBER_KERNELS_CONV_SIMD_H_

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(EMBER_KERNELS_PORTABLE)
#define EMBER_KV 1
#if defined(__AVX512F__) || defined(__FMA__) || defined(__AVX__) || defined(__SSE__)
#include <immintrin.h>
#endif

typedef float ember_v4 __attribute__((vector_size(16)));
typedef float ember_v8 __attribute__((vector_size(32)));
typedef float ember_v16 __attribute__((vector_size(64)));
typedef int32_t ember_i4 __attribute__((vector_size(16)));
typedef int32_t ember_i8 __attribute__((vector_size(32)));
typedef int32_t ember_i16 __attribute__((vector_size(64)));
/* Unaligned, aliasing views for loads and stores at any float address. */
typedef float ember_v4u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float ember_v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float ember_v16u __attribute__((vector_size(64), aligned(4), may_alias));

/* Each macro takes the lane count L (4, 8 or 16; a macro such as EMBER_L is expanded first). */
#define EMBER_VT(L) EMBER_VT_(L)
#define EMBER_VT_(L) ember_v##L
#define EMBER_VLOAD(L, p) EMBER_VLOAD_(L, p)
#define EMBER_VLOAD_(L, p) EMBER_VLOAD_ANY(L, p)
#define EMBER_VSTORE(L, p, v) EMBER_VSTORE_(L, p, v)
#define EMBER_VSTORE_(L, p, v) (*(ember_v##L##u*)(void*)(p) = (v))
#define EMBER_VSPLAT(L, x) (EMBER_VZERO(L) + (float)(x))
#define EMBER_VZERO(L) EMBER_VZERO_(L)
#define EMBER_VZERO_(L) ((ember_v##L){0})

/* A non-temporal store of a whole vector at p, aligned to its size: the line goes to memory
 * without being read into the caches first (a plain store of an output far larger than the
 * caches reads every line from memory, then writes it back). A plain store where the target
 * has no such instruction for L lanes. Callers order the stores with EMBER_STREAM_FENCE
 * before the data is handed to another thread. */
#if defined(__AVX512F__)
#define EMBER_VSTREAM_16(p, v) _mm512_stream_ps((p), (__m512)(v))
#else
#define EMBER_VSTREAM_16(p, v) EMBER_VSTORE_(16, p, v)
#endif
#if defined(__AVX__)
#define EMBER_VSTREAM_8(p, v) _mm256_stream_ps((p), (__m256)(v))
#else
#define EMBER_VSTREAM_8(p, v) EMBER_VSTORE_(8, p, v)
#endif
#if defined(__SSE__)
#define EMBER_VSTREAM_4(p, v) _mm_stream_ps((p), (__m128)(v))
#define EMBER_STREAM_FENCE() _mm_sfence()
#else
#define EMBER_VSTREAM_4(p, v) EMBER_VSTORE_(4, p, v)
#define EMBER_STREAM_FENCE() ((void)0)
#endif
#define EMBER_VSTREAM(L, p, v) EMBER_VSTREAM_(L, p, v)
#define EMBER_VSTREAM_(L, p, v) EMBER_VSTREAM_##L(p, v)

/* Unaligned loads through memcpy: unlike a may_alias pointer, they let the compiler keep
 * accumulator arrays in registers. A macro, not a function: returning a vector wider than
 * the target's registers would change the ABI (-Wpsabi). */
#define EMBER_VLOAD_ANY(L, p) \
  __extension__({ ember_v##L v_; __builtin_memcpy(&v_, (p), sizeof(v_)); v_; })

/* An unaligned load of a vector that EMBER_VPIN then keeps in a register: the target's load
 * intrinsic where one vector is one register (through memcpy, GCC stored the pinned vector
 * to the stack and read it back before each use in the conv tiles that run several tiles
 * per call). */
#if defined(__AVX512F__)
#define EMBER_VLOAD_REG_16(p) ((ember_v16)_mm512_loadu_ps(p))
#else
#define EMBER_VLOAD_REG_16(p) EMBER_VLOAD_ANY(16, p)
#endif
#if defined(__AVX__)
#define EMBER_VLOAD_REG_8(p) ((ember_v8)_mm256_loadu_ps(p))
#else
#define EMBER_VLOAD_REG_8(p) EMBER_VLOAD_ANY(8, p)
#endif
#if defined(__SSE__)
#define EMBER_VLOAD_REG_4(p) ((ember_v4)_mm_loadu_ps(p))
#else
#define EMBER_VLOAD_REG_4(p) EMBER_VLOAD_ANY(4, p)
#endif
#define EMBER_VLOAD_REG(L, p) EMBER_VLOAD_REG__(L, p)
#define EMBER_VLOAD_REG__(L, p) EMBER_VLOAD_REG_##L(p)

/* A vector of the float at p (one broadcast load where the target has one). */
#if defined(__AVX512F__)
#define EMBER_VBCAST_16(p) ((ember_v16)_mm512_set1_ps(*(p)))
#else
#define EMBER_VBCAST_16(p) EMBER_VSPLAT(16, *(p))
#endif
#if defined(__AVX__)
#define EMBER_VBCAST_8(p) ((ember_v8)_mm256_broadcast_ss(p))
#define EMBER_VBCAST_4(p) ((ember_v4)_mm_broadcast_ss(p))
#else
#define EMBER_VBCAST_8(p) EMBER_VSPLAT(8, *(p))
#define EMBER_VBCAST_4(p) EMBER_VSPLAT(4, *(p))
#endif
#define EMBER_VBCAST(L, p) EMBER_VBCAST__(L, p)
#define EMBER_VBCAST__(L, p) EMBER_VBCAST_##L(p)

/* Keep vector v in a register: the compiler then loads it once instead of folding the load
 * into every FMA that reads it (GCC did so in the narrow conv tiles: a 4x2 tile then spent 12
 * loads per 8 FMAs and ran at 60% of the 6x2 tile's rate). A no-op where a vector of L lanes
 * spans more than one register. */
#if defined(__AVX512F__)
#define EMBER_VPIN_16(v) __asm__("" : "+v"(v))
#else
#define EMBER_VPIN_16(v) ((void)0)
#endif
#if defined(__AVX__)
#define EMBER_VPIN_8(v) __asm__("" : "+x"(v))
#else
#define EMBER_VPIN_8(v) ((void)0)
#endif
#if defined(__SSE__)
#define EMBER_VPIN_4(v) __asm__("" : "+x"(v))
#else
#define EMBER_VPIN_4(v) ((void)0)
#endif
#define EMBER_VPIN(L, v) EMBER_VPIN__(L, v)
#define EMBER_VPIN__(L, v) EMBER_VPIN_##L(v)

/* acc + a * b, fused where the target has FMA. */
#if defined(__AVX512F__)
#define EMBER_VFMA_16(acc, a, b) ((ember_v16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), \
                                                               (__m512)(acc)))
#else
#define EMBER_VFMA_16(acc, a, b) ((acc) + (a) * (b))
#endif
#if defined(__FMA__)
#define EMBER_VFMA_8(acc, a, b) ((ember_v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), \
                                                             (__m256)(acc)))
#define EMBER_VFMA_4(acc, a, b) ((ember_v4)_mm_fmadd_ps((__m128)(a), (__m128)(b), (__m128)(acc)))
#else
#define EMBER_VFMA_8(acc, a, b) ((acc) + (a) * (b))
#define EMBER_VFMA_4(acc, a, b) ((acc) + (a) * (b))
#endif
#define EMBER_VFMA(L, acc, a, b) EMBER_VFMA__(L, acc, a, b)
#define EMBER_VFMA__(L, acc, a, b) EMBER_VFMA_##L(acc, a, b)

/* Lane-wise (a > b ? a : b) and (a < b ? a : b): the max/min instructions compute exactly
 * these (NaN in either: b). Through masks (C has no vector ?:) where a vector spans several
 * registers; GCC turns the masks into a compare and a blend, not a max (a 3x3 max pool then
 * ran at half speed), hence the intrinsics. */
#if defined(__AVX512F__)
#define EMBER_VMAX_16(a, b) ((ember_v16)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define EMBER_VMIN_16(a, b) ((ember_v16)_mm512_min_ps((__m512)(a), (__m512)(b)))
#else
#define EMBER_VMAX_16(a, b) EMBER_VMAX_MASK(16, a, b)
#define EMBER_VMIN_16(a, b) EMBER_VMIN_MASK(16, a, b)
#endif
#if defined(__AVX__)
#define EMBER_VMAX_8(a, b) ((ember_v8)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define EMBER_VMIN_8(a, b) ((ember_v8)_mm256_min_ps((__m256)(a), (__m256)(b)))
#else
#define EMBER_VMAX_8(a, b) EMBER_VMAX_MASK(8, a, b)
#define EMBER_VMIN_8(a, b) EMBER_VMIN_MASK(8, a, b)
#endif
#if defined(__SSE__)
#define EMBER_VMAX_4(a, b) ((ember_v4)_mm_max_ps((__m128)(a), (__m128)(b)))
#define EMBER_VMIN_4(a, b) ((ember_v4)_mm_min_ps((__m128)(a), (__m128)(b)))
#else
#define EMBER_VMAX_4(a, b) EMBER_VMAX_MASK(4, a, b)
#define EMBER_VMIN_4(a, b) EMBER_VMIN_MASK(4, a, b)
#endif
#define EMBER_VMAX(L, a, b) EMBER_VMAX__(L, a, b)
#define EMBER_VMIN(L, a, b) EMBER_VMIN__(L, a, b)
#define EMBER_VMAX__(L, a, b) EMBER_VMAX_##L(a, b)
#define EMBER_VMIN__(L, a, b) EMBER_VMIN_##L(a, b)
#define EMBER_VMAX_MASK(L, a, b) ((ember_v##L)((((ember_i##L)(a)) & ((a) > (b))) | \
                                               (((ember_i##L)(b)) & ~((a) > (b)))))
#define EMBER_VMIN_MASK(L, a, b) ((ember_v##L)((((ember_i##L)(a)) & ((a) < (b))) | \
                                               (((ember_i##L)(b)) & ~((a) < (b)))))
#else
#define EMBER_KV 0
#endif
#ifndef EMBER_STREAM_FENCE
#define EMBER_STREAM_FENCE() ((void)0)
#endif

/* Kernel-internal functions: compiled once per translation unit (not inlined into every
 * call site, which multiplies compile time), and no warning when a lane count is unused. */
#if defined(__GNUC__)
#define EMBER_KFN static __attribute__((unused, noinline))
#else
#define EMBER_KFN static
#endif

/* Fully unroll the register-tile loops early, so that the accumulator arrays become
 * registers. */
#if defined(__clang__)
#define EMBER_KUNROLL _Pragma("unroll")
#elif defined(__GNUC__) && __GNUC__ >= 8
#define EMBER_KUNROLL _Pragma("GCC unroll 16")
#else
#define EMBER_KUNROLL
#endif

/* Activation codes shared with ember/topi/nn/conv2d_nchwc.py. */
#define EMBER_CONV_ACT_NONE 0
#define EMBER_CONV_ACT_RELU 1
#define EMBER_CONV_ACT_CLIP 2
#define EMBER_CONV_ACT_HARDSWISH 3
#define EMBER_CONV_ACT_HARDSIGMOID 4 /* min(max(lo * x + hi, 0), 1) */
#define EMBER_CONV_ACT_LEAKY_RELU 5  /* x > 0 ? x : lo * x */
/* the activations from here on need exp(): computed out of line */
#define EMBER_CONV_ACT_SIGMOID 6
#define EMBER_CONV_ACT_SILU 7        /* x * sigmoid(x) */
#define EMBER_CONV_ACT_MISH 8        /* x * tanh(log(1 + exp(x))) */
#define EMBER_CONV_ACT_GELU_ERF 9    /* lo * x * (1 + erf(hi * x)): lo = 1/2, hi = 1/sqrt(2) */
#define EMBER_CONV_ACT_GELU_TANH 10  /* lo * x * (1 + tanh(hi * (x + 0.044715 x^3))) */
#define EMBER_CONV_ACT_TANH 11
/* Epilogue flags: a residual tensor is added; the activation runs after the add; the output
 * is stored past the caches (EMBER_VSTREAM: the planner sets it for an output far larger than
 * the last-level cache; the kernel ignores it where it cannot honour it). */
#define EMBER_EPI_RESIDUAL 1
#define EMBER_EPI_ACT_AFTER_ADD 2
#define EMBER_EPI_STREAM 4

/* The store case of a conv's vector outputs from its activation and epilogue flags, decoded
 * once per call (a register tile's stores then run straight, the case a constant):
 * res_first | clamp << 1 | res_last << 3 for none, relu (clamp 1), clip (2) or an exp-based
 * activation (run later, in a pass over the stored outputs, the residual added there), the
 * residual added before the activation (res_first) or after it (res_last); -1 for hardswish,
 * hardsigmoid and leaky relu (per vector through the general store). The Winograd kernel's
 * case as is; conv_nchwc.h's ember_conv_epi_case adds its partial-sum and streamed cases. */
static inline int32_t ember_epi_store_case(int32_t act, int32_t flags) {
  const int32_t res_first = (flags & EMBER_EPI_RESIDUAL) &&
                            ((flags & EMBER_EPI_ACT_AFTER_ADD) || !act);
  const int32_t res_last = (flags & EMBER_EPI_RESIDUAL) && !res_first &&
                           act < EMBER_CONV_ACT_SIGMOID;
  const int32_t clamp = act == EMBER_CONV_ACT_RELU ? 1 : act == EMBER_CONV_ACT_CLIP ? 2 : 0;
  if (act > EMBER_CONV_ACT_CLIP && act < EMBER_CONV_ACT_SIGMOID) return -1;
  return res_first | clamp << 1 | res_last << 3;
}

static inline float ember_act_scalar(float v, int32_t act, float lo, float hi) {
  float t;
  switch (act) {
    case EMBER_CONV_ACT_RELU:
      return v > 0.0f ? v : 0.0f;
    case EMBER_CONV_ACT_CLIP:
      return v < lo ? lo : (v > hi ? hi : v);
    case EMBER_CONV_ACT_HARDSWISH:
      t = v + 3.0f;
      t = t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
      return v * t * (1.0f / 6.0f);
    case EMBER_CONV_ACT_HARDSIGMOID:
      t = lo * v + hi;
      return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    case EMBER_CONV_ACT_LEAKY_RELU:
      return v > 0.0f ? v : lo * v;
    case EMBER_CONV_ACT_SIGMOID:
      return 1.0f / (1.0f + expf(-v));
    case EMBER_CONV_ACT_SILU:
      return v / (1.0f + expf(-v));
    case EMBER_CONV_ACT_MISH: /* tanh(log(1 + e)) = n / (n + 2), n = e (e + 2) */
      t = expf(v < 20.0f ? v : 20.0f);
      t = t * (t + 2.0f);
      return v * (t / (t + 2.0f));
    case EMBER_CONV_ACT_GELU_ERF:
      return lo * v * (1.0f + erff(hi * v));
    case EMBER_CONV_ACT_GELU_TANH:
      return lo * v * (1.0f + tanhf(hi * (v + 0.044715f * v * v * v)));
    case EMBER_CONV_ACT_TANH:
      return tanhf(v);
    default:
      return v;
  }
}

/* a / d for a >= 0, d > 0, without the division where d is 1 (a dilation or stride almost
 * always is; one division per strip cost as much as a small depthwise strip's FMAs). */
static inline int32_t ember_div_nonneg(int32_t a, int32_t d) { return d == 1 ? a : a / d; }

/* The first tap k (0 <= k <= taps) with start + k * d >= 0. */
static inline int32_t ember_first_tap(int32_t start, int32_t d, int32_t taps) {
  int32_t k = start >= 0 ? 0 : ember_div_nonneg(-start + d - 1, d);
  return k < taps ? k : taps;
}

/* One past the last tap k < taps with start + k * d < size (at least lo). */
static inline int32_t ember_end_tap(int32_t start, int32_t d, int32_t size, int32_t taps,
                                    int32_t lo) {
  int32_t k = size - start <= 0 ? 0 : ember_div_nonneg(size - start + d - 1, d);
  k = k < taps ? k : taps;
  return k > lo ? k : lo;
}

/* How many taps start + k * d (0 <= k < taps) fall inside [lo, hi) (a pool's divisor). */
static inline int32_t ember_pool_taps(int32_t start, int32_t d, int32_t taps, int32_t lo,
                                      int32_t hi) {
  int32_t first = ember_first_tap(start - lo, d, taps);
  int32_t end = ember_end_tap(start - lo, d, hi - lo, taps, first);
  return end - first;
}

#endif /* EMBER_KERNELS_CONV_SIMD_H_ */
