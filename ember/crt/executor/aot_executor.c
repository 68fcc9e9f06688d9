/*
 * aot_executor.c -- the AOT executor (see aot_executor.h).
 *
 * Memory, in allocation order (released in reverse): the executor with its tables, one
 * buffer for every input and output (each 64-byte aligned), the constant pool, the workspace.
 */
#include <string.h>

#include "ember/crt/aot_executor.h"
#include "ember/crt/json.h"

#include "../src/backend/internal.h"

typedef struct {
  const char* name; /* relay_name_hint (inputs, outputs) or name (constants) */
  uint32_t name_len;
  uint64_t offset; /* constants: in the pool */
  DLTensor t;
} Slot;

struct EmberAotExecutor {
  uint32_t num_inputs, num_outputs, num_constants, num_args;
  Slot* slots;         /* inputs, outputs, constants */
  int64_t* dims;
  uint8_t* is_set;     /* per input and constant */
  uint8_t* io;         /* the buffer of all inputs and outputs */
  uint8_t* pool_raw;   /* the constant pool as allocated, and aligned */
  uint8_t* ws_raw;
  DLTensor pool, ws;
  int64_t pool_dim, ws_dim;
  int interface_c;
  TVMFunctionHandle run;
  int32_t (*run_c)(void*, void*);
  int32_t (*set_constants)(const void*, uint64_t);
  TVMValue* values;
  int* codes;
  void** ptrs; /* interface c: the inputs struct, then the outputs struct */
};

static tvm_crt_error_t bad(const char* path, int64_t index, const char* msg) {
  ember_crt_error(kTvmErrorExecutorBadArtifact, "aot metadata: ");
  ember_crt_error_append(path);
  if (index >= 0) {
    ember_crt_error_append("[");
    ember_crt_error_append_i64(index);
    ember_crt_error_append("]");
  }
  ember_crt_error_append(": ");
  ember_crt_error_append(msg);
  return kTvmErrorExecutorBadArtifact;
}

static int field_int(const EmberJson* j, size_t obj, const char* key, int64_t* out) {
  size_t v;
  return ember_json_find(j, obj, key, &v) && ember_json_kind(j, v) != '"' &&
         ember_json_int(j, v, out) == 0 && *out >= 0;
}

/* One parameter or constant: name, shape, dtype (and offset). */
static tvm_crt_error_t read_slot(const EmberJson* j, size_t obj, const char* name_key,
                                 const char* path, int64_t index, Slot* s, int64_t* dims,
                                 uint32_t* used) {
  size_t v, d;
  const char* text;
  uint32_t len;
  uint64_t count = 1;
  int more;
  if (!ember_json_find(j, obj, name_key, &v) || ember_json_string(j, v, &s->name, &s->name_len)) {
    return bad(path, index, "missing its name");
  }
  if (!ember_json_find(j, obj, "dtype", &v) || ember_json_string(j, v, &text, &len) != 0 ||
      ember_dtype_parse(text, len, &s->t.dtype) != 0) {
    return bad(path, index, "missing or unknown dtype");
  }
  if (!ember_json_find(j, obj, "shape", &v) || ember_json_kind(j, v) != '[' ||
      ember_json_count(j, v) > EMBER_CRT_MAX_NDIM) {
    return bad(path, index, "shape must be a list of at most 16 dims");
  }
  s->t.shape = dims + *used;
  s->t.ndim = 0;
  s->t.strides = NULL;
  s->t.byte_offset = 0;
  for (more = ember_json_first(j, v, &d); more; more = ember_json_next(j, d, &d)) {
    int64_t dim;
    if (ember_json_kind(j, d) == '"' || ember_json_int(j, d, &dim) != 0 || dim < 0 ||
        dim > 0x7fffffffLL) {
      return bad(path, index, "dimensions must be integers >= 0");
    }
    count *= (uint64_t)dim;
    if (count > ((uint64_t)1 << 40)) return bad(path, index, "the tensor is implausibly large");
    dims[(*used)++] = dim;
    s->t.ndim++;
  }
  return 0;
}

