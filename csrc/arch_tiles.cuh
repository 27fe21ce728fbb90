#pragma once
// The target architecture's tiles as the host's schedule sees them (nvfp4::ArchTiles: shapes, rows,
// costs). No kernel code: csrc/host/schedule.cuh compiles with a host compiler alone.
#include "prelude.cuh"
#if NVFP4_ARCH == 90
#include "sm90/tiles.cuh"
#elif NVFP4_ARCH == 100
#include "sm100/tiles.cuh"
#endif
