/*
 * graph_executor.c -- create, feed and run a graph executor (see graph_executor.h).
 *
 * Memory: one block for the executor and its tables (sized by a first pass over the JSON),
 * then one buffer per used storage id; released in the reverse order.
 */
#include <string.h>

#include "graph_internal.h"

/* Offsets of the tables inside the executor's block, each 8-byte aligned. */
typedef struct {
  uint64_t nodes, row_ptr, node_inputs, arg_nodes, heads, sids, root, entries, dims, pool_bytes,
      pools, values, codes, flat, flat_dims, total;
} Layout;

static uint64_t take(uint64_t* at, uint64_t count, uint64_t size) {
  uint64_t start = (*at + 7u) & ~(uint64_t)7u;
  *at = start + count * size;
  return start;
}

static void lay_out(const EmberGraphCounts* n, Layout* l) {
  uint64_t at = sizeof(EmberGraphExecutor);
  l->nodes = take(&at, n->nodes, sizeof(EmberGraphNode));
  l->row_ptr = take(&at, (uint64_t)n->nodes + 1u, sizeof(uint32_t));
  l->node_inputs = take(&at, n->node_inputs, sizeof(uint32_t));
  l->arg_nodes = take(&at, n->args, sizeof(uint32_t));
  l->heads = take(&at, n->heads, sizeof(uint32_t));
  l->sids = take(&at, n->entries, sizeof(uint32_t));
  l->root = take(&at, n->entries, sizeof(uint32_t));
  l->entries = take(&at, n->entries, sizeof(DLTensor));
  l->dims = take(&at, n->dims, sizeof(int64_t));
  l->pool_bytes = take(&at, n->entries, sizeof(uint64_t));
  l->pools = take(&at, n->entries, sizeof(void*));
  l->values = take(&at, n->call_args, sizeof(TVMValue));
  l->codes = take(&at, n->call_args, sizeof(int));
  l->flat = take(&at, n->flat, sizeof(DLTensor));
  l->flat_dims = take(&at, n->flat, sizeof(int64_t));
  l->total = at;
}

static EmberGraphExecutor* make(const EmberGraphCounts* n) {
  Layout l;
  uint8_t* b;
  EmberGraphExecutor* ex;
  lay_out(n, &l);
  if (l.total > (uint64_t)(size_t)-1) return NULL;
  b = (uint8_t*)ember_executor_alloc(l.total);
  if (b == NULL) return NULL;
  memset(b, 0, (size_t)l.total);
  ex = (EmberGraphExecutor*)b;
  ex->n = *n;
  ex->nodes = (EmberGraphNode*)(b + l.nodes);
  ex->row_ptr = (uint32_t*)(b + l.row_ptr);
  ex->node_inputs = (uint32_t*)(b + l.node_inputs);
  ex->arg_nodes = (uint32_t*)(b + l.arg_nodes);
  ex->heads = (uint32_t*)(b + l.heads);
  ex->sids = (uint32_t*)(b + l.sids);
  ex->root = (uint32_t*)(b + l.root);
  ex->entries = (DLTensor*)(b + l.entries);
  ex->dims = (int64_t*)(b + l.dims);
  ex->pool_bytes = (uint64_t*)(b + l.pool_bytes);
  ex->pools = (void**)(b + l.pools);
  ex->values = (TVMValue*)(b + l.values);
  ex->codes = (int*)(b + l.codes);
  ex->flat = (DLTensor*)(b + l.flat);
  ex->flat_dims = (int64_t*)(b + l.flat_dims);
  return ex;
}

static tvm_crt_error_t allocate_pools(EmberGraphExecutor* ex) {
  static uint8_t used_mark;
  uint32_t sid, eid;
  for (eid = 0; eid < ex->n.entries; ++eid) ex->pools[ex->sids[eid]] = &used_mark;
  for (sid = 0; sid < ex->n.entries; ++sid) {
    if (ex->pools[sid] == NULL) continue;
    ex->pools[sid] = ember_executor_alloc(ex->pool_bytes[sid]);
    if (ex->pools[sid] == NULL) {
      for (eid = sid; eid < ex->n.entries; ++eid) {
        if (ex->pools[eid] == &used_mark) ex->pools[eid] = NULL; /* not allocated */
      }
      ember_crt_error_append(" (graph executor: storage ");
      ember_crt_error_append_u64(sid);
      ember_crt_error_append(" of ");
      ember_crt_error_append_u64(ex->pool_bytes[sid]);
      ember_crt_error_append(" bytes)");
      return kTvmErrorExecutorOutOfMemory;
    }
  }
  for (eid = 0; eid < ex->n.entries; ++eid) ex->entries[eid].data = ex->pools[ex->sids[eid]];
  return 0;
}

