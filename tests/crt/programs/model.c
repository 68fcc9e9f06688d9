/*
 * model.c -- stands in for generated model code: it includes only the two headers generated
 * code may include. out = relu(a + b), computed as
 *   run_model: sid = workspace; add_unpacked(a, b, sid); call_packed relu(sid, out); free sid
 * where add_unpacked takes a scratch workspace of its own (freed first: LIFO).
 */
#include "ember/c_backend_api.h"
#include "ember/c_packed_func.h"

/* An unpacked operator (plain pointers), with a workspace of its own. */
int32_t tvmgen_test_fused_add(float* a, float* b, float* out, int64_t n) {
  int64_t i;
  float* scratch = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)n * sizeof(float),
                                                    kDLFloat, 32);
  if (scratch == NULL) return -1;
  for (i = 0; i < n; ++i) scratch[i] = a[i] + b[i];
  for (i = 0; i < n; ++i) out[i] = scratch[i];
  return TVMBackendFreeWorkspace(kDLCPU, 0, scratch);
}

typedef struct {
  const float* in;
  float* out;
  int64_t n;
} ReluTask;

/* Body of the parallel region: this task's share of [0, n). */
static int relu_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ReluTask* t = (ReluTask*)cdata;
  int64_t chunk = (t->n + penv->num_task - 1) / penv->num_task;
  int64_t i, end = (task_id + 1) * chunk < t->n ? (task_id + 1) * chunk : t->n;
  for (i = task_id * chunk; i < end; ++i) t->out[i] = t->in[i] > 0.0f ? t->in[i] : 0.0f;
  return TVMBackendParallelBarrier(task_id, penv);
}

static int is_f32_vector(int code, TVMValue v) {
  const DLTensor* t = (const DLTensor*)v.v_handle;
  return (code == kTVMDLTensorHandle || code == kTVMNDArrayHandle) && t != NULL &&
         t->ndim == 1 && t->dtype.code == kDLFloat && t->dtype.bits == 32;
}

/* A packed operator: relu(x) -> y, checking its arguments as generated wrappers do. */
int tvmgen_test_fused_nn_relu(TVMValue* args, int* type_codes, int num_args,
                              TVMValue* out_ret_value, int* out_ret_tcode, void* resource) {
  ReluTask task;
  (void)out_ret_value;
  (void)out_ret_tcode;
  (void)resource;
  if (num_args != 2) {
    TVMPackedFuncSetLastError("tvmgen_test_fused_nn_relu: expected 2 arguments");
    return -1;
  }
  if (!is_f32_vector(type_codes[0], args[0]) || !is_f32_vector(type_codes[1], args[1])) {
    TVMPackedFuncSetLastError("tvmgen_test_fused_nn_relu: expected float32 vectors");
    return -1;
  }
  task.in = (const float*)((DLTensor*)args[0].v_handle)->data;
  task.out = (float*)((DLTensor*)args[1].v_handle)->data;
  task.n = ((DLTensor*)args[0].v_handle)->shape[0];
  return TVMBackendParallelLaunch(relu_task, &task, 0);
}

/* call_packed(name, x, y) as generated code does it: look up, then TVMFuncCall. */
static int32_t call_packed2(const char* name, DLTensor* x, DLTensor* y, int num_args) {
  TVMFunctionHandle f = NULL;
  TVMValue args[2], ret;
  int codes[2] = {kTVMDLTensorHandle, kTVMDLTensorHandle}, ret_code = kTVMNullptr;
  if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, name, &f) != 0) return -1;
  args[0].v_handle = x;
  args[1].v_handle = y;
  return TVMFuncCall(f, args, codes, num_args, &ret, &ret_code);
}

/* The run function, like the AOT run_model. bad: 1 calls relu wrongly, 2 calls a missing op. */
int32_t tvmgen_test_run_model(float* a, float* b, float* out, int64_t n, int bad) {
  int64_t shape[1];
  DLTensor x = {NULL, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, NULL, NULL, 0};
  DLTensor y = {NULL, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, NULL, NULL, 0};
  void* sid = TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)n * sizeof(float), kDLFloat, 32);
  int32_t rc;
  if (sid == NULL) return -1;
  shape[0] = n;
  x.data = sid;
  x.shape = shape;
  y.data = out;
  y.shape = shape;
  rc = tvmgen_test_fused_add(a, b, (float*)sid, n);
  if (rc == 0) rc = call_packed2("tvmgen_test_fused_nn_relu", &x, &y, bad == 1 ? 1 : 2);
  if (rc == 0 && bad > 1) rc = call_packed2("tvmgen_test_no_such_op", &x, &y, 2);
  /* free on every path, so that a failed run leaves the arena empty */
  if (TVMBackendFreeWorkspace(kDLCPU, 0, sid) != 0) return -1;
  return rc;
}
