/*
 * ember kernels: attention as one kernel, for each batch b (an (outer, head) pair) of
 *
 *   S = alpha * Q[b] K[b] + bias + mask[b]        (bias: one value or one per key column;
 *                                                  mask: strided, broadcast over heads/rows)
 *   P = softmax(S) over the keys (the last axis)
 *   O[b] = P V[b]
 *
 * Q, K, V and O are read and written through the strides of nn.contrib_gemm's views (gemm.h):
 * batch b starts at (b / heads) * bs + (b % heads) * hs; Q rows ldq apart (k contiguous), K
 * read as the (D, N) matrix K[k * k_ks + n * k_ns], V as the (N, DV) matrix
 * V[k * v_ks + n * v_ns], O rows ldo apart.
 *
 * Work items are (batch, block of mb query rows), split over TVMBackendParallelLaunch tasks
 * when `parallel`. An item computes its mb x N scores into a per-task buffer (ember_gemm_range
 * with the scale and bias in its epilogue), adds the mask, takes the softmax of each row into a
 * second buffer (softmax.h's rows: the same exp and IEEE rules as nn.softmax, so a row of -inf
 * gives NaN as numpy's formula does), then multiplies that block by V into O: the scores never
 * leave the cache (mb is chosen so that both buffers fit in L2). Returns 0, or -1 when a buffer
 * cannot be allocated or the parallel launch fails.
 */
#ifndef EMBER_KERNELS_ATTENTION_H_
#define EMBER_KERNELS_ATTENTION_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_ATTENTION_PARAMS                                                                     \
  int32_t batch, int32_t heads, int32_t M, int32_t N, int32_t D, int32_t DV, const float* Q,       \
      int32_t q_bs, int32_t q_hs, int32_t ldq, const float* K, int32_t k_bs, int32_t k_hs,         \
      int32_t k_ks, int32_t k_ns, const float* V, int32_t v_bs, int32_t v_hs, int32_t v_ks,        \
      int32_t v_ns, float* O, int32_t o_bs, int32_t o_hs, int32_t ldo, float alpha,                \
      int32_t bias_mode, const float* bias, const float* mask, int32_t m_bs, int32_t m_hs,         \
      int32_t m_rs, int32_t m_cs, int32_t m_select, int32_t mb, int32_t kc1, int32_t kc2,      \
      int32_t parallel
EMBER_KENTRY int32_t ember_attention(EMBER_ATTENTION_PARAMS);

#if EMBER_KERNEL_BODIES
#include <string.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm.h"
#include "ember/kernels/softmax.h"

typedef struct {
  int32_t batch, heads, M, N, D, DV;
  const float *Q, *K, *V;
  float* O;
  int64_t q_bs, q_hs, ldq, k_bs, k_hs, k_ks, k_ns, v_bs, v_hs, v_ks, v_ns, o_bs, o_hs, ldo;
  float alpha;
  int32_t bias_mode;
  const float* bias;
  const float* mask; /* NULL: none */
  int64_t m_bs, m_hs, m_rs, m_cs;
  int32_t m_select; /* 1: a nonzero mask entry replaces the score (a where's fill) */
  int32_t mb, kc1, kc2;
} ember_attention_args;

static inline int64_t ember_attention_off(const ember_attention_args* a, int64_t b, int64_t bs,
                                          int64_t hs) {
  return b / a->heads * bs + b % a->heads * hs;
}

static inline int64_t ember_attention_items(const ember_attention_args* a) {
  return (int64_t)a->batch * ((a->M + a->mb - 1) / a->mb);
}

/* The panels of a (K, N) matrix B[k * b_ks + n * b_ns] in the layout of a packed GEMM weight
 * (gemm.h, b_nr = EMBER_GEMM_NR): packed once per head, read by every row block of it. */
