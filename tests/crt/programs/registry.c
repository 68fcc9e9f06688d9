/* registry.c -- stands in for the generated tvmgen_<mod>_func_registry. */
#include "ember/crt/func_registry.h"

int tvmgen_test_fused_nn_relu(TVMValue* args, int* type_codes, int num_args,
                              TVMValue* out_ret_value, int* out_ret_tcode, void* resource);

static const EmberFuncEntry tvmgen_test_funcs[] = {
    {"tvmgen_test_fused_nn_relu", tvmgen_test_fused_nn_relu},
};

const EmberFuncRegistry tvmgen_test_func_registry = {
    "test", tvmgen_test_funcs, sizeof(tvmgen_test_funcs) / sizeof(tvmgen_test_funcs[0])};
