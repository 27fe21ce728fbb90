#pragma once
// ============================================================================ the epilogues' outputs
// What both architectures' epilogues make of a tile's fp32 sums (OutputArgs, launch_params.cuh):
// each times its column's alpha, then rounded to fp16 or bf16. Device code only: the host side's
// headers leave it out.
#include "prelude.cuh"
#include "launch_params.cuh"

namespace nvfp4 {
// The factor of C column `column` of a group (output_of_group), 1 without alpha: multiplying by 1 leaves
// every sum as it was, so a call without alpha rounds exactly what it always has.
__device__ __forceinline__ float alpha_at(const OutputArgs& out, int column) {
  return out.alpha ? __ldg(out.alpha + int64_t(column) * out.alpha_stride) : 1.0f;
}
// Two fp32 values as the bits of two fp16 or two bf16 (the lower in the low half), rounded to nearest even.
__device__ __forceinline__ uint32_t out2_bits(float lo, float hi, int bf16) {
  if (bf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
}  // namespace nvfp4
