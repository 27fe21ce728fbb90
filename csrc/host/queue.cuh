#pragma once
// The queue every launch goes to: the caller's (the library build). tools/bundle.py puts
// queue_default.cuh in this file's place in submission.py, which uses the default queue only.
#include "../prelude.cuh"

namespace nvfp4 {
namespace host {
using Queue = cudaStream_t;

inline Queue queue_of(void* handle) { return static_cast<Queue>(handle); }

// Sends a launch to the queue. `overlap`: the kernel may start while the previous kernel on the
// queue still runs (it waits where it reads that kernel's output, griddepcontrol.wait); the launch
// takes one more attribute, so attrs must have room for it beyond the *count already there.
inline void launch_on(cudaLaunchConfig_t& config, cudaLaunchAttribute* attrs, unsigned* count, Queue queue, bool overlap) {
  config.stream = queue;
  if (overlap) {
    attrs[*count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[*count].val.programmaticStreamSerializationAllowed = 1;
    ++*count;
  }
}
}  // namespace host
}  // namespace nvfp4
