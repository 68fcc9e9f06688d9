/*
 * ember kernels: a whole LSTM / GRU / RNN layer (ONNX semantics) in one call,
 *
 *   for each direction d, each step s: gates = proj[d, t] + bias[d] + h R[d]^T; gate math
 *
 * `proj` (dirs, seq, batch, G * H) is the input projection x W^T of every step, computed
 * before by one ember_sgemm call (G gates of H = hidden columns: iofc for LSTM, zrh for GRU,
 * one for RNN); `bias` (dirs, G * H) is the bias added to it (Wb + Rb; for a GRU with
 * linear_before_reset, Wb + [Rbz, Rbr, 0] and `extra` holds Rbh). Per step the recurrent
 * product h R^T runs through the GEMM micro-kernel of gemm.h (ember_gemm_range, one item
 * per gate and row block; a gate's R block is packed in panels of r_nr columns at build
 * time, or read from R (dirs, G * H, H) as it lies when r_nr is 0), and the gate math
 * (activations of gemm_epilogue.h, clip, peepholes) runs over the step's rows while they
 * are in L1. The hidden (and cell) state lives in Y_h (Y_c) (dirs, batch, H), updated in
 * place; Y is (seq, dirs, batch, H).
 *
 * sequence_lens (`lens`, NULL: all `seq`): row b runs its first lens[b] steps (the reverse
 * direction from its own step lens[b] - 1 back to 0); Y past a row's length is 0 and its
 * final state is that of its last valid step (0 for an empty row, as onnxruntime gives).
 *
 * `acts` holds 3 activation codes per direction (EMBER_ACT_*, 4 bits each, direction d at
 * bit 12 d) and `act_p` their parameters (alpha, beta) in the same order; clip <= 0: none.
 * `scratch` holds batch * (G + 1) * H floats per direction. With `parallel` and two
 * directions, each direction runs on its own task. Returns 0; -2 when a length is outside
 * [0, seq]; -1 when a launch or a panel buffer fails.
 */
#ifndef EMBER_KERNELS_RNN_H_
#define EMBER_KERNELS_RNN_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_RNN_PARAMS                                                                           \
  int32_t cell, int32_t seq, int32_t batch, int32_t hidden, int32_t direction,                     \
      const float* proj, const float* R, int32_t r_nr, const float* bias, int32_t has_extra,       \
      const float* extra, int32_t has_h0, const float* h0, int32_t has_c0, const float* c0,        \
      int32_t has_lens, const int64_t* lens, int32_t acts, const float* act_p, float clip,         \
      int32_t flags, float* scratch, float* Y, float* Y_h, float* Y_c, int32_t parallel
EMBER_KENTRY int32_t ember_rnn(EMBER_RNN_PARAMS);

#if EMBER_KERNEL_BODIES
#include <string.h>

#include "ember/c_backend_api.h"
#include "ember/kernels/gemm.h"

enum { EMBER_RNN_LSTM = 0, EMBER_RNN_GRU = 1, EMBER_RNN_PLAIN = 2 };
/* flags */
enum { EMBER_RNN_LINEAR_BEFORE_RESET = 1, EMBER_RNN_INPUT_FORGET = 2 };

typedef struct {
  int32_t cell, seq, batch, hidden, gates, dirs, direction, flags, r_nr;
  const float *proj, *R, *bias, *extra, *h0, *c0, *act_p;
  const int64_t* lens;
  int32_t acts;
  float clip;
  float *scratch, *Y, *Y_h, *Y_c;
} ember_rnn_args;

/* One direction's activation k. */
typedef struct {
  int32_t code;
  float a, b;
} ember_rnn_act;

static inline ember_rnn_act ember_rnn_act_of(const ember_rnn_args* g, int32_t d, int32_t k) {
  ember_rnn_act act;
  act.code = (g->acts >> (12 * d + 4 * k)) & 15;
  act.a = g->act_p[(d * 3 + k) * 2];
  act.b = g->act_p[(d * 3 + k) * 2 + 1];
  return act;
}

/* f(clip(x)): the clip bounds the input of every activation (ONNX). */
static inline ember_vf ember_rnn_f(ember_vf x, ember_rnn_act f, float clip) {
  if (clip > 0.0f) x = ember_vmin(ember_vmax(x, ember_vset1(-clip)), ember_vset1(clip));
  return ember_vact_fast(x, f.code, f.a, f.b);
}

/* Up to EMBER_VL floats at p (r of them; the rest of the vector 0), and their store. */
static inline ember_vf ember_rnn_ld(const float* p, int64_t r) {
  return r == EMBER_VL ? ember_vload(p) : ember_vload_part(p, r, 0.0f);
}
static inline void ember_rnn_st(float* p, int64_t r, ember_vf v) {
  if (r == EMBER_VL) {
    ember_vstore(p, v);
  } else {
    ember_vstore_part(p, r, v);
  }
}

