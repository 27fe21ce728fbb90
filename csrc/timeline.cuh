#pragma once
// Per-CTA timeline marks, read by bench/timeline.py (make timeline): the globaltimer (ns, one clock
// for every SM) at a few points of each CTA's run. Compiled in only when NVFP4_TIMELINE is 1, as in
// that tool's build; every other build has no mark (tests/kernels/test_cuda_host.py reads its SASS).
#include "prelude.cuh"

#ifndef NVFP4_TIMELINE
#define NVFP4_TIMELINE 0
#endif

namespace nvfp4 {
constexpr bool kTimeline = NVFP4_TIMELINE;
constexpr int kTimelineCtas = 1024;  // CTAs with marks (blockIdx.x below this)
// The marks: the CTA's entry; its first consumer thread seeing the first stage full; that thread
// done with its last tile's K loop; and with its last tile's stores.
enum TimelineMark { kCtaEntry, kFirstStageFull, kKLoopsEnd, kStoresEnd, kTimelineMarks };
#if NVFP4_TIMELINE
__device__ unsigned long long timeline[kTimelineCtas][kTimelineMarks];
#endif

__device__ __forceinline__ void timeline_mark(TimelineMark mark) {
#if NVFP4_TIMELINE
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (blockIdx.x < kTimelineCtas) timeline[blockIdx.x][mark] = t;
#endif
}
}  // namespace nvfp4
