// Probe kernels for the tcgen05 emulation: each runs emulated instructions in isolation, on a fresh
// TMEM allocation, and hands back what they produced (TMEM words, registers, barrier state), so
// tests/kernels/test_tcgen05_emulation.py can compare it with the PTX ISA's definition. The pair probes run
// a cluster of 2 CTAs (.cta_group::2); detector_probe breaks one ordering rule and must trap.
// Built with the emulation's header from csrc/ (-DNVFP4_ARCH=100 -DNVFP4_TCGEN05_EMULATION=1,
// sm_90a). Every CTA asks for more than half of an SM's shared memory, so no two share an SM (and
// its TMEM stand-in). Each host function returns a CUDA error code (0: success).
#include "sm100/tcgen05_emulation.cuh"

using namespace nvfp4;
using namespace nvfp4::sm100;  // sm100::mbar_wait_or_trap (the emulated wait) is named in full: nvfp4 has one too

namespace {
constexpr int kProbeSmem = 120 * 1024;

__device__ uint8_t* aligned_smem() {
  extern __shared__ uint8_t probe_smem_raw[];
  return probe_smem_raw + ((1024 - (smem_u32(probe_smem_raw) & 1023)) & 1023);
}
__device__ void copy_to_smem(uint8_t* dst, const uint8_t* src, int bytes) {
  for (int i = int(threadIdx.x); i < bytes; i += int(blockDim.x)) dst[i] = src[i];
  __syncthreads();
}
__device__ uint32_t phase_complete(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(bar), "r"(parity)
               : "memory");
  return done;
}
// The live allocation's words [128 lanes][columns], from `column` on (relative to the allocation).
__device__ void dump_columns(uint32_t* out, uint32_t tmem, int column, int columns) {
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * columns; i += int(blockDim.x))
    out[i] = emu::cell(t, uint32_t(i / columns), tmem + uint32_t(column + i % columns));
}
// TMEM words [128][columns] from `in`, at the allocation's column 0, written directly.
__device__ void fill_columns(const uint32_t* in, uint32_t tmem, int columns) {
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * columns; i += int(blockDim.x))
    emu::cell(t, uint32_t(i / columns), tmem + uint32_t(i % columns)) = in[i];
  if (threadIdx.x == 0) emu::mark_written(t, tmem, uint32_t(columns));
  __syncthreads();
}
__device__ uint32_t init_barrier(uint64_t* bar) {
  const uint32_t b = smem_u32(bar);
  if (threadIdx.x == 0) {
    mbar_init(b, 1);
    fence_barrier_init();
  }
  __syncthreads();
  return b;
}

// out: [0] the address tcgen05.alloc wrote, [1] the stand-in's allocated columns after alloc, [2] after dealloc.
__global__ void alloc_probe(int columns, uint32_t* out) {
  __shared__ uint32_t slot;
  tmem_alloc(smem_u32(&slot), columns);
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(&slot);
  if (threadIdx.x == 0) out[0] = tmem, out[1] = emu::sm_tmem().columns;
  __syncwarp();
  tmem_dealloc(tmem, columns);
  if (threadIdx.x == 0) out[2] = emu::sm_tmem().columns;
}

// A 512-byte scale atom -> tcgen05.cp .32x128b.warpx4 at allocation column `column`, committed and
// waited for; out: [128][4] words.
__global__ void cp_probe(const uint8_t* atom, int column, uint32_t* out) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar;
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, atom, 512);
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  const uint32_t b = init_barrier(&bar), tmem = slot;
  if (threadIdx.x == 0) {
    tcgen05_cp_scales(tmem + uint32_t(column), desc_sf(smem_u32(smem)));
    tcgen05_commit(b);
  }
  sm100::mbar_wait_or_trap(b, 0);
  dump_columns(out, tmem, column, 4);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// TMEM word (lane, column) = lane << 16 | column, then every warp of four loads .32x32b.x32 at its
