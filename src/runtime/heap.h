// Process heap settings for repeated model runs.
//
// Every run frees and reallocates the same activation sizes. With glibc's defaults, blocks above
// the mmap threshold (128 KiB, adapting up to 32 MiB) are mmap'ed and unmapped per allocation,
// and the heap top is trimmed on free, so each run faults in (and the kernel zeroes) every page
// of its activations again: 25-45% of a CPU pass on mobilenet_v2/efficientnet_b0 at batch 8
// (docs/performance.md). Keeping freed blocks in the heap lets the next run reuse them. Peak RSS
// is unchanged (it is the peak of live activations either way); freed memory is not returned to
// the system until the process exits.
#pragma once

namespace quantkit::runtime {

// Idempotent and process-wide; a no-op outside glibc and under sanitizers (own allocator).
void KeepFreedMemoryForReuse();

}  // namespace quantkit::runtime
