/*
 * dynamic_call.h -- a VM model's whole call at any input shape, as one C call.
 *
 * Included at the end of backend.c (so every library ember builds has it, and a loaded model
 * needs no C compiler): it uses EmberModelCall and its types. The host side is
 * ember/runtime/vm/plan_native.py, which fills the plan from a VM static plan once.
 *
 * EmberModelCall runs one input signature (exact shapes). A model with symbolic dimensions
 * gets a call at shapes it has not seen before; in Python that costs the shape phase and its
 * checks (tens of microseconds), more than a small model's kernels. Here a call whose input
 * dimensions differ from the last call's makes, in one pass of integer arithmetic:
 *
 *   1. each input dimension checked against its rule (a declared extent, any size, or equal
 *      to an earlier dimension of the same name) and written to its slot of the plan's arena;
 *   2. the inputs' byte sizes checked against their buffers;
 *   3. the shape functions (compiled kernels reading and writing the arena): each called
 *      directly (its unpacked entry on pointers fixed at load) where the host could lay it
 *      out so, else through its packed entry (which checks its arguments: ~0.2 us a call,
 *      most of an unseen shape's cost for a small model);
 *   4. the check program (below): block sizes within [least, capacity], tensors of run-time
 *      shape inside their blocks, reshapes that keep the element count;
 *   5. the outputs' shapes (declared, or read from the arena) and byte sizes checked against
 *      their buffers;
 *   6. which inputs and outputs the caller's arrays serve in place (ember_decide_in_place);
 *   7. the value phase: the kernel calls that read only constants, shapes and each other's
 *      blocks (T5's relative-position buckets, causal masks, position ids), whose blocks then
 *      hold this signature's values until the next new signature (ember_run_value_phase);
 *   8. the parts of the concatenations made in place (the host's plan_concat.py: no copy,
 *      each part's producer writes it inside the output) pointed at their offsets there, the
 *      sums of the earlier parts' sizes (ember_place_parts; a kept signature's too);
 *
 * then the kernels run as EmberModelCallDirect runs them (no copy in or out where 6 allows).
 * A signature that passed 1-6 is kept (up to kept_capacity of them besides the last): a later
 * call at it copies back what 1-6 wrote (the arena, sizes, decisions) instead of running them,
 * whose code and tables a model's kernels have evicted from the cache by then.
 * Anything that does not hold returns 1 with nothing run (the host's Python path then grows
 * a buffer, or raises the error that names the input); outputs the host made of another shape
 * return 2 (the host makes them again from out_dims and calls once more: the signature is then
 * the last one).
 *
 * A plan whose kernels compute a size from data (NonZero's count, NonMaxSuppression's) has
 * segments: kernel calls, then checks that read what they computed (the late shape
 * functions' results, in the arena), then more calls. Such a call (ember_segmented_call)
 * copies in the inputs that step 6 does not serve in place, then per segment runs its check
 * program (the sizes of the blocks that depend on data within the capacity the host gave
 * them: a larger one returns 1, the host grows it, and the next call runs here again) and
 * its calls; the outputs stay in their buffers, out_dims says their shapes, and the host
 * copies them out (their shapes are known only now: the host cannot make the arrays
 * beforehand).
 */
#ifndef EMBER_DYNAMIC_CALL_H_
#define EMBER_DYNAMIC_CALL_H_

/* Opcodes of the check program, a flat int64 array (mirrored in plan_native.py):
 *   SIZE  slot least most               sizes[n++] = arena[slot], least <= it <= most
 *   FIT   pos room offset item k i_1..k offset + prod(arena[i_j]) * item <= (pos >= 0 ?
 *                                       sizes[pos] : pos <= -2 ? arena[-2 - pos] : room),
 *                                       no extent negative (pos <= -2: a block sized by an
 *                                       earlier program, a tensor shaped by a later one)
 *   COUNT side side                     equal element counts; a side is "-1 count" or
 *                                       "k i_1..i_k" (the product of those arena values)
 *   SUM   out k i_1..i_k                arena[out] == the sum of arena[i_j] (a concatenation
 *                                       made in place: its parts' sizes fill its output) */
