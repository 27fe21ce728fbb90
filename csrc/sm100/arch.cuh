#pragma once
// ============================================================================ sm_100a traits
// nvfp4::Arch for sm_100a: what the host side knows of the kernels (csrc/arch.cuh).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../experts.cuh"
#include "config.cuh"
#include "kernel.cuh"

namespace nvfp4 {
struct Arch {
  using Unswapped = sm100::TileShape<sm100::kUnswapped>;
  static constexpr int kTileM = Unswapped::kRowsA, kTileN = Unswapped::kRowsB;
  static int threads(int /*shape*/) { return sm100::kThreads; }
  // Every tile shape takes the same shared memory: their stage counts are chosen to fill it.
  static constexpr int kSmemBytes =
      std::max({Unswapped::kSmemBytes, sm100::TileShape<sm100::kSwapped>::kSmemBytes, sm100::TileShape<sm100::kPair>::kSmemBytes});
  static constexpr int kTileShapes = 3;  // sm100::TileShapeId
  static int smem_bytes(int /*shape*/) { return kSmemBytes; }
  // A rows and B rows of a tile of each shape, and the CTAs that run it (a pair: a cluster of 2).
  struct TileGeometry {
    int a_rows, b_rows, ctas;
  };
  template <int kShape>
  static constexpr TileGeometry geometry_of() {
    using S = sm100::TileShape<kShape>;
    return {S::kRowsA, S::kRowsB * S::kCtaGroup, S::kCtaGroup};
  }
  static TileGeometry geometry(int shape) {
    constexpr TileGeometry all[kTileShapes] = {geometry_of<0>(), geometry_of<1>(), geometry_of<2>()};
    return all[shape];
  }
  static constexpr int kKMultiple = sm100::kBlockK;
  static constexpr bool kPrepass = false;  // the MMA reads FP4 A and its scales directly
  static const void* prepass_kernel() { return nullptr; }
  static constexpr int kPrepassThreads = 0;
  static constexpr bool kNarrowTiles = false;  // every tile has its shape's rows
  // A TMA load of A brings the rows one CTA holds, whose 128B-swizzled tile the MMA reads whole.
  static int a_box_rows(int /*m*/, int chunk_rows, int shape) { return chunk_rows / geometry(shape).ctas; }
  // Relative cost of a tile for load balancing and for choosing the tile shape, from the B200 model
  // (tools/b200_model.py, fitted to public per-version times; nothing here runs on a B200): a K
  // block is bound by the CTA's loads, 144 bytes (FP4 and scales) per row of A and of B it loads; a
  // tile adds a fixed cost worth 644 such rows (0.77 us at the fitted 120.5 GB/s per SM), and a
  // tile with one accumulator (the swapped shape), which keeps the next tile's MMAs waiting, its
  // epilogue's stores (0.92 rows per row of A).
  static int64_t tile_cost(int m_rows, int k, int shape) {
    const int ctas = geometry(shape).ctas;
    const int64_t loaded = kTileN + (m_rows + ctas - 1) / ctas;
    return int64_t(k / sm100::kBlockK) * loaded + 644 + (shape == sm100::kSwapped ? m_rows * 92 / 100 : 0);
  }
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
  // The MoE forms: the swapped shape (128 B rows by up to 256 A rows) while an expert has at most 256
  // rows, else the unswapped one; the persistent kernel; no prepass.
  static int expert_shape(int most_rows, int /*experts*/, int /*n*/, int /*k*/, int /*units*/) {
    return most_rows <= 256 ? sm100::kSwapped : sm100::kUnswapped;
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
  static int fixed_n8_at_least(int /*n8*/, int /*shape*/) { return 0; }        // no kernels built for one wgmma N
  static bool worth_trying(int /*most_rows*/, int /*shape*/) { return true; }  // the schedule weighs every shape
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
