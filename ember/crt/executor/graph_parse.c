/*
 * graph_parse.c -- read and check a graph JSON (layout: ember/runtime/graph_format.py).
 *
 * Two passes over validated JSON: ember_graph_count finds the sizes of the tables, the
 * executor allocates them in one block, ember_graph_fill fills and checks them. Messages
 * follow the Python parser: "graph json: nodes[7].inputs[1]: node 12 out of range ...".
 */
#include "graph_internal.h"

#define MAX_OUTPUTS 65535u
#define MAX_TOTAL 0x10000000u /* any count: far beyond a real graph, far from overflow */

static tvm_crt_error_t bad(const char* path, int64_t index, const char* sub) {
  ember_crt_error(kTvmErrorExecutorBadArtifact, "graph json: ");
  ember_crt_error_append(path);
  if (index >= 0) {
    ember_crt_error_append("[");
    ember_crt_error_append_i64(index);
    ember_crt_error_append("]");
  }
  ember_crt_error_append(sub);
  ember_crt_error_append(": ");
  return kTvmErrorExecutorBadArtifact;
}

static tvm_crt_error_t bad_msg(const char* path, int64_t index, const char* sub, const char* msg) {
  bad(path, index, sub);
  ember_crt_error_append(msg);
  return kTvmErrorExecutorBadArtifact;
}

static int top_field(const EmberJson* j, const char* key, char kind, size_t* out) {
  return ember_json_find(j, 0, key, out) && ember_json_kind(j, *out) == kind;
}

/* An int >= minimum (a number or a string holding one). */
static tvm_crt_error_t read_int(const EmberJson* j, size_t pos, int64_t minimum, int64_t* out,
                                const char* path, int64_t index, const char* sub) {
  if (ember_json_int(j, pos, out) != 0 || *out < minimum) {
    bad(path, index, sub);
    ember_crt_error_append("expected an integer >= ");
    ember_crt_error_append_i64(minimum);
    return kTvmErrorExecutorBadArtifact;
  }
  return 0;
}

/* The attrs object of a tvm_op node ("attrs", or "param" in very old graphs). */
static int node_attrs(const EmberJson* j, size_t node, size_t* attrs) {
  return (ember_json_find(j, node, "attrs", attrs) || ember_json_find(j, node, "param", attrs)) &&
         ember_json_kind(j, *attrs) == '{';
}

static tvm_crt_error_t node_outputs(const EmberJson* j, size_t attrs, uint32_t i,
                                    uint32_t* outputs, int* flatten) {
  size_t v;
  int64_t value = 1;
  if (ember_json_find(j, attrs, "num_outputs", &v) &&
      read_int(j, v, 1, &value, "nodes", i, ".attrs.num_outputs") != 0) {
    return kTvmErrorExecutorBadArtifact;
  }
  if (value > (int64_t)MAX_OUTPUTS) return bad_msg("nodes", i, ".attrs.num_outputs", "too large");
  *outputs = (uint32_t)value;
  value = 0;
  if (ember_json_find(j, attrs, "flatten_data", &v) &&
      read_int(j, v, 0, &value, "nodes", i, ".attrs.flatten_data") != 0) {
    return kTvmErrorExecutorBadArtifact;
  }
  *flatten = value != 0;
  return 0;
}

