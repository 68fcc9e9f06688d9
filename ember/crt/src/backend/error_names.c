/*
 * error_names.c -- names of the error codes, for reports (platform hooks, test programs).
 * A separate object so that firmware which never prints a code does not carry the strings.
 */
#include "ember/crt/error_codes.h"

#include <stddef.h>

typedef struct {
  tvm_crt_error_t code;
  const char* name;
} ErrorName;

#define NAME(code) {code, #code}

static const ErrorName kNames[] = {
    NAME(kTvmErrorNoError),
    NAME(kTvmErrorPlatformCheckFailure),
    NAME(kTvmErrorPlatformWorkspaceCorrupted),
    NAME(kTvmErrorWorkspaceNotInitialized),
    NAME(kTvmErrorWorkspaceExhausted),
    NAME(kTvmErrorWorkspaceFreeNotLast),
    NAME(kTvmErrorWorkspaceFreeInvalid),
    NAME(kTvmErrorWorkspaceCorrupted),
    NAME(kTvmErrorWorkspaceBusy),
    NAME(kTvmErrorWorkspaceInvalidPool),
    NAME(kTvmErrorWorkspaceUnsupportedDevice),
    NAME(kTvmErrorFunctionRegistryFull),
    NAME(kTvmErrorFunctionRegistryInvalid),
    NAME(kTvmErrorFunctionRegistryDuplicate),
    NAME(kTvmErrorFunctionNameNotFound),
    NAME(kTvmErrorFunctionHandleInvalid),
    NAME(kTvmErrorFunctionCallNumArgs),
    NAME(kTvmErrorFunctionCallFailed),
    NAME(kTvmErrorFunctionReportedError),
    NAME(kTvmErrorFunctionParallelTaskFailed),
    NAME(kTvmErrorGenericInvalidArgument),
    NAME(kTvmErrorExecutorBadArtifact),
    NAME(kTvmErrorExecutorBadInput),
    NAME(kTvmErrorExecutorIndexOutOfRange),
    NAME(kTvmErrorExecutorNameNotFound),
    NAME(kTvmErrorExecutorOutOfMemory),
    NAME(kTvmErrorExecutorNotReady),
    NAME(kTvmErrorExecutorUnsupported),
    NAME(kTvmErrorModuleLoadFailed),
    NAME(kTvmErrorModuleFunctionNotFound),
    NAME(kTvmErrorModuleHandleInvalid),
    NAME(kTvmErrorRpcProtocol),
    NAME(kTvmErrorRpcTransport),
    NAME(kTvmErrorRpcRefused),
    NAME(kTvmErrorRpcHandleInvalid),
    NAME(kTvmErrorRpcUnsupported),
    NAME(kTvmErrorRpcTableFull),
};

const char* ember_crt_error_name(tvm_crt_error_t code) {
  size_t i;
  for (i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    if (kNames[i].code == code) return kNames[i].name;
  }
  return "kTvmErrorUnknown";
}
