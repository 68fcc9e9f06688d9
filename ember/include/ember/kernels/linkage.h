/*!
 * \file ember/kernels/linkage.h
 * \brief How a translation unit sees the kernels' entry points (ember_conv2d_nchwc_x8,
 *        ember_sgemm, ...): the three ways a kernel header can be included.
 *
 * - Standalone (nothing defined; Model Library Format, C source exports, firmware): every
 *   entry point is a static inline function whose body the header provides, so the file
 *   builds alone with no ember objects.
 * - EMBER_KERNELS_LINKED (a hosted model library's C): the header declares the entry points
 *   and their parameter types only, with hidden external linkage; the bodies come from kernel
 *   objects linked into the same library. A model then never recompiles the kernels.
 * - EMBER_KERNEL_OBJECT (one kernel object, compiled once per flag set and cached): the header
 *   defines, with hidden external linkage, only the entry point named by
 *   EMBER_KOBJ_<name> (e.g. EMBER_KOBJ_ember_conv2d_nchwc) and, for a kernel with lane
 *   variants, only lane count EMBER_KERNEL_LANES. Each entry point's body is guarded by
 *   `#if EMBER_KERNEL_ALL || defined(EMBER_KOBJ_<name>)`.
 *
 * A header declares its entry points up front as `EMBER_KENTRY <type> <name>(...)`, one per
 * line: ember.tir.kernel_objects reads those lines to know which calls link from objects.
 *
 * Parts: an entry point too big for one compile job (the conv kernel's register tiles) is
 * declared `EMBER_KPARTS(<name>, <n>)` on a line of its own; its kernel object is then n
 * translation units, compiled in parallel and linked together, each with EMBER_KERNEL_PART set
 * (0 to n - 1). Part 0 defines the entry point and all but the header's tile groups; part
 * p >= 1 defines tile group p alone (EMBER_KERNEL_IN_PART(p)) with hidden external linkage
 * (EMBER_KPART_FN), which the other parts declare. Without EMBER_KERNEL_PART (standalone, or
 * an object in one piece, as the tile-search harness builds) every part is in and the tiles
 * stay static inline.
 *
 * Hidden: a model library's kernels stay private to it (no symbol clash between libraries).
 */
#ifndef EMBER_KERNELS_LINKAGE_H_
#define EMBER_KERNELS_LINKAGE_H_

#if defined(EMBER_KERNELS_LINKED) || defined(EMBER_KERNEL_OBJECT)
#if defined(__GNUC__)
#define EMBER_KENTRY __attribute__((visibility("hidden")))
#else
#define EMBER_KENTRY
#endif
#else
#define EMBER_KENTRY static inline
#endif

/* Whether the bodies follow (standalone or a kernel object; not a linked model's C). */
#if defined(EMBER_KERNELS_LINKED) && !defined(EMBER_KERNEL_OBJECT)
#define EMBER_KERNEL_BODIES 0
#else
#define EMBER_KERNEL_BODIES 1
#endif

/* Whether every entry point's body is wanted (standalone), not one object's. */
#if defined(EMBER_KERNEL_OBJECT)
#define EMBER_KERNEL_ALL 0
#else
#define EMBER_KERNEL_ALL 1
#endif

/* Whether lane count L's variant is wanted (a kernel object wants one lane count). */
#if defined(EMBER_KERNEL_OBJECT) && defined(EMBER_KERNEL_LANES)
#define EMBER_KERNEL_WANTS_LANES(L) (EMBER_KERNEL_LANES == (L))
#else
#define EMBER_KERNEL_WANTS_LANES(L) 1
#endif

/* Whether this unit defines part P of a kernel object in parts (every part, when not split),
 * and the linkage of the functions one part defines for another. */
#if defined(EMBER_KERNEL_OBJECT) && defined(EMBER_KERNEL_PART)
#define EMBER_KERNEL_IN_PART(P) (EMBER_KERNEL_PART == (P))
#if defined(__GNUC__)
#define EMBER_KPART_FN __attribute__((visibility("hidden")))
#else
#define EMBER_KPART_FN
#endif
#else
#define EMBER_KERNEL_IN_PART(P) 1
#define EMBER_KPART_FN static inline
#endif

/* Kernel-internal functions: EMBER_ALWAYS_INLINE, inlined at every call (where GCC's heuristics
 * would keep a call: a tile's cheap parts, loops whose constant sizes must fold into the caller);
 * EMBER_NOINLINE, one out-of-line copy, neither inlined nor cloned per constant argument
 * (compile time; noipa). */
#if defined(__GNUC__)
#define EMBER_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define EMBER_ALWAYS_INLINE static inline
#endif
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define EMBER_NOINLINE static __attribute__((noipa, unused))
#elif defined(__GNUC__)
#define EMBER_NOINLINE static __attribute__((noinline, unused))
#else
#define EMBER_NOINLINE static
#endif

/* The parts of entry point `name`'s object (the lane variants of name_x<L> alike): read by
 * ember.tir.kernel_objects, nothing for the compiler. */
#define EMBER_KPARTS(name, n)

#endif /* EMBER_KERNELS_LINKAGE_H_ */