static tvm_crt_error_t count_nodes(const EmberJson* j, size_t nodes, EmberGraphCounts* c) {
  size_t node, v, op;
  uint32_t i = 0;
  int more = ember_json_first(j, nodes, &node);
  for (; more; more = ember_json_next(j, node, &node), ++i) {
    uint32_t inputs = 0, outputs = 1;
    int flatten = 0;
    if (ember_json_kind(j, node) != '{') return bad_msg("nodes", i, "", "expected an object");
    if (!ember_json_find(j, node, "op", &op) ||
        !(ember_json_string_is(j, op, "null") || ember_json_string_is(j, op, "tvm_op"))) {
      return bad_msg("nodes", i, ".op", "expected 'null' or 'tvm_op'");
    }
    if (ember_json_find(j, node, "inputs", &v)) {
      if (ember_json_kind(j, v) != '[') return bad_msg("nodes", i, ".inputs", "expected a list");
      inputs = ember_json_count(j, v);
    }
    if (ember_json_string_is(j, op, "tvm_op")) {
      size_t attrs;
      if (!node_attrs(j, node, &attrs)) {
        return bad_msg("nodes", i, ".attrs", "a tvm_op node needs an attrs object");
      }
      if (node_outputs(j, attrs, i, &outputs, &flatten) != 0) return kTvmErrorExecutorBadArtifact;
      c->call_args += inputs + outputs;
      if (flatten) c->flat += inputs + outputs;
    } else if (inputs != 0) {
      return bad_msg("nodes", i, ".inputs", "an input node ('null') cannot have inputs");
    }
    c->node_inputs += inputs;
    c->entries += outputs;
    if (c->entries > MAX_TOTAL || c->call_args > MAX_TOTAL) {
      return bad_msg("nodes", -1, "", "the graph is too large");
    }
  }
  c->nodes = i;
  return 0;
}

/* The value list of attrs[key] = ["<kind>", [...]], at *list, with `count` values (one per
 * entry, or per what `per` names); 0 if absent and optional. */
static tvm_crt_error_t attr_list_of(const EmberJson* j, size_t attrs, const char* key,
                                    const char* kind, int required, size_t* list, uint32_t count,
                                    const char* per) {
  size_t v, first;
  if (!ember_json_find(j, attrs, key, &v)) {
    if (!required) return 0;
    bad_msg("attrs.", -1, key, "missing (expected [\"");
    ember_crt_error_append(kind);
    ember_crt_error_append("\", [...]] with one value per entry)");
    return kTvmErrorExecutorBadArtifact;
  }
  if (!ember_json_first(j, v, &first) || !ember_json_string_is(j, first, kind) ||
      !ember_json_next(j, first, list) || ember_json_kind(j, *list) != '[' ||
      ember_json_next(j, *list, &first)) {
    bad_msg("attrs.", -1, key, "expected [\"");
    ember_crt_error_append(kind);
    ember_crt_error_append("\", [...]]");
    return kTvmErrorExecutorBadArtifact;
  }
  if (ember_json_count(j, *list) != count) {
    bad("attrs.", -1, key);
    ember_crt_error_append("has ");
    ember_crt_error_append_u64(ember_json_count(j, *list));
    ember_crt_error_append(" values but the graph has ");
    ember_crt_error_append_u64(count);
    ember_crt_error_append(per);
    return kTvmErrorExecutorBadArtifact;
  }
  return 1;
}

static tvm_crt_error_t attr_list(const EmberJson* j, size_t attrs, const char* key,
                                 const char* kind, int required, size_t* list, uint32_t count) {
  return attr_list_of(j, attrs, key, kind, required, list, count, " entries");
}

tvm_crt_error_t ember_graph_count(const EmberJson* j, EmberGraphCounts* c) {
  size_t nodes, v, attrs, list, e;
  int more, rc;
  c->nodes = c->entries = c->node_inputs = c->args = c->heads = c->dims = 0;
  c->call_args = c->flat = 0;
  if (ember_json_kind(j, 0) != '{') {
    return bad_msg("", -1, "(top level)", "expected a JSON object");
  }
  if (!top_field(j, "nodes", '[', &nodes)) return bad_msg("", -1, "nodes", "missing or not a list");
  if (!top_field(j, "arg_nodes", '[', &v)) {
    return bad_msg("", -1, "arg_nodes", "missing or not a list");
  }
  c->args = ember_json_count(j, v);
  if (!top_field(j, "heads", '[', &v)) return bad_msg("", -1, "heads", "missing or not a list");
  c->heads = ember_json_count(j, v);
  if (!top_field(j, "attrs", '{', &attrs)) {
    return bad_msg("", -1, "attrs", "missing or not an object");
  }
  if (count_nodes(j, nodes, c) != 0) return kTvmErrorExecutorBadArtifact;
  rc = attr_list(j, attrs, "shape", "list_shape", 1, &list, c->entries);
  if (rc != 1) return kTvmErrorExecutorBadArtifact;
  for (more = ember_json_first(j, list, &e); more; more = ember_json_next(j, e, &e)) {
    uint32_t ndim = ember_json_count(j, e);
    if (ember_json_kind(j, e) != '[' || ndim > EMBER_CRT_MAX_NDIM) {
      return bad_msg("attrs.shape", -1, "", "each shape must be a list of at most 16 dims");
    }
    c->dims += ndim;
  }
  return 0;
}