/* gates[:, k0 * H ..] = h R[d, k0 .. k0 + ng]^T: one GEMM item per gate and row block. */
static inline int ember_rnn_product(const ember_rnn_args* g, int32_t d, int32_t k0, int32_t ng,
                                    const float* h, float* gates) {
  ember_gemm_args gg;
  int64_t H = g->hidden, G = g->gates;
  memset(&gg, 0, sizeof gg);
  gg.batch = ng; gg.M = g->batch; gg.N = (int32_t)H; gg.K = (int32_t)H;
  gg.A = h; gg.a_bs = 0; gg.lda = H;
  if (g->r_nr > 0) { /* (dirs, G, panels, H, r_nr) */
    int64_t gate = (H + g->r_nr - 1) / g->r_nr * H * g->r_nr;
    gg.B = g->R + (d * G + k0) * gate; gg.b_bs = gate; gg.b_nr = g->r_nr;
  } else { /* (dirs, G * H, H): a gate's (H, H) block read as its transpose */
    gg.B = g->R + (d * G + k0) * H * H; gg.b_bs = H * H; gg.b_ks = 1; gg.b_ns = H;
  }
  gg.C = gates + k0 * H; gg.c_bs = H; gg.ldc = G * H;
  gg.epi.alpha = 1.0f;
  gg.mc = (g->batch + EMBER_GEMM_MR - 1) / EMBER_GEMM_MR * EMBER_GEMM_MR;
  gg.kc = (int32_t)H;
  return ember_gemm_range(&gg, 0, ember_gemm_items(&gg));
}

/* The step's row b of the input projection (with its bias added in the gate math). */
static inline const float* ember_rnn_proj(const ember_rnn_args* g, int32_t d, int64_t t,
                                          int64_t b) {
  return g->proj + ((d * (int64_t)g->seq + t) * g->batch + b) * g->gates * g->hidden;
}

/* LSTM, row b: gates (i, o, f, c pre-activations of h R^T) -> h, c in place. */
static inline void ember_rnn_lstm_row(const ember_rnn_args* g, int32_t d, const float* x,
                                      const float* rec, float* h, float* c) {
  int64_t H = g->hidden, n, r;
  const float* bias = g->bias + d * 4 * H;
  const float* peep = g->extra ? g->extra + d * 3 * H : NULL;
  ember_rnn_act f = ember_rnn_act_of(g, d, 0), gg = ember_rnn_act_of(g, d, 1);
  ember_rnn_act hh = ember_rnn_act_of(g, d, 2);
  for (n = 0; n < H; n += EMBER_VL) {
    ember_vf pre[4], cv, cn, iv, fv, ov;
    int k;
    r = H - n < EMBER_VL ? H - n : EMBER_VL;
    for (k = 0; k < 4; ++k) {
      pre[k] = ember_vadd(ember_vadd(ember_rnn_ld(x + k * H + n, r), ember_rnn_ld(rec + k * H + n, r)),
                          ember_rnn_ld(bias + k * H + n, r));
    }
    cv = ember_rnn_ld(c + n, r);
    if (peep) pre[0] = ember_vfma(ember_rnn_ld(peep + n, r), cv, pre[0]);
    iv = ember_rnn_f(pre[0], f, g->clip);
    if (g->flags & EMBER_RNN_INPUT_FORGET) {
      fv = ember_vsub(ember_vset1(1.0f), iv);
    } else {
      if (peep) pre[2] = ember_vfma(ember_rnn_ld(peep + 2 * H + n, r), cv, pre[2]);
      fv = ember_rnn_f(pre[2], f, g->clip);
    }
    cn = ember_vfma(fv, cv, ember_vmul(iv, ember_rnn_f(pre[3], gg, g->clip)));
    if (peep) pre[1] = ember_vfma(ember_rnn_ld(peep + H + n, r), cn, pre[1]);
    ov = ember_rnn_f(pre[1], f, g->clip);
    ember_rnn_st(c + n, r, cn);
    ember_rnn_st(h + n, r, ember_vmul(ov, ember_vact_fast(cn, hh.code, hh.a, hh.b)));
  }
}

/* GRU, row b, first half: z, r from gates (z, r pre-activations); z kept in rec's z slot,
 * r * h into rh (without linear_before_reset the h gate's product reads it). */