static tvm_crt_error_t resolve(EmberGraphExecutor* ex, const EmberExecutorEnv* env) {
  char name[EMBER_CRT_MAX_FUNC_NAME + 1];
  uint32_t i;
  for (i = 0; i < ex->n.nodes; ++i) {
    EmberGraphNode* g = &ex->nodes[i];
    if (g->kind != kGraphNodeOp) continue;
    if (g->func_len > EMBER_CRT_MAX_FUNC_NAME) {
      ember_crt_error(kTvmErrorExecutorBadArtifact, "graph json: nodes[");
      ember_crt_error_append_u64(i);
      ember_crt_error_append("].attrs.func_name: longer than EMBER_CRT_MAX_FUNC_NAME");
      return kTvmErrorExecutorBadArtifact;
    }
    memcpy(name, g->func, g->func_len);
    name[g->func_len] = '\0';
    if (env == NULL || env->get_function == NULL ||
        env->get_function(env->ctx, name, &g->fn) != 0 || g->fn == NULL) {
      g->fn = NULL;
      ember_crt_error(kTvmErrorExecutorNameNotFound, "graph executor: nodes[");
      ember_crt_error_append_u64(i);
      ember_crt_error_append("] (");
      ember_error_append_str(g->name, g->name_len);
      ember_crt_error_append(") calls ");
      ember_error_append_str(g->func, g->func_len);
      ember_crt_error_append(", which is not a function of the library or the registry");
      return kTvmErrorExecutorNameNotFound;
    }
  }
  return 0;
}

/* The packed arguments of every kernel call, set once: run() only calls. */
static void prepare_calls(EmberGraphExecutor* ex) {
  uint32_t i, k, flat = 0;
  for (i = 0; i < ex->n.nodes; ++i) {
    const EmberGraphNode* g = &ex->nodes[i];
    uint32_t n = g->num_inputs + g->num_outputs;
    if (g->kind != kGraphNodeOp) continue;
    for (k = 0; k < n; ++k) {
      uint32_t eid = k < g->num_inputs ? ex->node_inputs[g->inputs + k]
                                       : ex->row_ptr[i] + (k - g->num_inputs);
      DLTensor* t = &ex->entries[eid];
      if (g->flatten) {
        DLTensor* f = &ex->flat[flat];
        int32_t d;
        *f = *t;
        f->ndim = 1;
        f->shape = &ex->flat_dims[flat++];
        f->shape[0] = 1;
        for (d = 0; d < t->ndim; ++d) f->shape[0] *= t->shape[d];
        t = f;
      }
      ex->values[g->args + k].v_handle = t;
      ex->codes[g->args + k] = kTVMDLTensorHandle;
    }
  }
}

tvm_crt_error_t ember_graph_executor_create(const char* json, size_t json_len,
                                            const EmberExecutorEnv* env, DLDevice dev,
                                            EmberGraphExecutor** out) {
  EmberJson j;
  EmberGraphCounts n;
  EmberGraphExecutor* ex;
  tvm_crt_error_t rc;
  if (out == NULL) {
    return ember_crt_error(kTvmErrorGenericInvalidArgument,
                           "ember_graph_executor_create: out is NULL");
  }
  *out = NULL;
  if (dev.device_type != kDLCPU) {
    ember_crt_error(kTvmErrorExecutorUnsupported, "graph executor: device type ");
    ember_crt_error_append_i64(dev.device_type);
    ember_crt_error_append(" is not supported (only the CPU, device type 1)");
    return kTvmErrorExecutorUnsupported;
  }
  if ((rc = ember_json_validate("graph json", json, json_len, &j)) != 0) return rc;
  if ((rc = ember_graph_count(&j, &n)) != 0) return rc;
  ex = make(&n);
  if (ex == NULL) {
    ember_crt_error_append(" (graph executor: its tables)");
    return kTvmErrorExecutorOutOfMemory;
  }
  ex->json = j;
  ex->dev = dev;
  rc = ember_graph_fill(ex);
  if (rc == 0) rc = allocate_pools(ex);
  if (rc == 0) rc = resolve(ex, env);
  if (rc != 0) {
    ember_graph_executor_release(ex);
    return rc;
  }
  prepare_calls(ex);
  *out = ex;
  return 0;
}

void ember_graph_executor_release(EmberGraphExecutor* ex) {
  uint32_t i;
  if (ex == NULL) return;
  for (i = 0; i < ex->n.nodes; ++i) {
    if (ex->nodes[i].fn != NULL) TVMFuncFree(ex->nodes[i].fn);
  }
  for (i = ex->n.entries; i > 0; --i) {
    if (ex->pools[i - 1] != NULL) ember_executor_free(ex->pools[i - 1]);
  }
  ember_executor_free(ex);
}

uint32_t ember_graph_executor_num_inputs(const EmberGraphExecutor* ex) { return ex->n.args; }

uint32_t ember_graph_executor_num_outputs(const EmberGraphExecutor* ex) { return ex->n.heads; }