// lanes 32w from allocation column `column`; out: [warp][thread][32] registers.
__global__ void ld_probe(int column, uint32_t* out) {
  __shared__ uint32_t slot;
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  __syncthreads();
  const uint32_t tmem = slot;
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * 512; i += int(blockDim.x))
    emu::cell(t, uint32_t(i / 512), tmem + uint32_t(i % 512)) = uint32_t(i / 512) << 16 | uint32_t(i % 512);
  if (threadIdx.x == 0) emu::mark_written(t, tmem, 512);
  __syncthreads();
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  float v[32];
  tmem_load_32x32b_x32(v, tmem + (uint32_t(32 * warp) << 16) + uint32_t(column));
  for (int i = 0; i < 32; ++i) out[(warp * 32 + lane) * 32 + i] = __float_as_uint(v[i]);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// One tcgen05.mma kind::mxf4nvf4 (M = 128, N = 128, K = 64) on 128B-swizzled 128 x 128-byte images of
// A and B (the K slice `k_slice` of 32 bytes), with the scales of that slice copied from 512-byte
// atoms at columns 256 (A) and 260 (B); D starts as d_in at columns 0..127, and is dumped once right
// after the issue (before: nothing has waited, so D must still be d_in) and once after the commit's
// barrier completed (out). D [128][128] fp32 each.
__global__ void mma_probe(const uint8_t* a_image, const uint8_t* b_image, const uint8_t* sfa_atom, const uint8_t* sfb_atom, int k_slice,
                          int accumulate, const float* d_in, float* before, float* out) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar;
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, a_image, 16384);
  copy_to_smem(smem + 16384, b_image, 16384);
  copy_to_smem(smem + 32768, sfa_atom, 512);
  copy_to_smem(smem + 32768 + 512, sfb_atom, 512);
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  const uint32_t b = init_barrier(&bar), tmem = slot;
  fill_columns(reinterpret_cast<const uint32_t*>(d_in), tmem, 128);
  if (threadIdx.x == 0) {
    const uint32_t base = smem_u32(smem);
    tcgen05_cp_scales(tmem + 256, desc_sf(base + 32768));
    tcgen05_cp_scales(tmem + 260, desc_sf(base + 32768 + 512));
    tcgen05_mma_nvfp4(tmem, desc_ab(base + uint32_t(32 * k_slice)), desc_ab(base + 16384 + uint32_t(32 * k_slice)), instr_desc(128),
                      tmem + 256, tmem + 260, uint32_t(accumulate));
    tcgen05_commit(b);
  }
  __syncthreads();
  dump_columns(reinterpret_cast<uint32_t*>(before), tmem, 0, 128);
  __syncthreads();
  sm100::mbar_wait_or_trap(b, 0);
  dump_columns(reinterpret_cast<uint32_t*>(out), tmem, 0, 128);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// out: barrier phase 0 complete [0] before tcgen05.commit, [1] right after it (nothing has waited),
// [2] after the warp's wait (a barrier of count 1, an empty queue before the commit).
__global__ void commit_probe(int* out) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar;
  tmem_alloc(smem_u32(&slot), 32);
  const uint32_t b = init_barrier(&bar);
  if (threadIdx.x == 0) {
    out[0] = int(phase_complete(b, 0));
    tcgen05_commit(b);
    out[1] = int(phase_complete(b, 0));
  }
  __syncwarp();
  sm100::mbar_wait_or_trap(b, 0);
  if (threadIdx.x == 0) out[2] = int(phase_complete(b, 0));
  __syncwarp();
  tmem_dealloc(slot, 32);
}

