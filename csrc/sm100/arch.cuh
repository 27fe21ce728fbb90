#pragma once
// ============================================================================ sm_100a traits
// nvfp4::Arch for sm_100a: the tiles' traits (tiles.cuh) and what the host side knows of the kernels
// (csrc/arch.cuh).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../experts.cuh"
#include "config.cuh"
#include "../arch_tiles.cuh"
#include "kernel.cuh"

namespace nvfp4 {
struct Arch : ArchTiles {
  static int threads(int /*shape*/) { return sm100::kThreads; }
  // Every tile shape takes the same shared memory: their stage counts are chosen to fill it.
  static constexpr int kSmemBytes =
      std::max({Unswapped::kSmemBytes, sm100::TileShape<sm100::kSwapped>::kSmemBytes, sm100::TileShape<sm100::kPair>::kSmemBytes});
  static int smem_bytes(int /*shape*/) { return kSmemBytes; }
  static const void* prepass_kernel() { return nullptr; }
  // TMEM columns of a kernel: buffers, M-side scale column, N-side scale column, columns used, columns allocated.
  template <int kShape, bool kPersistent>
  static void tmem_columns(int* out) {
    using T = sm100::TmemPlan<kShape, kPersistent>;
    const int values[5] = {T::kBuffers, T::kSfM, T::kSfN, T::kUsed, T::kAllocated};
    std::memcpy(out, values, sizeof values);
  }
  template <int kShape>
  static void tmem_columns(bool persistent, int* out) {
    persistent ? tmem_columns<kShape, true>(out) : tmem_columns<kShape, false>(out);
  }
  static bool tmem_plan(int shape, bool persistent, int* out) {
    shape == 0 ? tmem_columns<0>(persistent, out) : shape == 1 ? tmem_columns<1>(persistent, out) : tmem_columns<2>(persistent, out);
    return true;
  }
  static CUresult encode_dequantized_a(EncodeTiledFn, CUtensorMap*, const void*, int, int, int) { return CUDA_ERROR_NOT_SUPPORTED; }
  template <int kShape>
  static const void* kernel_of(bool persistent) {
    return persistent ? reinterpret_cast<const void*>(&sm100::grouped_gemm<kShape, true, LaunchArgs>)
                      : reinterpret_cast<const void*>(&sm100::grouped_gemm<kShape, false, LaunchArgs>);
  }
  static const void* expert_kernel(int shape, int fixed_n8) {  // no kernels built for one wgmma N
    if (fixed_n8 != 0) return nullptr;
    return shape == sm100::kSwapped ? reinterpret_cast<const void*>(&sm100::grouped_gemm<sm100::kSwapped, true, ExpertLaunchArgs>)
                                    : reinterpret_cast<const void*>(&sm100::grouped_gemm<sm100::kUnswapped, true, ExpertLaunchArgs>);
  }
  // The kernel before the MoE GEMM: the schedule alone, one CTA.
  static const void* expert_schedule_kernel() { return reinterpret_cast<const void*>(&sm100::schedule_experts); }
  static const void* kernel(bool persistent, int /*fixed_n8*/, int shape) {
    return shape == 0 ? kernel_of<0>(persistent) : shape == 1 ? kernel_of<1>(persistent) : kernel_of<2>(persistent);
  }
  // Packed FP4 as a 3-D tensor of 4-bit elements {256, rows, K/256}, 128B swizzle,
  // 256B L2 promotion; a box is box_rows (128 or 256) x 256 K (one 128-byte swizzled row each). byte_elements
  // gives the byte-equivalent UINT8 map (same bytes, strides, box and swizzle), which drivers of
  // pre-sm_100 GPUs accept: the dry run and the emulation build use it.
  static CUresult encode_operand(EncodeTiledFn encode, CUtensorMap* map, const void* base, int rows, int k, int box_rows,
                                 bool byte_elements) {
    byte_elements = byte_elements || NVFP4_TCGEN05_EMULATION;
    const cuuint64_t inner = byte_elements ? 128 : 256;
    const cuuint64_t dims[3] = {inner, cuuint64_t(rows), cuuint64_t(k / 256)};
    const cuuint64_t strides[2] = {cuuint64_t(k / 2), 128};
    const cuuint32_t box[3] = {cuuint32_t(inner), cuuint32_t(box_rows), sm100::kBlockK / 256};
    const cuuint32_t element_strides[3] = {1, 1, 1};
    const CUtensorMapDataType type = byte_elements ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B;
    return encode(map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};
}  // namespace nvfp4