/* Counts of the metadata: parameters, constants and all their dims. */
static tvm_crt_error_t count(const EmberJson* j, size_t* main, uint32_t* params,
                             uint32_t* constants, uint32_t* dims) {
  size_t v, e;
  int64_t version, n_in, n_out;
  int more;
  if (ember_json_kind(j, 0) != '{') return bad("(top level)", -1, "expected a JSON object");
  if (!field_int(j, 0, "version", &version) || version != 1) {
    return bad("version", -1, "missing, or not 1 (the version this runtime reads)");
  }
  if (!ember_json_find(j, 0, "functions", &v) || !ember_json_first(j, v, main) ||
      ember_json_kind(j, *main) != '{') {
    return bad("functions", -1, "the model's run_model function is missing");
  }
  if (!ember_json_find(j, *main, "params", &v) || ember_json_kind(j, v) != '[') {
    return bad("functions[0].params", -1, "missing");
  }
  *params = ember_json_count(j, v);
  if (!field_int(j, *main, "num_inputs", &n_in) || !field_int(j, *main, "num_outputs", &n_out) ||
      n_out == 0 || n_in + n_out != (int64_t)*params) {
    return bad("functions[0]", -1, "num_inputs + num_outputs must be the number of params "
               "(and num_outputs >= 1)");
  }
  *dims = 0;
  for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e)) {
    size_t s;
    if (ember_json_find(j, e, "shape", &s)) *dims += ember_json_count(j, s);
  }
  *constants = 0;
  if (ember_json_find(j, 0, "constants", &v)) {
    *constants = ember_json_count(j, v);
    for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e)) {
      size_t s;
      if (ember_json_find(j, e, "shape", &s)) *dims += ember_json_count(j, s);
    }
  }
  if (*params > 0x100000u || *constants > 0x100000u) return bad("params", -1, "too many");
  return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1u) & ~(a - 1u); }

static EmberAotExecutor* make(uint32_t params, uint32_t constants, uint32_t dims) {
  uint32_t slots = params + constants, args = params + 2u;
  uint64_t at = align_up(sizeof(EmberAotExecutor), 8), off_slots, off_dims, off_vals, off_codes,
           off_ptrs, off_set;
  uint8_t* b;
  EmberAotExecutor* ex;
  off_slots = at;
  at = align_up(at + (uint64_t)slots * sizeof(Slot), 8);
  off_dims = at;
  at = align_up(at + (uint64_t)dims * sizeof(int64_t), 8);
  off_vals = at;
  at = align_up(at + (uint64_t)args * sizeof(TVMValue), 8);
  off_ptrs = at;
  at = align_up(at + (uint64_t)params * sizeof(void*), 8);
  off_codes = at;
  at = align_up(at + (uint64_t)args * sizeof(int), 8);
  off_set = at;
  at += slots;
  b = (uint8_t*)ember_executor_alloc(at);
  if (b == NULL) return NULL;
  memset(b, 0, (size_t)at);
  ex = (EmberAotExecutor*)b;
  ex->slots = (Slot*)(b + off_slots);
  ex->dims = (int64_t*)(b + off_dims);
  ex->values = (TVMValue*)(b + off_vals);
  ex->ptrs = (void**)(b + off_ptrs);
  ex->codes = (int*)(b + off_codes);
  ex->is_set = b + off_set;
  return ex;
}

