/*
 * crt_config.h -- the fixed limits of the ember standalone C runtime.
 *
 * The C runtime never allocates after ember_crt_init: every table has a size fixed here.
 * Override a value with -D on the compiler command line (EXTRA_CFLAGS of the Makefile), e.g.
 *
 *   make -C <crt dir> BUILD=out EXTRA_CFLAGS="-DEMBER_CRT_WORKSPACE_ALIGNMENT=16"
 *
 * The runtime and the application must be compiled with the same values.
 */
#ifndef EMBER_CRT_CRT_CONFIG_H_
#define EMBER_CRT_CRT_CONFIG_H_

/*!
 * \brief Alignment in bytes of every pointer TVMBackendAllocWorkspace returns.
 * c_backend_api.h promises 64 (generated code may vectorise on it); 16 saves a little arena
 * on small devices when the model was compiled with workspace-byte-alignment=16.
 */
#ifndef EMBER_CRT_WORKSPACE_ALIGNMENT
#define EMBER_CRT_WORKSPACE_ALIGNMENT 64
#endif

/*!
 * \brief Check each workspace block for overruns when it is freed (a 4-byte guard after the
 * block). An overrun means memory is corrupt, so TVMBackendFreeWorkspace calls
 * TVMPlatformAbort(kTvmErrorPlatformWorkspaceCorrupted). Set to 0 to save 4 bytes per block.
 */
#ifndef EMBER_CRT_WORKSPACE_GUARD
#define EMBER_CRT_WORKSPACE_GUARD 1
#endif

/*! \brief Bytes kept of the last error message (TVMGetLastError), NUL included. */
#ifndef EMBER_CRT_ERROR_BUFFER_SIZE
#define EMBER_CRT_ERROR_BUFFER_SIZE 256
#endif

/*! \brief Most arguments TVMFuncCall passes on; more is reported as an error. */
#ifndef EMBER_CRT_MAX_ARGS
#define EMBER_CRT_MAX_ARGS 64
#endif

/*!
 * \brief Storage class of the last error: empty on firmware (one static message); a hosted
 * build with threads sets it to its thread-local keyword (the native runtime: __thread).
 */
#ifndef EMBER_CRT_ERROR_THREAD_LOCAL
#define EMBER_CRT_ERROR_THREAD_LOCAL
#endif

/*! \brief Most function registries (one per compiled model) registered at once. */
#ifndef EMBER_CRT_MAX_FUNC_REGISTRIES
#define EMBER_CRT_MAX_FUNC_REGISTRIES 4
#endif

/*! \brief Longest function name, NUL excluded: names are compared within this bound. */
#ifndef EMBER_CRT_MAX_NAME_LENGTH
#define EMBER_CRT_MAX_NAME_LENGTH 127
#endif

/* ---- checks: a bad value fails the build instead of the device ------------------------- */
#if EMBER_CRT_WORKSPACE_ALIGNMENT < 4 || \
    (EMBER_CRT_WORKSPACE_ALIGNMENT & (EMBER_CRT_WORKSPACE_ALIGNMENT - 1)) != 0
#error "EMBER_CRT_WORKSPACE_ALIGNMENT must be a power of two >= 4"
#endif
#if EMBER_CRT_ERROR_BUFFER_SIZE < 32
#error "EMBER_CRT_ERROR_BUFFER_SIZE must be at least 32"
#endif
#if EMBER_CRT_MAX_ARGS < 1 || EMBER_CRT_MAX_FUNC_REGISTRIES < 1 || EMBER_CRT_MAX_NAME_LENGTH < 1
#error "EMBER_CRT_MAX_ARGS, EMBER_CRT_MAX_FUNC_REGISTRIES, EMBER_CRT_MAX_NAME_LENGTH must be >= 1"
#endif

#endif /* EMBER_CRT_CRT_CONFIG_H_ */
