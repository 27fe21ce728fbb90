#pragma once
// ============================================================================ sm_90a GEMM
// The GEMM over the prepass's fp16 rows of A (config.cuh: the design and the pipelines).
#include "../prelude.cuh"
#include "../launch_params.cuh"
#include "../output.cuh"
#include "../experts.cuh"
#include "../ptx.cuh"
#include "../timeline.cuh"
#include "config.cuh"
#include "decode.cuh"
#include "wgmma.cuh"

namespace nvfp4 {
namespace sm90 {
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// The fragments of B rows `row` and `row` + 8 of a half whose packed rows and scale atom are at
// b_offset and sf_offset in the stage, its scale bytes converted through the CTA's scale table.
// (Offsets, constant once inlined, not pointers: ptxas then folds them into each thread's fixed
// offsets, and the loads wait on one add after the stage's barrier.) frag[s][j], k16 step s: row
// `row` for even j, `row` + 8 for odd, the half2 of codes q = 2 (s % 2) + j / 2 of the row's first
// word (s < 2) or second, the K order the prepass gives A.
__device__ __forceinline__ void load_b_fragments(uint32_t (&frag)[4][4], const uint8_t* stage, const uint32_t* scale_table, int b_offset,
                                                 int sf_offset, int row, int t) {
  const uint32_t sa = scale_table[stage[sf_offset + scale_byte_in_atom(row, t)]];
  const uint32_t sb = scale_table[stage[sf_offset + scale_byte_in_atom(row + 8, t)]];
  const uint2 wa = *reinterpret_cast<const uint2*>(stage + (b_offset + row * 32 + t * 8));
  const uint2 wb = *reinterpret_cast<const uint2*>(stage + (b_offset + (row + 8) * 32 + t * 8));
  uint32_t ax[4], ay[4], bx[4], by[4];
  fp4x8_to_half2x4(wa.x, ax);
  fp4x8_to_half2x4(wa.y, ay);
  fp4x8_to_half2x4(wb.x, bx);
  fp4x8_to_half2x4(wb.y, by);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    frag[q / 2][2 * (q % 2)] = hmul2_bits(ax[q], sa);
    frag[q / 2][2 * (q % 2) + 1] = hmul2_bits(bx[q], sb);
    frag[2 + q / 2][2 * (q % 2)] = hmul2_bits(ay[q], sa);
    frag[2 + q / 2][2 * (q % 2) + 1] = hmul2_bits(by[q], sb);
  }
}

// Barriers, 8 bytes each: full[s] (TMA landed), empty[s] (every consumer warp's wgmma done with stage s).
template <int kStages>
struct Barriers {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + 8 * (kStages + s); }
};

template <int kFixedN8, int kShape>
struct Consumer {
  using P = Pipeline<kShape>;
  uint8_t* smem;
  Barriers<P::kStages> bars;
  int half;             // this warpgroup's half of the tile's B rows
  int b_row;            // this thread's B rows of that half: b_row and b_row + 8
  int t;                // lane % 4: the scale block of this thread's B fragments
  bool warp_leader;     // lane 0: arrives for its warp
  uint32_t iter = 0;    // K blocks consumed so far (stage ring position)
  int unreleased = -1;  // stage whose wgmma may still be running

  // One K block with B fragments in frag[kBuf]: decode this warpgroup's B rows, issue their wgmma on
  // the stage's A rows. A half without rows of B (tile_halves) is computed from whatever its part of
  // the stage holds; its columns of C are past N, so store_tile stores none of them. (Branches
  // around the wgmma, or around reading their accumulators, would make ptxas fence them.)
  template <int kBuf>
  __device__ __forceinline__ void k_block(float (&acc)[128], uint32_t (&frag)[2][4][4], int n8, bool first) {
    const int s = iter % P::kStages;
    const uint8_t* stage = smem + s * P::kStageBytes;
    mbar_wait(bars.full(s), (iter / P::kStages) & 1);
    if constexpr (kTimeline)
      if (iter == 0 && threadIdx.x == 128) timeline_mark(kFirstStageFull);
    load_b_fragments(frag[kBuf], stage, reinterpret_cast<const uint32_t*>(smem + P::kSmemScaleTable), P::kStageB + half * kTileN * 32,
                     P::kStageSfb + half * 512, b_row, t);
    wgmma_fence();
    wgmma_k_block<kFixedN8, P::kMaxN8>(acc, frag[kBuf], smem_desc_sw128(smem_u32(stage + P::kStageA)), n8, first);
    wgmma_wait<1>();       // the previous K block's wgmma are done ...
    release_unreleased();  // ... so its stage ...
#pragma unroll
    for (int j = 0; j < 4; ++j) keep_in_registers(frag[kBuf ^ 1][j]);  // ... and its fragments may be overwritten now
    unreleased = s;
    ++iter;
  }
  // After this warp's wgmma_wait, which is warp-synchronous: one arrival speaks for the warp.
  __device__ __forceinline__ void release_unreleased() {
    if (unreleased >= 0 && warp_leader) mbar_arrive(bars.empty(unreleased));
    unreleased = -1;
  }
};

