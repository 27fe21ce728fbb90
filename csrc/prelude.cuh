#pragma once
// What every file of the translation unit needs: the CUDA and C++ headers, and the build's
// configuration (NVFP4_ARCH, NVFP4_TCGEN05_EMULATION), checked once.
#include <cuda.h>
#include <cuda_runtime.h>
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
