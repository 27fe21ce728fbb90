#pragma once
// ============================================================================ sm_90a configuration
// The tile shapes' figures and pipelines, which the kernels, the prepass and the host traits share.
#include "../prelude.cuh"

namespace nvfp4 {
namespace sm90 {
// Two kernels per launch. The prepass dequantizes A (the small operand) once, into fp16 rows in
// the K order below, in a workspace the plan owns. The GEMM computes C^T tiles = B_tile (128 rows
// of N, 64 per consumer warpgroup, the wgmma M) x A_tile^T (up to 256 rows of M, the wgmma N, any
// multiple of 8), so a group with M <= 256 reads B once: B is dequantized straight into wgmma
// A-operand registers, and TMA loads the fp16 A rows with 128-byte swizzle into the layout wgmma
// reads as its B operand. (Dequantizing A inside the GEMM would repeat that work for every N block.)
//
// K order inside a 64-wide K block is permuted identically for both operands: k16 step j holds,
// at wgmma positions 2t, 2t+1 / 2t+8, 2t+9, the nibble pairs (2(j%2), +4) / (2(j%2)+1, +4) of
// word j/2 of scale block t. Each element keeps its own scale, so the dot product is unchanged.
constexpr int kTileN = 128;                      // B rows per tile half (a TMA box of B, a scale atom)
constexpr int kTileM = 256;                      // most A rows per tile (the wgmma N) of tile shape 0
constexpr int kBlockK = 64;                      // K elements per pipeline stage
constexpr int kEpilogueWarpBytes = 64 * 16 * 2;  // 64 rows of C x 16 columns, fp16
constexpr int kSmemBudget = 227 * 1024;          // the most shared memory a CTA may have on sm_90
// The CTA's table of B's scales: scale_to_half2 of every E4M3 byte, built once at the kernel's start,
// so that a K block's scales cost a shared-memory load each instead of the conversion's instructions.
constexpr int kScaleTableBytes = 256 * 4;

// The pipeline of each tile shape. Warpgroup 0 holds the TMA producers (a thread in each of its
// first kProducers warps); each consumer warpgroup after it decodes 64 rows of one half of the
// tile's B and issues their wgmma, two warpgroups a half. Shape 0 takes tiles of 128 B rows by up to
// 256 A rows, in 5 stages, with two consumer warpgroups. Shape 1 (few rows) takes 256 B rows, two
// halves of 128, by up to 64 A rows, with four consumer warpgroups, in as many stages as fit (11):
// when A has few rows a K block is its decode's instructions and their latencies, and sixteen
// consumer warps, each with one half's rows, measured 1% faster on the H200 than eight with both
// halves' (docs/perf-log/log.md); the deep ring keeps about 90 KB of B in flight per SM.
//
// A stage: A's fp16 rows (128 bytes each, 128B-swizzled, from the stage's 1024-byte boundary as the
// swizzle atoms need), B's packed FP4 rows (32 bytes each), then one 512-byte scale atom per half.
template <int kShape>
struct Pipeline {
  // Threads issuing the stages' loads, each every kProducers-th (produce): measured on the H200, four
  // make few rows' K blocks 10-20% faster, and cost shape 0's 1-4%.
  static constexpr int kProducers = kShape == 1 ? 4 : 1;
  static constexpr int kARows = kShape == 0 ? kTileM : 64;
  static constexpr int kHalves = kShape == 1 ? 2 : 1;
  static constexpr int kConsumerWarps = 8 * kHalves;
  static constexpr int kThreads = 128 + 32 * kConsumerWarps;
  // setmaxnreg's counts: the CTA starts with kStartRegisters a thread (168 and 96); the consumers'
  // increase is served only by what the producer warpgroup gives back:
  // 128 x (168 - 56) = 256 x (224 - 168) and 128 x (96 - 32) = 512 x (112 - 96).
  static constexpr int kStartRegisters = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegisters = kShape == 1 ? 32 : 56;
  static constexpr int kConsumerRegisters = kShape == 1 ? 112 : 224;
  static constexpr int kBRows = kHalves * kTileN;
  static constexpr int kMaxN8 = kARows / 8;
  static constexpr int kStageA = 0;
  static constexpr int kStageB = kStageA + kARows * kBlockK * 2;
  static constexpr int kStageSfb = kStageB + kBRows * kBlockK / 2;
  static constexpr int kStageBytes = (kStageSfb + kHalves * 512 + 1023) / 1024 * 1024;
  static constexpr int kStages =
      (kSmemBudget - kConsumerWarps * kEpilogueWarpBytes - kScaleTableBytes - 1024) / (kStageBytes + 16);  // + its two barriers
  // Stages in flight while the ring first fills: a stage past them is issued once the stage this
  // many before it has landed. When every CTA asks for its whole ring at once (13 MB for few rows,
  // after the leaderboard's flush), DRAM serves the stages interleaved and a CTA's first one lands
  // with about all the rest, 6.6 us after the kernel's start on the H200 (3.9 us with a ramp of 4);
  // the consumers wait for it. A ramp of 8 measured 1-3% faster on few rows than none, 4 or 6; 2
  // starves them (docs/perf-log/log.md).
  static constexpr int kRampStages = kShape == 1 ? 8 : kStages;
  static constexpr int kSmemEpilogue = kStages * kStageBytes;
  static constexpr int kSmemScaleTable = kSmemEpilogue + kConsumerWarps * kEpilogueWarpBytes;
  static constexpr int kSmemBarriers = kSmemScaleTable + kScaleTableBytes;
  static constexpr int kSmemBytes = kSmemBarriers + 2 * kStages * 8 + 1024;  // + slack to align the base to 1024
  static_assert(kStageBytes % 1024 == 0 && kStages >= 4 && kSmemBytes <= kSmemBudget, "shared memory plan");
  static_assert(kRampStages >= 1 && kRampStages <= kStages, "the ramp's first stages are issued without a wait");
  static_assert(kProducers <= 4 && kProducers <= kStages,
                "a producer a warp of the producer warpgroup; no stage's barrier two phases behind its producer");
  static_assert(128 * (kStartRegisters - kProducerRegisters) >= (kThreads - 128) * (kConsumerRegisters - kStartRegisters),
                "the consumers' registers come from the producers'");
};
constexpr int kPrepassThreads = 256;

// The wgmma N (/ 8) of the GEMMs built for one N, besides the one choosing each tile's N: every
// multiple of 16 rows (each adds about 0.8 s to a cold build; a tile shape builds those its tiles
// can have, kMaxN8 at most).
using FixedWgmmaN8 = std::integer_sequence<int, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32>;
// The smallest N (/ 8) of a GEMM of the shape built for one N that is at least n8; 0 when there is none.
template <int kShape, int... kN8>
constexpr int fixed_n8_at_least(int n8, std::integer_sequence<int, kN8...>) {
  int found = 0;
  for (const int built : {kN8...})
    if (built <= Pipeline<kShape>::kMaxN8 && built >= n8 && (found == 0 || built < found)) found = built;
  return found;
}
}  // namespace sm90
}  // namespace nvfp4
