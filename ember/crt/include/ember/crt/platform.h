/*
 * platform.h -- the hooks an application implements for the ember C runtime.
 *
 * The runtime core (libembercrt.a) calls only these functions of the outside world, plus
 * memset/memcpy which the compiler may emit. platform/host/platform.c implements them for a
 * hosted build (tests, a PC); firmware provides its own (reset the device, blink a LED, ...).
 *
 * Errors that the caller can handle are never reported here: they come back as error codes
 * with a message in TVMGetLastError(). TVMPlatformAbort is only for states the runtime
 * cannot recover from (a workspace block was overrun: memory is corrupt).
 */
#ifndef EMBER_CRT_PLATFORM_H_
#define EMBER_CRT_PLATFORM_H_

#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EMBER_CRT_NORETURN __attribute__((noreturn))
#else
#define EMBER_CRT_NORETURN
#endif

/*!
 * \brief Stop: the runtime found a fatal error (a kTvmErrorPlatform* code); it must not
 * return. TVMGetLastError() holds a message describing what happened.
 */
EMBER_CRT_NORETURN void TVMPlatformAbort(tvm_crt_error_t error_code);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_PLATFORM_H_ */
