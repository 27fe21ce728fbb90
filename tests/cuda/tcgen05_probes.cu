// Probe kernels for the tcgen05 emulation: each runs one emulated instruction in isolation, on a
// fresh TMEM allocation, and hands back what the instruction produced (TMEM words, registers,
// barrier state), so tests/test_tcgen05_emulation.py can compare it with the PTX ISA's definition.
// Built with the emulation's header from csrc/ (-DNVFP4_ARCH=100 -DNVFP4_TCGEN05_EMULATION=1,
// sm_90a). Every probe is one CTA; its host function returns a CUDA error code (0: success).
#include "sm100/tcgen05_emulation.cuh"

using namespace nvfp4;
using namespace nvfp4::sm100;

namespace {
constexpr int kProbeSmem = 3 * 16384 + 1024;

__device__ uint8_t* aligned_smem() {
  extern __shared__ uint8_t probe_smem_raw[];
  return probe_smem_raw + ((1024 - (smem_u32(probe_smem_raw) & 1023)) & 1023);
}
__device__ void copy_to_smem(uint8_t* dst, const uint8_t* src, int bytes) {
  for (int i = int(threadIdx.x); i < bytes; i += int(blockDim.x)) dst[i] = src[i];
  __syncthreads();
}
// The live allocation's words [128 lanes][columns], from `column` on (relative to the allocation).
__device__ void dump_columns(uint32_t* out, uint32_t tmem, int column, int columns) {
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * columns; i += int(blockDim.x))
    out[i] = emu::cell(t, uint32_t(i / columns), tmem + uint32_t(column + i % columns));
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

// A 512-byte scale atom -> tcgen05.cp .32x128b.warpx4 at allocation column `column`; out: [128][4] words.
__global__ void cp_probe(const uint8_t* atom, int column, uint32_t* out) {
  __shared__ uint32_t slot;
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, atom, 512);
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  __syncthreads();
  const uint32_t tmem = slot;
  if (threadIdx.x == 0) tcgen05_cp_scales(tmem + uint32_t(column), desc_sf(smem_u32(smem)));
  __syncthreads();
  dump_columns(out, tmem, column, 4);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// TMEM word (lane, column) = lane << 16 | column, then every warp of four loads .16x256b.x16 at its
// lanes 32w + 16h (h = 0, 1) from allocation column `column`; out: [warp][h][thread][64] registers.
__global__ void ld_probe(int column, uint32_t* out) {
  __shared__ uint32_t slot;
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  __syncthreads();
  const uint32_t tmem = slot;
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * 512; i += int(blockDim.x)) emu::cell(t, uint32_t(i / 512), tmem + uint32_t(i % 512)) = uint32_t(i / 512) << 16 | uint32_t(i % 512);
  __syncthreads();
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  for (int h = 0; h < 2; ++h) {
    float v[64];
    tmem_load_16x256b_x16(v, tmem + (uint32_t(32 * warp + 16 * h) << 16) + uint32_t(column));
    for (int i = 0; i < 64; ++i) out[((warp * 2 + h) * 32 + lane) * 64 + i] = __float_as_uint(v[i]);
  }
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// One tcgen05.mma kind::mxf4nvf4 (M = 128, N = 128, K = 64) on 128B-swizzled 128 x 128-byte images of
// A and B (the K slice `k_slice` of 32 bytes), with the scales of that slice copied from 512-byte
// atoms at columns 256 (A) and 260 (B); D starts as d_in at columns 0..127. out: D [128][128] fp32.
__global__ void mma_probe(const uint8_t* a_image, const uint8_t* b_image, const uint8_t* sfa_atom, const uint8_t* sfb_atom, int k_slice,
                          int accumulate, const float* d_in, float* out) {
  __shared__ uint32_t slot;
  uint8_t* smem = aligned_smem();
  copy_to_smem(smem, a_image, 16384);
  copy_to_smem(smem + 16384, b_image, 16384);
  copy_to_smem(smem + 32768, sfa_atom, 512);
  copy_to_smem(smem + 32768 + 512, sfb_atom, 512);
  if (threadIdx.x < 32) tmem_alloc(smem_u32(&slot), 512);
  __syncthreads();
  const uint32_t tmem = slot;
  emu::TmemStandIn& t = emu::sm_tmem();
  for (int i = int(threadIdx.x); i < 128 * 128; i += int(blockDim.x)) emu::cell(t, uint32_t(i / 128), tmem + uint32_t(i % 128)) = __float_as_uint(d_in[i]);
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t base = smem_u32(smem);
    tcgen05_cp_scales(tmem + 256, desc_sf(base + 32768));
    tcgen05_cp_scales(tmem + 260, desc_sf(base + 32768 + 512));
    tcgen05_mma_nvfp4(tmem, desc_ab(base + uint32_t(32 * k_slice)), desc_ab(base + 16384 + uint32_t(32 * k_slice)), kInstrDesc, tmem + 256,
                      tmem + 260, uint32_t(accumulate));
  }
  __syncthreads();
  dump_columns(reinterpret_cast<uint32_t*>(out), tmem, 0, 128);
  __syncthreads();
  if (threadIdx.x < 32) tmem_dealloc(tmem, 512);
}

// out: [0] barrier phase 0 complete before tcgen05.commit, [1] after it (one thread, a barrier of count 1).
__global__ void commit_probe(int* out) {
  __shared__ uint64_t bar;
  if (threadIdx.x != 0) return;
  const uint32_t b = smem_u32(&bar);
  mbar_init(b, 1);
  fence_barrier_init();
  for (int i = 0; i < 2; ++i) {
    if (i == 1) tcgen05_commit(b);
    uint32_t done;
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(b) : "memory");
    out[i] = int(done);
  }
}

template <typename Kernel, typename... Args>
int run(Kernel kernel, int threads, Args... args) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kProbeSmem);
  if (e == cudaSuccess) {
    kernel<<<1, threads, kProbeSmem>>>(args...);
    e = cudaGetLastError();
  }
  return int(e == cudaSuccess ? cudaDeviceSynchronize() : e);
}
}  // namespace

extern "C" {
int probe_alloc(int columns, void* out) { return run(alloc_probe, 32, columns, static_cast<uint32_t*>(out)); }
int probe_cp(const void* atom, int column, void* out) { return run(cp_probe, 128, static_cast<const uint8_t*>(atom), column, static_cast<uint32_t*>(out)); }
int probe_ld(int column, void* out) { return run(ld_probe, 128, column, static_cast<uint32_t*>(out)); }
int probe_mma(const void* a, const void* b, const void* sfa, const void* sfb, int k_slice, int accumulate, const void* d_in, void* out) {
  return run(mma_probe, 128, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<const uint8_t*>(sfa),
             static_cast<const uint8_t*>(sfb), k_slice, accumulate, static_cast<const float*>(d_in), static_cast<float*>(out));
}
int probe_commit(void* out) { return run(commit_probe, 32, static_cast<int*>(out)); }
}
