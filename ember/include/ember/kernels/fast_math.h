/*
 * ember kernels: exact powers of two for the fast math ops (fast_exp, fast_tanh, fast_erf in
 * ember/relay/op/fast_math.py), which scale a polynomial by 2**n.
 *
 * ember_pow2i(n) builds 2**n from its IEEE-754 bits: no libm call (exp2f is one, and a loop
 * that calls it does not vectorize). n must be in [-126, 127], which the ops' clamps ensure.
 */
#ifndef EMBER_KERNELS_FAST_MATH_H_
#define EMBER_KERNELS_FAST_MATH_H_

#include <stdint.h>
#include <string.h>

static inline float ember_pow2i(int32_t n) {
  uint32_t bits = (uint32_t)(n + 127) << 23;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

#endif /* EMBER_KERNELS_FAST_MATH_H_ */
