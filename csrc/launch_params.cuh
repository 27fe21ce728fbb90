#pragma once
#include "prelude.cuh"

namespace nvfp4 {
// ============================================================================ launch parameters
// Everything a launch needs travels in its kernel parameters (up to 32764 bytes since CUDA 12.1),
// so each CUDA graph owns a private copy: no device buffer is shared between graphs.
constexpr int kMaxGroupsPerLaunch = 64;
constexpr int kMaxCtas = 256;
constexpr int kMaxTilesPerLaunch = 3072;
constexpr int kMaxKernelParamBytes = 32764;

// What the epilogue makes of a group's fp32 sums: each times alpha where there is one (the product
// of the operands' global scales in two-level NVFP4), then rounded to fp16 or bf16. alpha is read on
// the GPU only, as a tile is stored, so a graph replays with whatever values it holds then.
struct OutputArgs {
  const float* alpha;  // null: the sums as they are; else one value per group (per expert), or per group and column of C
  int alpha_stride;    // 0: one value per group; 1: one per column of C (the group's values alpha[0 .. N - 1])
  int bf16;            // 1: C holds bf16, 0: fp16
};

struct GroupArgs {
  const uint8_t* sfa;  // reordered scales: [ceil(M/128)][K/64][512-byte atom]
  const uint8_t* sfb;
  __half* c;  // [M][N] row-major, fp16 or bf16 (OutputArgs::bf16): 16 bits an element either way
  int m, n, k;
  int m_chunk_rows;  // A rows per tile: sm_90a 256, fewer when the problem has too few tiles for the GPU; sm_100a its tile shape's
  int a_box_rows;    // rows one TMA load of A brings (a pair's CTA: half the tile's)
  int alpha_index;   // the group's first value in its launch's OutputArgs::alpha (in the padding of the pointers above)
};
static_assert(sizeof(GroupArgs) == 48, "a launch's 64 groups fit the kernel parameters only at 48 bytes each");

struct LaunchArgs {
  CUtensorMap tmap_a[kMaxGroupsPerLaunch];  // packed FP4 A: [M rows][K/2 bytes]
  CUtensorMap tmap_b[kMaxGroupsPerLaunch];  // packed FP4 B: [N rows][K/2 bytes]
  GroupArgs groups[kMaxGroupsPerLaunch];
  uint32_t tiles[kMaxTilesPerLaunch];     // packed tiles, grouped by CTA
  uint16_t cta_first_tile[kMaxCtas + 1];  // CTA (sm_100a pair) b runs tiles [cta_first_tile[b], cta_first_tile[b + 1])
  OutputArgs out;                         // alpha over the call's groups (GroupArgs::alpha_index), C's type
};
static_assert(sizeof(LaunchArgs) <= kMaxKernelParamBytes, "launch arguments exceed the kernel parameter limit");

// The sm_90a prepass's arguments (A -> fp16 rows in a workspace); one per GEMM launch.
struct PrepassGroup {
  const uint8_t* a;    // packed FP4 [M][K/2]
  const uint8_t* sfa;  // reordered scales
  __half* a_half;      // workspace rows [M][K]
  int m, k;
};
struct PrepassArgs {
  PrepassGroup groups[kMaxGroupsPerLaunch];
};

// A group's alpha (its first value, null when there is none), from a launch's and the group's first index.
__host__ __device__ inline OutputArgs output_of_group(const OutputArgs& launch, int64_t first) {
  return OutputArgs{launch.alpha ? launch.alpha + first : nullptr, launch.alpha_stride, launch.bf16};
}
// cuTensorMapEncodeTiled, fetched from the driver at run time (no link-time dependency on libcuda).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                   const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);

// A tile: one group, one chunk of its M rows (A side), one block of its N rows (B side).
struct Tile {
  int group, m_chunk, n_block;
};
__host__ __device__ inline uint32_t pack_tile(int group, int m_chunk, int n_block) {
  return uint32_t(group) | uint32_t(m_chunk) << 7 | uint32_t(n_block) << 16;
}
__host__ __device__ inline Tile unpack_tile(uint32_t w) { return Tile{int(w & 127u), int((w >> 7) & 511u), int(w >> 16)}; }

// Byte of scale (row r, scale column j) inside its 512-byte atom of the reordered layout
// (docs/PROBLEM.md, the reordered scale layout); the atom of row block rb and K block kb starts at (rb * K/64 + kb) * 512.
__host__ __device__ inline int scale_byte_in_atom(int r, int j) { return (r % 32) * 16 + ((r % 128) / 32) * 4 + (j % 4); }
__host__ __device__ inline int64_t scale_atom_offset(int row_block, int k_block, int k) {
  return (int64_t(row_block) * (k / 64) + k_block) * 512;
}
}  // namespace nvfp4