static inline int64_t ember_attention_panel_floats(int64_t K, int64_t N) {
  return (N + EMBER_GEMM_NR - 1) / EMBER_GEMM_NR * K * EMBER_GEMM_NR;
}
static inline void ember_attention_pack(const float* B, int64_t b_ks, int64_t b_ns, int64_t K,
                                        int64_t N, float* dst) {
  int64_t j;
  for (j = 0; j * EMBER_GEMM_NR < N; ++j) {
    int64_t w = N - j * EMBER_GEMM_NR < EMBER_GEMM_NR ? N - j * EMBER_GEMM_NR : EMBER_GEMM_NR;
    ember_gemm_copy_strided(B, b_ks, b_ns, 0, K, j * EMBER_GEMM_NR, w,
                            dst + j * K * EMBER_GEMM_NR);
  }
}

/* Whether V (N, DV) is read in place: row-major whole panels (gemm.h reads them there). */
static inline int ember_attention_v_in_place(const ember_attention_args* a) {
  return a->v_ns == 1 && a->DV % EMBER_GEMM_NR == 0;
}

/* A product of `rows` rows through ember_gemm_range, serially (the caller is one task), by B
 * packed (b_ks 0) or row-major with row stride b_ks. */
static inline int ember_attention_gemm(int32_t rows, int32_t N, int32_t K, const float* A,
                                       int64_t lda, const float* B, int64_t b_ks, float* C,
                                       int64_t ldc, float alpha, int32_t bias_mode,
                                       const float* bias, int32_t kc) {
  ember_gemm_args g;
  memset(&g, 0, sizeof g);
  g.batch = 1; g.M = rows; g.N = N; g.K = K;
  g.A = A; g.lda = lda;
  g.B = B;
  if (b_ks == 0) {
    g.b_nr = EMBER_GEMM_NR;
  } else {
    g.b_ks = b_ks; g.b_ns = 1;
  }
  g.C = C; g.ldc = ldc;
  g.heads = 1;
  g.epi.alpha = alpha; g.epi.bias_mode = bias_mode; g.epi.bias = bias;
  g.mc = (rows + EMBER_GEMM_MR - 1) / EMBER_GEMM_MR * EMBER_GEMM_MR;
  g.kc = kc < 1 ? K : kc;
  return ember_gemm_range(&g, 0, ember_gemm_items(&g));
}

/* Items [begin, end) with the score and probability buffers s and p (mb x N each) and the
 * packed K and V of the current head (kp, vp). */
static inline int ember_attention_range(const ember_attention_args* a, int64_t begin,
                                        int64_t end, float* s, float* p, float* kp, float* vp) {
  const int64_t blocks = (a->M + a->mb - 1) / a->mb, N = a->N;
  const int v_in_place = ember_attention_v_in_place(a);
  int64_t item, r, n, packed = -1;
  for (item = begin; item < end; ++item) {
    int64_t b = item / blocks, m0 = item % blocks * a->mb;
    int32_t rows = (int32_t)(a->M - m0 < a->mb ? a->M - m0 : a->mb);
    ember_softmax_args sm;
    if (b != packed) {
      ember_attention_pack(a->K + ember_attention_off(a, b, a->k_bs, a->k_hs), a->k_ks, a->k_ns,
                           a->D, N, kp);
      if (!v_in_place) {
        ember_attention_pack(a->V + ember_attention_off(a, b, a->v_bs, a->v_hs), a->v_ks,
                             a->v_ns, N, a->DV, vp);
      }
      packed = b;
    }
    if (ember_attention_gemm(rows, a->N, a->D,
                             a->Q + ember_attention_off(a, b, a->q_bs, a->q_hs) + m0 * a->ldq,
                             a->ldq, kp, 0, s, N, a->alpha, a->bias_mode, a->bias, a->kc1) != 0) {
      return -1;
    }
    if (a->mask != NULL) {
      const float* mk = a->mask + ember_attention_off(a, b, a->m_bs, a->m_hs) + m0 * a->m_rs;
      for (r = 0; r < rows; ++r) {
        float* sr = s + r * N;
        const float* mr = mk + r * a->m_rs;
        if (a->m_select) { /* where(cond, s, fill): the fill, whatever s is (NaN too) */
          for (n = 0; n < N; ++n) {
            const float m = mr[n * a->m_cs];
            if (m != 0.0f) sr[n] = m;
          }
        } else if (a->m_cs == 1) {
          for (n = 0; n < N; ++n) sr[n] += mr[n];
        } else {
          for (n = 0; n < N; ++n) sr[n] += mr[n * a->m_cs];
        }
      }
    }
    sm.x = s; sm.y = p; sm.outer = rows; sm.n = N; sm.inner = 1; sm.log = 0;
    ember_softmax_range(&sm, 0, rows);
    if (ember_attention_gemm(rows, a->DV, a->N, p, N,
                             v_in_place ? a->V + ember_attention_off(a, b, a->v_bs, a->v_hs) : vp,
                             v_in_place ? a->v_ks : 0, a->O + ember_attention_off(a, b, a->o_bs, a->o_hs) + m0 * a->ldo,
                             a->ldo, 1.0f, 0, NULL, a->kc2) != 0) {
      return -1;
    }
  }
  return 0;
}

