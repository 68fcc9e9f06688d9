/*!
 * \file ember/kernels/fft.h
 * \brief The forward DFT of frames of a signal by a mixed-radix FFT: STFT and DFT.
 *
 * Frame f of batch b holds the samples s = f * step + start + p (p < positions) of its signal,
 * times window[p], at FFT positions start + p of a length-N transform (zeros elsewhere):
 *
 *   out[b, f, k] = sum_p window[p] x[b, f * step + start + p] exp(-2 pi i k (start + p) / N)
 *
 * for k < bins (N / 2 + 1 for a onesided transform of a real signal, else N), written in ONNX's
 * complex layout (..., bins, 2). A DFT along an axis is the same with one frame per signal.
 *
 * Vectors hold EMBER_VL frames, one per lane, so every butterfly is full-width arithmetic with
 * no shuffles: a block of EMBER_VL frames is gathered into two ping-pong buffers of N complex
 * vectors (real and imaginary parts apart), transformed by Stockham stages of radix 4, 2, 3 or
 * 5 (natural order in and out, no bit reversal), and its first `bins` outputs written back,
 * lane by lane, to their frames. A frame costs O(N log N) instead of the N x bins products of
 * a DFT matrix (N = 512: 23 thousand flops instead of half a million).
 *
 * Layouts:
 *   x      channels floats per sample (1: real; 2: real, imaginary); batch b's signal starts at
 *          x + b * batch_stride * channels
 *   table  window[positions], then per stage (radices as ember_fft_radices orders them, n the
 *          stage's length, m = n / r): the twiddles exp(-2 pi i p u / n) for p < m, 1 <= u < r
 *          as (cos, sin) pairs (topi/signal.py builds it)
 *   out    [batch][frames][bins][2]
 * Work items (batch, block of EMBER_VL frames) are split over TVMBackendParallelLaunch's tasks
 * when `parallel` and the call has EMBER_FFT_PARALLEL_POINTS points or more; each task has a
 * workspace of 4 N EMBER_VL floats. Returns 0, or -1 when N has a prime factor above 5, the
 * table's size does not match, or a workspace or the launch fails.
 */
#ifndef EMBER_KERNELS_FFT_H_
#define EMBER_KERNELS_FFT_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_FRAMES_FFT_PARAMS                                                                    \
  const float* x, const float* table, float* out, int64_t batch, int64_t frames,                  \
      int64_t batch_stride, int64_t step, int32_t channels, int32_t positions, int32_t start,    \
      int32_t length, int32_t bins, int64_t table_size, int32_t parallel
