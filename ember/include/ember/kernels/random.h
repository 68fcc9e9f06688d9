/*
 * ember kernels: the mixing function of the counter-based generator of relay.random
 * (ember/relay/op/random.py), which the loop-level IR cannot spell (it has no xor or shifts).
 *
 * ember_splitmix64(z) is SplitMix64's finaliser (Steele, Lea and Flood, 2014): a bijection of
 * the 64-bit integers whose outputs for consecutive states pass BigCrush. The numpy reference
 * in random.py computes the same function.
 */
#ifndef EMBER_KERNELS_RANDOM_H_
#define EMBER_KERNELS_RANDOM_H_

#include <stdint.h>

static inline uint64_t ember_splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

#endif /* EMBER_KERNELS_RANDOM_H_ */