// Breaks one rule, which the emulation must report and trap on. An MMA (zero operands and scales) is
// issued to columns 0..127, then:
//   0: tcgen05.ld of those columns without waiting for the commit;
//   1: (no MMA) tcgen05.ld of columns nothing wrote;
//   2: a store into the A operand's shared memory, then the wait (the MMA runs and finds it changed);
//   3: a bulk copy into the A operand's shared memory;
//   4: tcgen05.dealloc without a commit or a wait;
//   5: (the MMA accumulating into D, which nothing wrote) the wait.
__global__ void detector_probe(int rule, const uint8_t* global_bytes) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar, copy_bar;
  uint8_t* smem = aligned_smem();
  for (int i = int(threadIdx.x); i < 32768 + 1024; i += int(blockDim.x)) smem[i] = 0;
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  const uint32_t b = init_barrier(&bar), copy_b = init_barrier(&copy_bar), tmem = slot, base = smem_u32(smem);
  if (threadIdx.x == 0 && rule != 1) {
    tcgen05_cp_scales(tmem + 256, desc_sf(base + 32768));
    tcgen05_cp_scales(tmem + 260, desc_sf(base + 32768 + 512));
    tcgen05_mma_nvfp4(tmem, desc_ab(base), desc_ab(base + 16384), instr_desc(128), tmem + 256, tmem + 260, uint32_t(rule == 5));
    if (rule != 4) tcgen05_commit(b);
    if (rule == 2) smem[0] = 0x77;
    if (rule == 3) {
      bulk_load_cta(base + 1024, global_bytes, 1024, copy_b, kEvictFirst);
      mbar_arrive_expect_tx(copy_b, 1024);
    }
  }
  __syncthreads();
  if (rule <= 1) {
    float v[32];
    tmem_load_32x32b_x32(v, tmem + (uint32_t(32 * (threadIdx.x / 32)) << 16));
  }
  if (rule == 2 || rule == 3 || rule == 5) sm100::mbar_wait_or_trap(b, 0);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// ----------------------------------------------------------------------------- CTA pairs (a cluster of 2)
// out: [rank] the address tcgen05.alloc.cta_group::2 wrote in each CTA; columns[rank]: what each asks for.
__global__ void pair_alloc_probe(const int* columns, uint32_t* out) {
  __shared__ uint32_t slot;
  const uint32_t rank = cluster_ctarank();
  tmem_alloc<2>(smem_u32(&slot), columns[rank]);
  cluster_sync();
  if (threadIdx.x == 0) out[rank] = slot;
  __syncwarp();
  tmem_dealloc<2>(slot, columns[rank]);
  cluster_sync();
}

// Each CTA v holds atom v; the even CTA issues one tcgen05.cp.cta_group::2 .32x128b.warpx4 to column
// `column` and a multicast commit to both; out: [v][128][4] words of CTA v's TMEM.
__global__ void pair_cp_probe(const uint8_t* atoms, int column, uint32_t* out) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar;
  const uint32_t rank = cluster_ctarank();
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, atoms + 512 * rank, 512);
  if (threadIdx.x < 32) tmem_alloc<2>(smem_u32(&slot), 512);
  const uint32_t b = init_barrier(&bar), tmem = slot;
  cluster_sync();
  if (rank == 0 && threadIdx.x == 0) {
    tcgen05_cp_scales<2>(tmem + uint32_t(column), desc_sf(smem_u32(smem)));
    tcgen05_commit_multicast<2>(b, 3);
  }
  sm100::mbar_wait_or_trap(b, 0);
  dump_columns(out + rank * 512, tmem, column, 4);
  cluster_sync();
  if (threadIdx.x < 32) tmem_dealloc<2>(tmem, 512);
  cluster_sync();
}

// One tcgen05.mma.cta_group::2 kind::mxf4nvf4 (M = 256, N = 128, K = 64) over the pair, issued by the
// even CTA: CTA v holds A rows 128v.. (a_images[v], 128B-swizzled 128 x 128 bytes), B rows 64v..
// (b_images[v], 64 x 128 bytes), the scale atoms of its A rows (sfa_atoms[v]) and of all of B
// (sfb_atom), D starting as d_in[v]. With `swap` each CTA loads the other's halves instead (a planted
// bug). The scales are copied with tcgen05.cp.cta_group::2, the MMA committed with a multicast to both
// CTAs. out: D [v][128][128]; phases [v][2]: barrier phase complete before and after the wait.
__global__ void pair_mma_probe(const uint8_t* a_images, const uint8_t* b_images, const uint8_t* sfa_atoms, const uint8_t* sfb_atom,
                               int k_slice, int accumulate, const float* d_in, int swap, float* out, int* phases) {
  __shared__ uint32_t slot;
  __shared__ uint64_t bar;
  const uint32_t rank = cluster_ctarank(), half = swap ? rank ^ 1u : rank;
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, a_images + 16384 * half, 16384);
  copy_to_smem(smem + 16384, b_images + 8192 * half, 8192);
  copy_to_smem(smem + 32768, sfa_atoms + 512 * rank, 512);
  copy_to_smem(smem + 32768 + 512, sfb_atom, 512);
  if (threadIdx.x < 32) tmem_alloc<2>(smem_u32(&slot), 512);
  const uint32_t b = init_barrier(&bar), tmem = slot;
  fill_columns(reinterpret_cast<const uint32_t*>(d_in) + 128 * 128 * rank, tmem, 128);
  cluster_sync();
  if (rank == 0 && threadIdx.x == 0) {
    const uint32_t base = smem_u32(smem);
    tcgen05_cp_scales<2>(tmem + 256, desc_sf(base + 32768));
    tcgen05_cp_scales<2>(tmem + 260, desc_sf(base + 32768 + 512));
    tcgen05_mma_nvfp4<2>(tmem, desc_ab(base + uint32_t(32 * k_slice)), desc_ab(base + 16384 + uint32_t(32 * k_slice)), instr_desc(128, 256),
                         tmem + 256, tmem + 260, uint32_t(accumulate));
    tcgen05_commit_multicast<2>(b, 3);
  }
  cluster_sync();
  if (threadIdx.x == 0) phases[2 * rank] = int(phase_complete(b, 0));
  cluster_sync();
  sm100::mbar_wait_or_trap(b, 0);
  if (threadIdx.x == 0) phases[2 * rank + 1] = int(phase_complete(b, 0));
  dump_columns(reinterpret_cast<uint32_t*>(out) + 128 * 128 * rank, tmem, 0, 128);
  cluster_sync();
  if (threadIdx.x < 32) tmem_dealloc<2>(tmem, 512);
  cluster_sync();
}

