/*
 * error_codes.h -- integer error codes of the ember standalone C runtime.
 *
 * A code is (category << 8) | number, so the category of any code is code >> 8 and a new
 * code never renumbers the others. 0 is success. Functions of the C ABI (TVMBackend*,
 * TVMFuncCall, ...) return these codes where they return an int; the message that goes with
 * the last one is TVMGetLastError() and the code itself ember_crt_last_error_code().
 */
#ifndef EMBER_CRT_ERROR_CODES_H_
#define EMBER_CRT_ERROR_CODES_H_

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief An error code (an int, so that a platform hook may also be declared with int). */
typedef int tvm_crt_error_t;

#define EMBER_CRT_ERROR(category, number) (((category) << 8) | (number))
#define EMBER_CRT_ERROR_CATEGORY(code) ((code) >> 8)

/*! \brief Who detected the error. */
typedef enum {
  kTvmErrorCategoryPlatform = 1,         /* fatal: passed to TVMPlatformAbort */
  kTvmErrorCategoryWorkspace = 2,        /* the workspace arena */
  kTvmErrorCategoryFunctionRegistry = 3, /* registering and finding functions */
  kTvmErrorCategoryFunction = 4,         /* calling functions */
  kTvmErrorCategoryGeneric = 5,          /* arguments of the runtime's own API */
  kTvmErrorCategoryExecutor = 6,         /* graph and AOT executors (ember/crt/executor) */
  kTvmErrorCategoryModule = 7,           /* loading modules (the native hosted runtime) */
  kTvmErrorCategoryRpc = 8,              /* the micro RPC server (ember/crt/rpc) */
} tvm_crt_error_category_t;

enum {
  kTvmErrorNoError = 0,

  /* platform: the runtime cannot go on; TVMPlatformAbort receives one of these */
  kTvmErrorPlatformCheckFailure = EMBER_CRT_ERROR(kTvmErrorCategoryPlatform, 0), /* for apps */
  kTvmErrorPlatformWorkspaceCorrupted = EMBER_CRT_ERROR(kTvmErrorCategoryPlatform, 1),

  /* workspace: TVMBackendAllocWorkspace / TVMBackendFreeWorkspace / ember_crt_init */
  kTvmErrorWorkspaceNotInitialized = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 0),
  kTvmErrorWorkspaceExhausted = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 1),
  kTvmErrorWorkspaceFreeNotLast = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 2),
  kTvmErrorWorkspaceFreeInvalid = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 3),
  kTvmErrorWorkspaceCorrupted = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 4),
  kTvmErrorWorkspaceBusy = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 5),
  kTvmErrorWorkspaceInvalidPool = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 6),
  kTvmErrorWorkspaceUnsupportedDevice = EMBER_CRT_ERROR(kTvmErrorCategoryWorkspace, 7),

  /* function registry: ember_crt_register_func_registry / TVMBackendGetFuncFromEnv */
  kTvmErrorFunctionRegistryFull = EMBER_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 0),
  kTvmErrorFunctionRegistryInvalid = EMBER_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 1),
  kTvmErrorFunctionRegistryDuplicate = EMBER_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 2),
  kTvmErrorFunctionNameNotFound = EMBER_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 3),

  /* function: TVMFuncCall, TVMBackendParallelLaunch, errors reported by called code */
  kTvmErrorFunctionHandleInvalid = EMBER_CRT_ERROR(kTvmErrorCategoryFunction, 0),
  kTvmErrorFunctionCallNumArgs = EMBER_CRT_ERROR(kTvmErrorCategoryFunction, 1),
  kTvmErrorFunctionCallFailed = EMBER_CRT_ERROR(kTvmErrorCategoryFunction, 2),
  kTvmErrorFunctionReportedError = EMBER_CRT_ERROR(kTvmErrorCategoryFunction, 3),
  kTvmErrorFunctionParallelTaskFailed = EMBER_CRT_ERROR(kTvmErrorCategoryFunction, 4),

  /* generic */
  kTvmErrorGenericInvalidArgument = EMBER_CRT_ERROR(kTvmErrorCategoryGeneric, 0),

  /* executor: a malformed graph JSON, metadata or params blob; bad inputs; bad indices */
  kTvmErrorExecutorBadArtifact = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 0),
  kTvmErrorExecutorBadInput = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 1),
  kTvmErrorExecutorIndexOutOfRange = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 2),
  kTvmErrorExecutorNameNotFound = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 3),
  kTvmErrorExecutorOutOfMemory = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 4),
  kTvmErrorExecutorNotReady = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 5),
  kTvmErrorExecutorUnsupported = EMBER_CRT_ERROR(kTvmErrorCategoryExecutor, 6),

  /* module: loading a library (missing, truncated, foreign, wrong version), handles */
  kTvmErrorModuleLoadFailed = EMBER_CRT_ERROR(kTvmErrorCategoryModule, 0),
  kTvmErrorModuleFunctionNotFound = EMBER_CRT_ERROR(kTvmErrorCategoryModule, 1),
  kTvmErrorModuleHandleInvalid = EMBER_CRT_ERROR(kTvmErrorCategoryModule, 2),

  /* rpc: the micro RPC server; a protocol or transport error ends the session */
  kTvmErrorRpcProtocol = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 0),
  kTvmErrorRpcTransport = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 1),
  kTvmErrorRpcRefused = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 2),
  kTvmErrorRpcHandleInvalid = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 3),
  kTvmErrorRpcUnsupported = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 4),
  kTvmErrorRpcTableFull = EMBER_CRT_ERROR(kTvmErrorCategoryRpc, 5),
};

/*!
 * \brief The name of a code ("kTvmErrorWorkspaceExhausted"), or "kTvmErrorUnknown".
 * Lives in its own object file: firmware that never calls it does not link the names.
 */
const char* ember_crt_error_name(tvm_crt_error_t code);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_ERROR_CODES_H_ */
