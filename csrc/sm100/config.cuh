#pragma once
// ============================================================================ sm_100a kernel
// The B200 design: 128x128x256 tiles, a 6-stage TMA ring, one TMA warp, one MMA warp
// issuing tcgen05.cp (scales into TMEM) and tcgen05.mma kind::mxf4nvf4 (FP4 x FP4 with E4M3 block
// scales, fp32 accumulators in TMEM), four epilogue warps reading TMEM with tcgen05.ld (a row per
// thread) and storing each row 32 bytes at a time. The persistent variant double-buffers the
// accumulators so the epilogue of tile t overlaps the MMA of tile t + 1; the single-tile variant
// (launches with no more tiles than SMs) keeps one buffer.
// Compiled and host-checked here; it has never run on hardware (no B200 is available). It departs
// from the public design it grew from where that one was wrong: TMEM allocated for every column
// used, the epilogue waiting for the MMAs' commit, a whole-warp dealloc, a fence before a release.
#include "../prelude.cuh"
#include "../launch_params.cuh"

namespace nvfp4 {
namespace sm100 {
constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 256, kStages = 6;
constexpr int kMmaK = 64;                          // K per tcgen05.mma for FP4
constexpr int kWarps = kBlockM / 32 + 2;           // warps 0-3 epilogue, 4 TMA, 5 MMA
constexpr int kThreads = kWarps * 32;
constexpr int kTmaWarp = kWarps - 2, kMmaWarp = kWarps - 1;
constexpr int kABytes = kBlockM * kBlockK / 2, kBBytes = kBlockN * kBlockK / 2;
constexpr int kSfBytes = 128 * kBlockK / 16;       // four 512-byte scale atoms (128 rows x 64 K each)
constexpr int kStageBytes = kABytes + kBBytes + 2 * kSfBytes;
constexpr int kSmemBarriers = kStages * kStageBytes;
constexpr int kNumBarriers = 2 * kStages + 4;      // tma[s], mma[s], mainloop[2], epilogue[2]
constexpr int kSmemTmemSlot = kSmemBarriers + kNumBarriers * 8;
constexpr int kSmemBytes = kSmemTmemSlot + 16 + 1024;  // + slack to align the base to 1024 (128B swizzle)

// L2 cache-policy operands (the createpolicy encodings of evict-first and evict-last).
constexpr uint64_t kEvictFirst = 0x12F0000000000000ull;
constexpr uint64_t kEvictLast = 0x14F0000000000000ull;

// TMEM columns: accumulator buffers (kBlockN fp32 columns each), then the scales of one K block,
// 4 columns per 64-K atom, A's then B's. The allocation covers every column used (288 persistent,
// 160 single-tile), rounded up to the power of two tcgen05.alloc requires.
template <bool kPersistent>
struct TmemPlan {
  static constexpr int kBuffers = kPersistent ? 2 : 1;
  static constexpr int kSfa = kBuffers * kBlockN;
  static constexpr int kSfb = kSfa + 4 * (kBlockK / kMmaK);
  static constexpr int kUsed = kSfb + 4 * (kBlockK / kMmaK);
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
// Instruction descriptor: A and B E2M1, E4M3 scales (bit 23 clear), N >> 3 at bits 17-22 (N =
// kBlockN), M >> 4 at bits 24-28 (M = 128).
constexpr uint32_t kInstrDesc = (1u << 7) | (1u << 10) | (uint32_t(kBlockN) >> 3 << 17) | (uint32_t(128) >> 4 << 24);

__device__ __forceinline__ bool elect_one() {
  uint32_t pred = 0;
  asm volatile("{\n .reg .pred P;\n elect.sync _|P, %1;\n selp.b32 %0, 1, 0, P;\n}\n" : "=r"(pred) : "r"(0xFFFFFFFFu));
  return pred != 0;
}
}  // namespace sm100
}  // namespace nvfp4
