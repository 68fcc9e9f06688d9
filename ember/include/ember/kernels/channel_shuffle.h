/*!
 * \file ember/kernels/channel_shuffle.h
 * \brief A channel shuffle of two blocked maps into a blocked map, in one pass (the kernel of
 *        nn.contrib_channel_shuffle_nchwc): ShuffleNetV2's Concat, Reshape (N, G, C / G, H,
 *        W), Transpose (0, 2, 1, 3, 4), Reshape (N, C, H, W) and Split, with its inputs and
 *        outputs in NCHW[L]c, where the exported graph went through NCHW and back.
 *
 *   x = the first ca channels of a, then the first cb of b      (C = ca + cb, C % G == 0)
 *   y[co] = x[(co % G) * (C / G) + co / G]                       (the shuffle)
 *   out = y[begin:end] in NCHW[Lo]c, the lanes past end - begin zero
 *
 * a: [N][ceil(ca / L)][HW][L], b: [N][ceil(cb / L)][HW][L], out: [N][ceil((end - begin) /
 * Lo)][HW][Lo] (Lo = out_block: the next conv's blocking, which may differ from the
 * branches'). An output block takes each lane from some lane of some input block; the lanes
 * are grouped by the input block they come from (two or three for a shuffle of two groups)
 * and each group is one permute of a loaded vector under a lane mask (AVX-512 for blocks of
 * 8 and 16, AVX2 for 8 into 8; a table-driven lane loop otherwise), so every input and
 * output vector moves once and whole. Work items (batch x output block x position tile) are split over
 * TVMBackendParallelLaunch's tasks when `threads` is set. Returns 0, -1 for sizes that are
 * not a shuffle.
 */
#ifndef EMBER_KERNELS_CHANNEL_SHUFFLE_H_
#define EMBER_KERNELS_CHANNEL_SHUFFLE_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_CHANNEL_SHUFFLE_PARAMS                                                               \
  const float *a, const float *b, float *out, int32_t n, int32_t ca, int32_t cb, int32_t hw,      \
      int32_t block, int32_t out_block, int32_t groups, int32_t begin, int32_t end,              \
      int32_t threads
