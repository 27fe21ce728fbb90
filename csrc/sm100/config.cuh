#pragma once
// ============================================================================ sm_100a kernel
// The B200 design: a TMA ring of as many stages as fit, one TMA warp, one MMA warp issuing
// tcgen05.cp (scales into TMEM) and tcgen05.mma kind::mxf4nvf4 (FP4 x FP4 with E4M3 block scales,
// fp32 accumulators in TMEM), four epilogue warps reading TMEM with tcgen05.ld and storing 16
// bytes a thread. Three tile shapes (TileShape); where TMEM holds two accumulators, the persistent
// variant double-buffers them so the epilogue of tile t overlaps the MMA of tile t + 1.
// Compiled and host-checked here; it has never run on hardware (no B200 is available). It departs
// from the public design it grew from where that one was wrong: TMEM allocated for every column
// used, the epilogue waiting for the MMAs' commit, a whole-warp dealloc, a fence before a release.
#include "../prelude.cuh"
#include "../launch_params.cuh"

namespace nvfp4 {
namespace sm100 {
constexpr int kBlockK = 256;                // K per pipeline stage (one 128-byte swizzled row per operand row)
constexpr int kMmaK = 64;                   // K per tcgen05.mma for FP4
constexpr int kEpilogueWarps = 4;           // one per 32 TMEM lanes
constexpr int kWarps = kEpilogueWarps + 2;  // warps 0-3 epilogue, 4 TMA, 5 MMA
constexpr int kThreads = kWarps * 32;
constexpr int kTmaWarp = kWarps - 2, kMmaWarp = kWarps - 1;
constexpr int kSfAtomBytes = 128 * kBlockK / 16;  // the scales of 128 rows for one K block: four 512-byte atoms (64 K each)
constexpr int kSmemBudget = 232448;               // the most dynamic shared memory a B200 CTA may opt into (227 KB)
constexpr int kSmemSlack = 1024;                  // to align the base to 1024 (128B swizzle)

// The tile shapes, one kernel each (kShape). The MMA's M side is 128 rows of one operand per CTA,
// which land in its 128 TMEM lanes; its N side is up to kNRows rows of the other, issued as
// kNPieces MMAs of at most 128 (each with one 128-row scale atom), which land in TMEM columns.
// kUnswapped: 128 rows of A (C rows) by 128 of B (C columns). kSwapped, for problems of few A
// rows: 128 rows of B by up to 256 of A, so each B tile is read once for up to 256 rows of C; the
// epilogue transposes through shared memory. kPair: the swapped tile over a CTA pair
// (cta_group::2, M = 256): 256 rows of B by 128 of A, each CTA loading its 128 B rows and half of
// the A rows, so a CTA loads 192 rows per K block for 128 x 128 outputs instead of 256.
enum TileShapeId { kUnswapped = 0, kSwapped = 1, kPair = 2 };
template <int kShape>
struct TileShape {
  static constexpr bool kIsSwapped = kShape != kUnswapped, kIsPair = kShape == kPair;
  static constexpr int kCtaGroup = kIsPair ? 2 : 1;
  static constexpr int kRowsA = kShape == kSwapped ? 256 : 128;  // C rows per tile
  static constexpr int kRowsB = 128;                             // C columns per CTA; per tile kCtaGroup x this
  static constexpr int kCtaRowsA = kRowsA / kCtaGroup;           // A rows one CTA loads
  static constexpr int kNRows = kIsSwapped ? kRowsA : kRowsB;
  static constexpr int kNPieces = kNRows / 128;
  static constexpr int kABytes = kCtaRowsA * kBlockK / 2, kBBytes = kRowsB * kBlockK / 2;
  static constexpr int kSfaBytes = kRowsA / 128 * kSfAtomBytes, kSfbBytes = kRowsB / 128 * kSfAtomBytes;
  static constexpr int kStageBytes = kABytes + kBBytes + kSfaBytes + kSfbBytes;        // a multiple of 1024: stages stay aligned
  static constexpr int kStagingBytes = kIsSwapped ? kEpilogueWarps * 32 * 32 * 2 : 0;  // the epilogue's 32 x 32 halves per warp
  static constexpr int kFixedBytes = kStagingBytes + 32 * 8 + 16 + kSmemSlack;         // staging, barriers, TMEM slot, slack
  static constexpr int kStages = (kSmemBudget - kFixedBytes) / kStageBytes;            // as many as fit
  static constexpr int kSmemStaging = kStages * kStageBytes;
  static constexpr int kSmemBarriers = kSmemStaging + kStagingBytes;
  static constexpr int kNumBarriers = 2 * kStages + 4;  // tma[s], mma[s], mainloop[2], epilogue[2]
  static constexpr int kSmemTmemSlot = kSmemBarriers + kNumBarriers * 8;
  static constexpr int kSmemBytes = kSmemTmemSlot + 16 + kSmemSlack;
  static_assert(kStageBytes % 1024 == 0 && kStages >= 2 && kNumBarriers <= 32 && kSmemBytes <= kSmemBudget, "shared memory plan");
};

// L2 cache-policy operands (the createpolicy encodings of evict-first and evict-last).
constexpr uint64_t kEvictFirst = 0x12F0000000000000ull;
constexpr uint64_t kEvictLast = 0x14F0000000000000ull;

// TMEM columns: accumulator buffers (kNRows fp32 columns each; two when a CTA runs several tiles
// and they fit), then the scales of one K block, 4 columns per 64-K atom: the M side's 128 rows,
// then each N piece's. The allocation covers every column used, rounded up to the power of two
// tcgen05.alloc requires.
template <int kShape, bool kPersistent>
struct TmemPlan {
  static constexpr int kNRows = TileShape<kShape>::kNRows, kNPieces = TileShape<kShape>::kNPieces;
  static constexpr int kScaleColumns = 4 * (kBlockK / kMmaK);  // per 128 rows
  static constexpr int kBuffers = kPersistent && 2 * kNRows + (1 + kNPieces) * kScaleColumns <= 512 ? 2 : 1;
  static constexpr int kSfM = kBuffers * kNRows;
  static constexpr int kSfN = kSfM + kScaleColumns;
  static constexpr int kUsed = kSfN + kNPieces * kScaleColumns;
  static constexpr int kAllocated = kUsed <= 32 ? 32 : kUsed <= 64 ? 64 : kUsed <= 128 ? 128 : kUsed <= 256 ? 256 : 512;
  static_assert(kUsed <= kAllocated && kAllocated <= 512, "TMEM plan exceeds the 512 columns of an SM");
};

__device__ __forceinline__ constexpr uint64_t desc_encode(uint64_t x) { return (x & 0x3FFFFull) >> 4; }
// K-major FP4 tile in 128B swizzle atoms (SBO 1024 = 8 rows x 128 bytes); bits 46-48 = 0b001.
__device__ __forceinline__ uint64_t desc_ab(uint32_t addr) {
  return desc_encode(addr) | desc_encode(8 * 128) << 32 | 1ull << 46 | 2ull << 61;
}
// A 512-byte scale atom, no swizzle (SBO 128 = 8 rows x 16 bytes).
__device__ __forceinline__ uint64_t desc_sf(uint32_t addr) { return desc_encode(addr) | desc_encode(8 * 16) << 32 | 1ull << 46; }
// Instruction descriptor: A and B E2M1, E4M3 scales (bit 23 clear), N >> 3 at bits 17-22, M >> 4
// at bits 24-28 (M = 128, or 256 over a CTA pair).
__host__ __device__ constexpr uint32_t instr_desc(int n, int m = 128) {
  return (1u << 7) | (1u << 10) | (uint32_t(n) >> 3 << 17) | (uint32_t(m) >> 4 << 24);
}

__device__ __forceinline__ bool elect_one() {
  uint32_t pred = 0;
  asm volatile("{\n .reg .pred P;\n elect.sync _|P, %1;\n selp.b32 %0, 1, 0, P;\n}\n" : "=r"(pred) : "r"(0xFFFFFFFFu));
  return pred != 0;
}
}  // namespace sm100
}  // namespace nvfp4