// Accumulators of this warp (C columns n_base..n_base+15, rows m0..) -> fp16 or bf16 C through a
// per-warp staging buffer: stmatrix.trans makes each C row's 16 columns 32 contiguous bytes. This
// thread's accumulators hold C columns n_base + lane / 4 (acc[4i], acc[4i + 1]) and 8 past it
// (acc[4i + 2], acc[4i + 3]); each is unscaled, then times its column's alpha (a column past N
// takes the last column's: it is not stored). kTwoLevel false: fp16 without alpha, the stores of a
// call without either, compiled apart so that they cost what they did before alpha existed (one
// runtime choice per tile instead of a multiply and a conversion choice per element: 1-2% of the
// benchmark's small cases on the H200, docs/perf-log/log.md).
template <bool kTwoLevel>
__device__ __forceinline__ void store_tile_as(const float (&acc)[128], const GroupArgs& g, const OutputArgs& out, int m0, int m_rows,
                                              int n_base, int n8, uint8_t* staging, int lane) {
  const uint32_t staging_u32 = smem_u32(staging);
  const int matrix = lane / 8, matrix_row = lane % 8;
  const float alpha_lo = kTwoLevel ? alpha_at(out, min(n_base + lane / 4, g.n - 1)) : 1.0f;
  const float alpha_hi = kTwoLevel ? alpha_at(out, min(n_base + lane / 4 + 8, g.n - 1)) : 1.0f;
  const int bf16 = kTwoLevel ? out.bf16 : 0;
  auto pack = [&](int i, float alpha) { return out2_bits(acc[i] * kUnscale * alpha, acc[i + 1] * kUnscale * alpha, bf16); };
#pragma unroll
  for (int win = 0; win < 4; ++win) {  // 64 rows of C per window
    if (win * 8 >= n8) break;
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      const int c = win * 8 + pair * 2;  // accumulator chunks c and c + 1: 8 C rows each
      const int row = (pair * 2 + matrix / 2) * 8 + matrix_row;
      const int side = (matrix & 1) ^ ((row >> 2) & 1);  // which 16 bytes; swizzled against bank conflicts
      stmatrix_x4_trans(staging_u32 + row * 32 + side * 16, pack(4 * c, alpha_lo), pack(4 * c + 2, alpha_hi), pack(4 * c + 4, alpha_lo),
                        pack(4 * c + 6, alpha_hi));
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int seg = lane + 32 * i, row = seg >> 1, side = seg & 1;
      const uint4 v = *reinterpret_cast<const uint4*>(staging + row * 32 + ((side ^ ((row >> 2) & 1)) << 4));
      const int m = win * 64 + row, n = n_base + side * 8;
      if (m < m_rows && n < g.n) st_global_v4_evict_first(g.c + int64_t(m0 + m) * g.n + n, v);
    }
    __syncwarp();
  }
}
__device__ __forceinline__ void store_tile(const float (&acc)[128], const GroupArgs& g, const OutputArgs& out, int m0, int m_rows,
                                           int n_base, int n8, uint8_t* staging, int lane) {
  if (out.alpha || out.bf16)
    store_tile_as<true>(acc, g, out, m0, m_rows, n_base, n8, staging, lane);
  else
    store_tile_as<false>(acc, g, out, m0, m_rows, n_base, n8, staging, lane);
}

// The A rows of a tile (its group's last chunk may have fewer than the others).
__device__ __forceinline__ int tile_rows(const TileJob& job) { return min(job.g.m_chunk_rows, job.g.m - job.m_chunk * job.g.m_chunk_rows); }

