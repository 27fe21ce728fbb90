#pragma once
// ============================================================================ sm_90a prepass
// A dequantized once into fp16 rows before the GEMM (the list form's kernel; the MoE forms', which also
// writes their schedule).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../experts.cuh"
#include "../ptx.cuh"
#include "config.cuh"
#include "decode.cuh"

namespace nvfp4 {
namespace sm90 {
// The prepass: 16-byte chunk j of item (row r, K block kb) of a group: positions 2t, 2t+1 hold
// nibbles q, q + 4 (q = j % 4) of word 2t + j / 4 of the block's 32 bytes, times scale t: the K
// order above (word h of scale block t, K 16t + 8h .. + 7, feeds k16 steps 2h and 2h + 1). Eight
// consecutive threads write one item's 128 bytes, so a warp's stores are contiguous.
__device__ __forceinline__ void dequantize_rows(const PrepassGroup& g) {
  const int k_blocks = g.k / kBlockK;
  const int64_t chunks = int64_t(g.m) * k_blocks * 8;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
    const int item = int(c / 8), j = int(c % 8), q = j % 4, h = j / 4;
    const int r = item / k_blocks, kb = item % k_blocks;
    const uint32_t* words = reinterpret_cast<const uint32_t*>(g.a + int64_t(r) * (g.k / 2) + kb * 32);
    const uint32_t sf = __ldg(reinterpret_cast<const uint32_t*>(g.sfa + scale_atom_offset(r / 128, kb, g.k) + scale_byte_in_atom(r, 0)));
    uint32_t out[4];
#pragma unroll
    for (int t = 0; t < 4; ++t)
      out[t] = hmul2_bits(fp4x2_to_half2(__ldg(words + 2 * t + h), q), bits_of(scale_to_half2((sf >> (8 * t)) & 0xFF)));
    reinterpret_cast<uint4*>(g.a_half + int64_t(r) * g.k + kb * kBlockK)[j] = uint4{out[0], out[1], out[2], out[3]};
  }
}
// The list form's prepass: blockIdx.y is the group.
__global__ void __launch_bounds__(kPrepassThreads) dequantize_a(const __grid_constant__ PrepassArgs args) {
  allow_dependent_launch();
  dequantize_rows(args.groups[blockIdx.y]);
}
// The MoE forms' prepass and schedule, one grid: CTA (0, 0) writes the schedule, in the first row
// of blocks so that it is dispatched first and runs beside the dequantization, not after it; row
// y > 0 dequantizes expert y - 1's rows, read from the counts. The GEMM waits for this grid, so for
// both. A CTA has at least a thread per expert (build_schedule).
__global__ void __launch_bounds__(kMaxExperts) dequantize_and_schedule_experts(const __grid_constant__ ExpertArgs a) {
  allow_dependent_launch();
  if (blockIdx.y == 0) {
    if (blockIdx.x == 0) build_schedule(a);
    return;
  }
  const int e = blockIdx.y - 1;
  __shared__ int most[kMaxExperts / 32];
  int earlier = 0;  // the offset form: the most first row of the experts before e
  if (!a.masked_m) {
    for (int i = threadIdx.x; i < e; i += blockDim.x) earlier = max(earlier, a.offsets[i]);
    earlier = __reduce_max_sync(0xFFFFFFFFu, earlier);
    if (threadIdx.x % 32 == 0) most[threadIdx.x / 32] = earlier;
    __syncthreads();
    for (int w = 0; w < int(blockDim.x / 32); ++w) earlier = max(earlier, most[w]);
  }
  int rows, first, first_sf;
  expert_rows(a, e, earlier, rows, first, first_sf);
  dequantize_rows(PrepassGroup{a.a + int64_t(first) * (a.k / 2), a.sfa + int64_t(first_sf / 128) * (a.k / 64) * 512,
                               a.a_half + int64_t(first) * a.k, rows, a.k});
}
}  // namespace sm90
}  // namespace nvfp4