static tvm_crt_error_t fill(EmberAotExecutor* ex, const EmberJson* j, size_t main) {
  size_t v, e;
  uint32_t k = 0, used = 0;
  int more, link_params = 0;
  int64_t n_in;
  field_int(j, main, "num_inputs", &n_in);
  ex->num_inputs = (uint32_t)n_in;
  ember_json_find(j, main, "params", &v);
  for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e), ++k) {
    if (read_slot(j, e, "relay_name_hint", "functions[0].params", k, &ex->slots[k], ex->dims,
                  &used) != 0) {
      return kTvmErrorExecutorBadArtifact;
    }
  }
  ex->num_outputs = k - ex->num_inputs;
  if (ember_json_find(j, 0, "link_params", &v) && ember_json_bool(j, v, &link_params) != 0) {
    return bad("link_params", -1, "expected true or false");
  }
  if (ember_json_find(j, 0, "constants", &v) && !link_params) {
    uint32_t c = 0;
    for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e), ++c) {
      Slot* s = &ex->slots[k + c];
      int64_t offset;
      if (read_slot(j, e, "name", "constants", c, s, ex->dims, &used) != 0) {
        return kTvmErrorExecutorBadArtifact;
      }
      if (!field_int(j, e, "offset", &offset)) return bad("constants", c, "bad offset");
      s->offset = (uint64_t)offset;
    }
    ex->num_constants = c;
  }
  return 0;
}

/* Inputs and outputs in one buffer, the pool and the workspace: each 64-byte aligned. */
static tvm_crt_error_t allocate(EmberAotExecutor* ex, const EmberJson* j, size_t main) {
  uint32_t k, n_io = ex->num_inputs + ex->num_outputs;
  uint64_t at = 0, pool = 0, ws, align = 16;
  int64_t value;
  for (k = 0; k < n_io; ++k) {
    Slot* s = &ex->slots[k];
    s->offset = at;
    at = align_up(at + ember_tensor_bytes(s->t.dtype, s->t.ndim, s->t.shape), 64);
  }
  for (k = n_io; k < n_io + ex->num_constants; ++k) {
    const Slot* s = &ex->slots[k];
    uint64_t end = s->offset + ember_tensor_bytes(s->t.dtype, s->t.ndim, s->t.shape);
    if (end > pool) pool = end;
  }
  if (!field_int(j, main, "workspace_size_bytes", &value)) {
    return bad("functions[0].workspace_size_bytes", -1, "missing");
  }
  ws = (uint64_t)value;
  if (at > ((uint64_t)1 << 40) || pool > ((uint64_t)1 << 40) || ws > ((uint64_t)1 << 40)) {
    return bad("functions[0]", -1, "implausibly large tensors or workspace");
  }
  if ((ex->io = (uint8_t*)ember_executor_alloc(at)) == NULL) return kTvmErrorExecutorOutOfMemory;
  for (k = 0; k < n_io; ++k) ex->slots[k].t.data = ex->io + ex->slots[k].offset;
  if (field_int(j, 0, "constant_alignment", &value) && value > 64) align = (uint64_t)value;
  if (pool > 0) {
    if ((ex->pool_raw = (uint8_t*)ember_executor_alloc(pool + align)) == NULL) {
      return kTvmErrorExecutorOutOfMemory;
    }
    ex->pool.data = (void*)(uintptr_t)align_up((uint64_t)(uintptr_t)ex->pool_raw, align);
    ex->pool_dim = (int64_t)pool;
  }
  align = 16;
  if (field_int(j, 0, "workspace_alignment", &value) && value > 64) align = (uint64_t)value;
  if (ws > 0) {
    if ((ex->ws_raw = (uint8_t*)ember_executor_alloc(ws + align)) == NULL) {
      return kTvmErrorExecutorOutOfMemory;
    }
    ex->ws.data = (void*)(uintptr_t)align_up((uint64_t)(uintptr_t)ex->ws_raw, align);
    ex->ws_dim = (int64_t)ws;
  }
  return 0;
}

static void byte_tensor(DLTensor* t, int64_t* dim) {
  t->ndim = 1;
  t->shape = dim;
  t->strides = NULL;
  t->byte_offset = 0;
  t->dtype.code = kDLUInt;
  t->dtype.bits = 8;
  t->dtype.lanes = 1;
}