// The halves of a tile of the shape that hold rows of B (the last tile of a group may have one).
template <int kShape>
__device__ __forceinline__ int tile_halves(const TileJob& job) {
  using P = Pipeline<kShape>;
  return P::kHalves == 1 ? 1 : min(P::kHalves, (job.g.n - job.n_block * P::kBRows + kTileN - 1) / kTileN);
}

// What a producer needs of a tile to issue its stages, in few registers (shape 1's producers have
// 32): the tensor maps, the tile's first rows in them, its first half's scale atom of K block 0 (a
// half's atoms follow the previous half's k_blocks atoms later), its halves, its K blocks and the
// bytes a stage of it lands.
struct TileLoads {
  const CUtensorMap* tmap_a;
  const CUtensorMap* tmap_b;
  const uint8_t* sfb;
  int a_row, b_row, halves, k_blocks;
  uint32_t bytes;
};
template <int kShape>
__device__ __forceinline__ TileLoads loads_of(const TileJob& job) {
  using P = Pipeline<kShape>;
  const int halves = tile_halves<kShape>(job);
  return TileLoads{job.tmap_a,
                   job.tmap_b,
                   job.g.sfb + scale_atom_offset(job.n_block * P::kBRows / kTileN, 0, job.g.k),
                   job.a_row0 + job.m_chunk * job.g.m_chunk_rows,
                   job.b_row0 + job.n_block * P::kBRows,
                   halves,
                   job.g.k / kBlockK,
                   uint32_t(halves * (kTileN * kBlockK / 2 + 512) + job.g.a_box_rows * kBlockK * 2)};
}

// Producer `p` of the shape's kProducers (one thread in each of the producer warpgroup's first warps)
// issues the loads of every kProducers-th K block of the CTA's walk, from its p-th: one thread's issue
// of a stage (about 110 instructions, mostly dependent uniform-datapath ones) takes about as long as
// the consumers' K block when A has few rows, so one producer would leave them waiting for data.
template <int kShape, class Tiles>
__device__ __forceinline__ void produce(const Tiles& tiles, uint8_t* smem, Barriers<Pipeline<kShape>::kStages> bars, int p) {
  using P = Pipeline<kShape>;
  constexpr int kStages = P::kStages, kProducers = P::kProducers;
  const uint64_t keep = l2_evict_last(), once = l2_evict_first();
  const uint32_t stages = smem_u32(smem);
  // B's rows and scale atoms: nothing the prepass writes, and written by work that ended before the
  // prepass began (it is launched plainly, after everything earlier on the queue). A stage's loads go
  // out in the order that measured fastest on the H200 (docs/perf-log/log.md): shape 0 B's rows, A's rows,
  // then B's scales; shape 1 each half's rows and scales, then A's rows.
  constexpr bool kScalesAfterA = kShape == 0;
  auto load_b_scales = [&](const TileLoads& t, int kb, uint32_t stage, uint32_t full, int h) {
    bulk_load(stage + P::kStageSfb + h * 512, t.sfb + (h * t.k_blocks + kb) * 512, 512, full, once);
  };
  auto load_b = [&](const TileLoads& t, int kb, uint32_t stage, uint32_t full) {
#pragma unroll
    for (int h = 0; h < P::kHalves; ++h)
      if (h < t.halves) {
        tma_load_2d(stage + P::kStageB + h * kTileN * 32, t.tmap_b, kb * kBlockK / 2, t.b_row + h * kTileN, full, once);
        if constexpr (!kScalesAfterA) load_b_scales(t, kb, stage, full, h);
      }
  };
  auto load_scales_after_a = [&](const TileLoads& t, int kb, uint32_t stage, uint32_t full) {
    if constexpr (kScalesAfterA)
#pragma unroll
      for (int h = 0; h < P::kHalves; ++h)
        if (h < t.halves) load_b_scales(t, kb, stage, full, h);
  };
  auto load_a = [&](const TileLoads& t, int kb, uint32_t stage, uint32_t full) {  // the prepass's fp16 rows
    tma_load_2d(stage + P::kStageA, t.tmap_a, kb * kBlockK, t.a_row, full, keep);
  };
  // The list form's first stages (those of the ramp) ask for their B rows and scales before the wait
  // for the prepass, so that DRAM's latency for them overlaps the prepass's tail; their A rows follow
  // the wait. (The MoE forms' walker read the schedule after the wait, at the kernel's start.)
  int early = 0;
  if constexpr (!Tiles::kReadsEarlierGrids) {
    if (tiles.count() > 0) {
      const TileLoads t = loads_of<kShape>(tiles.job(0));
      early = min(P::kRampStages, t.k_blocks);
      for (int kb = p; kb < early; kb += kProducers) {  // each stage's first use: free, no wait
        const uint32_t stage = stages + kb * P::kStageBytes;
        mbar_arrive_expect_tx(bars.full(kb), t.bytes);
        load_b(t, kb, stage, bars.full(kb));
        load_scales_after_a(t, kb, stage, bars.full(kb));
      }
    }
    wait_for_prerequisite_grids();
  }
  uint32_t walked = 0;  // K blocks of the CTA's tiles before this one
  for (int i = 0; i < tiles.count(); ++i) {
    const TileLoads t = loads_of<kShape>(tiles.job(i));
    for (int kb = (p - int(walked % kProducers) + kProducers) % kProducers; kb < t.k_blocks; kb += kProducers) {
      const uint32_t iter = walked + kb;
      const int s = iter % kStages;
      const uint32_t stage = stages + s * P::kStageBytes, full = bars.full(s);
      if (int(iter) < early) {  // the first tile's first K blocks: their B is on the way
        load_a(t, kb, stage, full);
        continue;
      }
      if constexpr (P::kRampStages < kStages)  // the ring's first round: its first phase of stage iter - kRampStages
        if (int(iter) >= P::kRampStages && int(iter) < kStages) mbar_wait_or_trap(bars.full(iter - P::kRampStages), 0);
      mbar_wait_or_trap(bars.empty(s), ((iter / kStages) & 1) ^ 1);
      mbar_arrive_expect_tx(full, t.bytes);
      load_b(t, kb, stage, full);
      load_a(t, kb, stage, full);
      load_scales_after_a(t, kb, stage, full);
    }
    walked += t.k_blocks;
  }
  // The consumers' release of every stage they used, awaited by the producer of the last K block:
  // its wait for that block's stage saw every earlier block kStages back released, so no barrier it
  // waits on here is two phases behind (a parity wait would pass one). A consumer stuck on a stage
  // that never lands releases nothing more, so this wait, or one above, traps for it.
  if (walked > 0 && int((walked - 1) % kProducers) == p)
    for (uint32_t iter = walked; iter < walked + kStages; ++iter) mbar_wait_or_trap(bars.empty(iter % kStages), ((iter / kStages) & 1) ^ 1);
}

