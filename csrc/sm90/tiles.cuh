#pragma once
// ============================================================================ sm_90a tiles
// nvfp4::ArchTiles for sm_90a: what the host's schedule knows of the tiles (their shapes, rows and
// costs, the GEMMs built for one wgmma N), from the pipelines' figures alone; no kernel code, so
// the schedule compiles with a host compiler (csrc/arch_tiles.cuh). Arch (arch.cuh) adds the kernels.
#include "../prelude.cuh"
#include "config.cuh"

namespace nvfp4 {
struct ArchTiles {
  static constexpr int kTileM = sm90::kTileM, kTileN = sm90::kTileN;
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
  // The schedule weighs shape 1 only for problems whose groups all fit one of its tiles.
  static bool worth_trying(int most_rows, int shape) { return shape == 0 || most_rows <= sm90::Pipeline<1>::kARows; }
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
  static int fixed_n8_at_least(int n8, int shape) {
    return shape ? sm90::fixed_n8_at_least<1>(n8, sm90::FixedWgmmaN8{}) : sm90::fixed_n8_at_least<0>(n8, sm90::FixedWgmmaN8{});
  }
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
};
}  // namespace nvfp4
