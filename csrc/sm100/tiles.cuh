#pragma once
// ============================================================================ sm_100a tiles
// nvfp4::ArchTiles for sm_100a: what the host's schedule knows of the tiles (their shapes, rows and
// costs), from the tile shapes' figures alone; no kernel code, so the schedule compiles with a host
// compiler (csrc/arch_tiles.cuh). Arch (arch.cuh) adds the kernels.
#include "../prelude.cuh"
#include "config.cuh"

namespace nvfp4 {
struct ArchTiles {
  using Unswapped = sm100::TileShape<sm100::kUnswapped>;
  static constexpr int kTileM = Unswapped::kRowsA, kTileN = Unswapped::kRowsB;
  static constexpr int kTileShapes = 3;  // sm100::TileShapeId
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
  // The MoE forms: the swapped shape (128 B rows by up to 256 A rows) while an expert has at most 256
  // rows, else the unswapped one; the persistent kernel; no prepass.
  static int expert_shape(int most_rows, int /*experts*/, int /*n*/, int /*k*/, int /*units*/) {
    return most_rows <= 256 ? sm100::kSwapped : sm100::kUnswapped;
  }
  static int fixed_n8_at_least(int /*n8*/, int /*shape*/) { return 0; }        // no kernels built for one wgmma N
  static bool worth_trying(int /*most_rows*/, int /*shape*/) { return true; }  // the schedule weighs every shape
};
}  // namespace nvfp4
