#pragma once
// ---------------------------------------------------------------------------- tcgen05, emulated
// Test build for sm_90a (NVFP4_TCGEN05_EMULATION=1): the same kernel with each Blackwell-only
// instruction replaced by a device function of the same signature that reproduces, from the PTX
// ISA's definitions, what the kernel relies on. The asynchronous ones (cp, mma) complete before they
// return, so tcgen05.commit arrives at once. TMEM is a per-SM array in global memory; every access
// is checked against the live allocation, the lane quarter of the accessing warp and the scale
// duplication the ISA requires, and a violation prints what it was and traps.
// sm_100-only forms of sm_90 features use their sm_90 equivalents: .shared::cluster destinations for
// bulk copies, no .cta_group on tensor copies, byte-element tensor maps (see Arch::encode_operand).
#include "config.cuh"
#include "../ptx.cuh"

namespace nvfp4 {
namespace sm100 {
namespace emu {
constexpr int kLanes = 128, kColumns = 512, kMaxSms = 256;
struct TmemStandIn {
  uint32_t base, columns;                // the live allocation; columns == 0: none
  uint32_t cells[kLanes][kColumns];      // 32-bit TMEM words
  float a_scaled[kLanes][64];            // mma scratch: A x SFA of the current instruction
};
__device__ TmemStandIn g_tmem[kMaxSms];

__device__ __noinline__ void fail(const char* what, uint32_t x, uint32_t y) {
  printf("tcgen05 emulation, block %d thread %d: %s (%u, %u)\n", int(blockIdx.x), int(threadIdx.x), what, x, y);
  __trap();
}
__device__ __forceinline__ int lane_id() { return int(threadIdx.x % 32); }
__device__ __forceinline__ void require_whole_warp(const char* what) {
  if (__activemask() != 0xFFFFFFFFu) fail(what, __activemask(), 0);
}
__device__ __forceinline__ TmemStandIn& sm_tmem() {
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (sm >= kMaxSms) fail("SM id beyond the TMEM stand-ins", sm, kMaxSms);
  return g_tmem[sm];
}
__device__ __forceinline__ uint32_t& cell(TmemStandIn& t, uint32_t lane, uint32_t column) {
  const uint32_t base = *reinterpret_cast<volatile uint32_t*>(&t.base), columns = *reinterpret_cast<volatile uint32_t*>(&t.columns);
  if (lane >= kLanes || column < base || column >= base + columns) fail("TMEM access outside the allocation (lane, column)", lane, column);
  return t.cells[lane][column];
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_shared_u8(uint32_t addr) {
  uint16_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=h"(v) : "r"(addr) : "memory");
  return v;
}

// Shared-memory matrix descriptor (tcgen05 form): start, LBO and SBO in 16-byte units at bits 0, 16
// and 32; bits 46-48 = 0b001; base offset (49-51) and absolute-LBO mode (52) are not emulated;
// swizzle mode at 61-63 (0 none, 2 128-byte; the other modes are not emulated).
struct SmemDesc { uint32_t start, lbo, sbo, swizzle; };
__device__ __forceinline__ SmemDesc decode_smem_desc(uint64_t d) {
  if (((d >> 46) & 7) != 1) fail("matrix descriptor bits 46-48 are not 0b001", uint32_t(d >> 32), 0);
  if ((d >> 49) & 15) fail("matrix descriptor base offset / LBO mode not emulated", uint32_t(d >> 32), 0);
  const SmemDesc s{uint32_t(d & 0x3FFF) << 4, uint32_t((d >> 16) & 0x3FFF) << 4, uint32_t((d >> 32) & 0x3FFF) << 4, uint32_t(d >> 61)};
  if (s.swizzle != 0 && s.swizzle != 2) fail("matrix descriptor swizzle mode not emulated", s.swizzle, 0);
  return s;
}
// Address of byte `byte` of row `row` of a K-major operand. No swizzle: 8-row x 16-byte core matrices,
// rows 16 bytes apart, 8-row groups SBO apart, 16-byte columns LBO apart. 128-byte swizzle: rows 128
// bytes apart, 8-row groups SBO apart, and the 16-byte chunk index (address bits 4-6) XORed with the
// row within the 1024-byte pattern (address bits 7-9).
__device__ __forceinline__ uint32_t kmajor_address(const SmemDesc& d, int row, int byte) {
  if (d.swizzle == 0) return d.start + uint32_t(row / 8) * d.sbo + uint32_t(row % 8) * 16 + uint32_t(byte / 16) * d.lbo + uint32_t(byte % 16);
  const uint32_t a = d.start + uint32_t(row / 8) * d.sbo + uint32_t(row % 8) * 128 + uint32_t(byte);
  return a ^ ((a >> 3) & 0x70);
}
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3, m = code & 1;
  const float magnitude = e ? ldexpf(1.0f + 0.5f * float(m), int(e) - 1) : 0.5f * float(m);
  return code & 8 ? -magnitude : magnitude;
}
__device__ __forceinline__ float e4m3_value(uint32_t byte) {
  const uint32_t e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return __int_as_float(0x7FC00000);
  const float magnitude = e ? ldexpf(1.0f + float(m) / 8.0f, int(e) - 7) : ldexpf(float(m) / 8.0f, -6);
  return byte & 0x80 ? -magnitude : magnitude;
}
// scale_vec::4X scales of row r of a 128-row operand: lane r, column `column` + r / 32, byte j for K
// elements 16j .. 16j + 15. The ISA requires the same words in all four lane quarters: checked.
__device__ __forceinline__ uint32_t scale_word(TmemStandIn& t, uint32_t column, int r) {
  const uint32_t w = cell(t, uint32_t(r), column + uint32_t(r / 32));
  for (int q = 0; q < 4; ++q)
    if (cell(t, uint32_t(32 * q + r % 32), column + uint32_t(r / 32)) != w) fail("scale factors differ between lane quarters (row, column)", r, column);
  return w;
}
__device__ __forceinline__ void require_lane_zero(uint32_t taddr, const char* what) {
  if (taddr >> 16) fail(what, taddr >> 16, taddr & 0xFFFF);
}
}  // namespace emu

__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int x, int y, int z, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy) : "memory");
}
__device__ __forceinline__ void bulk_load_cta(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  bulk_load(dst, src, bytes, bar, policy);
}
// tcgen05.alloc (+ relinquish_alloc_permit): warp-wide; the columns are placed at the top of the
// 512, so a kernel that assumes address 0 instead of reading the slot back fails.
__device__ __forceinline__ void tmem_alloc(uint32_t slot, int columns) {
  emu::require_whole_warp("tcgen05.alloc by part of a warp");
  emu::TmemStandIn& t = emu::sm_tmem();
  if (columns < 32 || columns > emu::kColumns || (columns & (columns - 1))) emu::fail("tcgen05.alloc of a column count not a power of 2 in [32, 512]", columns, 0);
  if (emu::lane_id() == 0) {
    volatile uint32_t* header = &t.base;
    if (header[1]) emu::fail("tcgen05.alloc while this SM's TMEM is allocated (base, columns)", header[0], header[1]);
    header[0] = uint32_t(emu::kColumns - columns);
    header[1] = uint32_t(columns);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(slot), "r"(uint32_t(emu::kColumns - columns)) : "memory");
  }
  __syncwarp();
}
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, int columns) {
  emu::require_whole_warp("tcgen05.dealloc by part of a warp");
  emu::TmemStandIn& t = emu::sm_tmem();
  __syncwarp();
  if (emu::lane_id() == 0) {
    volatile uint32_t* header = &t.base;
    if (taddr != header[0] || uint32_t(columns) != header[1]) emu::fail("tcgen05.dealloc of columns not allocated (address, columns)", taddr, uint32_t(columns));
    header[1] = 0;
  }
  __syncwarp();
}
// tcgen05.cp .32x128b.warpx4: row r (16 bytes) of the shared-memory matrix -> lanes r, r + 32,
// r + 64, r + 96, four columns from taddr (bytes 4w .. 4w + 3 in column w).
__device__ __forceinline__ void tcgen05_cp_scales(uint32_t taddr, uint64_t desc) {
  const emu::SmemDesc d = emu::decode_smem_desc(desc);
  emu::require_lane_zero(taddr, "tcgen05.cp .32x128b.warpx4 not at lane 0 (lane, column)");
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int r = 0; r < 32; ++r)
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = emu::ld_shared_u32(emu::kmajor_address(d, r, 4 * w));
      for (int q = 0; q < 4; ++q) emu::cell(t, uint32_t(32 * q + r), (taddr & 0xFFFF) + uint32_t(w)) = v;
    }
}
// tcgen05.mma .kind::mxf4nvf4.block_scale.scale_vec::4X, cta_group::1: D (lane m, column n) = (enable
// ? D : 0) + sum over K = 64 of A[m][k] SFA[m][k/16] B[n][k] SFB[n][k/16], A and B K-major E2M1 (two
// per byte, low nibble first), E4M3 scales, fp32 accumulation. Only the descriptor fields the
// kernel's shapes need are emulated; any other value traps.
__device__ __forceinline__ void tcgen05_mma_nvfp4(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t i_desc, uint32_t sfa_tmem,
                                                  uint32_t sfb_tmem, uint32_t accumulate) {
  const uint32_t m_dim = ((i_desc >> 27) & 3) << 7, n_dim = ((i_desc >> 17) & 63) << 3;
  const uint32_t fixed = i_desc & ~((63u << 17) | (3u << 27));
  if (fixed != ((1u << 7) | (1u << 10)) || m_dim != 128 || n_dim < 32 || n_dim % 32)
    emu::fail("instruction descriptor not emulated (need E2M1 x E2M1, E4M3 scales, K-major, M = 128, N % 32 == 0)", i_desc, n_dim);
  emu::require_lane_zero(d_tmem, "tcgen05.mma D not at lane 0 (lane, column)");
  emu::require_lane_zero(sfa_tmem, "tcgen05.mma scale A not at lane 0 (lane, column)");
  emu::require_lane_zero(sfb_tmem, "tcgen05.mma scale B not at lane 0 (lane, column)");
  const emu::SmemDesc a = emu::decode_smem_desc(a_desc), b = emu::decode_smem_desc(b_desc);
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int m = 0; m < 128; ++m) {
    const uint32_t sf = emu::scale_word(t, sfa_tmem & 0xFFFF, m);
    for (int byte = 0; byte < 32; ++byte) {
      const uint32_t codes = emu::ld_shared_u8(emu::kmajor_address(a, m, byte));
      const float scale = emu::e4m3_value((sf >> (8 * (byte / 8))) & 0xFF);
      t.a_scaled[m][2 * byte] = emu::e2m1_value(codes & 15) * scale;
      t.a_scaled[m][2 * byte + 1] = emu::e2m1_value(codes >> 4) * scale;
    }
  }
  for (int n = 0; n < int(n_dim); ++n) {
    const uint32_t sf = emu::scale_word(t, sfb_tmem & 0xFFFF, n);
    float bv[64];
#pragma unroll
    for (int byte = 0; byte < 32; ++byte) {
      const uint32_t codes = emu::ld_shared_u8(emu::kmajor_address(b, n, byte));
      const float scale = emu::e4m3_value((sf >> (8 * (byte / 8))) & 0xFF);
      bv[2 * byte] = emu::e2m1_value(codes & 15) * scale;
      bv[2 * byte + 1] = emu::e2m1_value(codes >> 4) * scale;
    }
    for (int m = 0; m < 128; ++m) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < 64; ++k) acc = fmaf(t.a_scaled[m][k], bv[k], acc);
      uint32_t& d = emu::cell(t, uint32_t(m), (d_tmem & 0xFFFF) + uint32_t(n));
      d = __float_as_uint(accumulate ? __uint_as_float(d) + acc : acc);
    }
  }
}
__device__ __forceinline__ void tcgen05_commit(uint32_t bar) {
  __threadfence_block();
  mbar_arrive(bar);
}
__device__ __forceinline__ void tcgen05_fence_before_sync() { __threadfence_block(); }
__device__ __forceinline__ void tcgen05_fence_after_sync() { __threadfence_block(); }
// tcgen05.ld .16x256b.x16 (+ wait::ld): warp-wide, lanes L .. L + 15 of the warp's quarter; repeat j,
// register i of thread l: lane L + l / 4 + 8 (i / 2), column 8j + 2 (l % 4) + i % 2.
__device__ __forceinline__ void tmem_load_16x256b_x16(float (&v)[64], uint32_t taddr) {
  emu::require_whole_warp("tcgen05.ld by part of a warp");
  if (__shfl_sync(0xFFFFFFFFu, taddr, 0) != taddr) emu::fail("tcgen05.ld address differs within the warp", taddr, 0);
  const uint32_t lane0 = taddr >> 16, column0 = taddr & 0xFFFF, quarter = (threadIdx.x / 32) % 4;
  if (lane0 < 32 * quarter || lane0 + 16 > 32 * quarter + 32) emu::fail("tcgen05.ld outside the warp's lane quarter (lane, quarter)", lane0, quarter);
  emu::TmemStandIn& t = emu::sm_tmem();
  const int l = emu::lane_id();
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      v[4 * j + i] = __uint_as_float(emu::cell(t, lane0 + uint32_t(l / 4 + 8 * (i / 2)), column0 + uint32_t(8 * j + 2 * (l % 4) + i % 2)));
}
}  // namespace sm100
}  // namespace nvfp4
