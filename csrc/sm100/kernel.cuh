#pragma once
#include "config.cuh"
#include "../ptx.cuh"
#if NVFP4_TCGEN05_EMULATION
#include "tcgen05_emulation.cuh"
#else
#include "tcgen05.cuh"
#endif

namespace nvfp4 {
namespace sm100 {
// Eight fp32 values as eight halves, one 16-byte store (evict-first: C is not read again).
__device__ __forceinline__ void st_global_8_halves(__half* p, const float* v) {
  __half2 h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  st_global_v4_evict_first(p, *reinterpret_cast<const uint4*>(h));
}

struct Barriers {
  uint32_t base;
  __device__ uint32_t tma(int s) const { return base + 8 * s; }                // stage loaded
  __device__ uint32_t mma(int s) const { return base + 8 * (kStages + s); }    // stage consumed by the MMAs
  __device__ uint32_t mainloop(int b) const { return base + 8 * (2 * kStages + b); }      // accumulator b complete
  __device__ uint32_t epilogue(int b) const { return base + 8 * (2 * kStages + 2 + b); }  // accumulator b read out
};

// Where tile i of this CTA lives: group, first A row, first B row.
struct TileCoords {
  const GroupArgs* g;
  int group, off_m, off_n;
};
__device__ __forceinline__ TileCoords tile_coords(const LaunchArgs& args, int i) {
  const Tile t = unpack_tile(args.tiles[i]);
  return TileCoords{&args.groups[t.group], t.group, t.m_chunk * kBlockM, t.n_block * kBlockN};
}

__device__ __forceinline__ void tma_warp(const LaunchArgs& args, uint8_t* smem, Barriers bars, int first, int last) {
  int stage = 0, filled = 0;
  uint32_t mma_phase = 1;  // a fresh barrier's "previous phase" reads as complete
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords(args, i);
    const int k = tc.g->k;
    const uint64_t cache_a = kEvictFirst, cache_b = k > 4096 ? kEvictFirst : kEvictLast;
    for (int iter_k = 0; iter_k < k / kBlockK; ++iter_k) {
      if (filled < kStages) ++filled;  // the first fill: every stage is free, nothing to wait for
      else mbar_wait_or_trap(bars.mma(stage), mma_phase);
      const uint32_t a_smem = smem_u32(smem + stage * kStageBytes), b_smem = a_smem + kABytes;
      const uint32_t sfa_smem = b_smem + kBBytes, sfb_smem = sfa_smem + kSfBytes;
      const int off_k = iter_k * kBlockK;
      tma_load_3d(a_smem, &args.tmap_a[tc.group], 0, tc.off_m, off_k / 256, bars.tma(stage), cache_a);
      tma_load_3d(b_smem, &args.tmap_b[tc.group], 0, tc.off_n, off_k / 256, bars.tma(stage), cache_b);
      // The four 64-K atoms of this K block are contiguous: one 2048-byte copy per operand.
      bulk_load_cta(sfa_smem, tc.g->sfa + scale_atom_offset(tc.off_m / 128, off_k / 64, k), kSfBytes, bars.tma(stage), cache_a);
      bulk_load_cta(sfb_smem, tc.g->sfb + scale_atom_offset(tc.off_n / 128, off_k / 64, k), kSfBytes, bars.tma(stage), cache_b);
      mbar_arrive_expect_tx(bars.tma(stage), kStageBytes);
      stage = (stage + 1) % kStages;
      if (stage == 0) mma_phase ^= 1;
    }
  }
}

template <bool kPersistent>
__device__ __forceinline__ void mma_warp(const LaunchArgs& args, uint8_t* smem, Barriers bars, uint32_t tmem, int first, int last) {
  using Tmem = TmemPlan<kPersistent>;
  int stage = 0, buffer = 0;
  uint32_t tma_phase = 0, epilogue_phase = 1;
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords(args, i);
    const int scale_a_offset = ((tc.off_m / kBlockM) % (128 / kBlockM)) * (kBlockM / 32);
    const int scale_b_offset = ((tc.off_n / kBlockN) % (128 / kBlockN)) * (kBlockN / 32);
    mbar_wait_or_trap(bars.epilogue(buffer), epilogue_phase);
    tcgen05_fence_after_sync();
    const uint32_t d_tmem = tmem + buffer * kBlockN;
    for (int iter_k = 0; iter_k < tc.g->k / kBlockK; ++iter_k) {
      mbar_wait_or_trap(bars.tma(stage), tma_phase);
      tcgen05_fence_after_sync();
      const uint32_t a_smem = smem_u32(smem + stage * kStageBytes), b_smem = a_smem + kABytes;
      const uint32_t sfa_smem = b_smem + kBBytes, sfb_smem = sfa_smem + kSfBytes;
#pragma unroll
      for (int k = 0; k < kBlockK / kMmaK; ++k) {
        tcgen05_cp_scales(tmem + Tmem::kSfa + k * 4, desc_sf(sfa_smem + k * 512));
        tcgen05_cp_scales(tmem + Tmem::kSfb + k * 4, desc_sf(sfb_smem + k * 512));
      }
#pragma unroll
      for (int k1 = 0; k1 < kBlockK / 256; ++k1)
#pragma unroll
        for (int k2 = 0; k2 < 256 / kMmaK; ++k2) {
          const int k_sf = k1 * 4 + k2;
          tcgen05_mma_nvfp4(d_tmem, desc_ab(a_smem + k1 * kBlockM * 128 + k2 * 32), desc_ab(b_smem + k1 * kBlockN * 128 + k2 * 32),
                            kInstrDesc, tmem + Tmem::kSfa + k_sf * 4 + scale_a_offset, tmem + Tmem::kSfb + k_sf * 4 + scale_b_offset,
                            (k1 == 0 && k2 == 0) ? uint32_t(iter_k) : 1u);
        }
      tcgen05_commit(bars.mma(stage));  // frees the stage once these MMAs have read it
      stage = (stage + 1) % kStages;
      if (stage == 0) tma_phase ^= 1;
    }
    tcgen05_commit(bars.mainloop(buffer));  // accumulator complete
    buffer = (buffer + 1) % Tmem::kBuffers;
    if (buffer == 0) epilogue_phase ^= 1;
  }
}

