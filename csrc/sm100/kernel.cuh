#pragma once
#include "config.cuh"
#include "../ptx.cuh"
#include "../output.cuh"
#include "../experts.cuh"
#if NVFP4_TCGEN05_EMULATION
#include "tcgen05_emulation.cuh"
#else
#include "tcgen05.cuh"
#endif

namespace nvfp4 {
namespace sm100 {
// Eight fp32 values of C columns col .. col + 7, each times its column's alpha, as eight fp16 or bf16
// in one 16-byte store (evict-first: C is not read again).
__device__ __forceinline__ void st_global_8_outputs(__half* p, const float* v, const OutputArgs& out, int col) {
  uint32_t h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    h[i] = out2_bits(v[2 * i] * alpha_at(out, col + 2 * i), v[2 * i + 1] * alpha_at(out, col + 2 * i + 1), out.bf16);
  st_global_v4_evict_first(p, uint4{h[0], h[1], h[2], h[3]});
}

template <int kShape>
struct Barriers {
  static constexpr int kStages = TileShape<kShape>::kStages;
  uint32_t base;
  __device__ uint32_t tma(int s) const { return base + 8 * s; }                           // stage loaded (in a pair: in both CTAs)
  __device__ uint32_t mma(int s) const { return base + 8 * (kStages + s); }               // stage consumed by the MMAs
  __device__ uint32_t mainloop(int b) const { return base + 8 * (2 * kStages + b); }      // accumulator b complete
  __device__ uint32_t epilogue(int b) const { return base + 8 * (2 * kStages + 2 + b); }  // accumulator b read out (in a pair: by both)
};

// Where a tile lives for this CTA: its group's arguments and tensor maps, the group's first rows in
// them, the first A row (C row) of the tile, the first B row (C column) of this CTA's part, and
// the tile's A rows.
struct TileCoords {
  const GroupArgs* g;
  const OutputArgs* out;
  const CUtensorMap *tmap_a, *tmap_b;
  int a_row0, b_row0, off_m, off_n, rows;
};
template <int kShape>
__device__ __forceinline__ TileCoords tile_coords(const TileJob& job, uint32_t rank) {
  using S = TileShape<kShape>;
  const int off_m = job.m_chunk * S::kRowsA;
  return TileCoords{&job.g,
                    &job.out,
                    job.tmap_a,
                    job.tmap_b,
                    job.a_row0,
                    job.b_row0,
                    off_m,
                    (job.n_block * S::kCtaGroup + int(rank)) * S::kRowsB,
                    min(S::kRowsA, job.g.m - off_m)};
}
// The MMA pieces of a tile's N side, each with one 128-row scale atom of A that lies inside the
// matrix (the scales stop at its last atom): one, except in a swapped tile of over 128 A rows.
template <int kShape>
__device__ __forceinline__ int pieces(const TileCoords& tc) {
  return kShape == kSwapped ? (tc.rows + 127) / 128 : 1;
}
// N of piece p: unswapped, all 128 B rows; swapped, the piece's A rows rounded up to 32 (the
// epilogue reads 32 columns at a time, each of which the MMA must have written); in a pair, all 128
// A rows, half from each CTA (rows past M are TMA's zeros).
template <int kShape>
__device__ __forceinline__ int piece_n(const TileCoords& tc, int p) {
  return kShape == kSwapped ? (min(128, tc.rows - 128 * p) + 31) / 32 * 32 : 128;
}
// The first row of the scale atom of this CTA's B rows. A pair's odd CTA may hold only rows past N
// (its B rows are then TMA's zeros), whose atoms the scales do not have: it takes the last one,
// whose finite values multiply zeros.
__device__ __forceinline__ int b_scale_row(const TileCoords& tc) { return min(tc.off_n, (tc.g->n - 1) / 128 * 128); }

// The operands of one stage in shared memory: A, B, A's scale atoms, B's scale atom.
template <int kShape>
struct StageSmem {
  uint32_t a, b, sfa, sfb;
  __device__ StageSmem(uint8_t* smem, int stage) {
    using S = TileShape<kShape>;
    a = smem_u32(smem + stage * S::kStageBytes), b = a + S::kABytes, sfa = b + S::kBBytes, sfb = sfa + S::kSfaBytes;
  }
};

// Each CTA loads its own operands onto its own barriers: in a pair its B rows and half of the A
// rows, and all of the A rows' scales (the MMA reads them from each CTA's TMEM).
template <int kShape, class Tiles>
__device__ __forceinline__ void tma_warp(const Tiles& tiles, uint8_t* smem, Barriers<kShape> bars, uint32_t rank) {
  using S = TileShape<kShape>;
  int stage = 0, filled = 0;
  uint32_t mma_phase = 1;  // a fresh barrier's "previous phase" reads as complete
  for (int i = 0; i < tiles.count(); ++i) {
    const TileJob job = tiles.job(i);
    const TileCoords tc = tile_coords<kShape>(job, rank);
    const int k = tc.g->k, atoms = pieces<kShape>(tc), a_row = tc.off_m + int(rank) * S::kCtaRowsA;
    const uint64_t cache_a = kEvictFirst, cache_b = k > 4096 ? kEvictFirst : kEvictLast;
    for (int iter_k = 0; iter_k < k / kBlockK; ++iter_k) {
      if (filled < S::kStages)
        ++filled;  // the first fill: every stage is free, nothing to wait for
      else
        mbar_wait_or_trap<S::kIsPair>(bars.mma(stage), mma_phase);
      const StageSmem<kShape> st(smem, stage);
      const int off_k = iter_k * kBlockK;
      tma_load_3d(st.a, tc.tmap_a, 0, tc.a_row0 + a_row, off_k / 256, bars.tma(stage), cache_a, S::kABytes);
      tma_load_3d(st.b, tc.tmap_b, 0, tc.b_row0 + tc.off_n, off_k / 256, bars.tma(stage), cache_b, S::kBBytes);
      // The four 64-K atoms of a K block are contiguous: one 2048-byte copy per 128 rows.
      for (int r = 0; r < atoms; ++r)
        bulk_load_cta(st.sfa + r * kSfAtomBytes, tc.g->sfa + scale_atom_offset(tc.off_m / 128 + r, off_k / 64, k), kSfAtomBytes,
                      bars.tma(stage), cache_a);
      bulk_load_cta(st.sfb, tc.g->sfb + scale_atom_offset(b_scale_row(tc) / 128, off_k / 64, k), kSfAtomBytes, bars.tma(stage), cache_b);
      mbar_arrive_expect_tx(bars.tma(stage), S::kABytes + S::kBBytes + (atoms + 1) * kSfAtomBytes);
      stage = (stage + 1) % S::kStages;
      if (stage == 0) mma_phase ^= 1;
    }
  }
}

// A pair's odd CTA: once each of its stages has landed, arrive on the even CTA's barrier of that
// stage, whose MMAs read both CTAs' shared memory (its barrier counts both arrivals).
template <int kShape, class Tiles>
__device__ __forceinline__ void forward_stages(const Tiles& tiles, Barriers<kShape> bars) {
  using S = TileShape<kShape>;
  int stage = 0;
  uint32_t tma_phase = 0;
  for (int i = 0; i < tiles.count(); ++i)
    for (int iter_k = 0; iter_k < tiles.job(i).g.k / kBlockK; ++iter_k) {
      mbar_wait_or_trap<true>(bars.tma(stage), tma_phase);
      mbar_arrive_in(bars.tma(stage), 0);
      stage = (stage + 1) % S::kStages;
      if (stage == 0) tma_phase ^= 1;
    }
}

// A commit of the MMA thread's operations to a barrier: this CTA's; a pair's, at the same offset in
// both CTAs (multicast).
template <int kShape>
__device__ __forceinline__ void commit(uint32_t bar) {
  if constexpr (TileShape<kShape>::kIsPair)
    tcgen05_commit_multicast<2>(bar, 0b11);
  else
    tcgen05_commit(bar);
}

// Issues every MMA of the tile (in a pair: the even CTA, for both).
template <int kShape, bool kPersistent, class Tiles>
__device__ __forceinline__ void mma_warp(const Tiles& tiles, uint8_t* smem, Barriers<kShape> bars, uint32_t tmem) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  constexpr int kGroup = S::kCtaGroup;
  int stage = 0, buffer = 0;
  uint32_t tma_phase = 0, epilogue_phase = 1;
  for (int i = 0; i < tiles.count(); ++i) {
    const TileJob job = tiles.job(i);
    const TileCoords tc = tile_coords<kShape>(job, 0);
    const int n_pieces = pieces<kShape>(tc);
    mbar_wait_or_trap<S::kIsPair>(bars.epilogue(buffer), epilogue_phase);
    tcgen05_fence_after_sync();
    const uint32_t d_tmem = tmem + buffer * S::kNRows;
    for (int iter_k = 0; iter_k < tc.g->k / kBlockK; ++iter_k) {
      mbar_wait_or_trap<S::kIsPair>(bars.tma(stage), tma_phase);
      tcgen05_fence_after_sync();
      const StageSmem<kShape> st(smem, stage);
      // The M side: B swapped, else A; the N side the other, a 128-row piece (and scale atom) at a time.
      const uint32_t m_tile = S::kIsSwapped ? st.b : st.a, m_scales = S::kIsSwapped ? st.sfb : st.sfa;
      const uint32_t n_tile = S::kIsSwapped ? st.a : st.b, n_scales = S::kIsSwapped ? st.sfa : st.sfb;
#pragma unroll
      for (int k = 0; k < kBlockK / kMmaK; ++k) {
        tcgen05_cp_scales<kGroup>(tmem + Tmem::kSfM + k * 4, desc_sf(m_scales + k * 512));
        for (int p = 0; p < n_pieces; ++p)
          tcgen05_cp_scales<kGroup>(tmem + Tmem::kSfN + p * Tmem::kScaleColumns + k * 4, desc_sf(n_scales + p * kSfAtomBytes + k * 512));
      }
#pragma unroll
      for (int k = 0; k < kBlockK / kMmaK; ++k)
        for (int p = 0; p < n_pieces; ++p)
          tcgen05_mma_nvfp4<kGroup>(d_tmem + p * 128, desc_ab(m_tile + k * 32), desc_ab(n_tile + p * 128 * 128 + k * 32),
                                    instr_desc(piece_n<kShape>(tc, p), 128 * kGroup), tmem + Tmem::kSfM + k * 4,
                                    tmem + Tmem::kSfN + p * Tmem::kScaleColumns + k * 4, (iter_k == 0 && k == 0) ? 0u : 1u);
      commit<kShape>(bars.mma(stage));  // frees the stage once these MMAs have read it
      stage = (stage + 1) % S::kStages;
      if (stage == 0) tma_phase ^= 1;
    }
    commit<kShape>(bars.mainloop(buffer));  // accumulator complete
    buffer = (buffer + 1) % Tmem::kBuffers;
    if (buffer == 0) epilogue_phase ^= 1;
  }
}

// Not swapped: TMEM lane 32w + l = row off_m + 32w + l of C, which thread l stores 32 bytes at a
// time (two 16-byte stores; N is a multiple of 8, so a row's 8-column pieces are whole and aligned).
__device__ __forceinline__ void store_tile(const TileCoords& tc, uint32_t acc, int warp, int lane) {
  const int n = tc.g->n, row = tc.off_m + warp * 32 + lane;
#pragma unroll 1
  for (int chunk = 0; chunk < 128 / 32; ++chunk) {
    float v[32];
    tmem_load_32x32b_x32(v, acc + chunk * 32);
    const int col = tc.off_n + chunk * 32;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (row < tc.g->m && col + 8 * j < n) st_global_8_outputs(tc.g->c + int64_t(row) * n + col + 8 * j, v + 8 * j, *tc.out, col + 8 * j);
  }
}
// Swapped: TMEM lane 32w + l = column off_n + 32w + l of C and TMEM column j = row off_m + j. Each
// 32 x 32 block goes through the warp's staging (32 rows of 32 halves, 64 bytes) so that thread l
// stores 8 consecutive columns (16 bytes) of rows l / 4, l / 4 + 8, ...: each row's 64 bytes in one
// store instruction of four threads.
__device__ __forceinline__ void store_tile_swapped(const TileCoords& tc, uint32_t acc, int warp, int lane, uint8_t* staging) {
  uint16_t* rows = reinterpret_cast<uint16_t*>(staging) + warp * 32 * 32;
  const int n = tc.g->n, col = tc.off_n + warp * 32 + 8 * (lane % 4);
  const float alpha =
      alpha_at(*tc.out, min(tc.off_n + warp * 32 + lane, n - 1));  // this lane's column (past N: the last one's, not stored)
#pragma unroll 1
  for (int chunk = 0; chunk < (tc.rows + 31) / 32; ++chunk) {
    float v[32];
    tmem_load_32x32b_x32(v, acc + chunk * 32);
#pragma unroll
    for (int j = 0; j < 32; j += 2) {  // rows j and j + 1 of this lane's column
      const uint32_t two = out2_bits(v[j] * alpha, v[j + 1] * alpha, tc.out->bf16);
      rows[j * 32 + lane] = uint16_t(two), rows[(j + 1) * 32 + lane] = uint16_t(two >> 16);
    }
    __syncwarp();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int j = 8 * s + lane / 4, row = tc.off_m + chunk * 32 + j;
      if (row < tc.g->m && col < n)
        st_global_v4_evict_first(tc.g->c + int64_t(row) * n + col, *reinterpret_cast<const uint4*>(rows + j * 32 + 8 * (lane % 4)));
    }
    __syncwarp();  // the staging is rewritten by the next chunk
  }
}