/* ---- filling ------------------------------------------------------------------------------ */

/* [node, index(, version)] -> entry id, checking that node comes before `before`. */
static tvm_crt_error_t read_entry(EmberGraphExecutor* ex, size_t pos, uint32_t before,
                                  const char* path, int64_t index, const char* sub,
                                  uint32_t* eid) {
  const EmberJson* j = &ex->json;
  size_t a, b, c;
  int64_t nid, k, version = 0;
  if (!ember_json_first(j, pos, &a) || !ember_json_next(j, a, &b) ||
      (ember_json_next(j, b, &c) && (ember_json_int(j, c, &version) != 0 ||
                                     ember_json_next(j, c, &c))) ||
      ember_json_int(j, a, &nid) != 0 || ember_json_int(j, b, &k) != 0 || nid < 0 || k < 0) {
    return bad_msg(path, index, sub, "expected [node_id, index, version]");
  }
  if (nid >= (int64_t)before) {
    bad(path, index, sub);
    ember_crt_error_append("node ");
    ember_crt_error_append_i64(nid);
    ember_crt_error_append(nid >= (int64_t)ex->n.nodes ? " out of range (graph has "
                                                       : " is not before this node (of ");
    ember_crt_error_append_u64(ex->n.nodes);
    ember_crt_error_append(" nodes)");
    return kTvmErrorExecutorBadArtifact;
  }
  if (k >= (int64_t)ex->nodes[nid].num_outputs) {
    bad(path, index, sub);
    ember_crt_error_append("output ");
    ember_crt_error_append_i64(k);
    ember_crt_error_append(" of node ");
    ember_crt_error_append_i64(nid);
    ember_crt_error_append(" out of range");
    return kTvmErrorExecutorBadArtifact;
  }
  *eid = ex->row_ptr[nid] + (uint32_t)k;
  return 0;
}

static tvm_crt_error_t fill_node(EmberGraphExecutor* ex, size_t node, uint32_t i,
                                 uint32_t* next_input, uint32_t* next_arg) {
  const EmberJson* j = &ex->json;
  EmberGraphNode* g = &ex->nodes[i];
  size_t v, attrs = 0, e;
  int flatten = 0, more;
  uint32_t k = 0;
  if (!ember_json_find(j, node, "name", &v) || ember_json_string(j, v, &g->name, &g->name_len) != 0 ||
      g->name_len == 0) {
    return bad_msg("nodes", i, ".name", "expected a non-empty string");
  }
  g->kind = kGraphNodeInput;
  g->num_outputs = 1;
  g->inputs = *next_input;
  g->args = *next_arg;
  g->fn = NULL;
  g->func = NULL;
  g->func_len = 0;
  ember_json_find(j, node, "op", &v);
  if (ember_json_string_is(j, v, "tvm_op")) {
    node_attrs(j, node, &attrs);
    if (!ember_json_find(j, attrs, "func_name", &v) ||
        ember_json_string(j, v, &g->func, &g->func_len) != 0 || g->func_len == 0) {
      return bad_msg("nodes", i, ".attrs.func_name", "expected a non-empty string");
    }
    node_outputs(j, attrs, i, &g->num_outputs, &flatten);
    g->kind = ember_json_string_is(j, v, "__nop") ? kGraphNodeNop : kGraphNodeOp;
    g->flatten = (uint8_t)flatten;
  }
  ex->row_ptr[i + 1] = ex->row_ptr[i] + g->num_outputs;
  if (ember_json_find(j, node, "inputs", &v)) {
    for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e), ++k) {
      if (read_entry(ex, e, i, "nodes", i, ".inputs", &ex->node_inputs[*next_input + k]) != 0) {
        ember_crt_error_append(" (input ");
        ember_crt_error_append_u64(k);
        ember_crt_error_append(")");
        return kTvmErrorExecutorBadArtifact;
      }
    }
  }
  g->num_inputs = k;
  *next_input += k;
  if (g->kind != kGraphNodeInput) {
    int64_t declared;
    if (ember_json_find(j, attrs, "num_inputs", &v) &&
        (ember_json_int(j, v, &declared) != 0 || declared != (int64_t)k)) {
      return bad_msg("nodes", i, ".attrs.num_inputs", "disagrees with the node's inputs");
    }
    *next_arg += k + g->num_outputs;
  }
  if (g->kind == kGraphNodeNop && (k == 0u || g->num_outputs != 1u)) {
    return bad_msg("nodes", i, "", "a __nop node must have inputs and one output");
  }
  return 0;
}

