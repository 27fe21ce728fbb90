#pragma once
#include "../prelude.cuh"

namespace nvfp4 {
namespace sm90 {
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void keep_in_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
__device__ __forceinline__ void keep_in_registers(float (&r)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// K-major operand in 128-byte swizzle atoms: rows 128 bytes apart, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// wgmma m64nNk16, A (4 x f16x2) from registers, B from shared memory, f32 accumulators.
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d);
#include "wgmma_generated.cuh"

// The four k16 steps of one K block with the wgmma N of the tile (8 * n8 columns), committed as one
// group. A kernel built for one N (kFixedN8 > 0) issues them directly. Otherwise the N is chosen by
// a binary tree of comparisons over the tile shape's N (at most 8 * kMaxN8), not a switch compiled
// to a jump table (a constant load and an indirect branch in every K block), which cost 7% of the
// geomean on the H200. (The commit sits in each leaf: after the tree, ptxas would emit an extra
// empty wgmma to carry it, whose group, the newest, makes wgmma_wait<1> wait for this K block's own
// wgmma.)
template <int kFixedN8, int kMaxN8>
__device__ __forceinline__ void wgmma_k_block(float (&acc)[128], const uint32_t (&frag)[4][4], uint64_t desc, int n8, bool first) {
  if constexpr (kFixedN8 > 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) wgmma_rs<8 * kFixedN8>(acc, frag[j], desc + 2 * j, j == 0 && first ? 0 : 1);
    wgmma_commit();
  } else {
    wgmma_k_block_tree<kMaxN8>(acc, frag, desc, n8, first);
  }
}
}  // namespace sm90
}  // namespace nvfp4