template <int kShape, bool kPersistent, class Tiles>
__device__ __forceinline__ void epilogue_warps(const Tiles& tiles, uint8_t* smem, Barriers<kShape> bars, uint32_t tmem, uint32_t rank) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int buffer = 0;
  uint32_t mainloop_phase = 0;
  for (int i = 0; i < tiles.count(); ++i) {
    const TileJob job = tiles.job(i);
    const TileCoords tc = tile_coords<kShape>(job, rank);
    mbar_wait_or_trap<S::kIsPair>(bars.mainloop(buffer), mainloop_phase);
    __syncwarp();  // the wait's threads may leave its loop apart; tcgen05.ld is .sync.aligned
    tcgen05_fence_after_sync();
    const uint32_t acc = tmem + (uint32_t(warp * 32) << 16) + buffer * Tmem::kNRows;
    if (S::kIsSwapped)
      store_tile_swapped(tc, acc, warp, lane, smem + S::kSmemStaging);
    else
      store_tile(tc, acc, warp, lane);
    // Order this warp's TMEM reads before the MMA warp (of the even CTA) reuses the buffer.
    tcgen05_fence_before_sync();
    if (elect_one()) {
      if (S::kIsPair)
        mbar_arrive_in(bars.epilogue(buffer), 0);
      else
        mbar_arrive(bars.epilogue(buffer));
    }
    buffer = (buffer + 1) % Tmem::kBuffers;
    if (buffer == 0) mainloop_phase ^= 1;
  }
}