/* The entry, and its arguments packed once. */
static tvm_crt_error_t bind(EmberAotExecutor* ex, const EmberJson* j, const EmberExecutorEnv* env,
                            DLDevice dev) {
  char name[EMBER_CRT_MAX_NAME_LENGTH + 32];
  const char* prefix;
  uint32_t len, k, n_io = ex->num_inputs + ex->num_outputs;
  size_t v;
  if (!ember_json_find(j, 0, "prefix", &v) || ember_json_string(j, v, &prefix, &len) != 0 ||
      len == 0 || len > EMBER_CRT_MAX_NAME_LENGTH) {
    return bad("prefix", -1, "missing, or longer than EMBER_CRT_MAX_NAME_LENGTH");
  }
  ex->interface_c = ember_json_find(j, 0, "interface_api", &v) && ember_json_string_is(j, v, "c");
  memcpy(name, prefix, len);
  memcpy(name + len, "_run", 5);
  for (k = 0; k < n_io + ex->num_constants; ++k) ex->slots[k].t.device = dev;
  ex->pool.device = ex->ws.device = dev;
  byte_tensor(&ex->pool, &ex->pool_dim);
  byte_tensor(&ex->ws, &ex->ws_dim);
  if (ex->interface_c) {
    void* run = env->get_symbol != NULL ? env->get_symbol(env->ctx, name) : NULL;
    memcpy(name + len, "_set_constants", 15);
    ex->set_constants = (int32_t(*)(const void*, uint64_t))(uintptr_t)(
        env->get_symbol != NULL && ex->pool.data != NULL ? env->get_symbol(env->ctx, name) : NULL);
    ex->run_c = (int32_t(*)(void*, void*))(uintptr_t)run;
    if (run == NULL || (ex->pool.data != NULL && ex->set_constants == NULL)) {
      ember_crt_error(kTvmErrorExecutorUnsupported, "aot executor: the model has the C "
                      "interface (interface-api=c), and its symbols ");
      ember_error_append_str(name, len + 4);
      ember_crt_error_append(" are not reachable here (build it with interface-api=packed)");
      return kTvmErrorExecutorUnsupported;
    }
    for (k = 0; k < n_io; ++k) ex->ptrs[k] = ex->slots[k].t.data;
    return 0;
  }
  if (env->get_function == NULL || env->get_function(env->ctx, name, &ex->run) != 0) {
    ex->run = NULL;
    ember_crt_error(kTvmErrorExecutorNameNotFound, "aot executor: no function ");
    ember_error_append_str(name, len + 4);
    ember_crt_error_append(" in the library or the registry (built for another module name?)");
    return kTvmErrorExecutorNameNotFound;
  }
  for (k = 0; k < n_io; ++k) ex->values[k].v_handle = &ex->slots[k].t;
  if (ex->pool.data != NULL) ex->values[k++].v_handle = &ex->pool;
  if (ex->ws.data != NULL) ex->values[k++].v_handle = &ex->ws;
  ex->num_args = k;
  while (k-- > 0) ex->codes[k] = kTVMDLTensorHandle;
  return 0;
}

tvm_crt_error_t ember_aot_executor_create(const char* metadata_json, size_t len,
                                          const EmberExecutorEnv* env, DLDevice dev,
                                          EmberAotExecutor** out) {
  EmberJson j;
  EmberAotExecutor* ex;
  size_t main = 0;
  uint32_t params = 0, constants = 0, dims = 0;
  tvm_crt_error_t rc;
  if (out == NULL || env == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "ember_aot_executor_create: out and env must not be NULL");
  }
  *out = NULL;
  if (dev.device_type != kDLCPU) {
    return ember_crt_error(kTvmErrorExecutorUnsupported, "aot executor: only the CPU "
                           "(device type 1) is supported");
  }
  if ((rc = ember_json_validate("aot metadata", metadata_json, len, &j)) != 0) return rc;
  if ((rc = count(&j, &main, &params, &constants, &dims)) != 0) return rc;
  if ((ex = make(params, constants, dims)) == NULL) return kTvmErrorExecutorOutOfMemory;
  rc = fill(ex, &j, main);
  if (rc == 0) rc = allocate(ex, &j, main);
  if (rc == 0) rc = bind(ex, &j, env, dev);
  if (rc != 0) {
    ember_aot_executor_release(ex);
    return rc;
  }
  *out = ex;
  return 0;
}