EMBER_KENTRY int32_t ember_frames_fft(EMBER_FRAMES_FFT_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"
#include "ember/kernels/gemm_simd.h"

#define EMBER_FFT_MAX_STAGES 64
/* Below this many transformed points (frames x N) a call runs on one thread. */
#define EMBER_FFT_PARALLEL_POINTS 32768

/* The radices of n in stage order (4s first, then 2, 3, 5; topi/signal.py's fft_radices):
 * their count, or -1 when n has another prime factor. */
static inline int ember_fft_radices(int32_t n, int32_t* radix) {
  int count = 0;
  while (n > 1 && count < EMBER_FFT_MAX_STAGES) {
    int r = n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : n % 3 == 0 ? 3 : n % 5 == 0 ? 5 : 0;
    if (!r) return -1;
    radix[count++] = r;
    n /= r;
  }
  return n == 1 ? count : -1;
}

/* The twiddles a length-n transform's stages read ((r - 1) * n / r pairs per stage). */
static inline int64_t ember_fft_twiddles(int32_t n, const int32_t* radix, int stages) {
  int64_t pairs = 0;
  int i;
  for (i = 0; i < stages; ++i) {
    pairs += (int64_t)(radix[i] - 1) * (n / radix[i]);
    n /= radix[i];
  }
  return pairs;
}

/* A complex vector (EMBER_VL lanes: one per frame). */
typedef struct {
  ember_vf re, im;
} ember_cv;

static inline ember_cv ember_cv_add(ember_cv a, ember_cv b) {
  ember_cv c;
  c.re = ember_vadd(a.re, b.re);
  c.im = ember_vadd(a.im, b.im);
  return c;
}
static inline ember_cv ember_cv_sub(ember_cv a, ember_cv b) {
  ember_cv c;
  c.re = ember_vsub(a.re, b.re);
  c.im = ember_vsub(a.im, b.im);
  return c;
}
/* -i a */
static inline ember_cv ember_cv_mul_neg_i(ember_cv a) {
  ember_cv c;
  c.re = a.im;
  c.im = ember_vsub(ember_vzero(), a.re);
  return c;
}
/* a * (wr + i wi) */
static inline ember_cv ember_cv_twiddle(ember_cv a, ember_vf wr, ember_vf wi) {
  ember_cv c;
  c.re = ember_vsub(ember_vmul(a.re, wr), ember_vmul(a.im, wi));
  c.im = ember_vfma(a.re, wi, ember_vmul(a.im, wr));
  return c;
}
/* a * s for a real scalar vector s */
static inline ember_cv ember_cv_scale(ember_cv a, ember_vf s) {
  ember_cv c;
  c.re = ember_vmul(a.re, s);
  c.im = ember_vmul(a.im, s);
  return c;
}

static inline ember_cv ember_cv_load(const float* re, const float* im, int64_t i) {
  ember_cv c;
  c.re = ember_vload(re + i * EMBER_VL);
  c.im = ember_vload(im + i * EMBER_VL);
  return c;
}
static inline void ember_cv_store(float* re, float* im, int64_t i, ember_cv c) {
  ember_vstore(re + i * EMBER_VL, c.re);
  ember_vstore(im + i * EMBER_VL, c.im);
}

/* The r-point DFT of a[0..r) (forward: exp(-2 pi i t u / r)) into y[0..r). */
static inline void ember_fft_butterfly(int r, const ember_cv* a, ember_cv* y) {
  if (r == 2) {
    y[0] = ember_cv_add(a[0], a[1]);
    y[1] = ember_cv_sub(a[0], a[1]);
  } else if (r == 4) {
    ember_cv b0 = ember_cv_add(a[0], a[2]), b1 = ember_cv_sub(a[0], a[2]);
    ember_cv b2 = ember_cv_add(a[1], a[3]), b3 = ember_cv_mul_neg_i(ember_cv_sub(a[1], a[3]));
    y[0] = ember_cv_add(b0, b2);
    y[2] = ember_cv_sub(b0, b2);
    y[1] = ember_cv_add(b1, b3);
    y[3] = ember_cv_sub(b1, b3);
  } else if (r == 3) {
    /* exp(-2 pi i / 3) = -1/2 - i sqrt(3)/2 */
    ember_cv t1 = ember_cv_add(a[1], a[2]);
    ember_cv t2 = ember_cv_sub(a[0], ember_cv_scale(t1, ember_vset1(0.5f)));
    ember_cv t3 = ember_cv_mul_neg_i(ember_cv_scale(ember_cv_sub(a[1], a[2]),
                                                    ember_vset1(0.86602540378443865f)));
    y[0] = ember_cv_add(a[0], t1);
    y[1] = ember_cv_add(t2, t3);
    y[2] = ember_cv_sub(t2, t3);
  } else { /* 5 */
    const ember_vf c1 = ember_vset1(0.30901699437494742f), c2 = ember_vset1(-0.80901699437494742f);
    const ember_vf s1 = ember_vset1(0.95105651629515357f), s2 = ember_vset1(0.58778525229247313f);
    ember_cv t1 = ember_cv_add(a[1], a[4]), t2 = ember_cv_add(a[2], a[3]);
    ember_cv t3 = ember_cv_sub(a[1], a[4]), t4 = ember_cv_sub(a[2], a[3]);
    ember_cv b1, b2, d1, d2;
    b1.re = ember_vfma(c2, t2.re, ember_vfma(c1, t1.re, a[0].re));
    b1.im = ember_vfma(c2, t2.im, ember_vfma(c1, t1.im, a[0].im));
    b2.re = ember_vfma(c1, t2.re, ember_vfma(c2, t1.re, a[0].re));
    b2.im = ember_vfma(c1, t2.im, ember_vfma(c2, t1.im, a[0].im));
    /* d1 = -i (s1 t3 + s2 t4), d2 = -i (s2 t3 - s1 t4) */
    d1.re = ember_vfma(s1, t3.im, ember_vmul(s2, t4.im));
    d1.im = ember_vsub(ember_vzero(), ember_vfma(s1, t3.re, ember_vmul(s2, t4.re)));
    d2.re = ember_vsub(ember_vmul(s2, t3.im), ember_vmul(s1, t4.im));
    d2.im = ember_vsub(ember_vmul(s1, t4.re), ember_vmul(s2, t3.re));
    y[0] = ember_cv_add(a[0], ember_cv_add(t1, t2));
    y[1] = ember_cv_add(b1, d1);
    y[4] = ember_cv_sub(b1, d1);
    y[2] = ember_cv_add(b2, d2);
    y[3] = ember_cv_sub(b2, d2);
  }
}


/* One Stockham stage of radix r over a length-n transform, s interleaved transforms (s n = N):
 * y[q + s (r p + u)] = w^(p u) sum_t x[q + s (p + t m)] exp(-2 pi i t u / r), m = n / r.
 * Inlined with r constant (ember_fft_stage), so the butterfly's arrays live in registers. */
EMBER_ALWAYS_INLINE void ember_fft_stage_r(const int r, int64_t n, int64_t s, const float* tw,
                                           const float* xr, const float* xi, float* yr,
                                           float* yi) {
  int64_t m = n / r, p, q;
  ember_cv a[5], y[5];
  ember_vf wr[5], wi[5];
  int t, u;
  for (p = 0; p < m; ++p) {
    for (u = 1; u < r; ++u) {
      wr[u] = ember_vset1(tw[2 * (p * (r - 1) + u - 1)]);
      wi[u] = ember_vset1(tw[2 * (p * (r - 1) + u - 1) + 1]);
    }
    for (q = 0; q < s; ++q) {
      for (t = 0; t < r; ++t) a[t] = ember_cv_load(xr, xi, q + s * (p + t * m));
      ember_fft_butterfly(r, a, y);
      ember_cv_store(yr, yi, q + s * r * p, y[0]);
      for (u = 1; u < r; ++u) {
        ember_cv v = p ? ember_cv_twiddle(y[u], wr[u], wi[u]) : y[u]; /* w^0 = 1 */
        ember_cv_store(yr, yi, q + s * (r * p + u), v);
      }
    }
  }
}

static void ember_fft_stage(int r, int64_t n, int64_t s, const float* tw, const float* xr,
                            const float* xi, float* yr, float* yi) {
  switch (r) {
    case 4: ember_fft_stage_r(4, n, s, tw, xr, xi, yr, yi); break;
    case 2: ember_fft_stage_r(2, n, s, tw, xr, xi, yr, yi); break;
    case 3: ember_fft_stage_r(3, n, s, tw, xr, xi, yr, yi); break;
    default: ember_fft_stage_r(5, n, s, tw, xr, xi, yr, yi); break;
  }
}

typedef struct {
  const float* x;
  const float* table;
  float* out;
  int64_t batch, frames, batch_stride, step, blocks, per_block;
  int32_t channels, positions, start, length, bins, stages;
  int32_t radix[EMBER_FFT_MAX_STAGES];
} ember_fft_args;

/* count frames from f0 of batch b, channel c (0 real, 1 imaginary) of each sample, times the
 * window, into lanes 0 .. count - 1 of the buffer of N vectors at `dst` (zeros elsewhere). */
static void ember_fft_gather(const ember_fft_args* a, int64_t b, int64_t f0, int64_t count,
                             int c, float* dst) {
  const float* window = a->table;
  const int64_t ch = a->channels;
  int64_t p, j;
  const float* src = a->x + (b * a->batch_stride + f0 * a->step + a->start) * ch + c;
  float* at = dst + (int64_t)a->start * EMBER_VL;
  memset(dst, 0, (size_t)a->start * EMBER_VL * sizeof(float));
  memset(at + (int64_t)a->positions * EMBER_VL, 0,
         (size_t)(a->length - a->start - a->positions) * EMBER_VL * sizeof(float));
  /* frame by frame (scalar stores a vector apart; a vector built from scalars stored just
   * before would stall on store forwarding), then the window on whole vectors */
  for (j = 0; j < count; ++j) {
    const float* frame = src + j * a->step * ch;
    for (p = 0; p < a->positions; ++p) at[p * EMBER_VL + j] = frame[p * ch];
  }
  for (p = 0; p < a->positions; ++p) {
    float* v = at + p * EMBER_VL;
    for (j = count; j < EMBER_VL; ++j) v[j] = 0.0f;
    ember_vstore(v, ember_vmul(ember_vload(v), ember_vset1(window[p])));
  }
}

/* The real and imaginary lanes 0 .. count - 1 of v as bin k of frames f0 .. (out layout). */
static inline void ember_fft_put(const ember_fft_args* a, int64_t b, int64_t f0, int64_t count,
                                 int64_t k, ember_cv v) {
  float re[EMBER_VL], im[EMBER_VL];
  float* dst = a->out + ((b * a->frames) + f0) * a->bins * 2 + 2 * k;
  int64_t j;
  ember_vstore(re, v.re);
  ember_vstore(im, v.im);
  for (j = 0; j < count; ++j) {
    dst[j * a->bins * 2] = re[j];
    dst[j * a->bins * 2 + 1] = im[j];
  }
}

/* One block of frames: gather, the stages (ping-pong between the two buffers), write back.
 * A real signal's block is 2 EMBER_VL frames: the first EMBER_VL as the real parts and the
 * others as the imaginary parts of one complex transform Z, split after it as
 * A[k] = (Z[k] + conj Z[N - k]) / 2 and B[k] = (Z[k] - conj Z[N - k]) / 2i. */
static void ember_fft_block(const ember_fft_args* a, int64_t item, float* work) {
  const int64_t n = a->length, b = item / a->blocks, f0 = (item % a->blocks) * a->per_block;
  const int64_t count = a->frames - f0 < a->per_block ? a->frames - f0 : a->per_block;
  float *xr = work, *xi = work + n * EMBER_VL, *yr = xi + n * EMBER_VL, *yi = yr + n * EMBER_VL;
  const float* tw = a->table + a->positions;
  int64_t len = n, s = 1, k;
  int i;
  if (a->channels == 2) {
    ember_fft_gather(a, b, f0, count, 0, xr);
    ember_fft_gather(a, b, f0, count, 1, xi);
  } else {
    ember_fft_gather(a, b, f0, count < EMBER_VL ? count : EMBER_VL, 0, xr);
    ember_fft_gather(a, b, f0 + EMBER_VL, count > EMBER_VL ? count - EMBER_VL : 0, 0, xi);
  }
  for (i = 0; i < a->stages; ++i) {
    float* t;
    ember_fft_stage(a->radix[i], len, s, tw, xr, xi, yr, yi);
    tw += 2 * (int64_t)(a->radix[i] - 1) * (len / a->radix[i]);
    len /= a->radix[i];
    s *= a->radix[i];
    t = xr; xr = yr; yr = t;
    t = xi; xi = yi; yi = t;
  }
  for (k = 0; k < a->bins; ++k) {
    ember_cv z = ember_cv_load(xr, xi, k), w, lo, hi;
    const ember_vf half = ember_vset1(0.5f);
    if (a->channels == 2) {
      ember_fft_put(a, b, f0, count, k, z);
      continue;
    }
    w = ember_cv_load(xr, xi, k ? n - k : 0);
    lo.re = ember_vmul(ember_vadd(z.re, w.re), half);
    lo.im = ember_vmul(ember_vsub(z.im, w.im), half);
    hi.re = ember_vmul(ember_vadd(z.im, w.im), half);
    hi.im = ember_vmul(ember_vsub(w.re, z.re), half);
    ember_fft_put(a, b, f0, count < EMBER_VL ? count : EMBER_VL, k, lo);
    if (count > EMBER_VL) ember_fft_put(a, b, f0 + EMBER_VL, count - EMBER_VL, k, hi);
  }
}

static int ember_fft_range(const ember_fft_args* a, int64_t begin, int64_t end) {
  float* work;
  int64_t item;
  if (begin >= end) return 0;
  work = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)a->length * 4 * EMBER_VL * sizeof(float),
                                          2, 32);
  if (!work) return -1;
  for (item = begin; item < end; ++item) ember_fft_block(a, item, work);
  TVMBackendFreeWorkspace(1, 0, work);
  return 0;
}