EMBER_KENTRY int32_t ember_channel_shuffle_nchwc(EMBER_CHANNEL_SHUFFLE_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"

#if !defined(EMBER_KERNELS_PORTABLE) && (defined(__AVX512F__) || defined(__AVX2__))
#include <immintrin.h>
#endif

#define EMBER_SHUFFLE_TILE 64 /* positions per work item */
#define EMBER_SHUFFLE_MAX_LANES 16

/*! \brief One shuffle call (sizes in elements). */
typedef struct {
  const float *a, *b;
  float* out;
  int32_t n, ca, cb, hw, block, out_block, groups, begin, end;
} ember_shuffle_p;

/* The lanes of one output block grouped by their source block: group k reads the vector at
 * src[k] + position * L and moves its lane idx[k][l] to lane l where mask[k] has bit l. */
typedef struct {
  const float* src[EMBER_SHUFFLE_MAX_LANES];
  int32_t idx[EMBER_SHUFFLE_MAX_LANES][EMBER_SHUFFLE_MAX_LANES];
  uint32_t mask[EMBER_SHUFFLE_MAX_LANES];
  int32_t count;
} ember_shuffle_plan;

static inline int64_t ember_shuffle_items(const ember_shuffle_p* p) {
  const int64_t blocks = (p->end - p->begin + p->out_block - 1) / p->out_block;
  return (int64_t)p->n * blocks * ((p->hw + EMBER_SHUFFLE_TILE - 1) / EMBER_SHUFFLE_TILE);
}

/* The groups of output block `ob` of batch `batch` (its source planes at position 0). Built
 * once per output block and work item: the shuffle's indices step through the lanes without
 * a division (five per lane took longer than moving a 7x7 block), the input's block and lane
 * by shifts for the lane counts compiled as constants (ember_shuffle_range). Always inlined
 * (as the two below) into each constant lane count's copy of the loops. */
EMBER_ALWAYS_INLINE void ember_shuffle_plan_block(const ember_shuffle_p* p, int32_t batch,
                                                  int32_t ob, ember_shuffle_plan* plan,
                                                  const int32_t L) {
  const int32_t per = (p->ca + p->cb) / p->groups, first = p->begin + ob * p->out_block;
  const size_t plane = (size_t)p->hw * L;
  const float* a = p->a + (size_t)batch * ((p->ca + L - 1) / L) * plane;
  const float* b = p->b + (size_t)batch * ((p->cb + L - 1) / L) * plane;
  int32_t l, k, g = first % p->groups, q = first / p->groups; /* co = q * groups + g */
  plan->count = 0;
  for (l = 0; l < p->out_block && first + l < p->end; ++l) { /* lanes past end: zero */
    const int32_t s = g * per + q, in_b = s >= p->ca, c = in_b ? s - p->ca : s;
    const float* src = (in_b ? b : a) + (size_t)(c / L) * plane;
    for (k = 0; k < plan->count && plan->src[k] != src; ++k) {
    }
    if (k == plan->count) {
      memset(plan->idx[k], 0, sizeof(plan->idx[k]));
      plan->src[k] = src;
      plan->mask[k] = 0;
      ++plan->count;
    }
    plan->idx[k][l] = c % L;
    plan->mask[k] |= 1u << l;
    if (++g == p->groups) {
      g = 0;
      ++q;
    }
  }
}

/* Positions [p0, p1) of one output block. */
EMBER_ALWAYS_INLINE void ember_shuffle_block(const ember_shuffle_p* p,
                                             const ember_shuffle_plan* plan, float* dst,
                                             int32_t p0, int32_t p1, const int32_t L) {
  const int32_t Lo = p->out_block;
  int32_t x = p0, k, l;
#if !defined(EMBER_KERNELS_PORTABLE) && defined(__AVX512F__)
  if ((L == 16 || L == 8) && (Lo == 16 || Lo == 8)) { /* an 8-lane block is the low half */
    __m512i idx[EMBER_SHUFFLE_MAX_LANES];
    for (k = 0; k < plan->count; ++k) idx[k] = _mm512_loadu_si512((const void*)plan->idx[k]);
    for (; x < p1; ++x) {
      __m512 acc = _mm512_setzero_ps();
      for (k = 0; k < plan->count; ++k) {
        const float* src = plan->src[k] + (size_t)x * L;
        const __m512 v = L == 16 ? _mm512_loadu_ps(src)
                                 : _mm512_castps256_ps512(_mm256_loadu_ps(src));
        acc = _mm512_mask_permutexvar_ps(acc, (__mmask16)plan->mask[k], idx[k], v);
      }
      if (Lo == 16) {
        _mm512_storeu_ps(dst + (size_t)x * 16, acc);
      } else {
        _mm256_storeu_ps(dst + (size_t)x * 8, _mm512_castps512_ps256(acc));
      }
    }
  }
#endif
#if !defined(EMBER_KERNELS_PORTABLE) && defined(__AVX2__)
  if (L == 8 && Lo == 8) {
    __m256i idx[EMBER_SHUFFLE_MAX_LANES];
    __m256 sel[EMBER_SHUFFLE_MAX_LANES];
    for (k = 0; k < plan->count; ++k) {
      int32_t bits[8];
      for (l = 0; l < 8; ++l) bits[l] = (plan->mask[k] >> l & 1u) ? -1 : 0;
      idx[k] = _mm256_loadu_si256((const __m256i*)plan->idx[k]);
      sel[k] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i*)bits));
    }
    for (; x < p1; ++x) {
      __m256 acc = _mm256_setzero_ps();
      for (k = 0; k < plan->count; ++k) {
        const __m256 v = _mm256_loadu_ps(plan->src[k] + (size_t)x * 8);
        acc = _mm256_blendv_ps(acc, _mm256_permutevar8x32_ps(v, idx[k]), sel[k]);
      }
      _mm256_storeu_ps(dst + (size_t)x * 8, acc);
    }
  }