void ember_aot_executor_release(EmberAotExecutor* ex) {
  if (ex == NULL) return;
  if (ex->run != NULL) TVMFuncFree(ex->run);
  if (ex->ws_raw != NULL) ember_executor_free(ex->ws_raw);
  if (ex->pool_raw != NULL) ember_executor_free(ex->pool_raw);
  if (ex->io != NULL) ember_executor_free(ex->io);
  ember_executor_free(ex);
}

uint32_t ember_aot_executor_num_inputs(const EmberAotExecutor* ex) { return ex->num_inputs; }

uint32_t ember_aot_executor_num_outputs(const EmberAotExecutor* ex) { return ex->num_outputs; }

static int32_t find(const EmberAotExecutor* ex, uint32_t first, uint32_t count, const char* name,
                    uint32_t len) {
  uint32_t k;
  for (k = first; k < first + count; ++k) {
    if (ex->slots[k].name_len == len && memcmp(ex->slots[k].name, name, len) == 0) {
      return (int32_t)k;
    }
  }
  return -1;
}

int32_t ember_aot_executor_input_index(const EmberAotExecutor* ex, const char* name,
                                       uint32_t len) {
  return find(ex, 0, ex->num_inputs, name, len);
}

static tvm_crt_error_t out_of_range(const char* who, uint32_t index, uint32_t count,
                                    const char* what) {
  ember_crt_error(kTvmErrorExecutorIndexOutOfRange, who);
  ember_crt_error_append(": ");
  ember_crt_error_append(what);
  ember_crt_error_append(" index ");
  ember_crt_error_append_u64(index);
  ember_crt_error_append(" out of range (this model has ");
  ember_crt_error_append_u64(count);
  ember_crt_error_append(")");
  return kTvmErrorExecutorIndexOutOfRange;
}

tvm_crt_error_t ember_aot_executor_input_name(const EmberAotExecutor* ex, uint32_t index,
                                              const char** name, uint32_t* len) {
  if (index >= ex->num_inputs) return out_of_range("get_input_name", index, ex->num_inputs, "input");
  *name = ex->slots[index].name;
  *len = ex->slots[index].name_len;
  return 0;
}

tvm_crt_error_t ember_aot_executor_set_input(EmberAotExecutor* ex, uint32_t index,
                                             const DLTensor* value) {
  tvm_crt_error_t rc;
  if (index >= ex->num_inputs) return out_of_range("set_input", index, ex->num_inputs, "input");
  rc = ember_tensor_copy_checked("set_input", "input", ex->slots[index].name,
                                 ex->slots[index].name_len, &ex->slots[index].t, value);
  if (rc == 0) ex->is_set[index] = 1;
  return rc;
}

tvm_crt_error_t ember_aot_executor_input(EmberAotExecutor* ex, uint32_t index, DLTensor** out) {
  if (index >= ex->num_inputs) return out_of_range("get_input", index, ex->num_inputs, "input");
  *out = &ex->slots[index].t;
  ex->is_set[index] = 1; /* a writable view: filling it sets the input (get_input().copyfrom) */
  return 0;
}

tvm_crt_error_t ember_aot_executor_output(EmberAotExecutor* ex, uint32_t index, DLTensor** out) {
  if (index >= ex->num_outputs) {
    return out_of_range("get_output", index, ex->num_outputs, "output");
  }
  *out = &ex->slots[ex->num_inputs + index].t;
  return 0;
}