static inline int ember_fft_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_fft_args* a = (const ember_fft_args*)cdata;
  int64_t items = a->batch * a->blocks, tasks = penv->num_task;
  return ember_fft_range(a, items * task_id / tasks, items * (task_id + 1) / tasks);
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_frames_fft)
EMBER_KENTRY int32_t ember_frames_fft(EMBER_FRAMES_FFT_PARAMS) {
  ember_fft_args a;
  int64_t items;
  a.stages = ember_fft_radices(length, a.radix);
  if (a.stages < 0 || length < 1 || bins < 1 || bins > length || positions < 0 ||
      start < 0 || start + positions > length || (channels != 1 && channels != 2)) {
    return -1;
  }
  if (table_size != positions + 2 * ember_fft_twiddles(length, a.radix, a.stages)) return -1;
  if (batch <= 0 || frames <= 0) return 0;
  a.x = x; a.table = table; a.out = out; a.batch = batch; a.frames = frames;
  a.batch_stride = batch_stride; a.step = step; a.channels = channels;
  a.positions = positions; a.start = start; a.length = length; a.bins = bins;
  a.per_block = channels == 2 ? EMBER_VL : 2 * EMBER_VL;
  a.blocks = (frames + a.per_block - 1) / a.per_block;
  items = batch * a.blocks;
  if (parallel && items > 1 && batch * frames * length >= EMBER_FFT_PARALLEL_POINTS) {
    return TVMBackendParallelLaunch(ember_fft_task, &a, 0) == 0 ? 0 : -1;
  }
  return ember_fft_range(&a, 0, items);
}
#endif

#endif /* EMBER_KERNEL_BODIES */
#endif /* EMBER_KERNELS_FFT_H_ */
