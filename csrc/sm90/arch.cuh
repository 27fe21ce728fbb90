#pragma once
// ============================================================================ sm_90a traits
// nvfp4::Arch for sm_90a: the tiles' traits (tiles.cuh) and what the host side knows of the kernels
// (csrc/arch.cuh).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../experts.cuh"
#include "config.cuh"
#include "../arch_tiles.cuh"
#include "prepass.cuh"
#include "kernel.cuh"

namespace nvfp4 {
struct Arch : ArchTiles {
  static int smem_bytes(int shape) { return shape ? sm90::Pipeline<1>::kSmemBytes : sm90::Pipeline<0>::kSmemBytes; }
  static int threads(int shape) { return shape ? sm90::Pipeline<1>::kThreads : sm90::Pipeline<0>::kThreads; }
  static constexpr int kSmemBytes = std::max(sm90::Pipeline<0>::kSmemBytes, sm90::Pipeline<1>::kSmemBytes);  // the most of any shape
  static const void* kernel(bool /*persistent*/, int fixed_n8, int shape) {
    return shape ? sm90::gemm_kernel<1, LaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{})
                 : sm90::gemm_kernel<0, LaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{});
  }
  static const void* prepass_kernel() { return reinterpret_cast<const void*>(&sm90::dequantize_a); }
  // The MoE forms' GEMM of a tile shape, choosing each tile's N (fixed_n8 0) or, for shape 1, built
  // for one N of FixedWgmmaN8; null for any other.
  static const void* expert_kernel(int shape, int fixed_n8) {
    if (shape == 0) return fixed_n8 == 0 ? sm90::kernel_for_n8<0, 0, ExpertLaunchArgs>() : nullptr;
    return sm90::gemm_kernel<1, ExpertLaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{});
  }
  static const void* expert_schedule_kernel() { return reinterpret_cast<const void*>(&sm90::dequantize_and_schedule_experts); }
  static bool tmem_plan(int /*shape*/, bool /*persistent*/, int* /*out*/) { return false; }  // no TMEM on sm_90
  // B: packed FP4 rows as a 2-D byte tensor [rows][K/2]; a box is box_rows x 32 bytes (64 K), unswizzled.
  static CUresult encode_operand(EncodeTiledFn encode, CUtensorMap* map, const void* base, int rows, int k, int box_rows,
                                 bool /*byte_elements*/) {
    const cuuint64_t dims[2] = {cuuint64_t(k / 2), cuuint64_t(rows)};
    const cuuint64_t strides[1] = {cuuint64_t(k / 2)};
    const cuuint32_t box[2] = {cuuint32_t(sm90::kBlockK / 2), cuuint32_t(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  // A after the prepass: fp16 rows [rows][K] in the workspace; a box is box_rows x 64 K (128 bytes),
  // 128-byte swizzled: the K-major layout wgmma's shared-memory descriptor describes.
  static CUresult encode_dequantized_a(EncodeTiledFn encode, CUtensorMap* map, const void* base, int rows, int k, int box_rows) {
    const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
    const cuuint64_t strides[1] = {cuuint64_t(k) * 2};
    const cuuint32_t box[2] = {cuuint32_t(sm90::kBlockK), cuuint32_t(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};
}  // namespace nvfp4