static tvm_crt_error_t fill_nodes(EmberGraphExecutor* ex) {
  const EmberJson* j = &ex->json;
  size_t nodes, node, v, e;
  uint32_t i = 0, next_input = 0, next_arg = 0, k = 0;
  int more;
  top_field(j, "nodes", '[', &nodes);
  ex->row_ptr[0] = 0;
  for (more = ember_json_first(j, nodes, &node); more; more = ember_json_next(j, node, &node)) {
    if (fill_node(ex, node, i++, &next_input, &next_arg) != 0) return kTvmErrorExecutorBadArtifact;
  }
  if (ember_json_find(j, 0, "node_row_ptr", &v)) {
    int64_t value;
    int ok = ember_json_kind(j, v) == '[' && ember_json_count(j, v) == ex->n.nodes + 1u;
    for (more = ok && ember_json_first(j, v, &e); ok && more; more = ember_json_next(j, e, &e)) {
      ok = ember_json_int(j, e, &value) == 0 && value == (int64_t)ex->row_ptr[k++];
    }
    if (!ok) return bad_msg("node_row_ptr", -1, "", "disagrees with the nodes' output counts");
  }
  return 0;
}

static int same_name(const EmberGraphNode* a, const EmberGraphNode* b) {
  uint32_t k;
  if (a->name_len != b->name_len) return 0;
  for (k = 0; k < a->name_len; ++k) {
    if (a->name[k] != b->name[k]) return 0;
  }
  return 1;
}

static tvm_crt_error_t fill_args_heads(EmberGraphExecutor* ex) {
  const EmberJson* j = &ex->json;
  size_t v, e;
  uint32_t k = 0, i, m;
  int more;
  int64_t nid;
  top_field(j, "arg_nodes", '[', &v);
  for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e), ++k) {
    if (ember_json_int(j, e, &nid) != 0 || nid < 0 || nid >= (int64_t)ex->n.nodes) {
      return bad_msg("arg_nodes", k, "", "not a node id of this graph");
    }
    if (ex->nodes[nid].kind != kGraphNodeInput) {
      return bad_msg("arg_nodes", k, "", "names a tvm_op node, not an input ('null') node");
    }
    for (m = 0; m < k; ++m) {
      if (same_name(&ex->nodes[ex->arg_nodes[m]], &ex->nodes[nid])) {
        bad("arg_nodes", k, "");
        ember_crt_error_append("two inputs named ");
        ember_error_append_str(ex->nodes[nid].name, ex->nodes[nid].name_len);
        return kTvmErrorExecutorBadArtifact;
      }
    }
    ex->arg_nodes[k] = (uint32_t)nid;
  }
  for (i = 0, m = 0; i < ex->n.nodes; ++i) m += ex->nodes[i].kind == kGraphNodeInput;
  if (m != ex->n.args) {
    return bad_msg("arg_nodes", -1, "", "must list every input ('null') node exactly once");
  }
  top_field(j, "heads", '[', &v);
  k = 0;
  for (more = ember_json_first(j, v, &e); more; more = ember_json_next(j, e, &e), ++k) {
    if (read_entry(ex, e, ex->n.nodes, "heads", k, "", &ex->heads[k]) != 0) {
      return kTvmErrorExecutorBadArtifact;
    }
  }
  return 0;
}

