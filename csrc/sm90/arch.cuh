#pragma once
// ============================================================================ sm_90a traits
// nvfp4::Arch for sm_90a: what the host side knows of the kernels (csrc/arch.cuh).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../experts.cuh"
#include "config.cuh"
#include "prepass.cuh"
#include "kernel.cuh"

namespace nvfp4 {
struct Arch {
  static constexpr int kTileM = sm90::kTileM, kTileN = sm90::kTileN;
  static int threads(int shape) { return shape ? sm90::Pipeline<1>::kThreads : sm90::Pipeline<0>::kThreads; }
  static constexpr int kSmemBytes = std::max(sm90::Pipeline<0>::kSmemBytes, sm90::Pipeline<1>::kSmemBytes);  // the most of any shape
  static constexpr int kKMultiple = sm90::kBlockK;
  static constexpr bool kPrepass = true;  // A is dequantized into a workspace before the GEMM
  // Two tile shapes (the wgmma's N side is already A's rows), on one CTA each: 0, kTileN rows of B by
  // up to 256 rows of A; 1 (few rows), 2 x kTileN by up to 64, in a deeper pipeline (sm90::Pipeline).
  static constexpr int kTileShapes = 2;
  struct TileGeometry {
    int a_rows, b_rows, ctas;
  };
  template <int kShape>
  static TileGeometry geometry_of() {
    return {sm90::Pipeline<kShape>::kARows, sm90::Pipeline<kShape>::kBRows, 1};
  }
  static TileGeometry geometry(int shape) { return shape ? geometry_of<1>() : geometry_of<0>(); }
  static int smem_bytes(int shape) { return shape ? sm90::Pipeline<1>::kSmemBytes : sm90::Pipeline<0>::kSmemBytes; }
  // The schedule weighs shape 1 only for problems whose groups all fit one of its tiles.
  static bool worth_trying(int most_rows, int shape) { return shape == 0 || most_rows <= sm90::Pipeline<1>::kARows; }
  static const void* kernel(bool /*persistent*/, int fixed_n8, int shape) {
    return shape ? sm90::gemm_kernel<1, LaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{})
                 : sm90::gemm_kernel<0, LaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{});
  }
  static int fixed_n8_at_least(int n8, int shape) {
    return shape ? sm90::fixed_n8_at_least<1>(n8, sm90::FixedWgmmaN8{}) : sm90::fixed_n8_at_least<0>(n8, sm90::FixedWgmmaN8{});
  }
  static const void* prepass_kernel() { return reinterpret_cast<const void*>(&sm90::dequantize_a); }
  // The MoE forms: the tile shape whose busiest CTA would cost least (tile_cost) if every expert had
  // the most rows it can have (the counts are not known on the host); shape 1 only when those rows fit
  // one of its tiles. (A rule on shape 1's tile count alone gave E=8, N=4096's 128 wide tiles, one
  // for all but 4 of the H200's CTAs, to shape 0: two narrow tiles on most CTAs.)
  static int expert_shape(int most_rows, int experts, int n, int k, int units) {
    auto busiest = [&](int shape) {
      const TileGeometry g = geometry(shape);
      const int64_t tiles = int64_t(experts) * ((n + g.b_rows - 1) / g.b_rows) * ((std::max(most_rows, 1) + g.a_rows - 1) / g.a_rows);
      return (tiles + units - 1) / units * tile_cost(std::min(most_rows, g.a_rows), k, shape);
    };
    return worth_trying(most_rows, 1) && busiest(1) <= busiest(0) ? 1 : 0;
  }
  // The MoE forms' GEMM of a tile shape, choosing each tile's N (fixed_n8 0) or, for shape 1, built
  // for one N of FixedWgmmaN8; null for any other.
  static const void* expert_kernel(int shape, int fixed_n8) {
    if (shape == 0) return fixed_n8 == 0 ? sm90::kernel_for_n8<0, 0, ExpertLaunchArgs>() : nullptr;
    return sm90::gemm_kernel<1, ExpertLaunchArgs>(fixed_n8, sm90::FixedWgmmaN8{});
  }
  static const void* expert_schedule_kernel() { return reinterpret_cast<const void*>(&sm90::dequantize_and_schedule_experts); }
  static constexpr int kPrepassThreads = sm90::kPrepassThreads;
  static constexpr bool kNarrowTiles = true;  // a tile may have any multiple of 8 A rows (the wgmma N)
  // Rows a TMA load of A brings: the tile's rows, at most the group's rounded to 8.
  static int a_box_rows(int m, int chunk_rows, int /*shape*/) { return std::min(chunk_rows, (std::max(m, 1) + 7) / 8 * 8); }
  // Relative cost of a tile for load balancing: per K block, a share that grows with the tile's rows
  // (the wgmma N) and a fixed share (B decode, barrier round trips, wgmma latency) that on the H200
  // weighs as much as about 256 rows: balancing on rows alone left a third of case 0's SM time idle.
  // Shape 1's tile has twice the B rows at 13% less time than two of shape 0's on the H200 at 0-32
  // A rows (docs/perf-log/log.md): 2 x rows + 440.
  static int64_t tile_cost(int m_rows, int k, int shape) {
    const int rows = (m_rows + 7) / 8 * 8;
    return int64_t(k) * (shape ? 2 * rows + 440 : rows + 256);
  }
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