template <typename Kernel, typename... Args>
int run(Kernel kernel, int ctas, int threads, Args... args) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kProbeSmem);
  if (e == cudaSuccess) {
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute cluster = {};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = unsigned(ctas), cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.gridDim = dim3(unsigned(ctas)), config.blockDim = dim3(unsigned(threads)), config.dynamicSmemBytes = kProbeSmem;
    config.attrs = &cluster, config.numAttrs = 1;
    e = cudaLaunchKernelEx(&config, kernel, args...);
  }
  return int(e == cudaSuccess ? cudaDeviceSynchronize() : e);
}
}  // namespace

extern "C" {
int probe_configure(uint64_t seed, uint32_t max_delay_ns) { return int(configure_tcgen05_emulation(seed, max_delay_ns)); }
int probe_alloc(int columns, void* out) { return run(alloc_probe, 1, 32, columns, static_cast<uint32_t*>(out)); }
int probe_cp(const void* atom, int column, void* out) {
  return run(cp_probe, 1, 128, static_cast<const uint8_t*>(atom), column, static_cast<uint32_t*>(out));
}
int probe_ld(int column, void* out) { return run(ld_probe, 1, 128, column, static_cast<uint32_t*>(out)); }
int probe_mma(const void* a, const void* b, const void* sfa, const void* sfb, int k_slice, int accumulate, const void* d_in, void* before,
              void* out) {
  return run(mma_probe, 1, 128, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<const uint8_t*>(sfa),
             static_cast<const uint8_t*>(sfb), k_slice, accumulate, static_cast<const float*>(d_in), static_cast<float*>(before),
             static_cast<float*>(out));
}
int probe_commit(void* out) { return run(commit_probe, 1, 32, static_cast<int*>(out)); }
int probe_detector(int rule, const void* global_bytes) {
  return run(detector_probe, 1, 128, rule, static_cast<const uint8_t*>(global_bytes));
}
int probe_pair_alloc(const void* columns, void* out) {
  return run(pair_alloc_probe, 2, 32, static_cast<const int*>(columns), static_cast<uint32_t*>(out));
}
int probe_pair_cp(const void* atoms, int column, void* out) {
  return run(pair_cp_probe, 2, 128, static_cast<const uint8_t*>(atoms), column, static_cast<uint32_t*>(out));
}
int probe_pair_mma(const void* a, const void* b, const void* sfa, const void* sfb, int k_slice, int accumulate, const void* d_in, int swap,
                   void* out, void* phases) {
  return run(pair_mma_probe, 2, 128, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<const uint8_t*>(sfa),
             static_cast<const uint8_t*>(sfb), k_slice, accumulate, static_cast<const float*>(d_in), swap, static_cast<float*>(out),
             static_cast<int*>(phases));
}
}