#endif
  if (x < p1) { /* other blocks and SIMD levels: lane by lane over the positions */
    uint32_t covered = 0;
    for (k = 0; k < plan->count; ++k) {
      covered |= plan->mask[k];
      for (l = 0; l < Lo; ++l) {
        if (plan->mask[k] >> l & 1u) {
          const float* v = plan->src[k] + plan->idx[k][l];
          int32_t y;
          for (y = x; y < p1; ++y) dst[(size_t)y * Lo + l] = v[(size_t)y * L];
        }
      }
    }
    for (l = 0; l < Lo; ++l) { /* the lanes past the range */
      if (!(covered >> l & 1u)) {
        int32_t y;
        for (y = x; y < p1; ++y) dst[(size_t)y * Lo + l] = 0.0f;
      }
    }
  }
}

EMBER_ALWAYS_INLINE void ember_shuffle_items_of(const ember_shuffle_p* p, int64_t lo,
                                                int64_t hi, const int32_t L) {
  const int64_t tiles = (p->hw + EMBER_SHUFFLE_TILE - 1) / EMBER_SHUFFLE_TILE;
  const int64_t blocks = (p->end - p->begin + p->out_block - 1) / p->out_block;
  ember_shuffle_plan plan;
  int64_t item, planned = -1;
  plan.count = 0;
  for (item = lo; item < hi; ++item) {
    const int64_t plane = item / tiles; /* batch x output block */
    const int32_t p0 = (int32_t)(item % tiles) * EMBER_SHUFFLE_TILE;
    const int32_t p1 = p0 + EMBER_SHUFFLE_TILE < p->hw ? p0 + EMBER_SHUFFLE_TILE : p->hw;
    if (plane != planned) {
      ember_shuffle_plan_block(p, (int32_t)(plane / blocks), (int32_t)(plane % blocks), &plan,
                               L);
      planned = plane;
    }
    ember_shuffle_block(p, &plan, p->out + (size_t)plane * p->hw * p->out_block, p0, p1, L);
  }
}

/* Items [lo, hi) with the common input blocks as constants. */
static inline void ember_shuffle_range(const ember_shuffle_p* p, int64_t lo, int64_t hi) {
  switch (p->block) {
    case 8: ember_shuffle_items_of(p, lo, hi, 8); return;
    case 16: ember_shuffle_items_of(p, lo, hi, 16); return;
    default: ember_shuffle_items_of(p, lo, hi, p->block); return;
  }
}

static inline int ember_shuffle_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_shuffle_p* p = (const ember_shuffle_p*)cdata;
  const int64_t total = ember_shuffle_items(p), n = penv->num_task > 0 ? penv->num_task : 1;
  ember_shuffle_range(p, total * task_id / n, total * (task_id + 1) / n);
  return 0;
}

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_channel_shuffle_nchwc)
EMBER_KENTRY int32_t ember_channel_shuffle_nchwc(EMBER_CHANNEL_SHUFFLE_PARAMS) {
  ember_shuffle_p p;
  if (block < 1 || block > EMBER_SHUFFLE_MAX_LANES || out_block < 1 ||
      out_block > EMBER_SHUFFLE_MAX_LANES || groups < 1 || ca < 0 || cb < 0 ||
      (ca + cb) % groups != 0 || begin < 0 || end > ca + cb || begin >= end || n < 0 || hw < 0) {
    return -1;
  }
  p.a = a; p.b = b; p.out = out; p.n = n; p.ca = ca; p.cb = cb; p.hw = hw; p.block = block;
  p.out_block = out_block;
  p.groups = groups; p.begin = begin; p.end = end;
  if (threads) return TVMBackendParallelLaunch(ember_shuffle_task, &p, 0);
  ember_shuffle_range(&p, 0, ember_shuffle_items(&p));
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_CHANNEL_SHUFFLE_H_ */
