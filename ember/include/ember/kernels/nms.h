/*!
 * \file ember/kernels/nms.h
 * \brief Non-maximum suppression per batch and class (ONNX NonMaxSuppression).
 *
 * For each batch b and class c, the boxes are taken by decreasing score (equal scores: the
 * lower index first); a box whose score is above `score_threshold` (when `has_score_threshold`)
 * is selected unless its IoU with a box already selected for (b, c) is above `iou_threshold`,
 * until `max_output` boxes are selected (none when `max_output` is 0, no limit when negative).
 * IoU follows ONNX's reference: boxes as corners in either order (y1, x1, y2, x2) or, with
 * `center_point_box`, (x centre, y centre, width, height); an empty intersection, a box of
 * no area or an empty union never suppresses.
 *
 * Layouts: boxes [batch][n][4], scores [batch][classes][n], both float32; selected
 * [rows][3] int64 (batch, class, box), in batch, class, then selection order, rows after the
 * count zero; count [1] int64. `rows` (the output's size) is at least what can be selected:
 * batch * classes * min(n, max_output) (all n when max_output is negative).
 *
 * Work per (b, c): a heap of the candidates (O(n)), one take per candidate looked at
 * (O(log n)) and one IoU against each box selected before it; a class stops at its limit:
 * O(n + taken * (log n + selected)) instead of the n^2 pairwise matrix. The workspace (one
 * per call: n candidates and n boxes' edges and areas) comes from TVMBackendAllocWorkspace.
 * Returns 0, or -1 when a size is negative, the output has too few rows or the workspace
 * cannot be had.
 */
#ifndef EMBER_KERNELS_NMS_H_
#define EMBER_KERNELS_NMS_H_

#include <stdint.h>

#include "ember/kernels/linkage.h"

/* The entry point (linkage and where its body comes from: ember/kernels/linkage.h). */
#define EMBER_NMS_PARAMS                                                                           \
  const float* boxes, const float* scores, int64_t batch, int64_t classes, int64_t n,            \
      int64_t max_output, float iou_threshold, int32_t has_score_threshold,                      \
      float score_threshold, int32_t center_point_box, int64_t* selected, int64_t rows,          \
      int64_t* count
EMBER_KENTRY int32_t ember_non_max_suppression(EMBER_NMS_PARAMS);

#if EMBER_KERNEL_BODIES
#include "ember/c_backend_api.h"

typedef struct {
  float score;
  int32_t index;
} ember_nms_candidate;

/* (x_min, y_min, x_max, y_max) and area of one box, in ONNX's reference arithmetic. */
typedef struct {
  float x0, y0, x1, y1, area;
} ember_nms_box;

/* Whether candidate p comes before q: the higher score, then the lower index. */
static inline int ember_nms_before(const ember_nms_candidate* p, const ember_nms_candidate* q) {
  return p->score > q->score || (p->score == q->score && p->index < q->index);
}

/* A binary heap of the candidates, the first to take at the root: built in O(m), each take
 * O(log m), so a class stops after the few takes its limit allows (no full sort). */
static inline void ember_nms_sift(ember_nms_candidate* heap, int64_t m, int64_t at) {
  ember_nms_candidate item = heap[at];
  for (;;) {
    int64_t child = 2 * at + 1;
    if (child >= m) break;
    if (child + 1 < m && ember_nms_before(&heap[child + 1], &heap[child])) ++child;
    if (!ember_nms_before(&heap[child], &item)) break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = item;
}

static inline float ember_nms_min(float a, float b) { return a < b ? a : b; }
static inline float ember_nms_max(float a, float b) { return a > b ? a : b; }

static inline ember_nms_box ember_nms_edges(const float* v, int32_t center_point_box) {
  ember_nms_box e;
  if (center_point_box) {
    float hw = v[2] / 2.0f, hh = v[3] / 2.0f;
    e.x0 = v[0] - hw; e.x1 = v[0] + hw; e.y0 = v[1] - hh; e.y1 = v[1] + hh;
  } else {
    e.y0 = ember_nms_min(v[0], v[2]); e.y1 = ember_nms_max(v[0], v[2]);
    e.x0 = ember_nms_min(v[1], v[3]); e.x1 = ember_nms_max(v[1], v[3]);
  }
  e.area = (e.x1 - e.x0) * (e.y1 - e.y0);
  return e;
}

/* Whether a box selected before (a) suppresses b. */
static inline int ember_nms_suppresses(const ember_nms_box* a, const ember_nms_box* b,
                                       float iou_threshold) {
  float w = ember_nms_min(a->x1, b->x1) - ember_nms_max(a->x0, b->x0);
  float h = ember_nms_min(a->y1, b->y1) - ember_nms_max(a->y0, b->y0);
  float inter, uni;
  if (w <= 0.0f || h <= 0.0f) return 0;
  inter = w * h;
  uni = a->area + b->area - inter;
  if (inter <= 0.0f || a->area <= 0.0f || b->area <= 0.0f || uni <= 0.0f) return 0;
  return inter / uni > iou_threshold;
}

/* See the top of this file. */
#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_ember_non_max_suppression)
EMBER_KENTRY int32_t ember_non_max_suppression(EMBER_NMS_PARAMS) {
  int64_t limit = max_output < 0 || max_output > n ? n : max_output, found = 0, r;
  size_t bytes = (size_t)n * (sizeof(ember_nms_candidate) + sizeof(ember_nms_box) +
                              sizeof(int32_t)) + 1;
  char* work;
  ember_nms_candidate* cand;
  ember_nms_box* edges;
  int32_t* kept;
  if (batch < 0 || classes < 0 || n < 0 || n > INT32_MAX || rows < batch * classes * limit) {
    return -1;
  }
  work = (char*)TVMBackendAllocWorkspace(1, 0, (uint64_t)bytes, 0, 32);
  if (work == NULL) return -1;
  edges = (ember_nms_box*)work;
  cand = (ember_nms_candidate*)(edges + n);
  kept = (int32_t*)(cand + n);
  for (int64_t b = 0; b < batch && limit > 0; ++b) {
    for (int64_t i = 0; i < n; ++i) edges[i] = ember_nms_edges(boxes + (b * n + i) * 4,
                                                               center_point_box);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * n;
      int64_t m = 0, picked = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (has_score_threshold && !(s[i] > score_threshold)) continue;
        cand[m].score = s[i];
        cand[m++].index = (int32_t)i;
      }
      for (int64_t k = m / 2 - 1; k >= 0; --k) ember_nms_sift(cand, m, k);
      while (m > 0 && picked < limit) {
        int32_t index = cand[0].index;
        const ember_nms_box* box = &edges[index];
        int hit = 0;
        cand[0] = cand[--m];
        ember_nms_sift(cand, m, 0);
        for (int64_t j = 0; j < picked && !hit; ++j) {
          hit = ember_nms_suppresses(&edges[kept[j]], box, iou_threshold);
        }
        if (hit) continue;
        kept[picked++] = index;
        selected[found * 3] = b;
        selected[found * 3 + 1] = c;
        selected[found * 3 + 2] = index;
        ++found;
      }
    }
  }
  for (r = found * 3; r < rows * 3; ++r) selected[r] = 0;
  count[0] = found;
  TVMBackendFreeWorkspace(1, 0, work);
  return 0;
}
#endif

#endif /* EMBER_KERNEL_BODIES */
#endif /* EMBER_KERNELS_NMS_H_ */
