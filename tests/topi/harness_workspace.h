/* The workspace of the conv kernel harnesses (the 1x1 kernels' packed strips, the NCHW-input
 * kernel's row buffers): malloc, or none at all (as a C-runtime arena with no room gives),
 * and a count of the live buffers (each one freed). Include after the kernel header. */
#ifndef EMBER_TESTS_HARNESS_WORKSPACE_H_
#define EMBER_TESTS_HARNESS_WORKSPACE_H_

#include <stdlib.h>

static int harness_no_workspace = 0, harness_live_buffers = 0;

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  void* ptr;
  (void)device_type, (void)device_id, (void)dtype_code_hint, (void)dtype_bits_hint;
  if (harness_no_workspace) return NULL;
  ptr = malloc((size_t)nbytes);
  harness_live_buffers += ptr != NULL;
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type, (void)device_id;
  harness_live_buffers -= ptr != NULL;
  free(ptr);
  return 0;
}

void harness_set_workspace(int available) { harness_no_workspace = !available; }
int harness_live_workspace(void) { return harness_live_buffers; }

#endif /* EMBER_TESTS_HARNESS_WORKSPACE_H_ */