#define EMBER_CHECK_SIZE 1
#define EMBER_CHECK_FIT 2
#define EMBER_CHECK_COUNT 3
#define EMBER_CHECK_SUM 4

typedef struct {
  /* call.call: inputs[i].shape -> dims, outputs[i].shape -> out_dims; call.sites: the data
   * fields of the kernels' tensors in the input and output buffers (the caller's arrays take
   * their place where this signature's in_place says so); call.direct == in_place */
  EmberDirectCallPlan call;
  int64_t* arena;          /* the static plan's arena, as int64 */
  const EmberPlannedCall* shape_calls;
  const int64_t* dim_rule; /* per input dimension: >= 0 that extent; -1 any; -2 - j: = dim j */
  const int64_t* dim_slot; /* per input dimension: its arena index, or -1 */
  int64_t* dims;           /* this call's input dimensions */
  int64_t* last;           /* the dimensions whose shape phase the arena holds */
  const int64_t* in_capacity; /* per input: the bytes its buffer holds */
  const int64_t* in_item;     /* per input: its item size */
  const int64_t* program;     /* the check program */
  int64_t* sizes;             /* the program's block sizes (scratch) */
  const int64_t* out_rule;    /* per output dimension: >= 0 that extent, else -1 - arena index */
  int64_t* out_dims;          /* this signature's output dimensions */
  const int64_t* out_capacity; /* per output: the bytes its buffer holds from its offset */
  const int64_t* out_item;     /* per output: its item size */
  const int64_t* direct;       /* the shape calls as direct calls (below), or NULL */
  const int8_t* may_direct;    /* per input, then output: whether its sites may ever take the
                                  caller's array (the host's rule, which holds at any shape) */
  const int8_t* site_written;  /* per site: 1 where a kernel writes its tensor */
  int8_t* in_place;            /* per input, then output: this signature's decision */
  const EmberPlannedCall* value_calls; /* the value phase (step 7), or NULL */
  int64_t value_runs;          /* how many times it ran (the host's tests count) */
  int32_t num_shape_calls, num_dims, program_size, have_last;
  /* Signatures kept besides the last (ember_restore_kept): kept_dims holds each one's input
   * dimensions (num_dims apiece), kept the rest of what its new signature wrote (record_words
   * apiece: ember_kept_words); kept_capacity 0 keeps none. */
  int64_t* kept_dims;
  int64_t* kept;
  int64_t arena_size, record_words;
  int32_t kept_capacity, kept_count, kept_next, num_value_calls;
  /* Segments (ember_segmented_call), num_segments x "start end at size": the calls
   * [start, end) of call.calls, after the check program at program[at..at + size). */
  const int64_t* segments;
  /* The alias program (ember_place_parts), num_aliases entries; -1: C leaves every call to
   * the host (a block holding parts has no storage yet). */
  int32_t num_segments, num_aliases;
  int64_t* aliases;
} EmberDynamicCallPlan;

/* The plan's layout as this library has it: the host uses the library only if it agrees. */
EMBER_DLL int64_t EmberDynamicCallPlanSize(void) { return (int64_t)sizeof(EmberDynamicCallPlan); }

/* Direct shape calls, a flat int64 array of num_shape_calls entries, in the order of
 * shape_calls: "fn n p_1..p_n", the address of a kernel's unpacked entry (int32_t
 * f(int64_t*, ...)), its number of pointer arguments and the pointers (into the arena: they
 * do not move); or "0 -1 k", shape_calls[k] through its packed entry (a kernel that is no
 * shape function, such as a take of a shape, whose unpacked signature the host cannot tell:
 * one such call leaves the others direct). A shape function has two arguments per output
 * (shape and byte size) besides its inputs: a split into 7 pieces with one input takes 15. */
#define EMBER_DIRECT_MAX_ARGS 16

/* What the host may write here (a library built before this said 6; the host asks). */
EMBER_DLL int64_t EmberDirectMaxArgs(void) { return EMBER_DIRECT_MAX_ARGS; }