static tvm_crt_error_t fill_entries(EmberGraphExecutor* ex) {
  const EmberJson* j = &ex->json;
  size_t attrs, shapes, sids, dtypes, devs = 0, offs = 0, s, d, t, dv = 0, o = 0, v;
  uint32_t eid, used = 0;
  int has_devs, has_offs;
  top_field(j, "attrs", '{', &attrs);
  attr_list(j, attrs, "shape", "list_shape", 1, &shapes, ex->n.entries);
  if (attr_list(j, attrs, "storage_id", "list_int", 1, &sids, ex->n.entries) != 1 ||
      attr_list(j, attrs, "dltype", "list_str", 1, &dtypes, ex->n.entries) != 1) {
    return kTvmErrorExecutorBadArtifact;
  }
  has_devs = attr_list(j, attrs, "device_index", "list_int", 0, &devs, ex->n.entries);
  if (has_devs < 0 || has_devs > 1) return kTvmErrorExecutorBadArtifact;
  /* optional: bytes from the start of each entry's storage (absent: all 0) */
  has_offs = attr_list(j, attrs, "storage_offset", "list_int", 0, &offs, ex->n.entries);
  if (has_offs < 0 || has_offs > 1) return kTvmErrorExecutorBadArtifact;
  if (ember_json_find(j, attrs, "format_version", &v)) {
    size_t first, second;
    int64_t version;
    if (!ember_json_first(j, v, &first) || !ember_json_next(j, first, &second) ||
        ember_json_int(j, second, &version) != 0 || version < 1 || version > 3) {
      return bad_msg("attrs.format_version", -1, "", "not [\"size_t\", 1 to 3]: this runtime "
                     "reads graph format versions 1 to 3 (2: entries at a storage_offset, 3: "
                     "storage_size)");
    }
  }
  ember_json_first(j, shapes, &s);
  ember_json_first(j, sids, &d);
  ember_json_first(j, dtypes, &t);
  if (has_devs) ember_json_first(j, devs, &dv);
  if (has_offs) ember_json_first(j, offs, &o);
  for (eid = 0; eid < ex->n.entries; ++eid) {
    DLTensor* e = &ex->entries[eid];
    int64_t value;
    const char* name;
    uint32_t len;
    size_t dim;
    int more;
    e->device = ex->dev;
    e->shape = ex->dims + used;
    e->strides = NULL;
    e->byte_offset = 0;
    e->data = NULL;
    e->ndim = 0;
    for (more = ember_json_first(j, s, &dim); more; more = ember_json_next(j, dim, &dim)) {
      if (ember_json_int(j, dim, &value) != 0 || value < 0 || value > 0x7fffffffLL) {
        return bad_msg("attrs.shape[1]", eid, "", "dimensions must be integers >= 0");
      }
      ex->dims[used++] = value;
      e->ndim++;
    }
    if (ember_json_string(j, t, &name, &len) != 0 || ember_dtype_parse(name, len, &e->dtype) != 0) {
      return bad_msg("attrs.dltype[1]", eid, "", "unknown dtype");
    }
    if (ember_json_int(j, d, &value) != 0 || value < 0 || value >= (int64_t)ex->n.entries) {
      return bad_msg("attrs.storage_id[1]", eid, "", "must be in [0, number of entries)");
    }
    ex->sids[eid] = (uint32_t)value;
    if (has_devs && (ember_json_int(j, dv, &value) != 0 || value != kDLCPU)) {
      return bad_msg("attrs.device_index[1]", eid, "", "only the CPU (device type 1) is supported");
    }
    if (has_offs) {
      if (ember_json_int(j, o, &value) != 0 || value < 0 || value > ((int64_t)1 << 40)) {
        return bad_msg("attrs.storage_offset[1]", eid, "", "must be an integer >= 0");
      }
      e->byte_offset = (uint64_t)value;
      ember_json_next(j, o, &o);
    }
    ember_json_next(j, s, &s);
    ember_json_next(j, d, &d);
    ember_json_next(j, t, &t);
    if (has_devs) ember_json_next(j, dv, &dv);
  }
  return 0;
}