int32_t ember_graph_executor_input_index(const EmberGraphExecutor* ex, const char* name,
                                         uint32_t len) {
  uint32_t k;
  for (k = 0; k < ex->n.args; ++k) {
    const EmberGraphNode* g = &ex->nodes[ex->arg_nodes[k]];
    if (g->name_len == len && memcmp(g->name, name, len) == 0) return (int32_t)k;
  }
  return -1;
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
  ember_crt_error_append(" ");
  ember_crt_error_append(what);
  ember_crt_error_append(count == 1u ? ")" : "s)");
  return kTvmErrorExecutorIndexOutOfRange;
}

tvm_crt_error_t ember_graph_executor_input_name(const EmberGraphExecutor* ex, uint32_t index,
                                                const char** name, uint32_t* len) {
  if (index >= ex->n.args) return out_of_range("get_input_name", index, ex->n.args, "input");
  *name = ex->nodes[ex->arg_nodes[index]].name;
  *len = ex->nodes[ex->arg_nodes[index]].name_len;
  return 0;
}

tvm_crt_error_t ember_graph_executor_set_input(EmberGraphExecutor* ex, uint32_t index,
                                               const DLTensor* value) {
  const EmberGraphNode* g;
  if (index >= ex->n.args) return out_of_range("set_input", index, ex->n.args, "input");
  g = &ex->nodes[ex->arg_nodes[index]];
  return ember_tensor_copy_checked("set_input", "input", g->name, g->name_len,
                                   &ex->entries[ex->row_ptr[ex->arg_nodes[index]]], value);
}

tvm_crt_error_t ember_graph_executor_input(EmberGraphExecutor* ex, uint32_t index,
                                           DLTensor** out) {
  if (index >= ex->n.args) return out_of_range("get_input", index, ex->n.args, "input");
  *out = &ex->entries[ex->row_ptr[ex->arg_nodes[index]]];
  return 0;
}

tvm_crt_error_t ember_graph_executor_output(EmberGraphExecutor* ex, uint32_t index,
                                            DLTensor** out) {
  if (index >= ex->n.heads) return out_of_range("get_output", index, ex->n.heads, "output");
  *out = &ex->entries[ex->heads[index]];
  return 0;
}

/* Check (copy == 0) or copy every tensor of the blob into the input of its name. */
static tvm_crt_error_t each_param(EmberGraphExecutor* ex, const EmberParams* params, int copy) {
  uint64_t index = 0;
  size_t name_pos = 0, record_pos = 0;
  EmberParam p;
  while (ember_params_next(params, &index, &name_pos, &record_pos, &p)) {
    int32_t k = ember_graph_executor_input_index(ex, p.name, p.name_len);
    DLTensor* dst;
    uint32_t d;
    int same;
    if (k < 0) {
      ember_crt_error(kTvmErrorExecutorNameNotFound, "load_params: param ");
      ember_error_append_str(p.name, p.name_len);
      ember_crt_error_append(" is not an input of this graph");
      return kTvmErrorExecutorNameNotFound;
    }
    dst = &ex->entries[ex->row_ptr[ex->arg_nodes[k]]];
    same = dst->ndim == (int32_t)p.ndim && dst->dtype.code == p.dtype.code &&
           dst->dtype.bits == p.dtype.bits && dst->dtype.lanes == p.dtype.lanes;
    for (d = 0; same && d < p.ndim; ++d) same = dst->shape[d] == p.shape[d];
    if (!same || copy) {
      tvm_crt_error_t rc = ember_param_copy_checked("load_params", &p, dst);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

tvm_crt_error_t ember_graph_executor_load_params(EmberGraphExecutor* ex, const void* data,
                                                 size_t size) {
  EmberParams params;
  tvm_crt_error_t rc = ember_params_open(data, size, &params);
  if (rc == 0) rc = each_param(ex, &params, 0);
  if (rc == 0) rc = each_param(ex, &params, 1);
  return rc;
}

tvm_crt_error_t ember_graph_executor_run(EmberGraphExecutor* ex) {
  uint32_t i;
  for (i = 0; i < ex->n.nodes; ++i) {
    const EmberGraphNode* g = &ex->nodes[i];
    TVMValue ret;
    int ret_code = kTVMNullptr;
    int rc;
    if (g->kind != kGraphNodeOp) continue;
    rc = TVMFuncCall(g->fn, ex->values + g->args, ex->codes + g->args,
                     (int)(g->num_inputs + g->num_outputs), &ret, &ret_code);
    if (rc != 0) {
      ember_crt_error_append("\n  while running graph node nodes[");
      ember_crt_error_append_u64(i);
      ember_crt_error_append("] (");
      ember_error_append_str(g->name, g->name_len);
      ember_crt_error_append(")");
      return rc;
    }
  }
  return 0;
}