/* The slot a param names (a constant, else an input), or -1 with the error set. */
static int32_t param_slot(EmberAotExecutor* ex, const EmberParam* p) {
  uint32_t n_io = ex->num_inputs + ex->num_outputs;
  int32_t k = find(ex, n_io, ex->num_constants, p->name, p->name_len);
  if (k < 0) k = find(ex, 0, ex->num_inputs, p->name, p->name_len);
  if (k < 0) {
    ember_crt_error(kTvmErrorExecutorNameNotFound, "load_params: param ");
    ember_error_append_str(p->name, p->name_len);
    ember_crt_error_append(" is neither a constant nor an input of this model");
  }
  return k;
}

static int matches(const DLTensor* t, const EmberParam* p) {
  uint32_t d;
  if (t->ndim != (int32_t)p->ndim || t->dtype.code != p->dtype.code ||
      t->dtype.bits != p->dtype.bits || t->dtype.lanes != p->dtype.lanes) {
    return 0;
  }
  for (d = 0; d < p->ndim; ++d) {
    if (t->shape[d] != p->shape[d]) return 0;
  }
  return 1;
}

tvm_crt_error_t ember_aot_executor_load_params(EmberAotExecutor* ex, const void* data,
                                               size_t size) {
  EmberParams params;
  EmberParam p;
  int pass;
  tvm_crt_error_t rc = ember_params_open(data, size, &params);
  for (pass = 0; rc == 0 && pass < 2; ++pass) { /* check every tensor, then copy */
    uint64_t index = 0;
    size_t name_pos = 0, record_pos = 0;
    while (rc == 0 && ember_params_next(&params, &index, &name_pos, &record_pos, &p)) {
      int32_t k = param_slot(ex, &p);
      DLTensor dst;
      if (k < 0) return kTvmErrorExecutorNameNotFound;
      dst = ex->slots[k].t;
      if ((uint32_t)k >= ex->num_inputs) dst.data = (uint8_t*)ex->pool.data + ex->slots[k].offset;
      /* a mismatch fails in the check, before anything is copied */
      if (pass == 1 || !matches(&dst, &p)) rc = ember_param_copy_checked("load_params", &p, &dst);
      if (pass == 1 && rc == 0) ex->is_set[k] = 1;
    }
  }
  return rc;
}

static tvm_crt_error_t not_set(const EmberAotExecutor* ex, uint32_t k, const char* what) {
  ember_crt_error(kTvmErrorExecutorNotReady, "run: ");
  ember_crt_error_append(what);
  ember_crt_error_append(" ");
  ember_error_append_str(ex->slots[k].name, ex->slots[k].name_len);
  ember_crt_error_append(" has not been set");
  ember_crt_error_append(k < ex->num_inputs ? "; call set_input first" : "; call load_params");
  return kTvmErrorExecutorNotReady;
}

tvm_crt_error_t ember_aot_executor_run(EmberAotExecutor* ex) {
  TVMValue ret;
  int ret_code = kTVMNullptr, rc;
  uint32_t k, n_io = ex->num_inputs + ex->num_outputs;
  for (k = 0; k < ex->num_inputs; ++k) {
    if (!ex->is_set[k]) return not_set(ex, k, "input");
  }
  for (k = n_io; k < n_io + ex->num_constants; ++k) {
    if (!ex->is_set[k]) return not_set(ex, k, "constant");
  }
  if (ex->interface_c) {
    if (ex->set_constants != NULL &&
        ex->set_constants(ex->pool.data, (uint64_t)ex->pool_dim) != 0) {
      return kTvmErrorFunctionReportedError;
    }
    rc = ex->run_c(ex->ptrs, ex->ptrs + ex->num_inputs);
    return rc == 0 ? 0 : kTvmErrorFunctionReportedError;
  }
  rc = TVMFuncCall(ex->run, ex->values, ex->codes, (int)ex->num_args, &ret, &ret_code);
  return rc;
}