static uint64_t entry_bytes(const DLTensor* e) {
  return ember_tensor_bytes(e->dtype, e->ndim, e->shape);
}

/* A __nop node makes no call: with one input its output is bytes of the input (a reshape or
 * a contiguous slice); with several, its inputs laid end to end in its output's storage are
 * its output (a concatenation whose producers wrote it in place). */
static tvm_crt_error_t check_nop(EmberGraphExecutor* ex, uint32_t i) {
  const EmberGraphNode* g = &ex->nodes[i];
  uint32_t dst = ex->row_ptr[i], k;
  const DLTensor* out = &ex->entries[dst];
  uint64_t at = out->byte_offset;
  for (k = 0; k < g->num_inputs; ++k) {
    if (ex->sids[ex->node_inputs[g->inputs + k]] != ex->sids[dst]) {
      return bad_msg("nodes", i, "", "a __nop node must use its inputs' storage id");
    }
  }
  if (g->num_inputs == 1u) {
    const DLTensor* in = &ex->entries[ex->node_inputs[g->inputs]];
    if (out->byte_offset < in->byte_offset ||
        out->byte_offset - in->byte_offset + entry_bytes(out) > entry_bytes(in)) {
      return bad_msg("nodes", i, "", "a __nop node cannot output more bytes than its input");
    }
    ex->root[dst] = ex->root[ex->node_inputs[g->inputs]];
    return 0;
  }
  for (k = 0; k < g->num_inputs; ++k) {
    const DLTensor* in = &ex->entries[ex->node_inputs[g->inputs + k]];
    if (in->byte_offset != at) {
      return bad_msg("nodes", i, "", "a __nop node's inputs must lie end to end from its "
                     "output's storage_offset");
    }
    at += entry_bytes(in);
  }
  if (entry_bytes(out) != at - out->byte_offset) {
    return bad_msg("nodes", i, "", "a __nop node's inputs must hold exactly its output's bytes");
  }
  return 0;
}

/* __nop outputs alias their inputs; a graph input's storage is its own (and its views'). */
static tvm_crt_error_t check_storage(EmberGraphExecutor* ex) {
  uint32_t i, eid, k;
  for (eid = 0; eid < ex->n.entries; ++eid) ex->root[eid] = eid;
  for (i = 0; i < ex->n.nodes; ++i) {
    if (ex->nodes[i].kind == kGraphNodeNop && check_nop(ex, i) != 0) {
      return kTvmErrorExecutorBadArtifact;
    }
  }
  for (k = 0; k < ex->n.args; ++k) {
    uint32_t in = ex->row_ptr[ex->arg_nodes[k]];
    for (eid = 0; eid < ex->n.entries; ++eid) {
      if (ex->sids[eid] == ex->sids[in] && ex->root[eid] != in) {
        bad("attrs.storage_id[1]", eid, "");
        ember_crt_error_append("shares the storage of graph input ");
        ember_error_append_str(ex->nodes[ex->arg_nodes[k]].name,
                               ex->nodes[ex->arg_nodes[k]].name_len);
        return kTvmErrorExecutorBadArtifact;
      }
    }
  }
  return 0;
}

/* pool_bytes from attrs.storage_size (one per storage id, 0 .. the largest); *declared = 0
 * when the graph has none. */