/* The buffers of one task: scores and probabilities (mb x N each, plus a vector of slack for
 * the short rows' whole-vector reads), then the packed K and V of a head. */
static inline int ember_attention_run(const ember_attention_args* a, int64_t begin,
                                      int64_t end) {
  size_t rows = (size_t)a->mb * (size_t)a->N + EMBER_VL;
  size_t kf = (size_t)ember_attention_panel_floats(a->D, a->N);
  size_t vf = ember_attention_v_in_place(a) ? 0
                                             : (size_t)ember_attention_panel_floats(a->N, a->DV);
  float* s = (float*)TVMBackendAllocWorkspace(1, 0, (2 * rows + kf + vf) * sizeof(float), 2, 32);
  int rc;
  if (s == NULL) return -1;
  rc = ember_attention_range(a, begin, end, s, s + rows, s + 2 * rows, s + 2 * rows + kf);
  TVMBackendFreeWorkspace(1, 0, s);
  return rc;
}

static inline int ember_attention_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_attention_args* a = (const ember_attention_args*)cdata;
  int64_t tasks = penv->num_task > 0 ? penv->num_task : 1, items = ember_attention_items(a);
  int64_t begin = items * task_id / tasks, end = items * (task_id + 1) / tasks;
  return begin < end ? ember_attention_run(a, begin, end) : 0;
}

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_attention)
EMBER_KENTRY int32_t ember_attention(EMBER_ATTENTION_PARAMS) {
  ember_attention_args a;
  a.batch = batch; a.heads = heads < 1 ? 1 : heads; a.M = M; a.N = N; a.D = D; a.DV = DV;
  a.Q = Q; a.q_bs = q_bs; a.q_hs = q_hs; a.ldq = ldq;
  a.K = K; a.k_bs = k_bs; a.k_hs = k_hs; a.k_ks = k_ks; a.k_ns = k_ns;
  a.V = V; a.v_bs = v_bs; a.v_hs = v_hs; a.v_ks = v_ks; a.v_ns = v_ns;
  a.O = O; a.o_bs = o_bs; a.o_hs = o_hs; a.ldo = ldo;
  a.alpha = alpha; a.bias_mode = bias_mode; a.bias = bias;
  a.mask = mask; a.m_bs = m_bs; a.m_hs = m_hs; a.m_rs = m_rs; a.m_cs = m_cs;
  a.m_select = m_select;
  a.mb = mb < 1 ? 1 : mb; a.kc1 = kc1; a.kc2 = kc2;
  if (batch <= 0 || M <= 0 || DV <= 0) return 0;
  if (N <= 0) return -1; /* a softmax over no keys (nn.contrib_attention requires N >= 1) */
  if (parallel && ember_attention_items(&a) > 1) {
    return TVMBackendParallelLaunch(ember_attention_task, &a, 0) == 0 ? 0 : -1;
  }
  return ember_attention_run(&a, 0, ember_attention_items(&a));
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_ATTENTION_H_ */
