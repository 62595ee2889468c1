// QK_VECTOR_CLONES: compile a hot loop once per x86 vector width and pick the copy at load time
// by the CPU (GNU target_clones, an ifunc). quantkit is built for baseline x86-64 (SSE2, 4
// floats a vector); where a loop's cost is a vectorized operation, AVX2 and AVX-512 copies do
// 8 and 16 at once. IEEE arithmetic gives the same bits at every width, so results do not depend
// on the machine (files that use this are built with -ffp-contract=off, so no clone fuses a
// multiply-add the baseline copy rounds twice).
//
// Helpers called from a cloned function must be inlined into it (QK_ALWAYS_INLINE) to be compiled
// for that width: an out-of-line call runs the baseline copy.
#pragma once

#if defined(__x86_64__) && defined(__ELF__) && \
    (defined(__clang__) ? __clang_major__ >= 14 : defined(__GNUC__))
#define QK_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QK_VECTOR_CLONES
#endif

#define QK_ALWAYS_INLINE inline __attribute__((always_inline))