static inline void ember_rnn_gru_zr(const ember_rnn_args* g, int32_t d, const float* x,
                                    float* rec, const float* h, float* rh, float* rv_out) {
  int64_t H = g->hidden, n, r;
  const float* bias = g->bias + d * 3 * H;
  ember_rnn_act f = ember_rnn_act_of(g, d, 0);
  for (n = 0; n < H; n += EMBER_VL) {
    ember_vf z, rv;
    r = H - n < EMBER_VL ? H - n : EMBER_VL;
    z = ember_vadd(ember_vadd(ember_rnn_ld(x + n, r), ember_rnn_ld(rec + n, r)),
                   ember_rnn_ld(bias + n, r));
    rv = ember_vadd(ember_vadd(ember_rnn_ld(x + H + n, r), ember_rnn_ld(rec + H + n, r)),
                    ember_rnn_ld(bias + H + n, r));
    ember_rnn_st(rec + n, r, ember_rnn_f(z, f, g->clip));
    rv = ember_rnn_f(rv, f, g->clip);
    ember_rnn_st(rv_out + n, r, rv);
    if (rh) ember_rnn_st(rh + n, r, ember_vmul(rv, ember_rnn_ld(h + n, r)));
  }
}

/* GRU, row b, second half: the h gate and h = (1 - z) hh + z h. rec holds z (post-activation)
 * and the h gate's product (of h, or of r * h); rv the reset gate. */
static inline void ember_rnn_gru_h(const ember_rnn_args* g, int32_t d, const float* x,
                                   const float* rec, const float* rv_in, float* h) {
  int64_t H = g->hidden, n, r;
  const float* bias = g->bias + d * 3 * H + 2 * H;
  const float* rbh = g->extra ? g->extra + d * H : NULL;
  int lbr = g->flags & EMBER_RNN_LINEAR_BEFORE_RESET;
  ember_rnn_act gg = ember_rnn_act_of(g, d, 1);
  for (n = 0; n < H; n += EMBER_VL) {
    ember_vf z, hv, pre, prod;
    r = H - n < EMBER_VL ? H - n : EMBER_VL;
    z = ember_rnn_ld(rec + n, r);
    prod = ember_rnn_ld(rec + 2 * H + n, r);
    if (lbr) {
      if (rbh) prod = ember_vadd(prod, ember_rnn_ld(rbh + n, r));
      prod = ember_vmul(ember_rnn_ld(rv_in + n, r), prod);
    }
    pre = ember_vadd(ember_vadd(ember_rnn_ld(x + 2 * H + n, r), ember_rnn_ld(bias + n, r)), prod);
    hv = ember_rnn_ld(h + n, r);
    pre = ember_rnn_f(pre, gg, g->clip);
    ember_rnn_st(h + n, r, ember_vfma(z, ember_vsub(hv, pre), pre));
  }
}

/* Plain RNN, row b: h = f(x + bias + h R^T). */
static inline void ember_rnn_plain_row(const ember_rnn_args* g, int32_t d, const float* x,
                                       const float* rec, float* h) {
  int64_t H = g->hidden, n, r;
  const float* bias = g->bias + d * H;
  ember_rnn_act f = ember_rnn_act_of(g, d, 0);
  for (n = 0; n < H; n += EMBER_VL) {
    ember_vf pre;
    r = H - n < EMBER_VL ? H - n : EMBER_VL;
    pre = ember_vadd(ember_vadd(ember_rnn_ld(x + n, r), ember_rnn_ld(rec + n, r)),
                     ember_rnn_ld(bias + n, r));
    ember_rnn_st(h + n, r, ember_rnn_f(pre, f, g->clip));
  }
}

/* A row's length, and the time index of its step s (-1: past its length). */
static inline int64_t ember_rnn_time(const ember_rnn_args* g, int32_t d, int64_t b, int64_t s) {
  int64_t len = g->lens ? g->lens[b] : g->seq;
  int rev = g->direction == 1 || (g->direction == 2 && d == 1);
  if (s >= len) return -1;
  return rev ? len - 1 - s : s;
}