#define EMBER_P void*
typedef int32_t (*ember_direct_1)(EMBER_P);
typedef int32_t (*ember_direct_2)(EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_3)(EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_4)(EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_5)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_6)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_7)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_8)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                  EMBER_P);
typedef int32_t (*ember_direct_9)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                  EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_10)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_11)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_12)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_13)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P);
typedef int32_t (*ember_direct_14)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_15)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P);
typedef int32_t (*ember_direct_16)(EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P, EMBER_P,
                                   EMBER_P, EMBER_P, EMBER_P, EMBER_P);
#undef EMBER_P

/* The direct shape calls: 0 if each returned 0. */
static int ember_run_direct(const int64_t* at, int32_t count, const EmberPlannedCall* calls) {
  int32_t i, failed_at;
  for (i = 0; i < count; ++i) {
    void* f = (void*)(intptr_t)at[0];
    void* a[EMBER_DIRECT_MAX_ARGS];
    int64_t n = at[1], k;
    int32_t rc;
    if (n == -1) { /* "0 -1 k": a packed call */
      if (EmberRunCalls(&calls[at[2]], 1, &failed_at) != 0) return -1;
      at += 3;
      continue;
    }
    for (k = 0; k < n && k < EMBER_DIRECT_MAX_ARGS; ++k) a[k] = (void*)(intptr_t)at[2 + k];
    switch (n) {
      case 1: rc = ((ember_direct_1)f)(a[0]); break;
      case 2: rc = ((ember_direct_2)f)(a[0], a[1]); break;
      case 3: rc = ((ember_direct_3)f)(a[0], a[1], a[2]); break;
      case 4: rc = ((ember_direct_4)f)(a[0], a[1], a[2], a[3]); break;
      case 5: rc = ((ember_direct_5)f)(a[0], a[1], a[2], a[3], a[4]); break;
      case 6: rc = ((ember_direct_6)f)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
      case 7: rc = ((ember_direct_7)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
      case 8: rc = ((ember_direct_8)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
      case 9:
        rc = ((ember_direct_9)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
        break;
      case 10:
        rc = ((ember_direct_10)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
        break;
      case 11:
        rc = ((ember_direct_11)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10]);
        break;
      case 12:
        rc = ((ember_direct_12)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11]);
        break;
      case 13:
        rc = ((ember_direct_13)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11], a[12]);
        break;
      case 14:
        rc = ((ember_direct_14)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11], a[12], a[13]);
        break;
      case 15:
        rc = ((ember_direct_15)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11], a[12], a[13], a[14]);
        break;
      case 16:
        rc = ((ember_direct_16)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11], a[12], a[13], a[14], a[15]);
        break;
      default: return -1; /* the host writes no such entry */
    }
    if (rc != 0) return -1;
    at += 2 + n;
  }
  return 0;
}

/* *n = the product of the arena values at idx[0..k); 0 when one is negative or it overflows. */
static int ember_arena_product(const int64_t* arena, const int64_t* idx, int64_t k, int64_t* n) {
  int64_t j, p = 1;
  for (j = 0; j < k; ++j) {
    int64_t v = arena[idx[j]];
    if (v < 0 || __builtin_mul_overflow(p, v, &p)) return 0;
  }
  *n = p;
  return 1;
}

/* One side of a COUNT at program[*at]: its element count (-1 if none), *at moved past it. */
static int64_t ember_count_side(const int64_t* arena, const int64_t* program, int32_t* at) {
  int64_t k = program[(*at)++], n;
  if (k < 0) return program[(*at)++];
  if (!ember_arena_product(arena, &program[*at], k, &n)) n = -1;
  *at += (int32_t)k;
  return n;
}

/* The check program pr[0..size) over the arena: 1 if every check holds (its SIZEs in
 * p->sizes, in order). */
