#pragma once
// What every file of the translation unit needs: the CUDA and C++ headers, the build's
// configuration (NVFP4_ARCH, NVFP4_TCGEN05_EMULATION), checked once, and byte_perm, which device
// code and its host emulation share.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <utility>
#include <vector>

#ifndef NVFP4_ARCH
#error "build with -DNVFP4_ARCH=90 or -DNVFP4_ARCH=100"
#endif
#ifndef NVFP4_TCGEN05_EMULATION
#define NVFP4_TCGEN05_EMULATION 0  // 1 (with NVFP4_ARCH=100, built for sm_90a): the test build of the sm_100a kernel
#endif
#if NVFP4_TCGEN05_EMULATION && NVFP4_ARCH != 100
#error "NVFP4_TCGEN05_EMULATION emulates the sm_100a kernel: build it with -DNVFP4_ARCH=100"
#endif

namespace nvfp4 {
// PRMT: byte i of the result is byte selector[i] of y:x (selector nibbles below 8: no sign
// replication). The host computes the same, for the tests that run device arithmetic there.
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t selector) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, selector);
#else
  const uint64_t bytes = uint64_t(y) << 32 | x;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= uint32_t(bytes >> (8 * ((selector >> (4 * i)) & 7)) & 0xFFu) << (8 * i);
  return out;
#endif
}
}  // namespace nvfp4