/* Direction d, every step. */
static int ember_rnn_direction(const ember_rnn_args* g, int32_t d) {
  int64_t H = g->hidden, G = g->gates, B = g->batch, s, b;
  float* h = g->Y_h + d * B * H;
  float* c = g->cell == EMBER_RNN_LSTM ? g->Y_c + d * B * H : NULL;
  float* rec = g->scratch + d * B * (G + 1) * H; /* (batch, G * H) */
  float* rv = rec + B * G * H;                    /* (batch, H): r, then r * h */
  int lbr = g->flags & EMBER_RNN_LINEAR_BEFORE_RESET;
  if (g->h0) memcpy(h, g->h0 + d * B * H, (size_t)(B * H) * sizeof(float));
  else memset(h, 0, (size_t)(B * H) * sizeof(float));
  if (c && g->c0) memcpy(c, g->c0 + d * B * H, (size_t)(B * H) * sizeof(float));
  else if (c) memset(c, 0, (size_t)(B * H) * sizeof(float));
  for (s = 0; s < g->seq; ++s) {
    int32_t ng = g->cell == EMBER_RNN_GRU && !lbr ? 2 : (int32_t)G;
    if (ember_rnn_product(g, d, 0, ng, h, rec) != 0) return -1;
    for (b = 0; b < B; ++b) {
      int64_t t = ember_rnn_time(g, d, b, s);
      const float* x;
      if (t < 0) continue;
      x = ember_rnn_proj(g, d, t, b);
      if (g->cell == EMBER_RNN_LSTM) {
        ember_rnn_lstm_row(g, d, x, rec + b * G * H, h + b * H, c + b * H);
      } else if (g->cell == EMBER_RNN_PLAIN) {
        ember_rnn_plain_row(g, d, x, rec + b * G * H, h + b * H);
      } else {
        /* without linear_before_reset, rv holds r * h for the h gate's product; with it, r */
        ember_rnn_gru_zr(g, d, x, rec + b * G * H, h + b * H, lbr ? NULL : rv + b * H,
                         lbr ? rv + b * H : rec + b * G * H + 2 * H);
      }
    }
    if (g->cell == EMBER_RNN_GRU) {
      if (!lbr) {
        /* r (stored in the h gate's slot above) is not needed: the product overwrites it */
        if (ember_rnn_product(g, d, 2, 1, rv, rec) != 0) return -1;
      }
      for (b = 0; b < B; ++b) {
        int64_t t = ember_rnn_time(g, d, b, s);
        if (t < 0) continue;
        ember_rnn_gru_h(g, d, ember_rnn_proj(g, d, t, b), rec + b * G * H, rv + b * H,
                        h + b * H);
      }
    }
    for (b = 0; b < B; ++b) { /* Y at the step's time, or 0 past the row's length */
      int64_t t = ember_rnn_time(g, d, b, s);
      float* y = g->Y + (((t < 0 ? s : t) * g->dirs + d) * B + b) * H;
      if (t < 0) memset(y, 0, (size_t)H * sizeof(float));
      else memcpy(y, h + b * H, (size_t)H * sizeof(float));
    }
  }
  for (b = 0; b < B; ++b) { /* an empty row's final state is 0 */
    if (g->lens && g->lens[b] == 0) {
      memset(h + b * H, 0, (size_t)H * sizeof(float));
      if (c) memset(c + b * H, 0, (size_t)H * sizeof(float));
    }
  }
  return 0;
}

static inline int ember_rnn_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const ember_rnn_args* g = (const ember_rnn_args*)cdata;
  int32_t d, tasks = penv->num_task > 0 ? penv->num_task : 1;
  for (d = task_id; d < g->dirs; d += tasks) {
    if (ember_rnn_direction(g, d) != 0) return -1;
  }
  return 0;
}

#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_rnn)
EMBER_KENTRY int32_t ember_rnn(EMBER_RNN_PARAMS) {
  ember_rnn_args g;
  int64_t b;
  int32_t d;
  g.cell = cell; g.seq = seq; g.batch = batch; g.hidden = hidden;
  g.gates = cell == EMBER_RNN_LSTM ? 4 : (cell == EMBER_RNN_GRU ? 3 : 1);
  g.direction = direction; g.dirs = direction == 2 ? 2 : 1;
  g.flags = flags; g.r_nr = r_nr;
  g.proj = proj; g.R = R; g.bias = bias;
  g.extra = has_extra ? extra : NULL;
  g.h0 = has_h0 ? h0 : NULL;
  g.c0 = has_c0 ? c0 : NULL;
  g.lens = has_lens ? lens : NULL;
  g.acts = acts; g.act_p = act_p; g.clip = clip;
  g.scratch = scratch; g.Y = Y; g.Y_h = Y_h; g.Y_c = Y_c;
  if (g.lens) {
    for (b = 0; b < batch; ++b) {
      if (g.lens[b] < 0 || g.lens[b] > seq) return -2;
    }
  }
  if (batch <= 0 || hidden <= 0) return 0;
  if (parallel && g.dirs > 1) {
    return TVMBackendParallelLaunch(ember_rnn_task, &g, 0) == 0 ? 0 : -1;
  }
  for (d = 0; d < g.dirs; ++d) {
    if (ember_rnn_direction(&g, d) != 0) return -1;
  }
  return 0;
}
#endif
#endif /* EMBER_KERNEL_BODIES */

#endif /* EMBER_KERNELS_RNN_H_ */