template <int kFixedN8, int kShape, class Tiles>
__device__ __forceinline__ void consume(const Tiles& tiles, uint8_t* smem, Barriers<Pipeline<kShape>::kStages> bars) {
  using P = Pipeline<kShape>;
  // Consumer warpgroup w takes half w / 2 of the tile's B rows, its rows 64 (w % 2) ..
  const int ct = threadIdx.x - 128, warp = ct / 32, lane = ct % 32, half = warp / 8, half_row0 = (warp / 4) % 2 * 64 + (warp % 4) * 16;
  Consumer<kFixedN8, kShape> consumer{smem, bars, half, half_row0 + lane / 4, lane % 4, lane == 0};
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  uint32_t frag[2][4][4];
  for (int i = 0; i < tiles.count(); ++i) {
    const TileJob first_read = tiles.job(i);
    const int n8 = kFixedN8 > 0 ? kFixedN8 : (tile_rows(first_read) + 7) / 8;
    const int k_blocks = first_read.g.k / kBlockK;
    int kb = 0;
    for (; kb + 1 < k_blocks; kb += 2) {
      consumer.template k_block<0>(acc, frag, n8, kb == 0);
      consumer.template k_block<1>(acc, frag, n8, false);
    }
    if (kb < k_blocks) consumer.template k_block<0>(acc, frag, n8, kb == 0);
    wgmma_wait<0>();
    keep_in_registers(acc);
    if constexpr (kTimeline)
      if (threadIdx.x == 128) timeline_mark(kKLoopsEnd);
    consumer.release_unreleased();
    // The list form reads the tile's figures for its stores again from the kernel's parameters, not
    // kept through the K loop: shape 1's consumers have 112 registers, one too few to keep them.
    // (Shape 0's measured no faster keeping them.) The MoE forms keep them: theirs come from a
    // search of the schedule in global memory.
    int again = i;
    if constexpr (!Tiles::kReadsEarlierGrids) asm volatile("" : "+r"(again));
    const TileJob job = Tiles::kReadsEarlierGrids ? first_read : tiles.job(again);
    const GroupArgs& g = job.g;
    const int m0 = job.m_chunk * g.m_chunk_rows, n0 = job.n_block * P::kBRows;
    store_tile(acc, g, job.out, m0, tile_rows(job), n0 + half * kTileN + half_row0, n8, smem + P::kSmemEpilogue + warp * kEpilogueWarpBytes,
               lane);
  }
  if constexpr (kTimeline)
    if (threadIdx.x == 128) timeline_mark(kStoresEnd);
}

