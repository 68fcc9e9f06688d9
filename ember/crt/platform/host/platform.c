/*
 * platform.c -- the platform hooks (ember/crt/platform.h) for a hosted build: a PC, tests.
 *
 * Kept apart from the runtime core so that the core links without stdio; firmware replaces
 * this file with its own (e.g. log over UART, then reset).
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember/crt/crt.h"

/* Exit status of a program stopped by TVMPlatformAbort (distinct from an ordinary failure). */
#define EMBER_CRT_HOST_ABORT_STATUS 70

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  fflush(stdout);
  fprintf(stderr, "TVMPlatformAbort: %s (0x%x): %s\n", ember_crt_error_name(error_code),
          (unsigned)error_code, TVMGetLastError());
  fflush(stderr);
  exit(EMBER_CRT_HOST_ABORT_STATUS);
}