static int ember_run_program(EmberDynamicCallPlan* p, const int64_t* pr, int32_t size) {
  int32_t at = 0, sized = 0;
  while (at < size) {
    int64_t op = pr[at++];
    if (op == EMBER_CHECK_SIZE) {
      int64_t v = p->arena[pr[at]];
      if (v < pr[at + 1] || v > pr[at + 2]) return 0;
      p->sizes[sized++] = v;
      at += 3;
    } else if (op == EMBER_CHECK_FIT) {
      int64_t pos = pr[at], room = pr[at + 1], offset = pr[at + 2];
      int64_t item = pr[at + 3], k = pr[at + 4], n, bytes;
      if (!ember_arena_product(p->arena, &pr[at + 5], k, &n)) return 0;
      if (pos >= 0) room = p->sizes[pos];
      else if (pos <= -2) room = p->arena[-2 - pos];
      if (__builtin_mul_overflow(n, item, &bytes) || bytes > room - offset) return 0;
      at += 5 + (int32_t)k;
    } else if (op == EMBER_CHECK_COUNT) {
      int64_t a = ember_count_side(p->arena, pr, &at), b = ember_count_side(p->arena, pr, &at);
      if (a < 0 || a != b) return 0;
    } else if (op == EMBER_CHECK_SUM) {
      int64_t total = 0, k = pr[at + 1], j;
      for (j = 0; j < k; ++j) {
        if (__builtin_add_overflow(total, p->arena[pr[at + 2 + j]], &total)) return 0;
      }
      if (total != p->arena[pr[at]]) return 0; /* (the host's check names the concatenation) */
      at += 2 + (int32_t)k;
    } else {
      return 0; /* the host wrote no such op */
    }
  }
  return 1;
}

/* Step 8: each part of a concatenation made in place at its address, per entry "address
 * parent k s_1..s_k m (field offset) x m": the parent's address (>= 0: absolute; else
 * -1 - the word holding an earlier entry's, an output that is itself a part) plus the arena
 * values at s_j (the earlier parts' sizes, checked by SIZE and SUM), written to the entry's
 * address word and to each DLTensor data field at its offset. */
static void ember_place_parts(EmberDynamicCallPlan* p) {
  int64_t* at = p->aliases;
  int32_t i;
  for (i = 0; i < p->num_aliases; ++i) {
    int64_t parent = at[1], k = at[2], m, j, address;
    address = parent >= 0 ? parent : p->aliases[-1 - parent];
    for (j = 0; j < k; ++j) address += p->arena[at[3 + j]];
    at[0] = address;
    at += 3 + k;
    m = *at++;
    for (j = 0; j < m; ++j)
      *(void**)(intptr_t)at[2 * j] = (void*)(intptr_t)(address + at[2 * j + 1]);
    at += 2 * m;
  }
}

/* The check program of a new signature (the shape phase's checks). */
static int ember_run_checks(EmberDynamicCallPlan* p) {
  return ember_run_program(p, p->program, p->program_size);
}

/* The tensors' byte sizes for dims[d..d+ndim): *nbytes; 0 if it overflows or exceeds cap. */
static int ember_tensor_bytes(const int64_t* dims, int32_t ndim, int64_t item, int64_t cap,
                              int64_t* nbytes) {
  int64_t n = item;
  int32_t k;
  for (k = 0; k < ndim; ++k) {
    if (__builtin_mul_overflow(n, dims[k], &n)) return 0;
  }
  *nbytes = n;
  return n <= cap;
}

/* The bytes of site tensor t at this signature's shape (the host lists only tensors without
 * strides and of whole-byte items); -1 if a dimension is negative or it overflows. */
