/*
 * executor_memory.c -- the executors' memory on the C runtime: the workspace arena of
 * ember_crt_init (LIFO, so executors are released in the reverse order of creation).
 * The native hosted runtime brings its own (malloc) and does not link this file.
 */
#include "ember/crt/executor.h"

void* ember_executor_alloc(uint64_t nbytes) {
  return TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, kDLUInt, 8);
}

void ember_executor_free(void* ptr) { (void)TVMBackendFreeWorkspace(kDLCPU, 0, ptr); }
