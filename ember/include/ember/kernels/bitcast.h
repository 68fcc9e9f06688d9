/*
 * ember kernels: reinterpret a float's bits as an integer of the same width and back, for
 * relay's ``reinterpret`` op (ember/relay/op/bitcast.py; ONNX BitCast). memcpy is the
 * defined way in C; compilers turn it into a register move. Integer <-> integer of one width
 * needs no helper: C's conversion to unsigned is modulo 2**bits, and back is two's complement.
 */
#ifndef EMBER_KERNELS_BITCAST_H_
#define EMBER_KERNELS_BITCAST_H_

#include <stdint.h>
#include <string.h>

#define EMBER_BITCAST(name, from_t, to_t)  \
  static inline to_t name(from_t v) {      \
    to_t out;                              \
    memcpy(&out, &v, sizeof out);          \
    return out;                            \
  }

EMBER_BITCAST(ember_bitcast_f32_to_u32, float, uint32_t)
EMBER_BITCAST(ember_bitcast_u32_to_f32, uint32_t, float)
EMBER_BITCAST(ember_bitcast_f64_to_u64, double, uint64_t)
EMBER_BITCAST(ember_bitcast_u64_to_f64, uint64_t, double)

#undef EMBER_BITCAST

#endif /* EMBER_KERNELS_BITCAST_H_ */