// kFixedN8 > 0: every tile of the launch is issued with wgmma N = 8 * kFixedN8 (its A box has that
// many rows; columns past the tile's rows are computed and not stored); 0: each tile's own N.
// kShape: the tile shape's pipeline (Pipeline). Args: LaunchArgs (the list form, the host's
// schedule) or ExpertLaunchArgs (the MoE forms).
template <int kFixedN8, int kShape, class Args>
__global__ void __launch_bounds__(Pipeline<kShape>::kThreads, 1) grouped_gemm(const __grid_constant__ Args args) {
  using P = Pipeline<kShape>;
  static_assert(kFixedN8 <= P::kMaxN8, "a tile of this shape has at most kMaxN8 * 8 A rows");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const Barriers<P::kStages> bars{smem_u32(smem + P::kSmemBarriers)};
  if constexpr (kTimeline)
    if (threadIdx.x == 0) timeline_mark(kCtaEntry);
  if (threadIdx.x == 0) {
    for (int s = 0; s < P::kStages; ++s) {
      mbar_init(bars.full(s), 1);
      mbar_init(bars.empty(s), P::kConsumerWarps);
    }
    fence_barrier_init();
  }
  if (threadIdx.x < 256) reinterpret_cast<uint32_t*>(smem + P::kSmemScaleTable)[threadIdx.x] = bits_of(scale_to_half2(threadIdx.x));
  __syncthreads();
  // The MoE forms' walker reads the schedule: every thread first waits for the grid before this one,
  // which writes it and the fp16 rows. The list form's producer waits for the prepass itself.
  using Tiles = typename TilesOf<Args>::type;
  if constexpr (Tiles::kReadsEarlierGrids) wait_for_prerequisite_grids();
  const Tiles tiles(args, blockIdx.x, gridDim.x);
  if (threadIdx.x < 128) {
    setmaxnreg_dec<P::kProducerRegisters>();
    if (threadIdx.x % 32 == 0 && threadIdx.x / 32 < P::kProducers) produce<kShape>(tiles, smem, bars, threadIdx.x / 32);
  } else {
    setmaxnreg_inc<P::kConsumerRegisters>();
    consume<kFixedN8, kShape>(tiles, smem, bars);
  }
}

// The kernels of a tile shape and a form (Args): the one choosing each tile's N (0), and one built
// for each N of FixedWgmmaN8 that the shape's tiles can have.
template <int kShape, int kN8, class Args>
const void* kernel_for_n8() {
  if constexpr (kN8 <= Pipeline<kShape>::kMaxN8)
    return reinterpret_cast<const void*>(&grouped_gemm<kN8, kShape, Args>);
  else
    return nullptr;
}
// The kernel for a launch: built for its fixed wgmma N, or with the tree (0); null for an N the
// shape has no kernel for (its A boxes would overrun the stage), which the launch then reports.
template <int kShape, class Args, int... kN8>
const void* gemm_kernel(int fixed_n8, std::integer_sequence<int, kN8...>) {
  if (fixed_n8 == 0) return kernel_for_n8<kShape, 0, Args>();
  const int n8s[] = {kN8...};
  const void* kernels[] = {kernel_for_n8<kShape, kN8, Args>()...};
  for (size_t i = 0; i < sizeof n8s / sizeof n8s[0]; ++i)
    if (n8s[i] == fixed_n8) return kernels[i];
  return nullptr;
}
}  // namespace sm90
}  // namespace nvfp4
