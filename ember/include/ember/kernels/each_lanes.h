/*!
 * \file ember/kernels/each_lanes.h
 * \brief Includes the implementation header named by EMBER_EACH_LANES_IMPL once per lane
 *        count (4, 8, 16; from 8 with EMBER_EACH_LANES_FROM_8) with EMBER_L set, each only
 *        where the unit wants it (linkage.h's EMBER_KERNEL_WANTS_LANES: a kernel object
 *        wants one). Both names are undefined after. No include guard on purpose: each kernel
 *        header includes it once, at the end of its bodies.
 *
 *   #define EMBER_EACH_LANES_IMPL "ember/kernels/pool_nchwc_impl.h"
 *   #include "ember/kernels/each_lanes.h"
 */
#ifndef EMBER_EACH_LANES_IMPL
#error "each_lanes.h: define EMBER_EACH_LANES_IMPL (the implementation header) first"
#endif
#if !defined(EMBER_EACH_LANES_FROM_8) && EMBER_KERNEL_WANTS_LANES(4)
#define EMBER_L 4
#include EMBER_EACH_LANES_IMPL
#undef EMBER_L
#endif
#if EMBER_KERNEL_WANTS_LANES(8)
#define EMBER_L 8
#include EMBER_EACH_LANES_IMPL
#undef EMBER_L
#endif
#if EMBER_KERNEL_WANTS_LANES(16)
#define EMBER_L 16
#include EMBER_EACH_LANES_IMPL
#undef EMBER_L
#endif
#undef EMBER_EACH_LANES_IMPL
#undef EMBER_EACH_LANES_FROM_8
