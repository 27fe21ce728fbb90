#pragma once
// The kernel of the target architecture and its traits (nvfp4::Arch), which the host side uses.
#include "prelude.cuh"
#include "launch_params.cuh"
#include "ptx.cuh"
#include "experts.cuh"
#if NVFP4_ARCH == 90
#include "sm90/arch.cuh"
#elif NVFP4_ARCH == 100
#include "sm100/arch.cuh"
#endif
