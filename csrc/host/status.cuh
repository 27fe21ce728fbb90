#pragma once
#include "../prelude.cuh"

namespace nvfp4 {
namespace host {
struct Status {
  char* buf;
  int len;
  bool fail(const char* what, const char* detail = "") {
    if (buf && len > 0) snprintf(buf, size_t(len), "%s%s%s", what, detail[0] ? ": " : "", detail);
    return false;
  }
};
#define NVFP4_CUDA_TRY(status, call)                                            \
  do {                                                                          \
    const cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) return (status).fail(#call, cudaGetErrorString(e_)); \
  } while (0)
}  // namespace host
}  // namespace nvfp4
