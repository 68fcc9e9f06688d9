/*
 * graph_internal.h -- the graph executor's tables, shared by its parser (graph_parse.c) and
 * its run side (graph_executor.c). Not part of the API.
 */
#ifndef EMBER_CRT_EXECUTOR_GRAPH_INTERNAL_H_
#define EMBER_CRT_EXECUTOR_GRAPH_INTERNAL_H_

#include "ember/crt/graph_executor.h"
#include "ember/crt/json.h"

#include "../src/backend/internal.h"

enum { kGraphNodeInput = 0, kGraphNodeOp = 1, kGraphNodeNop = 2 };

typedef struct {
  const char* name; /* into the JSON text, not NUL-terminated */
  uint32_t name_len;
  const char* func;
  uint32_t func_len;
  uint32_t inputs;      /* first of its entries in node_inputs */
  uint32_t num_inputs;
  uint32_t num_outputs; /* 1 for inputs */
  uint32_t args;        /* first of its call arguments in values/codes */
  uint8_t kind;
  uint8_t flatten;
  TVMFunctionHandle fn;
} EmberGraphNode;

/* Sizes found by the first pass over the JSON; they lay out the executor's one block. */
typedef struct {
  uint32_t nodes, entries, node_inputs, args, heads, dims, call_args, flat;
} EmberGraphCounts;

struct EmberGraphExecutor {
  EmberJson json;
  DLDevice dev;
  EmberGraphCounts n;
  EmberGraphNode* nodes;
  uint32_t* row_ptr;     /* n.nodes + 1: entry id of (node, k) = row_ptr[node] + k */
  uint32_t* node_inputs; /* entry ids */
  uint32_t* arg_nodes;   /* node ids of the inputs, in input order */
  uint32_t* heads;       /* entry ids of the outputs */
  uint32_t* sids;        /* storage id per entry (< n.entries) */
  uint32_t* root;        /* per entry: the entry whose memory it is (__nop chains) */
  DLTensor* entries;
  int64_t* dims;
  uint64_t* pool_bytes;  /* per storage id */
  void** pools;          /* per storage id; NULL if unused */
  TVMValue* values;
  int* codes;
  DLTensor* flat;        /* 1-D views for flatten_data nodes */
  int64_t* flat_dims;
};

/* graph_parse.c: count, then fill the tables of ex (laid out for those counts). */
tvm_crt_error_t ember_graph_count(const EmberJson* j, EmberGraphCounts* out);
tvm_crt_error_t ember_graph_fill(EmberGraphExecutor* ex);

#endif /* EMBER_CRT_EXECUTOR_GRAPH_INTERNAL_H_ */