// Warps 0-3: TMEM lane 32w + l = row off_m + 32w + l of C, which thread l stores 32 bytes at a time
// (two 16-byte stores; N is a multiple of 8, so a row's 8-column pieces are whole and aligned).
template <bool kPersistent>
__device__ __forceinline__ void epilogue_warps(const LaunchArgs& args, Barriers bars, uint32_t tmem, int first, int last) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int buffer = 0;
  uint32_t mainloop_phase = 0;
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords(args, i);
    const int m = tc.g->m, n = tc.g->n, row = tc.off_m + warp * 32 + lane;
    mbar_wait_or_trap(bars.mainloop(buffer), mainloop_phase);
    __syncwarp();  // the wait's threads may leave its loop apart; tcgen05.ld is .sync.aligned
    tcgen05_fence_after_sync();
#pragma unroll 1
    for (int chunk = 0; chunk < kBlockN / 32; ++chunk) {
      float v[32];
      tmem_load_32x32b_x32(v, tmem + (uint32_t(warp * 32) << 16) + buffer * kBlockN + chunk * 32);
      const int col = tc.off_n + chunk * 32;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (row < m && col + 8 * j < n) st_global_8_halves(tc.g->c + int64_t(row) * n + col + 8 * j, v + 8 * j);
    }
    // Order this warp's TMEM reads before the MMA warp reuses the buffer.
    tcgen05_fence_before_sync();
    if (elect_one()) mbar_arrive(bars.epilogue(buffer));
    buffer = (buffer + 1) % TmemPlan<kPersistent>::kBuffers;
    if (buffer == 0) mainloop_phase ^= 1;
  }
}

