#pragma once
// The default queue only: what submission.py builds in place of queue.cuh (tools/bundle.py). The
// leaderboard's server refuses a file that names any other queue, and its harness times the
// default one. A launch keeps the zero handle of its config, and a kernel after the prepass starts
// once the prepass has ended (the plan's CUDA graph gives the overlap instead).
#include "../prelude.cuh"

namespace nvfp4 {
namespace host {
using Queue = decltype(nullptr);

inline Queue queue_of(void*) { return nullptr; }

inline void launch_on(cudaLaunchConfig_t&, cudaLaunchAttribute*, unsigned*, Queue, bool) {}
}  // namespace host
}  // namespace nvfp4