// One kernel, six instantiations: the three tile shapes, persistent (TMEM double buffer where it
// fits, for more tiles than SMs) or single-tile (one buffer). All wait on the mainloop barrier,
// which tcgen05.commit arrives on once the MMAs are complete, before the epilogue reads TMEM: a
// plain __syncthreads would not order them. A pair's CTAs (a cluster of 2) run the same tiles.
// Args: LaunchArgs (the list form, the host's schedule) or ExpertLaunchArgs (the MoE forms).
template <int kShape, bool kPersistent, class Args>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ Args args) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const Barriers<kShape> bars{smem_u32(smem + S::kSmemBarriers)};
  const uint32_t tmem_slot = smem_u32(smem + S::kSmemTmemSlot);
  const int warp = threadIdx.x / 32;
  const uint32_t rank = S::kIsPair ? cluster_ctarank() : 0;
  const typename TilesOf<Args>::type tiles(args, blockIdx.x / S::kCtaGroup, gridDim.x / S::kCtaGroup);
  if (warp == 0 && elect_one()) {
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(bars.tma(s), S::kIsPair && rank == 0 ? 2 : 1);  // the even CTA's: its own loads and the odd CTA's forward
      mbar_init(bars.mma(s), 1);
    }
    for (int b = 0; b < 2; ++b) {
      mbar_init(bars.mainloop(b), 1);
      mbar_init(bars.epilogue(b), kEpilogueWarps * S::kCtaGroup);  // one elected arrive per epilogue warp (of both CTAs)
    }
    fence_barrier_init();
  } else if (warp == 1) {
    tmem_alloc<S::kCtaGroup>(tmem_slot, Tmem::kAllocated);
  }
  tcgen05_fence_before_sync();
  if (S::kIsPair)
    cluster_sync();  // the barriers of both CTAs are initialized before either arrives on the other's
  else
    __syncthreads();
  tcgen05_fence_after_sync();
  // The allocation need not start at column 0: read the address tcgen05.alloc wrote.
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem + S::kSmemTmemSlot);
  if (warp == kTmaWarp) {
    if (elect_one()) tma_warp<kShape>(tiles, smem, bars, rank);
  } else if (warp == kMmaWarp) {
    if (elect_one()) {
      if (rank == 0)
        mma_warp<kShape, kPersistent>(tiles, smem, bars, tmem);
      else
        forward_stages<kShape>(tiles, bars);
    }
  } else {
    epilogue_warps<kShape, kPersistent>(tiles, smem, bars, tmem, rank);
  }
  tcgen05_fence_before_sync();
  if (S::kIsPair)
    cluster_sync();  // neither CTA leaves while the other may still read or arrive on its shared memory
  else
    __syncthreads();
  tcgen05_fence_after_sync();
  if (warp == 1) tmem_dealloc<S::kCtaGroup>(tmem, Tmem::kAllocated);  // .sync.aligned: the whole allocating warp, not one lane
}

// The MoE forms' schedule, one CTA, before their GEMM (launched plainly after it).
__global__ void __launch_bounds__(kMaxExperts) schedule_experts(const __grid_constant__ ExpertArgs a) { build_schedule(a); }
}  // namespace sm100
}  // namespace nvfp4