// One kernel, two instantiations: persistent (TMEM double buffer, for more tiles than SMs) and
// single-tile (one buffer). Both wait on the mainloop barrier, which tcgen05.commit arrives on once
// the MMAs are complete, before the epilogue reads TMEM: a plain __syncthreads would not order them.
template <bool kPersistent>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ LaunchArgs args) {
  using Tmem = TmemPlan<kPersistent>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const Barriers bars{smem_u32(smem + kSmemBarriers)};
  const uint32_t tmem_slot = smem_u32(smem + kSmemTmemSlot);
  const int warp = threadIdx.x / 32;
  const int first = args.cta_first_tile[blockIdx.x], last = args.cta_first_tile[blockIdx.x + 1];
  if (warp == 0 && elect_one()) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bars.tma(s), 1);
      mbar_init(bars.mma(s), 1);
    }
    for (int b = 0; b < 2; ++b) {
      mbar_init(bars.mainloop(b), 1);
      mbar_init(bars.epilogue(b), kBlockM / 32);  // one elected arrive per epilogue warp
    }
    fence_barrier_init();
  } else if (warp == 1) {
    tmem_alloc(tmem_slot, Tmem::kAllocated);
  }
  tcgen05_fence_before_sync();
  __syncthreads();
  tcgen05_fence_after_sync();
  // The allocation need not start at column 0: read the address tcgen05.alloc wrote.
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem + kSmemTmemSlot);
  if (warp == kTmaWarp) {
    if (elect_one()) tma_warp(args, smem, bars, first, last);
  } else if (warp == kMmaWarp) {
    if (elect_one()) mma_warp<kPersistent>(args, smem, bars, tmem, first, last);
  } else {
    epilogue_warps<kPersistent>(args, bars, tmem, first, last);
  }
  tcgen05_fence_before_sync();
  __syncthreads();
  tcgen05_fence_after_sync();
  if (warp == 1) tmem_dealloc(tmem, Tmem::kAllocated);  // .sync.aligned: the whole allocating warp, not one lane
}
}  // namespace sm100

struct Arch {
  static constexpr int kTileM = sm100::kBlockM, kTileN = sm100::kBlockN, kThreads = sm100::kThreads, kSmemBytes = sm100::kSmemBytes;
  static constexpr int kKMultiple = sm100::kBlockK;
  static constexpr bool kPrepass = false;  // the MMA reads FP4 A and its scales directly
  static const void* prepass_kernel() { return nullptr; }
  static constexpr int kPrepassThreads = 0;
  static constexpr bool kNarrowTiles = false;  // every tile has 128 rows
  // A TMA load of A brings the full 128-row box, whose 128B-swizzled tile the MMA reads whole.
  static int a_box_rows(int /*m*/, int chunk_rows) { return chunk_rows; }
  // Relative cost of a tile for load balancing: its K, since every tile is one full 128 x 128 MMA
  // tile whatever its rows (a model, not measured: nothing here runs on a B200).
  static int64_t tile_cost(int /*m_rows*/, int k) { return int64_t(k); }
  // TMEM columns of the persistent or single-tile kernel: buffers, SFA column, SFB column, columns
  // used, columns allocated.
  template <bool kPersistent>
  static void tmem_columns(int* out) {
    using T = sm100::TmemPlan<kPersistent>;
    const int values[5] = {T::kBuffers, T::kSfa, T::kSfb, T::kUsed, T::kAllocated};
    std::memcpy(out, values, sizeof values);
  }
  static bool tmem_plan(bool persistent, int* out) {
    persistent ? tmem_columns<true>(out) : tmem_columns<false>(out);
    return true;
  }
  static CUresult encode_dequantized_a(EncodeTiledFn, CUtensorMap*, const void*, int, int, int) { return CUDA_ERROR_NOT_SUPPORTED; }
  static const void* kernel(bool persistent, int /*fixed_n8*/) {
    return persistent ? reinterpret_cast<const void*>(&sm100::grouped_gemm<true>) : reinterpret_cast<const void*>(&sm100::grouped_gemm<false>);
  }
  static int fixed_n8_at_least(int /*n8*/) { return 0; }  // one tile shape: no such kernels
  // Packed FP4 as a 3-D tensor of 4-bit elements {256, rows, K/256}, 128B swizzle,
  // 256B L2 promotion; a box is 128 rows x 256 K (one 128-byte swizzled row each). byte_elements
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
    return encode(map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};
}  // namespace nvfp4