static tvm_crt_error_t read_storage_sizes(EmberGraphExecutor* ex, int* declared) {
  const EmberJson* j = &ex->json;
  size_t attrs, list, v;
  uint32_t eid, sid, count = 0;
  int rc, more;
  int64_t value;
  for (eid = 0; eid < ex->n.entries; ++eid) {
    if (ex->sids[eid] + 1u > count) count = ex->sids[eid] + 1u;
  }
  top_field(j, "attrs", '{', &attrs);
  rc = attr_list_of(j, attrs, "storage_size", "list_int", 0, &list, count, " storage ids");
  if (rc != 0 && rc != 1) return kTvmErrorExecutorBadArtifact;
  *declared = rc;
  sid = 0;
  for (more = rc && ember_json_first(j, list, &v); more; more = ember_json_next(j, v, &v)) {
    if (ember_json_int(j, v, &value) != 0 || value < 0 || value > ((int64_t)1 << 40)) {
      return bad_msg("attrs.storage_size[1]", sid, "", "must be an integer >= 0");
    }
    ex->pool_bytes[sid++] = (uint64_t)value;
  }
  return 0;
}

/* Each entry starts whole elements into its storage and ends within it (a storage without a
 * declared size is as large as its largest entry at offset 0). */
static tvm_crt_error_t check_fit(EmberGraphExecutor* ex, int declared) {
  uint32_t eid;
  for (eid = 0; eid < ex->n.entries; ++eid) {
    const DLTensor* e = &ex->entries[eid];
    uint64_t item = ((uint64_t)e->dtype.bits * e->dtype.lanes + 7u) / 8u;
    uint32_t sid = ex->sids[eid];
    if (e->byte_offset == 0 && !declared) continue;
    if (item == 0 || e->byte_offset % item != 0) {
      return bad_msg("attrs.storage_offset[1]", eid, "", "not a multiple of the element size");
    }
    if (e->byte_offset + entry_bytes(e) <= ex->pool_bytes[sid]) continue;
    if (!declared) {
      return bad_msg("attrs.storage_offset[1]", eid, "", "runs past the end of its storage");
    }
    bad("attrs.storage_size[1]", sid, "");
    ember_crt_error_append("storage ");
    ember_crt_error_append_u64(sid);
    ember_crt_error_append(" is too small for entry ");
    ember_crt_error_append_u64(eid);
    ember_crt_error_append(" at bytes [");
    ember_crt_error_append_u64(e->byte_offset);
    ember_crt_error_append(", ");
    ember_crt_error_append_u64(e->byte_offset + entry_bytes(e));
    ember_crt_error_append(")");
    return kTvmErrorExecutorBadArtifact;
  }
  return 0;
}

tvm_crt_error_t ember_graph_fill(EmberGraphExecutor* ex) {
  uint32_t eid;
  int declared = 0;
  if (fill_nodes(ex) != 0 || fill_args_heads(ex) != 0 || fill_entries(ex) != 0 ||
      check_storage(ex) != 0) {
    return kTvmErrorExecutorBadArtifact;
  }
  for (eid = 0; eid < ex->n.entries; ++eid) ex->pool_bytes[eid] = 0;
  if (read_storage_sizes(ex, &declared) != 0) return kTvmErrorExecutorBadArtifact;
  for (eid = 0; eid < ex->n.entries; ++eid) {
    const DLTensor* e = &ex->entries[eid];
    uint64_t bytes = ember_tensor_bytes(e->dtype, e->ndim, e->shape);
    uint64_t count = 1;
    int32_t k;
    for (k = 0; k < e->ndim; ++k) {
      count *= (uint64_t)e->shape[k];
      if (count > ((uint64_t)1 << 40)) {
        return bad_msg("attrs.shape[1]", eid, "", "the tensor is implausibly large");
      }
    }
    if (!declared && e->byte_offset == 0 && bytes > ex->pool_bytes[ex->sids[eid]]) {
      ex->pool_bytes[ex->sids[eid]] = bytes;
    }
  }
  return check_fit(ex, declared);
}