static int64_t ember_site_bytes(const DLTensor* t) {
  int64_t n = ((int64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
  int32_t k;
  for (k = 0; k < t->ndim; ++k) {
    if (t->shape[k] < 0 || __builtin_mul_overflow(n, t->shape[k], &n)) return -1;
  }
  return n;
}

/* Which inputs and outputs the caller's arrays serve at this signature (p->in_place), as
 * model_call.direct_sites decides for a static plan, but per signature: the tensors' extents
 * are the arena's now. An input: every tensor in its buffer is all of it (the host lists no
 * buffer that a kernel writes). An output: every tensor lies within it, and one that a kernel
 * writes is all of it (the caller's uninitialised array is written whole). Empty ones copy. */
static void ember_decide_in_place(EmberDynamicCallPlan* p) {
  const EmberModelCallPlan* c = &p->call.call;
  int32_t i, n = c->num_inputs + c->num_outputs;
  for (i = 0; i < n; ++i) p->in_place[i] = (int8_t)(p->may_direct[i] ? 2 : 0); /* 2: uncovered */
  for (i = 0; i < p->call.num_sites; ++i) {
    const EmberDirectSite* s = &p->call.sites[i];
    const DLTensor* t = (const DLTensor*)((char*)s->field - offsetof(DLTensor, data));
    int32_t b = s->tensor;
    int64_t whole = b < c->num_inputs ? c->inputs[b].nbytes : c->outputs[b - c->num_inputs].nbytes;
    int64_t start = s->offset + (int64_t)t->byte_offset, bytes = ember_site_bytes(t);
    if (!p->in_place[b]) continue;
    if (bytes < 0 || start < 0 || whole <= 0 || start + bytes > whole ||
        (b < c->num_inputs && (start != 0 || bytes != whole))) {
      p->in_place[b] = 0;
    } else if (b < c->num_inputs || (p->site_written[i] && start == 0 && bytes == whole)) {
      p->in_place[b] = 1;
    }
  }
  for (i = 0; i < n; ++i) {
    if (p->in_place[i] == 2) p->in_place[i] = 0;
  }
}

/* The outputs' shapes (out_dims) from their rules, their byte sizes within their buffers:
 * 1 if they hold. */
static int ember_output_sizes(EmberDynamicCallPlan* p) {
  EmberModelCallPlan* c = &p->call.call;
  int32_t i, k, d = 0;
  int64_t nbytes;
  for (i = 0; i < c->num_outputs; ++i) {
    EmberCallTensor* t = (EmberCallTensor*)&c->outputs[i];
    for (k = 0; k < t->ndim; ++k, ++d) {
      int64_t rule = p->out_rule[d];
      p->out_dims[d] = rule >= 0 ? rule : p->arena[-1 - rule];
      if (p->out_dims[d] < 0) return 0;
    }
    if (!ember_tensor_bytes(&p->out_dims[d - t->ndim], t->ndim, p->out_item[i],
                            p->out_capacity[i], &nbytes))
      return 0;
    t->nbytes = nbytes;
  }
  return 1;
}

/* Step 7: the value phase, with the model's thread count, as the kernel calls have it. Its
 * blocks were placed by the checks (a size beyond a block's capacity failed them). */
static int ember_run_value_phase(EmberDynamicCallPlan* p) {
  int saved = g_pool_num_threads, rc;
  if (p->call.call.num_threads > 0) ember_pool_set_num_threads(p->call.call.num_threads);
  rc = EmberRunCalls(p->value_calls, p->num_value_calls, &p->call.call.failed_at);
  g_pool_num_threads = saved;
  if (rc != 0) return -1;
  p->value_runs++;
  return 0;
}

/* Steps 1 (the arena part) to 7 for p->dims: 0 when the signature can run, 1 otherwise. */
static int ember_new_signature(EmberDynamicCallPlan* p) {
  EmberModelCallPlan* c = &p->call.call;
  int32_t i, d = 0;
  int64_t nbytes;
  p->have_last = 0;
  for (i = 0; i < p->num_dims; ++i) {
    if (p->dim_slot[i] >= 0) p->arena[p->dim_slot[i]] = p->dims[i];
  }
  for (i = 0; i < c->num_inputs; ++i) {
    EmberCallTensor* t = (EmberCallTensor*)&c->inputs[i];
    if (!ember_tensor_bytes(&p->dims[d], t->ndim, p->in_item[i], p->in_capacity[i], &nbytes))
      return 1;
    t->nbytes = nbytes;
    d += t->ndim;
  }
  if (p->num_shape_calls > 0 &&
      (p->direct != NULL ? ember_run_direct(p->direct, p->num_shape_calls, p->shape_calls)
                         : EmberRunCalls(p->shape_calls, p->num_shape_calls, &c->failed_at)) != 0)
    return 1;
  if (!ember_run_checks(p)) return 1;
  /* (a segmented plan's outputs take their shapes from its segments: ember_segmented_call) */
  if (p->num_segments == 0 && !ember_output_sizes(p)) return 1;
  if (p->call.num_sites > 0) ember_decide_in_place(p);
  /* (a failed kernel: the host's checked path runs the call again and reports it) */
  if (p->num_value_calls > 0 && ember_run_value_phase(p) != 0) return 1;
  memcpy(p->last, p->dims, sizeof(int64_t) * (size_t)p->num_dims);
  p->have_last = 1;
  return 0;
}

/* The int64s of a kept signature's record: the inputs' and outputs' byte sizes, the outputs'
 * dimensions, the in-place decisions (one int64 each) and the arena. */
static int64_t ember_kept_words(const EmberDynamicCallPlan* p) {
  const EmberModelCallPlan* c = &p->call.call;
  int64_t words = 2 * ((int64_t)c->num_inputs + c->num_outputs) + p->arena_size;
  int32_t i;
  for (i = 0; i < c->num_outputs; ++i) words += c->outputs[i].ndim;
  return words;
}

/* Copy what a new signature writes into record r (save) or back from it. */
static void ember_kept_copy(EmberDynamicCallPlan* p, int64_t* r, int save) {
  EmberModelCallPlan* c = &p->call.call;
  int32_t i, n = c->num_inputs + c->num_outputs, out_dims = 0;
  for (i = 0; i < n; ++i) {
    EmberCallTensor* t = (EmberCallTensor*)(i < c->num_inputs ? &c->inputs[i]
                                                              : &c->outputs[i - c->num_inputs]);
    if (save) r[i] = t->nbytes; else t->nbytes = r[i];
    if (save) r[n + i] = p->in_place[i]; else p->in_place[i] = (int8_t)r[n + i];
  }
  for (i = 0; i < c->num_outputs; ++i) out_dims += c->outputs[i].ndim;
  r += 2 * n;
  if (save) {
    memcpy(r, p->out_dims, sizeof(int64_t) * (size_t)out_dims);
    memcpy(r + out_dims, p->arena, sizeof(int64_t) * (size_t)p->arena_size);
  } else {
    memcpy(p->out_dims, r, sizeof(int64_t) * (size_t)out_dims);
    memcpy(p->arena, r + out_dims, sizeof(int64_t) * (size_t)p->arena_size);
  }
}

/* A signature that ran before, kept: its state back in place of the shape phase and checks
 * (which a kept signature passed: the buffers only grow while it is kept). 1 if p->dims was. */
static int ember_restore_kept(EmberDynamicCallPlan* p) {
  int32_t j;
  for (j = 0; j < p->kept_count; ++j) {
    const int64_t* dims = &p->kept_dims[(int64_t)j * p->num_dims];
    if (memcmp(dims, p->dims, sizeof(int64_t) * (size_t)p->num_dims) != 0) continue;
    ember_kept_copy(p, &p->kept[(int64_t)j * p->record_words], 0);
    memcpy(p->last, p->dims, sizeof(int64_t) * (size_t)p->num_dims);
    p->have_last = 1;
    return 1;
  }
  return 0;
}

/* After a new signature that can run: keep it (replacing the oldest when all are taken). */
static void ember_keep_signature(EmberDynamicCallPlan* p) {
  int32_t j = p->kept_next;
  if (p->kept_capacity <= 0 || p->record_words != ember_kept_words(p)) return;
  memcpy(&p->kept_dims[(int64_t)j * p->num_dims], p->dims,
         sizeof(int64_t) * (size_t)p->num_dims);
  ember_kept_copy(p, &p->kept[(int64_t)j * p->record_words], 1);
  p->kept_next = j + 1 < p->kept_capacity ? j + 1 : 0;
  if (p->kept_count < p->kept_capacity) ++p->kept_count;
}

/* A segmented plan's call (see the top of this file), its signature's shape phase done: the
 * inputs copied in, each segment's checks and calls, the outputs' shapes. 0 done (the
 * outputs in their buffers, out_dims their shapes), 1 a check failed or a block is too
 * small, -1 a kernel failed (c->failed_at its index in c->calls). */
static int ember_segmented_call(EmberDynamicCallPlan* p) {
  EmberModelCallPlan* c = &p->call.call;
  const EmberObjectLayout* L = c->layout;
  const void* const* items = (const void* const*)((const char*)c->args + L->tuple_items);
  int32_t i, j;
  int saved = g_pool_num_threads, rc = 0;
  for (i = 0; i < c->num_inputs; ++i) {
    if (!ember_array_is(L, items[i], &c->inputs[i])) return 1;
  }
  for (i = 0; i < c->num_inputs; ++i) {
    if (!p->in_place[i])
      memcpy(c->inputs[i].buffer, EMBER_FIELD(items[i], L->array_data, const void*),
             (size_t)c->inputs[i].nbytes);
  }
  /* the inputs that in_place marks read in the caller's arrays (the host lists no output) */
  if (p->call.num_sites > 0) ember_point_sites(&p->call, items, NULL);
  if (c->num_threads > 0) ember_pool_set_num_threads(c->num_threads);
  for (j = 0; j < p->num_segments && rc == 0; ++j) {
    const int64_t* s = &p->segments[4 * j];
    if (s[3] > 0 && !ember_run_program(p, &p->program[s[2]], (int32_t)s[3])) {
      rc = 1;
    } else if (s[1] > s[0] &&
               EmberRunCalls(&c->calls[s[0]], (int32_t)(s[1] - s[0]), &c->failed_at) != 0) {
      c->failed_at += (int32_t)s[0];
      rc = -1;
    }
  }
  g_pool_num_threads = saved;
  if (p->call.num_sites > 0) ember_point_sites(&p->call, NULL, NULL);
  if (rc != 0) return rc;
  return ember_output_sizes(p) ? 0 : 1;
}

/* A whole call at any input shape (see the top of this file): 0 done, 1 not run (the host's
 * checked path runs it), 2 the outputs the host made have other shapes (out_dims has
 * theirs), -1 a kernel failed (as EmberModelCall). */
EMBER_DLL int EmberDynamicModelCall(EmberDynamicCallPlan* p) {
  EmberModelCallPlan* c = &p->call.call;
  const EmberObjectLayout* L = c->layout;
  const void* const* items = (const void* const*)((const char*)c->args + L->tuple_items);
  const void* const* outs;
  int32_t i, k, d = 0, changed = !p->have_last;
  if (EMBER_FIELD(c->args, L->var_size, int64_t) != c->num_inputs || p->num_aliases < 0) return 1;
  for (i = 0; i < c->num_inputs; ++i) {
    const int64_t* dims;
    if (EMBER_FIELD(items[i], L->ob_type, const void*) != L->ndarray_type ||
        EMBER_FIELD(items[i], L->array_ndim, int) != c->inputs[i].ndim)
      return 1;
    dims = EMBER_FIELD(items[i], L->array_dims, const int64_t*);
    for (k = 0; k < c->inputs[i].ndim; ++k, ++d) {
      int64_t rule = p->dim_rule[d], v = dims[k];
      if ((rule >= 0 && v != rule) || (rule <= -2 && v != p->dims[-2 - rule])) return 1;
      changed |= v != p->last[d];
      p->dims[d] = v;
    }
  }
  if (changed && ember_restore_kept(p)) {
    /* the value blocks hold the previous signature's values: this one's are made again */
    if (p->num_value_calls > 0 && ember_run_value_phase(p) != 0) {
      p->have_last = 0;
      return 1;
    }
  } else if (changed) {
    if (ember_new_signature(p) != 0) return 1;
    ember_keep_signature(p);
  }
  if (changed && p->num_aliases > 0) ember_place_parts(p);
  if (p->num_segments > 0) return ember_segmented_call(p);
  outs = c->num_outputs == 1 ? &c->outs : EMBER_FIELD(c->outs, L->list_items, const void* const*);
  for (i = 0; i < c->num_outputs; ++i) {
    if (!ember_array_is(L, outs[i], &c->outputs[i])) return 2;
  }
  /* As EmberModelCallDirect: the inputs' dtypes and layouts checked, the inputs and outputs
   * that in_place marks read and written in the caller's arrays, the others copied. */
  return ember_model_call(c, p->call.num_sites > 0 ? &p->call : NULL);
}

#endif /* EMBER_DYNAMIC_CALL_H_ */
