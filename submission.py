"""NVFP4 block-scaled grouped GEMM: C_i = (A_i * SFA_i) @ (B_i * SFB_i)^T in fp16, for every group i.

One self-contained file (the leaderboard's unit). `custom_kernel` dispatches on the device:
- compute capability 10.x (B200 class): the tcgen05 block-scaled FP4 kernel (sm_100a; never run
  on a B200 here, its data path run on an H200 with tcgen05 emulated: NVFP4_EMULATE_TCGEN05=1);
- compute capability 9.0 (H100, H200): a prepass dequantizing A, then a wgmma GEMM that decodes
  FP4 B into its register fragments (sm_90a);
- anything else, the CPU included: a portable PyTorch path (exact decode, fp32 accumulation).
The CUDA kernels are JIT-built with `load_inline` (`python3 submission.py`, the leaderboard's
compile step, builds them for the local GPU); each problem signature gets a launch plan, and
from its second call on, a CUDA graph replayed through ctypes. All GPU work goes to the default
queue (CUDA's handle 0), the one the leaderboard's harness times. A kernel never run on real
hardware (sm_100a) is self-checked on its first use and replaced by a correct path if it fails.
"""
import ctypes
import hashlib
import os
import sys
import time
import warnings
import weakref
from functools import lru_cache, reduce
from itertools import chain, compress, repeat
from operator import attrgetter, or_

import torch

from task import input_t, output_t


# ----------------------------------------------------------------------------- validation
_FP4 = (torch.float4_e2m1fn_x2, torch.uint8)
_F16 = (torch.float16,)
_E4M3 = (torch.float8_e4m3fn,)


def _fail(group: int, what: str):
    raise ValueError(f"nvfp4 grouped gemm, group {group}: {what}")


def _group_shapes(m: int, n: int, k: int) -> tuple:
    """The shapes of a group's a, b, c, sfa_reordered and sfb_reordered (docs/PROBLEM.md section 2)."""
    return ((m, k // 2, 1), (n, k // 2, 1), (m, n, 1), (32, 4, -(-m // 128), 4, k // 64, 1), (32, 4, -(-n // 128), 4, k // 64, 1))


def _packed_scale_strides(k: int) -> tuple:
    """The first five strides of a reordered scale tensor in the layout the kernels read."""
    return (16, 4, (k // 64) * 512, 1, 512)


_TENSOR_ROLES = (("a", _FP4), ("b", _FP4), ("c", _F16), ("sfa_reordered", _E4M3), ("sfb_reordered", _E4M3))


def validate(data: input_t) -> None:
    """Raise ValueError naming the group and the problem for any input the kernels cannot take.

    Runs on every call that is not a graph-cache hit, so the common case does no string work:
    a message is only formatted for a check that failed.
    """
    if not (isinstance(data, (tuple, list)) and len(data) == 4):
        raise ValueError("input must be (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes)")
    abc, _, sf_reordered, sizes = data
    if not (len(abc) == len(sf_reordered) == len(sizes)) or not sizes:
        raise ValueError(f"need one entry per group: {len(abc)} abc, {len(sf_reordered)} scale pairs, {len(sizes)} sizes")
    device = abc[0][0].get_device()  # an index (-1: the CPU): cheaper to compare than torch.device
    for g, ((a, b, c), (sfa, sfb), size) in enumerate(zip(abc, sf_reordered, sizes)):
        if len(size) != 4:
            _fail(g, f"problem size must be (M, N, K, L), got {size}")
        m, n, k, l = size
        if l != 1:
            _fail(g, f"L must be 1, got {l}")
        if not (k > 0 and k % 64 == 0):
            _fail(g, f"K must be a positive multiple of 64, got {k}")
        for (name, dtypes), t, shape in zip(_TENSOR_ROLES, (a, b, c, sfa, sfb), _group_shapes(m, n, k)):
            if not isinstance(t, torch.Tensor):
                _fail(g, f"{name} is not a tensor")
            if t.dtype not in dtypes:
                _fail(g, f"{name} has dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
            if t.shape != shape:
                _fail(g, f"{name} has shape {tuple(t.shape)}, expected {shape}")
            if t.get_device() != device:
                _fail(g, f"{name} is on {t.device}, group 0's a on {abc[0][0].device}")


# ----------------------------------------------------------------------------- portable path
def _decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (sign, 2 exponent bits, 1 mantissa bit) -> float32, from the format's definition."""
    codes = codes.to(torch.int32)
    exponent, mantissa = (codes >> 1) & 3, (codes & 1).to(torch.float32)
    magnitude = torch.where(exponent == 0, 0.5 * mantissa, torch.exp2(exponent - 1.0) * (1.0 + 0.5 * mantissa))
    return torch.where(codes & 8 != 0, -magnitude, magnitude)


def _plain_scales(reordered: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """Reordered [32, 4, rest, 4, rest_k, 1] scales -> plain [rows, K // 16] float32."""
    plain = reordered[..., 0].permute(2, 1, 0, 4, 3).reshape(reordered.shape[2] * 128, -1)
    return plain[:rows, : k // 16].to(torch.float32)


def _dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    codes = packed[..., 0].view(torch.uint8)
    values = torch.stack((_decode_e2m1(codes & 0xF), _decode_e2m1(codes >> 4)), dim=-1).flatten(1)
    return values * scales.repeat_interleave(16, dim=1)


def portable_kernel(data: input_t) -> output_t:
    """Exact decode, fp32 accumulation; reads the reordered scales, as the GPU kernels do."""
    abc, _, sf_reordered, sizes = data
    for (a, b, c), (sfa, sfb), (m, n, k, _) in zip(abc, sf_reordered, sizes):
        if m and n:
            lhs = _dequantize(a, _plain_scales(sfa, m, k))
            rhs = _dequantize(b, _plain_scales(sfb, n, k))
            c[..., 0] = (lhs @ rhs.T).to(torch.float16)
    return [c for _, _, c in abc]


# ----------------------------------------------------------------------------- FP4 torch._scaled_mm path
def blocked_scales(reordered: torch.Tensor) -> torch.Tensor:
    """A reordered [32, 4, rest, 4, rest_k, 1] scale view as the flat blocked tensor `_scaled_mm`
    takes: its memory order [L][rest][rest_k][32][4][4] (docs/PROBLEM.md section 3); no copy when packed."""
    return reordered.permute(5, 2, 4, 0, 1, 3).reshape(-1)


def scaled_mm_kernel(data: input_t) -> output_t:
    """Per-group FP4 block-scaled `torch._scaled_mm` (sm_100-class GPUs only), as the reference
    computes there: the fallback when the sm_100a kernel fails its first-use self-check."""
    abc, _, sf_reordered, sizes = data
    for (a, b, c), (sfa, sfb), (m, n, _, _) in zip(abc, sf_reordered, sizes):
        if m and n:
            lhs, rhs = a[..., 0].view(torch.float4_e2m1fn_x2), b[..., 0].view(torch.float4_e2m1fn_x2)
            c[..., 0] = torch._scaled_mm(lhs, rhs.T, blocked_scales(sfa), blocked_scales(sfb), out_dtype=torch.float16)
    return [c for _, _, c in abc]


# ----------------------------------------------------------------------------- CUDA source
# One translation unit, csrc/nvfp4.cu and the files it includes, built once per target
# architecture (NVFP4_ARCH = 90 or 100) with no torch header in it: its host API is extern "C" and
# is called through ctypes. The region below is written by tools/bundle.py from csrc/.
# ----- BEGIN BUNDLE: written by tools/bundle.py from csrc/ (edit the sources there, then run `make bundle`)
CUDA_SOURCE = r"""
#line 1 "csrc/nvfp4.cu"
// The translation unit: the kernel of one architecture (NVFP4_ARCH = 90 or 100), the host side
// and the extern "C" API that submission.py calls through ctypes (no torch header).
#line 1 "csrc/prelude.cuh"

// What every file of the translation unit needs: the CUDA and C++ headers, and the build's
// configuration (NVFP4_ARCH, NVFP4_TCGEN05_EMULATION), checked once.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <utility>
#include <vector>

#ifndef NVFP4_ARCH
#error "build with -DNVFP4_ARCH=90 or -DNVFP4_ARCH=100"
#endif
#ifndef NVFP4_TCGEN05_EMULATION
#define NVFP4_TCGEN05_EMULATION 0  // 1 (with NVFP4_ARCH=100, built for sm_90a): the test build of the sm_100a kernel
#endif
#if NVFP4_TCGEN05_EMULATION && NVFP4_ARCH != 100
#error "NVFP4_TCGEN05_EMULATION emulates the sm_100a kernel: build it with -DNVFP4_ARCH=100"
#endif
#line 4 "csrc/nvfp4.cu"
#line 1 "csrc/launch_params.cuh"



namespace nvfp4 {
// ============================================================================ launch parameters
// Everything a launch needs travels in its kernel parameters (up to 32764 bytes since CUDA 12.1),
// so each CUDA graph owns a private copy: no device buffer is shared between graphs.
constexpr int kMaxGroupsPerLaunch = 64;
constexpr int kMaxCtas = 256;
constexpr int kMaxTilesPerLaunch = 3072;
constexpr int kMaxKernelParamBytes = 32764;

struct GroupArgs {
  const uint8_t* sfa;   // reordered scales: [ceil(M/128)][K/64][512-byte atom]
  const uint8_t* sfb;
  __half* c;            // [M][N] row-major
  int m, n, k;
  int m_chunk_rows;     // A rows per tile: sm_90a 256, fewer when the problem has too few tiles for the GPU; sm_100a its tile shape's
  int a_box_rows;       // rows one TMA load of A brings (a pair's CTA: half the tile's)
};

struct LaunchArgs {
  CUtensorMap tmap_a[kMaxGroupsPerLaunch];  // packed FP4 A: [M rows][K/2 bytes]
  CUtensorMap tmap_b[kMaxGroupsPerLaunch];  // packed FP4 B: [N rows][K/2 bytes]
  GroupArgs groups[kMaxGroupsPerLaunch];
  uint32_t tiles[kMaxTilesPerLaunch];       // packed tiles, grouped by CTA
  uint16_t cta_first_tile[kMaxCtas + 1];    // CTA (sm_100a pair) b runs tiles [cta_first_tile[b], cta_first_tile[b + 1])
};
static_assert(sizeof(LaunchArgs) <= kMaxKernelParamBytes, "launch arguments exceed the kernel parameter limit");

// The sm_90a prepass's arguments (A -> fp16 rows in a workspace); one per GEMM launch.
struct PrepassGroup {
  const uint8_t* a;     // packed FP4 [M][K/2]
  const uint8_t* sfa;   // reordered scales
  __half* a_half;       // workspace rows [M][K]
  int m, k;
};
struct PrepassArgs {
  PrepassGroup groups[kMaxGroupsPerLaunch];
};

// cuTensorMapEncodeTiled, fetched from the driver at run time (no link-time dependency on libcuda).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                   const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A tile: one group, one chunk of its M rows (A side), one block of its N rows (B side).
struct Tile { int group, m_chunk, n_block; };
__host__ __device__ inline uint32_t pack_tile(int group, int m_chunk, int n_block) {
  return uint32_t(group) | uint32_t(m_chunk) << 7 | uint32_t(n_block) << 16;
}
__host__ __device__ inline Tile unpack_tile(uint32_t w) { return Tile{int(w & 127u), int((w >> 7) & 511u), int(w >> 16)}; }

// Byte of scale (row r, scale column j) inside its 512-byte atom of the reordered layout
// (docs/PROBLEM.md section 3); the atom of row block rb and K block kb starts at (rb * K/64 + kb) * 512.
__host__ __device__ inline int scale_byte_in_atom(int r, int j) { return (r % 32) * 16 + ((r % 128) / 32) * 4 + (j % 4); }
__host__ __device__ inline int64_t scale_atom_offset(int row_block, int k_block, int k) {
  return (int64_t(row_block) * (k / 64) + k_block) * 512;
}
}  // namespace nvfp4
#line 5 "csrc/nvfp4.cu"
#line 1 "csrc/ptx.cuh"



namespace nvfp4 {
// ============================================================================ PTX wrappers (sm_90+)
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Whether the phase of the given parity has completed. kClusterAcquire: acquire at cluster scope, so
// that what another CTA of the cluster wrote before arriving is visible (default: this CTA's).
template <bool kClusterAcquire = false>
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  if (kClusterAcquire)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  else
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}
// Waits for the phase of the given parity. The sm_90a consumers wait in this bare loop: a time-out
// check in it, even one clock read per 1024 polls, made the GEMM 2-4% slower on the H200
// (docs/PERF.md). Their producer stands guard for them (produce()).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}
// The same, trapping after about 10 s, so a protocol bug surfaces as an error on the host instead of
// a hung GPU. The tcgen05 emulation waits up to 100x longer: its MMA runs on one thread, and under
// compute-sanitizer a wait for it outlasts 10 s.
constexpr long long kWaitTrapCycles = NVFP4_TCGEN05_EMULATION ? 2000000000000LL : 20000000000LL;
template <bool kClusterAcquire = false>
__device__ __forceinline__ void mbar_wait_or_trap(uint32_t bar, uint32_t parity) {
  long long start = 0;
  while (!mbar_try_wait<kClusterAcquire>(bar, parity)) {
    if (start == 0) start = clock64();
    else if (clock64() - start > kWaitTrapCycles) __trap();
  }
}
// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// The shared::cluster address of this CTA's shared::cta address `addr` in the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t cluster_address(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Arrive (release at cluster scope) on the barrier at the same offset in the cluster's CTA `rank`.
__device__ __forceinline__ void mbar_arrive_in(uint32_t bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_address(bar, rank)) : "memory");
}
// Every thread of every CTA of the cluster.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// 2-D TMA tile load (x in bytes along K, y in rows), completing on an mbarrier.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "l"(policy) : "memory");
}
// 1-D bulk copy global -> shared (size and addresses multiples of 16), completing on an mbarrier.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy) : "memory");
}
__device__ __forceinline__ void st_global_v4_evict_first(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
}  // namespace nvfp4
#line 6 "csrc/nvfp4.cu"
#line 1 "csrc/arch.cuh"

// The kernel of the target architecture and its traits (nvfp4::Arch), which the host side uses.



#if NVFP4_ARCH == 90
#line 1 "csrc/sm90/kernel.cuh"




#line 1 "csrc/sm90/decode.cuh"



namespace nvfp4 {
// ============================================================================ FP4 / FP8 decoding
// Two E2M1 codes, nibbles q and q + 4 of w, to a half2 holding value * 2^-14 each, exactly: the
// sign goes to bit 15 and the exponent and mantissa bits to bits 11..9, so E2M1's subnormal
// (0.5) becomes an fp16 subnormal and every other code a normal with the same significand.
// (With q a constant the compiler folds the shifts into one per half.)
__device__ __forceinline__ uint32_t fp4x2_to_half2(uint32_t w, int q) {
  const uint32_t x = w >> (4 * q);
  return ((x << 12) & 0x80008000u) | ((x << 9) & 0x0E000E00u);
}
// E4M3 scale byte to fp16 scale * 2^7, exactly (at most 448 * 128 = 57344). Multiplying a decoded
// code (value * 2^-14) by it gives value * scale * 2^-7: at most 6 significant bits, so exact in
// fp16, and normal for every product of the official data. The kernel undoes 2^-14 at the end.
__device__ __forceinline__ __half2 scale_to_half2(uint32_t byte) {
  const unsigned short bits = static_cast<unsigned short>(((byte & 0x80u) << 8) | ((byte & 0x7Fu) << 7));  // scale * 2^-8
  const __half scaled = __hmul(__ushort_as_half(bits), __ushort_as_half(0x7800));                     // * 2^15
  return __half2half2(scaled);
}
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t x, __half2 s) {
  __half2 v = __hmul2(*reinterpret_cast<__half2*>(&x), s);
  return *reinterpret_cast<uint32_t*>(&v);
}
constexpr float kUnscale = 16384.0f;  // 2^14: undoes the 2^-7 of both operands
}  // namespace nvfp4
#line 6 "csrc/sm90/kernel.cuh"
#line 1 "csrc/sm90/wgmma.cuh"



namespace nvfp4 {
namespace sm90 {
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
template <int N>
__device__ __forceinline__ void keep_in_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
__device__ __forceinline__ void keep_in_registers(float (&r)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// K-major operand in 128-byte swizzle atoms: rows 128 bytes apart, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// wgmma m64nNk16, A (4 x f16x2) from registers, B from shared memory, f32 accumulators.
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d);
#line 1 "csrc/sm90/wgmma_generated.cuh"
// Generated by tools/gen_wgmma.py: do not edit. Included by wgmma.cuh inside nvfp4::sm90.


using FixedWgmmaN8 = std::integer_sequence<int, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32>;

template <>
__device__ __forceinline__ void wgmma_rs<8>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<16>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<24>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n24k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, %16, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<32>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<40>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %25, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19}, {%20, %21, %22, %23}, %24, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<48>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, {%24, %25, %26, %27}, %28, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<56>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %33, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n56k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}, {%28, %29, %30, %31}, %32, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<64>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<72>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n72k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, {%36, %37, %38, %39}, %40, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<80>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, {%40, %41, %42, %43}, %44, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<88>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %49, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n88k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43}, {%44, %45, %46, %47}, %48, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<96>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<104>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %57, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n104k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51}, {%52, %53, %54, %55}, %56, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<112>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %61, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}, {%56, %57, %58, %59}, %60, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<120>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %65, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n120k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59}, {%60, %61, %62, %63}, %64, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<128>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<136>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n136k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67}, {%68, %69, %70, %71}, %72, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<144>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %77, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n144k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71}, {%72, %73, %74, %75}, %76, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<152>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %81, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n152k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75}, {%76, %77, %78, %79}, %80, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<160>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, {%80, %81, %82, %83}, %84, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<168>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %89, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n168k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83}, {%84, %85, %86, %87}, %88, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<176>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %93, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, {%88, %89, %90, %91}, %92, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<184>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %97, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n184k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91}, {%92, %93, %94, %95}, %96, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<192>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, %100, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<200>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %105, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n200k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99}, {%100, %101, %102, %103}, %104, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<208>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %109, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n208k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103}, {%104, %105, %106, %107}, %108, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<216>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %113, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n216k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107}, {%108, %109, %110, %111}, %112, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<224>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %117, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n224k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111}, {%112, %113, %114, %115}, %116, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<232>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %121, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n232k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115}, {%116, %117, %118, %119}, %120, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<240>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %125, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n240k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119}, {%120, %121, %122, %123}, %124, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<248>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %129, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n248k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123}, {%124, %125, %126, %127}, %128, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

// The four k16 steps of a K block with wgmma N = 8 * n8, chosen at run time, committed as one group.
__device__ __forceinline__ void wgmma_k_block_tree(float (&acc)[128], const uint32_t (&frag)[4][4], uint64_t desc, int n8,
                                                   bool first) {
  if (n8 < 17) {
    if (n8 < 9) {
      if (n8 < 5) {
        if (n8 < 3) {
          if (n8 < 2) {
            wgmma_rs<8>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<8>(acc, frag[1], desc + 2, 1); wgmma_rs<8>(acc, frag[2], desc + 4, 1); wgmma_rs<8>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<16>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<16>(acc, frag[1], desc + 2, 1); wgmma_rs<16>(acc, frag[2], desc + 4, 1); wgmma_rs<16>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 4) {
            wgmma_rs<24>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<24>(acc, frag[1], desc + 2, 1); wgmma_rs<24>(acc, frag[2], desc + 4, 1); wgmma_rs<24>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<32>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<32>(acc, frag[1], desc + 2, 1); wgmma_rs<32>(acc, frag[2], desc + 4, 1); wgmma_rs<32>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      } else {
        if (n8 < 7) {
          if (n8 < 6) {
            wgmma_rs<40>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<40>(acc, frag[1], desc + 2, 1); wgmma_rs<40>(acc, frag[2], desc + 4, 1); wgmma_rs<40>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<48>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<48>(acc, frag[1], desc + 2, 1); wgmma_rs<48>(acc, frag[2], desc + 4, 1); wgmma_rs<48>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 8) {
            wgmma_rs<56>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<56>(acc, frag[1], desc + 2, 1); wgmma_rs<56>(acc, frag[2], desc + 4, 1); wgmma_rs<56>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<64>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<64>(acc, frag[1], desc + 2, 1); wgmma_rs<64>(acc, frag[2], desc + 4, 1); wgmma_rs<64>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      }
    } else {
      if (n8 < 13) {
        if (n8 < 11) {
          if (n8 < 10) {
            wgmma_rs<72>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<72>(acc, frag[1], desc + 2, 1); wgmma_rs<72>(acc, frag[2], desc + 4, 1); wgmma_rs<72>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<80>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<80>(acc, frag[1], desc + 2, 1); wgmma_rs<80>(acc, frag[2], desc + 4, 1); wgmma_rs<80>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 12) {
            wgmma_rs<88>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<88>(acc, frag[1], desc + 2, 1); wgmma_rs<88>(acc, frag[2], desc + 4, 1); wgmma_rs<88>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<96>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<96>(acc, frag[1], desc + 2, 1); wgmma_rs<96>(acc, frag[2], desc + 4, 1); wgmma_rs<96>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      } else {
        if (n8 < 15) {
          if (n8 < 14) {
            wgmma_rs<104>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<104>(acc, frag[1], desc + 2, 1); wgmma_rs<104>(acc, frag[2], desc + 4, 1); wgmma_rs<104>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<112>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<112>(acc, frag[1], desc + 2, 1); wgmma_rs<112>(acc, frag[2], desc + 4, 1); wgmma_rs<112>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 16) {
            wgmma_rs<120>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<120>(acc, frag[1], desc + 2, 1); wgmma_rs<120>(acc, frag[2], desc + 4, 1); wgmma_rs<120>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<128>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<128>(acc, frag[1], desc + 2, 1); wgmma_rs<128>(acc, frag[2], desc + 4, 1); wgmma_rs<128>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      }
    }
  } else {
    if (n8 < 25) {
      if (n8 < 21) {
        if (n8 < 19) {
          if (n8 < 18) {
            wgmma_rs<136>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<136>(acc, frag[1], desc + 2, 1); wgmma_rs<136>(acc, frag[2], desc + 4, 1); wgmma_rs<136>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<144>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<144>(acc, frag[1], desc + 2, 1); wgmma_rs<144>(acc, frag[2], desc + 4, 1); wgmma_rs<144>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 20) {
            wgmma_rs<152>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<152>(acc, frag[1], desc + 2, 1); wgmma_rs<152>(acc, frag[2], desc + 4, 1); wgmma_rs<152>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<160>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<160>(acc, frag[1], desc + 2, 1); wgmma_rs<160>(acc, frag[2], desc + 4, 1); wgmma_rs<160>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      } else {
        if (n8 < 23) {
          if (n8 < 22) {
            wgmma_rs<168>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<168>(acc, frag[1], desc + 2, 1); wgmma_rs<168>(acc, frag[2], desc + 4, 1); wgmma_rs<168>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<176>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<176>(acc, frag[1], desc + 2, 1); wgmma_rs<176>(acc, frag[2], desc + 4, 1); wgmma_rs<176>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 24) {
            wgmma_rs<184>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<184>(acc, frag[1], desc + 2, 1); wgmma_rs<184>(acc, frag[2], desc + 4, 1); wgmma_rs<184>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<192>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<192>(acc, frag[1], desc + 2, 1); wgmma_rs<192>(acc, frag[2], desc + 4, 1); wgmma_rs<192>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      }
    } else {
      if (n8 < 29) {
        if (n8 < 27) {
          if (n8 < 26) {
            wgmma_rs<200>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<200>(acc, frag[1], desc + 2, 1); wgmma_rs<200>(acc, frag[2], desc + 4, 1); wgmma_rs<200>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<208>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<208>(acc, frag[1], desc + 2, 1); wgmma_rs<208>(acc, frag[2], desc + 4, 1); wgmma_rs<208>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 28) {
            wgmma_rs<216>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<216>(acc, frag[1], desc + 2, 1); wgmma_rs<216>(acc, frag[2], desc + 4, 1); wgmma_rs<216>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<224>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<224>(acc, frag[1], desc + 2, 1); wgmma_rs<224>(acc, frag[2], desc + 4, 1); wgmma_rs<224>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      } else {
        if (n8 < 31) {
          if (n8 < 30) {
            wgmma_rs<232>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<232>(acc, frag[1], desc + 2, 1); wgmma_rs<232>(acc, frag[2], desc + 4, 1); wgmma_rs<232>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<240>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<240>(acc, frag[1], desc + 2, 1); wgmma_rs<240>(acc, frag[2], desc + 4, 1); wgmma_rs<240>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        } else {
          if (n8 < 32) {
            wgmma_rs<248>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<248>(acc, frag[1], desc + 2, 1); wgmma_rs<248>(acc, frag[2], desc + 4, 1); wgmma_rs<248>(acc, frag[3], desc + 6, 1); wgmma_commit();
          } else {
            wgmma_rs<256>(acc, frag[0], desc + 0, first ? 0 : 1); wgmma_rs<256>(acc, frag[1], desc + 2, 1); wgmma_rs<256>(acc, frag[2], desc + 4, 1); wgmma_rs<256>(acc, frag[3], desc + 6, 1); wgmma_commit();
          }
        }
      }
    }
  }
}
#line 36 "csrc/sm90/wgmma.cuh"

// The four k16 steps of one K block with the wgmma N of the tile (8 * n8 columns), committed as one
// group. A kernel built for one N (kFixedN8 > 0) issues them directly. Otherwise the N is chosen by
// a binary tree of comparisons: a switch compiled to a jump table (a constant load and an indirect
// branch in every K block), which cost 7% of the geomean on the H200. (The commit sits in each
// leaf: after the tree, ptxas would emit an extra empty wgmma to carry it, whose group, the newest,
// makes wgmma_wait<1> wait for this K block's own wgmma.)
template <int kFixedN8>
__device__ __forceinline__ void wgmma_k_block(float (&acc)[128], const uint32_t (&frag)[4][4], uint64_t desc, int n8, bool first) {
  if constexpr (kFixedN8 > 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) wgmma_rs<8 * kFixedN8>(acc, frag[j], desc + 2 * j, j == 0 && first ? 0 : 1);
    wgmma_commit();
  } else {
    wgmma_k_block_tree(acc, frag, desc, n8, first);
  }
}
}  // namespace sm90
}  // namespace nvfp4
#line 7 "csrc/sm90/kernel.cuh"

namespace nvfp4 {
namespace sm90 {
// ============================================================================ sm_90a kernel
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
constexpr int kThreads = 384;          // warpgroup 0: the TMA producer (one thread); 1-2: consumers
constexpr int kConsumerThreads = 256;
constexpr int kConsumerWarps = kConsumerThreads / 32;
constexpr int kTileN = 128;            // B rows per tile
constexpr int kTileM = 256;            // most A rows per tile (the wgmma N)
constexpr int kBlockK = 64;            // K elements per pipeline stage
constexpr int kStages = 5;
constexpr int kStageA = 0;                                  // fp16 A rows, 128 bytes each, 128B-swizzled
constexpr int kStageB = kStageA + kTileM * kBlockK * 2;     // packed FP4 B rows, 32 bytes each
constexpr int kStageSfb = kStageB + kTileN * kBlockK / 2;   // B's 512-byte scale atom
constexpr int kStageBytes = (kStageSfb + 512 + 1023) / 1024 * 1024;  // stages stay 1024-aligned (swizzle atoms)
constexpr int kEpilogueWarpBytes = 64 * 16 * 2;  // 64 rows of C x 16 columns, fp16
constexpr int kSmemStages = 0;
constexpr int kSmemEpilogue = kSmemStages + kStages * kStageBytes;
constexpr int kSmemBarriers = kSmemEpilogue + 8 * kEpilogueWarpBytes;
constexpr int kNumBarriers = 2 * kStages;
constexpr int kSmemBytes = kSmemBarriers + kNumBarriers * 8 + 1024;  // + slack to align the base to 1024
constexpr int kPrepassThreads = 256;

// The CTA starts at 168 registers a thread (384 threads). The consumers' increase is served only
// by what the producer warpgroup gives back: 128 x (168 - 56) = 256 x (224 - 168) = 14336.
__device__ __forceinline__ void setmaxnreg_producer() { asm volatile("setmaxnreg.dec.sync.aligned.u32 56;"); }
__device__ __forceinline__ void setmaxnreg_consumer() { asm volatile("setmaxnreg.inc.sync.aligned.u32 224;"); }
// Programmatic dependent launch: in a plan's graph (a programmatic edge) the GEMM may start while
// the prepass runs, its launch and set-up overlapping the prepass's tail; only what reads the
// prepass's output waits for the prepass to finish. After a plain launch the wait returns at once.
__device__ __forceinline__ void allow_dependent_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void wait_for_prerequisite_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void load_b_fragments(uint32_t (&frag)[4][4], const uint8_t* stage, int row, int t) {
  const uint2 wa = *reinterpret_cast<const uint2*>(stage + kStageB + row * 32 + t * 8);
  const uint2 wb = *reinterpret_cast<const uint2*>(stage + kStageB + (row + 8) * 32 + t * 8);
  const __half2 sa = scale_to_half2(stage[kStageSfb + scale_byte_in_atom(row, t)]);
  const __half2 sb = scale_to_half2(stage[kStageSfb + scale_byte_in_atom(row + 8, t)]);
  frag[0][0] = hmul2_bits(fp4x2_to_half2(wa.x, 0), sa);
  frag[0][1] = hmul2_bits(fp4x2_to_half2(wb.x, 0), sb);
  frag[0][2] = hmul2_bits(fp4x2_to_half2(wa.x, 1), sa);
  frag[0][3] = hmul2_bits(fp4x2_to_half2(wb.x, 1), sb);
  frag[1][0] = hmul2_bits(fp4x2_to_half2(wa.x, 2), sa);
  frag[1][1] = hmul2_bits(fp4x2_to_half2(wb.x, 2), sb);
  frag[1][2] = hmul2_bits(fp4x2_to_half2(wa.x, 3), sa);
  frag[1][3] = hmul2_bits(fp4x2_to_half2(wb.x, 3), sb);
  frag[2][0] = hmul2_bits(fp4x2_to_half2(wa.y, 0), sa);
  frag[2][1] = hmul2_bits(fp4x2_to_half2(wb.y, 0), sb);
  frag[2][2] = hmul2_bits(fp4x2_to_half2(wa.y, 1), sa);
  frag[2][3] = hmul2_bits(fp4x2_to_half2(wb.y, 1), sb);
  frag[3][0] = hmul2_bits(fp4x2_to_half2(wa.y, 2), sa);
  frag[3][1] = hmul2_bits(fp4x2_to_half2(wb.y, 2), sb);
  frag[3][2] = hmul2_bits(fp4x2_to_half2(wa.y, 3), sa);
  frag[3][3] = hmul2_bits(fp4x2_to_half2(wb.y, 3), sb);
}

// The prepass: 16-byte chunk j of item (row r, K block kb) of a group: positions 2t, 2t+1 hold
// nibbles q, q + 4 (q = j % 4) of word 2t + j / 4 of the block's 32 bytes, times scale t: the K
// order above (word h of scale block t, K 16t + 8h .. + 7, feeds k16 steps 2h and 2h + 1). Eight
// consecutive threads write one item's 128 bytes, so a warp's stores are contiguous.
__global__ void __launch_bounds__(kPrepassThreads) dequantize_a(const __grid_constant__ PrepassArgs args) {
  allow_dependent_launch();
  const PrepassGroup& g = args.groups[blockIdx.y];
  const int k_blocks = g.k / kBlockK;
  const int64_t chunks = int64_t(g.m) * k_blocks * 8;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
    const int item = int(c / 8), j = int(c % 8), q = j % 4, h = j / 4;
    const int r = item / k_blocks, kb = item % k_blocks;
    const uint32_t* words = reinterpret_cast<const uint32_t*>(g.a + int64_t(r) * (g.k / 2) + kb * 32);
    const uint32_t sf = __ldg(reinterpret_cast<const uint32_t*>(g.sfa + scale_atom_offset(r / 128, kb, g.k) + scale_byte_in_atom(r, 0)));
    uint32_t out[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) out[t] = hmul2_bits(fp4x2_to_half2(__ldg(words + 2 * t + h), q), scale_to_half2((sf >> (8 * t)) & 0xFF));
    reinterpret_cast<uint4*>(g.a_half + int64_t(r) * g.k + kb * kBlockK)[j] = uint4{out[0], out[1], out[2], out[3]};
  }
}

// Barriers, 8 bytes each: full[s] (TMA landed), empty[s] (every consumer warp's wgmma done with stage s).
struct Barriers {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + 8 * (kStages + s); }
};

template <int kFixedN8>
struct Consumer {
  uint8_t* smem;
  Barriers bars;
  int b_row;                // this thread's B rows of the tile: b_row and b_row + 8
  int t;                    // lane % 4: the scale block of this thread's B fragments
  bool warp_leader;         // lane 0: arrives for its warp
  uint32_t iter = 0;        // K blocks consumed so far (stage ring position)
  int unreleased = -1;      // stage whose wgmma may still be running

  // One K block with B fragments in frag[kBuf]: decode B, issue the wgmma on the stage's A rows.
  template <int kBuf>
  __device__ __forceinline__ void k_block(float (&acc)[128], uint32_t (&frag)[2][4][4], int n8, bool first) {
    const int s = iter % kStages;
    const uint8_t* stage = smem + kSmemStages + s * kStageBytes;
    mbar_wait(bars.full(s), (iter / kStages) & 1);
    load_b_fragments(frag[kBuf], stage, b_row, t);
    wgmma_fence();
    wgmma_k_block<kFixedN8>(acc, frag[kBuf], smem_desc_sw128(smem_u32(stage + kStageA)), n8, first);
    wgmma_wait<1>();              // the previous K block's wgmma are done ...
    release_unreleased();         // ... so its stage ...
    keep_in_registers(frag[kBuf ^ 1][0]);  // ... and its fragments may be overwritten now
    keep_in_registers(frag[kBuf ^ 1][1]);
    keep_in_registers(frag[kBuf ^ 1][2]);
    keep_in_registers(frag[kBuf ^ 1][3]);
    unreleased = s;
    ++iter;
  }
  // After this warp's wgmma_wait, which is warp-synchronous: one arrival speaks for the warp.
  __device__ __forceinline__ void release_unreleased() {
    if (unreleased >= 0 && warp_leader) mbar_arrive(bars.empty(unreleased));
    unreleased = -1;
  }
};

// Accumulators of this warp (C columns n_base..n_base+15, rows m0..) -> fp16 C through a
// per-warp staging buffer: stmatrix.trans makes each C row's 16 columns 32 contiguous bytes.
__device__ __forceinline__ void store_tile(const float (&acc)[128], const GroupArgs& g, int m0, int m_rows, int n_base, int n8,
                                           uint8_t* staging, int lane) {
  const uint32_t staging_u32 = smem_u32(staging);
  const int matrix = lane / 8, matrix_row = lane % 8;
#pragma unroll
  for (int win = 0; win < 4; ++win) {  // 64 rows of C per window
    if (win * 8 >= n8) break;
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      const int c = win * 8 + pair * 2;  // accumulator chunks c and c + 1: 8 C rows each
      const int row = (pair * 2 + matrix / 2) * 8 + matrix_row;
      const int side = (matrix & 1) ^ ((row >> 2) & 1);  // which 16 bytes; swizzled against bank conflicts
      stmatrix_x4_trans(staging_u32 + row * 32 + side * 16, half2_bits(acc[4 * c] * kUnscale, acc[4 * c + 1] * kUnscale),
                        half2_bits(acc[4 * c + 2] * kUnscale, acc[4 * c + 3] * kUnscale),
                        half2_bits(acc[4 * c + 4] * kUnscale, acc[4 * c + 5] * kUnscale),
                        half2_bits(acc[4 * c + 6] * kUnscale, acc[4 * c + 7] * kUnscale));
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

__device__ __forceinline__ void produce(const LaunchArgs& args, uint8_t* smem, Barriers bars, int first, int last) {
  const uint64_t keep = l2_evict_last(), once = l2_evict_first();
  wait_for_prerequisite_grids();  // the prepass's fp16 A rows are complete and visible
  uint32_t iter = 0;
  for (int i = first; i < last; ++i) {
    const Tile tile = unpack_tile(args.tiles[i]);
    const GroupArgs& g = args.groups[tile.group];
    const int m0 = tile.m_chunk * g.m_chunk_rows, n0 = tile.n_block * kTileN;
    const int k_blocks = g.k / kBlockK;
    const uint32_t bytes = kTileN * kBlockK / 2 + g.a_box_rows * kBlockK * 2 + 512;
    for (int kb = 0; kb < k_blocks; ++kb, ++iter) {
      const int s = iter % kStages;
      mbar_wait_or_trap(bars.empty(s), ((iter / kStages) & 1) ^ 1);
      const uint32_t full = bars.full(s);
      const uint32_t stage = smem_u32(smem + kSmemStages + s * kStageBytes);
      mbar_arrive_expect_tx(full, bytes);
      tma_load_2d(stage + kStageB, &args.tmap_b[tile.group], kb * kBlockK / 2, n0, full, once);
      tma_load_2d(stage + kStageA, &args.tmap_a[tile.group], kb * kBlockK, m0, full, keep);
      bulk_load(stage + kStageSfb, g.sfb + scale_atom_offset(n0 / 128, kb, g.k), 512, full, once);
    }
  }
  // The consumers' release of every stage they used. A consumer stuck on a stage that never lands
  // releases nothing more, so this wait, or one above, traps for it.
  for (int s = 0; s < kStages; ++s, ++iter) mbar_wait_or_trap(bars.empty(iter % kStages), ((iter / kStages) & 1) ^ 1);
}

template <int kFixedN8>
__device__ __forceinline__ void consume(const LaunchArgs& args, uint8_t* smem, Barriers bars, int first, int last) {
  const int ct = threadIdx.x - 128, warp = ct / 32, lane = ct % 32;
  Consumer<kFixedN8> consumer{smem, bars, (warp / 4) * 64 + (warp % 4) * 16 + lane / 4, lane % 4, lane == 0};
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  uint32_t frag[2][4][4];
  for (int i = first; i < last; ++i) {
    const Tile tile = unpack_tile(args.tiles[i]);
    const GroupArgs& g = args.groups[tile.group];
    const int m0 = tile.m_chunk * g.m_chunk_rows, n0 = tile.n_block * kTileN;
    const int m_rows = min(g.m_chunk_rows, g.m - m0), n8 = kFixedN8 > 0 ? kFixedN8 : (m_rows + 7) / 8;
    const int k_blocks = g.k / kBlockK;
    int kb = 0;
    for (; kb + 1 < k_blocks; kb += 2) {
      consumer.template k_block<0>(acc, frag, n8, kb == 0);
      consumer.template k_block<1>(acc, frag, n8, false);
    }
    if (kb < k_blocks) consumer.template k_block<0>(acc, frag, n8, kb == 0);
    wgmma_wait<0>();
    keep_in_registers(acc);
    consumer.release_unreleased();
    store_tile(acc, g, m0, m_rows, n0 + (warp / 4) * 64 + (warp % 4) * 16, n8, smem + kSmemEpilogue + warp * kEpilogueWarpBytes, lane);
  }
}

// kFixedN8 > 0: every tile of the launch is issued with wgmma N = 8 * kFixedN8 (its A box has that
// many rows; columns past the tile's rows are computed and not stored); 0: each tile's own N.
template <int kFixedN8>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ LaunchArgs args) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const Barriers bars{smem_u32(smem + kSmemBarriers)};
  const int first = args.cta_first_tile[blockIdx.x], last = args.cta_first_tile[blockIdx.x + 1];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bars.full(s), 1);
      mbar_init(bars.empty(s), kConsumerWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    setmaxnreg_producer();
    if (threadIdx.x == 0) produce(args, smem, bars, first, last);
  } else {
    setmaxnreg_consumer();
    consume<kFixedN8>(args, smem, bars, first, last);
  }
}

// The smallest N (/ 8) of a kernel built for one N that is at least n8; 0 when there is none.
template <int... kN8>
constexpr int fixed_n8_at_least(int n8, std::integer_sequence<int, kN8...>) {
  int found = 0;
  ((kN8 >= n8 && (found == 0 || kN8 < found) ? (found = kN8) : 0), ...);
  return found;
}
// The kernel for a launch: built for its fixed wgmma N (one of FixedWgmmaN8), or with the tree (0).
template <int... kN8>
const void* gemm_kernel(int fixed_n8, std::integer_sequence<int, kN8...>) {
  const void* kernel = reinterpret_cast<const void*>(&grouped_gemm<0>);
  ((fixed_n8 == kN8 ? (kernel = reinterpret_cast<const void*>(&grouped_gemm<kN8>)) : nullptr), ...);
  return kernel;
}
}  // namespace sm90

struct Arch {
  static constexpr int kTileM = sm90::kTileM, kTileN = sm90::kTileN, kThreads = sm90::kThreads, kSmemBytes = sm90::kSmemBytes;
  static constexpr int kKMultiple = sm90::kBlockK;
  static constexpr bool kPrepass = true;  // A is dequantized into a workspace before the GEMM
  // One tile shape (the wgmma's N side is already A's rows): kTileM rows of A by kTileN of B, one CTA.
  static constexpr int kTileShapes = 1;
  struct TileGeometry { int a_rows, b_rows, ctas; };
  static TileGeometry geometry(int /*shape*/) { return {kTileM, kTileN, 1}; }
  static const void* kernel(bool /*persistent*/, int fixed_n8, int /*shape*/) { return sm90::gemm_kernel(fixed_n8, sm90::FixedWgmmaN8{}); }
  static int fixed_n8_at_least(int n8) { return sm90::fixed_n8_at_least(n8, sm90::FixedWgmmaN8{}); }
  static const void* prepass_kernel() { return reinterpret_cast<const void*>(&sm90::dequantize_a); }
  static constexpr int kPrepassThreads = sm90::kPrepassThreads;
  static constexpr bool kNarrowTiles = true;  // a tile may have any multiple of 8 A rows (the wgmma N)
  // Rows a TMA load of A brings: the tile's rows, at most the group's rounded to 8.
  static int a_box_rows(int m, int chunk_rows, int /*shape*/) { return std::min(chunk_rows, (std::max(m, 1) + 7) / 8 * 8); }
  // Relative cost of a tile for load balancing: per K block, a share that grows with the tile's rows
  // (the wgmma N) and a fixed share (B decode, barrier round trips, wgmma latency) that on the H200
  // weighs as much as about 256 rows: balancing on rows alone left a third of case 0's SM time idle.
  static int64_t tile_cost(int m_rows, int k, int /*shape*/) { return int64_t(k) * ((m_rows + 7) / 8 * 8 + 256); }
  static bool tmem_plan(int /*shape*/, bool /*persistent*/, int* /*out*/) { return false; }  // no TMEM on sm_90
  // B: packed FP4 rows as a 2-D byte tensor [rows][K/2]; a box is box_rows x 32 bytes (64 K), unswizzled.
  static CUresult encode_operand(EncodeTiledFn encode, CUtensorMap* map, const void* base, int rows, int k, int box_rows,
                                 bool /*byte_elements*/) {
    const cuuint64_t dims[2] = {cuuint64_t(k / 2), cuuint64_t(rows)};
    const cuuint64_t strides[1] = {cuuint64_t(k / 2)};
    const cuuint32_t box[2] = {cuuint32_t(sm90::kBlockK / 2), cuuint32_t(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  // A after the prepass: fp16 rows [rows][K] in the workspace; a box is box_rows x 64 K (128 bytes),
  // 128-byte swizzled: the K-major layout wgmma's shared-memory descriptor describes.
  static CUresult encode_dequantized_a(EncodeTiledFn encode, CUtensorMap* map, const void* base, int rows, int k, int box_rows) {
    const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
    const cuuint64_t strides[1] = {cuuint64_t(k) * 2};
    const cuuint32_t box[2] = {cuuint32_t(sm90::kBlockK), cuuint32_t(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};
}  // namespace nvfp4
#line 8 "csrc/arch.cuh"
#elif NVFP4_ARCH == 100
#line 1 "csrc/sm100/kernel.cuh"

#line 1 "csrc/sm100/config.cuh"

// ============================================================================ sm_100a kernel
// The B200 design: a TMA ring of as many stages as fit, one TMA warp, one MMA warp issuing
// tcgen05.cp (scales into TMEM) and tcgen05.mma kind::mxf4nvf4 (FP4 x FP4 with E4M3 block scales,
// fp32 accumulators in TMEM), four epilogue warps reading TMEM with tcgen05.ld and storing 16
// bytes a thread. Three tile shapes (TileShape); where TMEM holds two accumulators, the persistent
// variant double-buffers them so the epilogue of tile t overlaps the MMA of tile t + 1.
// Compiled and host-checked here; it has never run on hardware (no B200 is available). It departs
// from the public design it grew from where that one was wrong: TMEM allocated for every column
// used, the epilogue waiting for the MMAs' commit, a whole-warp dealloc, a fence before a release.



namespace nvfp4 {
namespace sm100 {
constexpr int kBlockK = 256;                       // K per pipeline stage (one 128-byte swizzled row per operand row)
constexpr int kMmaK = 64;                          // K per tcgen05.mma for FP4
constexpr int kEpilogueWarps = 4;                  // one per 32 TMEM lanes
constexpr int kWarps = kEpilogueWarps + 2;         // warps 0-3 epilogue, 4 TMA, 5 MMA
constexpr int kThreads = kWarps * 32;
constexpr int kTmaWarp = kWarps - 2, kMmaWarp = kWarps - 1;
constexpr int kSfAtomBytes = 128 * kBlockK / 16;   // the scales of 128 rows for one K block: four 512-byte atoms (64 K each)
constexpr int kSmemBudget = 232448;                // the most dynamic shared memory a B200 CTA may opt into (227 KB)
constexpr int kSmemSlack = 1024;                   // to align the base to 1024 (128B swizzle)

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
  static constexpr int kRowsB = 128;                              // C columns per CTA; per tile kCtaGroup x this
  static constexpr int kCtaRowsA = kRowsA / kCtaGroup;            // A rows one CTA loads
  static constexpr int kNRows = kIsSwapped ? kRowsA : kRowsB;
  static constexpr int kNPieces = kNRows / 128;
  static constexpr int kABytes = kCtaRowsA * kBlockK / 2, kBBytes = kRowsB * kBlockK / 2;
  static constexpr int kSfaBytes = kRowsA / 128 * kSfAtomBytes, kSfbBytes = kRowsB / 128 * kSfAtomBytes;
  static constexpr int kStageBytes = kABytes + kBBytes + kSfaBytes + kSfbBytes;  // a multiple of 1024: stages stay aligned
  static constexpr int kStagingBytes = kIsSwapped ? kEpilogueWarps * 32 * 32 * 2 : 0;  // the epilogue's 32 x 32 halves per warp
  static constexpr int kFixedBytes = kStagingBytes + 32 * 8 + 16 + kSmemSlack;          // staging, barriers, TMEM slot, slack
  static constexpr int kStages = (kSmemBudget - kFixedBytes) / kStageBytes;              // as many as fit
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
#line 3 "csrc/sm100/kernel.cuh"

#if NVFP4_TCGEN05_EMULATION
#line 1 "csrc/sm100/tcgen05_emulation.cuh"

// ---------------------------------------------------------------------------- tcgen05, emulated
// Test build for sm_90a (NVFP4_TCGEN05_EMULATION=1): the same kernel with each Blackwell-only
// instruction replaced by a device function of the same signature that reproduces, from the PTX
// ISA's definitions, what the kernel relies on, including when things happen.
//
// The emulated tensor core. tcgen05.cp, tcgen05.mma and tcgen05.commit only enqueue an operation
// on the issuing CTA's queue, with a checksum of every shared-memory byte it will read. Operations
// run later, in issue order, each no sooner than a delay drawn from the seed (Config) after its
// issue, by whichever thread of the CTA (or of its pair) waits on an mbarrier (the emulation's
// mbar_wait_or_trap replaces the one in ptx.cuh for this namespace), and only while the issuing
// thread itself waits or has issued nothing for kIdleIssuerNs: the tensor core starts on what a
// thread issued once it yields, so whatever it issues before its next wait is still pending when its
// earlier commits arrive. A lazy run (an even seed)
// executes only what a waiting thread needs, up to the commit that arrives on the barrier it waits
// for, so every operation stays pending as long as the ISA allows; an eager run (an odd seed)
// executes every operation whose delay expired. A commit arrives once every earlier operation of
// its issuer has completed.
//
// Detectors, which print what they found (and the seed) and trap:
//   - tcgen05.ld of TMEM columns a queued operation has not yet written, or that nothing wrote since
//     the allocation;
//   - an operation whose shared-memory source changed between its issue and its execution;
//   - a TMA or bulk copy into shared memory a pending operation still reads;
//   - an MMA reading scale or accumulator columns nothing has written;
//   - tcgen05.dealloc with operations pending; plus the layout checks (allocation bounds, lane
//     quarters, scale duplication, unsigned scales, descriptor fields).
// Not checked: the tcgen05 fences (they are __threadfence_block here), relinquish_alloc_permit.
//
// TMEM is a per-SM array in global memory (every kernel emulated here runs one CTA per SM).
// CTA pairs (.cta_group::2) are clusters of 2 on the H200: a pair's operations are queued by its
// even CTA and run by any waiting thread of either CTA, reading both CTAs' shared memory through
// distributed shared memory and arriving on barriers through mapa addresses. sm_100-only forms of
// sm_90 features use their sm_90 equivalents: .shared::cluster destinations for bulk copies, no
// .cta_group on tensor copies, byte-element tensor maps (see Arch::encode_operand).
// docs/TCGEN05.md gives the readings taken where the ISA is silent. The .cta_group::2 forms exist only
// here so far: tcgen05.cuh gains them with the first kernel that uses them.



namespace nvfp4 {
namespace sm100 {
namespace emu {
constexpr int kLanes = 128, kColumns = 512, kMaxSms = 256, kQueue = 256;
constexpr uint64_t kIdleIssuerNs = 2000000;  // well beyond the longest burst of issues between two waits

// seed: the delays, and lazy (even) or eager (odd); max_delay_ns: the longest delay.
struct Config {
  uint64_t seed;
  uint32_t max_delay_ns;
};
__device__ Config g_config = {2, 20000};

struct TmemStandIn {
  uint32_t base, columns;                // the live allocation; columns == 0: none
  uint32_t paired, peer_sm;              // a cta_group::2 allocation and the SM of the pair's other CTA
  uint32_t issued[kColumns];             // per column: 1 + sequence number of the last operation issued to write it (0: none)
  uint32_t done[kColumns];               // the same, of the last one executed
  uint32_t cells[kLanes][kColumns];      // 32-bit TMEM words
  float a_scaled[kLanes][64];            // mma scratch: A x SFA of the operation being executed
};
__device__ TmemStandIn g_tmem[kMaxSms];

enum OpKind : uint32_t { kCp = 1, kMma = 2, kCommit = 3 };
struct Op {
  uint32_t kind, group, seq, issuer_rank;  // group: the .cta_group; issuer_rank: %cluster_ctarank of the issuing CTA
  uint64_t ready_ns;                       // issue time + delay
  uint64_t desc[2];                        // mma: A, B; cp: the source
  uint32_t d_tmem, i_desc, sfa, sfb, accumulate;
  uint32_t bar, cta_mask;                  // commit: the barrier offset and the CTAs it arrives at
  uint32_t sum[2][2];                      // checksum at issue [operand][CTA of the pair]
  uint32_t lo[2][2], hi[2][2];             // shared-memory bytes read [lo, hi) [operand][CTA of the pair]
};
struct Queue {
  int lock;
  uint32_t head, tail;                     // operations head .. tail - 1 are pending; sequence number = position
  uint32_t issuer_thread, issuer_waiting;  // the one thread that issues (kNoThread: none yet), and whether it waits now
  uint64_t last_issue_ns;                  // when it last issued
  Op ops[kQueue];
};
constexpr uint32_t kNoThread = 0xFFFFFFFFu;
__device__ Queue g_queue[kMaxSms];

// A pair's CTAs find each other's SM through this record, in each CTA's shared memory.
struct PairRecord {
  uint64_t key;  // nonzero, unique to this CTA of this launch, written last
  uint32_t sm, columns;
};
__shared__ PairRecord g_pair_record;

__device__ __noinline__ void fail(const char* what, uint32_t x, uint32_t y, uint32_t z = 0) {
  printf("tcgen05 emulation (seed %llu), block %d thread %d: %s (%u, %u, %u)\n", static_cast<unsigned long long>(g_config.seed),
         int(blockIdx.x), int(threadIdx.x), what, x, y, z);
  __trap();
}
__device__ __forceinline__ int lane_id() { return int(threadIdx.x % 32); }
__device__ __forceinline__ void require_whole_warp(const char* what) {
  if (__activemask() != 0xFFFFFFFFu) fail(what, __activemask(), 0);
}
__device__ __forceinline__ uint32_t sm_id() {
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (sm >= kMaxSms) fail("SM id beyond the TMEM stand-ins (SM, stand-ins)", sm, kMaxSms);
  return sm;
}
__device__ __forceinline__ TmemStandIn& sm_tmem() { return g_tmem[sm_id()]; }
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27, x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Shared words read and written by threads of other warps or SMs: through volatile accesses.
template <typename T>
__device__ __forceinline__ volatile T& vol(T& x) { return const_cast<volatile T&>(x); }
__device__ __forceinline__ uint32_t load_acquire(const uint32_t& x) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&x) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_cluster_u32(uint32_t cluster_addr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
  return v;
}
// Which KB of the kernel's shared memory an address is in (from the dynamic window's base rounded
// up to 1024, as the kernel does), for messages.
__device__ __forceinline__ uint32_t kb_of(uint32_t addr) {
  extern __shared__ uint8_t emulation_dynamic_smem[];
  const uint32_t base = smem_u32(emulation_dynamic_smem), aligned = base + ((1024 - (base & 1023)) & 1023);
  return (addr - aligned) / 1024;
}

__device__ __forceinline__ uint32_t& cell(TmemStandIn& t, uint32_t lane, uint32_t column) {
  const uint32_t base = vol(t.base), columns = vol(t.columns);
  if (lane >= kLanes || column < base || column >= base + columns) fail("TMEM access outside the allocation (lane, column)", lane, column);
  return t.cells[lane][column];
}
// Writes of operation `seq` to columns [column, column + count): issued, then executed.
__device__ __forceinline__ void mark_issued(TmemStandIn& t, uint32_t column, uint32_t count, uint32_t seq) {
  for (uint32_t c = column; c < column + count; ++c) vol(t.issued[c]) = seq + 1;
}
__device__ __forceinline__ void mark_done(TmemStandIn& t, uint32_t column, uint32_t count, uint32_t seq) {
  for (uint32_t c = column; c < column + count; ++c) vol(t.done[c]) = seq + 1;
}
// For code that writes TMEM words directly (the probes): the columns count as written.
__device__ __forceinline__ void mark_written(TmemStandIn& t, uint32_t column, uint32_t count) {
  for (uint32_t c = column; c < column + count; ++c) vol(t.issued[c]) = vol(t.done[c]) = 0xFFFFFFFFu;
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
// An operand as an operation reads it: `rows` rows of `words` 32-bit words from the shared memory of
// cluster rank `rank`. Its checksum, and the bounds [lo, hi) of the bytes.
struct Operand {
  SmemDesc d;
  int rows, words;
  uint32_t rank;
  __device__ uint32_t word(int row, int w) const { return ld_cluster_u32(cluster_address(kmajor_address(d, row, 4 * w), rank)); }
  __device__ uint32_t checksum(uint32_t& lo, uint32_t& hi) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    lo = 0xFFFFFFFFu, hi = 0;
    for (int r = 0; r < rows; ++r)
      for (int w = 0; w < words; ++w) {
        const uint32_t a = kmajor_address(d, r, 4 * w);
        lo = min(lo, a), hi = max(hi, a + 4);
        h = (h ^ ld_cluster_u32(cluster_address(a, rank))) * 0x100000001B3ull + uint64_t(r * words + w);
      }
    return uint32_t(mix(h)) | 1u;
  }
};

__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3, m = code & 1;
  const float magnitude = e ? ldexpf(1.0f + 0.5f * float(m), int(e) - 1) : 0.5f * float(m);
  return code & 8 ? -magnitude : magnitude;
}
// kind::mxf4nvf4's scale type is ue4m3: E4M3 without a sign. A byte with bit 7 set traps.
__device__ __forceinline__ float ue4m3_value(uint32_t byte) {
  if (byte & 0x80) fail("a scale factor with bit 7 set (ue4m3 has no sign) (byte, 0)", byte, 0);
  const uint32_t e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return __int_as_float(0x7FC00000);
  return e ? ldexpf(1.0f + float(m) / 8.0f, int(e) - 7) : ldexpf(float(m) / 8.0f, -6);
}
// scale_vec::4X scales of row r (< 128) of an operand: lane r, column `column` + r / 32, byte j for K
// elements 16j .. 16j + 15. The ISA requires the same words in all four lane quarters: checked.
__device__ __forceinline__ uint32_t scale_word(TmemStandIn& t, uint32_t column, int r) {
  const uint32_t w = cell(t, uint32_t(r), column + uint32_t(r / 32));
  for (int q = 0; q < 4; ++q)
    if (cell(t, uint32_t(32 * q + r % 32), column + uint32_t(r / 32)) != w) fail("scale factors differ between lane quarters (row, column)", r, column);
  return w;
}
// Row `row` of an operand, 64 K elements (8 words of 8 codes, low nibble first), times its scales.
__device__ __forceinline__ void scaled_row(const Operand& op, int row, uint32_t sf, float (&out)[64]) {
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    const uint32_t codes = op.word(row, w);
    const float scale = ue4m3_value((sf >> (8 * (w / 2))) & 0xFF);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[8 * w + i] = e2m1_value((codes >> (4 * i)) & 15) * scale;
  }
}
// An MMA reads these columns: something must have written them, and have run.
__device__ __forceinline__ void require_written(const TmemStandIn& t, uint32_t column, uint32_t count, uint32_t seq, const char* what) {
  for (uint32_t c = column; c < column + count; ++c)
    if (c >= uint32_t(kColumns) || vol(t.done[c]) == 0) fail(what, seq, c);
}
__device__ __forceinline__ void require_lane_zero(uint32_t taddr, const char* what) {
  if (taddr >> 16) fail(what, taddr >> 16, taddr & 0xFFFF);
}

// ---- the queue
// The stand-in of the pair's CTA v (0: the even one, 1: the odd one) as seen from the issuer's SM.
__device__ __forceinline__ TmemStandIn& pair_tmem(uint32_t issuer_sm, uint32_t v) {
  return v == 0 ? g_tmem[issuer_sm] : g_tmem[vol(g_tmem[issuer_sm].peer_sm)];
}
// The operands of an operation: for an mma, A ([0]) and B ([1]) in each CTA of its group; for a cp,
// its source in each CTA.
__device__ __forceinline__ Operand operand(const Op& op, int which, uint32_t v) {
  const uint32_t rank = (op.issuer_rank & ~1u) * (op.group - 1) + op.issuer_rank * (2 - op.group) + v;
  if (op.kind == kCp) return Operand{decode_smem_desc(op.desc[0]), 32, 4, rank};
  const int n = int((op.i_desc >> 17) & 63) << 3;
  return Operand{decode_smem_desc(op.desc[which]), which == 0 ? 128 : n / int(op.group), 8, rank};
}
__device__ __forceinline__ int operand_count(const Op& op) { return op.kind == kMma ? 2 : op.kind == kCp ? 1 : 0; }

__device__ __forceinline__ void verify_sources(const Op& op) {
  for (int which = 0; which < operand_count(op); ++which)
    for (uint32_t v = 0; v < op.group; ++v) {
      uint32_t lo, hi;
      if (operand(op, which, v).checksum(lo, hi) != op.sum[which][v])
        fail("a shared-memory source of a queued operation changed between its issue and its execution (operation, KB of shared memory, source: 0 A or a cp's, 1 B; + 2 in the pair's odd CTA)",
             op.seq, kb_of(op.lo[which][v]), uint32_t(which) + 2 * v);
    }
}
// tcgen05.cp .32x128b.warpx4 into each CTA of the group: row r (16 bytes) of that CTA's source ->
// lanes r, r + 32, r + 64, r + 96, four columns from the address (bytes 4w .. 4w + 3 in column w).
__device__ __forceinline__ void execute_cp(const Op& op, uint32_t issuer_sm) {
  for (uint32_t v = 0; v < op.group; ++v) {
    TmemStandIn& t = pair_tmem(issuer_sm, v);
    const Operand src = operand(op, 0, v);
    for (int r = 0; r < 32; ++r)
      for (int w = 0; w < 4; ++w) {
        const uint32_t x = src.word(r, w);
        for (int q = 0; q < 4; ++q) cell(t, uint32_t(32 * q + r), (op.d_tmem & 0xFFFF) + uint32_t(w)) = x;
      }
    mark_done(t, op.d_tmem & 0xFFFF, 4, op.seq);
  }
}
// tcgen05.mma .kind::mxf4nvf4.block_scale.scale_vec::4X: D (lane m, column n) = (accumulate ? D : 0) +
// sum over K = 64 of A[m][k] SFA[m][k/16] B[n][k] SFB[n][k/16], A and B K-major E2M1, E4M3 scales,
// fp32 accumulation. cta_group::1: M = 128 from this CTA. cta_group::2: M = 256; CTA v of the pair
// supplies A rows 128v .. 128v + 127 and B rows vN/2 .. vN/2 + N/2 - 1 from its own shared memory at
// the descriptors' addresses, holds SFA of its own rows and SFB of all N (which must be the same in
// both), and receives D rows 128v .. in its lanes 0-127 at d_tmem.
__device__ __forceinline__ void execute_mma(const Op& op, uint32_t issuer_sm) {
  const int n_dim = int((op.i_desc >> 17) & 63) << 3, n_half = n_dim / int(op.group);
  for (uint32_t v = 0; v < op.group; ++v) {
    TmemStandIn& t = pair_tmem(issuer_sm, v);
    require_written(t, op.sfa & 0xFFFF, 4, op.seq, "a tcgen05.mma reads A scale columns nothing has written (operation, column)");
    require_written(t, op.sfb & 0xFFFF, uint32_t(n_dim + 31) / 32, op.seq, "a tcgen05.mma reads B scale columns nothing has written (operation, column)");
    if (op.accumulate) require_written(t, op.d_tmem & 0xFFFF, uint32_t(n_dim), op.seq, "a tcgen05.mma accumulates into columns nothing has written (operation, column)");
    const Operand a = operand(op, 0, v);
    for (int m = 0; m < 128; ++m) {
      float row[64];
      scaled_row(a, m, scale_word(t, op.sfa & 0xFFFF, m), row);
      for (int k = 0; k < 64; ++k) t.a_scaled[m][k] = row[k];
    }
    for (int n = 0; n < n_dim; ++n) {
      const uint32_t sf = scale_word(t, op.sfb & 0xFFFF, n);
      if (op.group == 2 && scale_word(pair_tmem(issuer_sm, 1 - v), op.sfb & 0xFFFF, n) != sf)
        fail("the scale factors of B differ between the pair's CTAs (operation, row, column)", op.seq, n, op.sfb & 0xFFFF);
      float bv[64];
      scaled_row(operand(op, 1, uint32_t(n / n_half)), n % n_half, sf, bv);
      for (int m = 0; m < 128; ++m) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < 64; ++k) acc = fmaf(t.a_scaled[m][k], bv[k], acc);
        uint32_t& d = cell(t, uint32_t(m), (op.d_tmem & 0xFFFF) + uint32_t(n));
        d = __float_as_uint(op.accumulate ? __uint_as_float(d) + acc : acc);
      }
    }
    mark_done(t, op.d_tmem & 0xFFFF, uint32_t(n_dim), op.seq);
  }
}
__device__ __forceinline__ void execute(const Op& op, uint32_t issuer_sm) {
  verify_sources(op);
  if (op.kind == kCp) execute_cp(op, issuer_sm);
  else if (op.kind == kMma) execute_mma(op, issuer_sm);
  else {
    __threadfence();  // the TMEM stand-ins' words before the arrival
    for (uint32_t r = 0; r < 32; ++r)
      if ((op.cta_mask >> r) & 1) mbar_arrive_in(op.bar, r);
  }
}
// Runs the pending operations of the queue of SM `issuer_sm` up to `limit` (exclusive) whose delay has
// expired, in order; stops at the first that is not ready. Returns with nothing done when another
// thread holds the queue.
__device__ __noinline__ void run_pending(uint32_t issuer_sm, uint32_t limit) {
  Queue& q = g_queue[issuer_sm];
  if (atomicCAS(&q.lock, 0, 1) != 0) return;
  __threadfence();
  for (uint32_t head = vol(q.head); head < limit; head = vol(q.head)) {
    const Op op = q.ops[head % kQueue];
    const uint64_t now = now_ns();
    if (now < op.ready_ns || !(vol(q.issuer_waiting) || now >= vol(q.last_issue_ns) + kIdleIssuerNs)) break;
    if (op.kind == kCommit) {  // done with the queue before the arrival: an arrival may let its CTA deallocate and exit
      vol(q.head) = head + 1;
      __threadfence();
      atomicExch(&q.lock, 0);
      execute(op, issuer_sm);
      return;
    }
    execute(op, issuer_sm);
    __threadfence();
    vol(q.head) = head + 1;
    __threadfence();
  }
  atomicExch(&q.lock, 0);
}
// The SMs whose queues may write this CTA's TMEM or read its shared memory: its own, and in a pair
// the other CTA's (kMaxSms: none).
struct QueueSms { uint32_t sm[2]; };
__device__ __forceinline__ QueueSms queues_of_this_cta() {
  const uint32_t sm = sm_id();
  const TmemStandIn& own = g_tmem[sm];
  return QueueSms{{sm, vol(own.columns) && vol(own.paired) ? vol(own.peer_sm) : uint32_t(kMaxSms)}};
}
// What a thread waiting on barrier `bar` (of this CTA) makes the tensor core do: in a lazy run, the
// operations up to the commit that arrives there, if one is queued; in an eager run, every ready one.
__device__ __forceinline__ void progress(uint32_t bar) {
  const uint32_t rank = cluster_ctarank();
  for (uint32_t sm : queues_of_this_cta().sm) {
    if (sm >= kMaxSms) continue;
    Queue& q = g_queue[sm];
    const uint32_t head = load_acquire(q.head), tail = load_acquire(q.tail);
    uint32_t limit = head;
    if (g_config.seed & 1) limit = tail;
    else
      for (uint32_t i = head; i < tail; ++i) {
        const Op& op = q.ops[i % kQueue];
        if (op.kind == kCommit && op.bar == bar && ((op.cta_mask >> rank) & 1)) {
          limit = i + 1;
          break;
        }
      }
    if (limit > head) run_pending(sm, limit);
  }
}
// Queues an operation of this CTA: its delay drawn from the seed, its sources' checksums taken and the
// TMEM columns it writes marked now. A full queue first runs its oldest operation (the tensor core
// may always be fast).
__device__ __forceinline__ void enqueue(Op op) {
  const uint32_t sm = sm_id();
  Queue& q = g_queue[sm];
  if (op.group == 2 && (op.issuer_rank & 1)) fail("a .cta_group::2 operation issued by the odd CTA of the pair (kind, rank)", op.kind, op.issuer_rank);
  if (op.group != 1 + vol(g_tmem[sm].paired)) fail("an operation of a .cta_group other than the allocation's (kind, group, paired)", op.kind, op.group, vol(g_tmem[sm].paired));
  if (vol(q.issuer_thread) == kNoThread) vol(q.issuer_thread) = threadIdx.x;
  if (vol(q.issuer_thread) != threadIdx.x) fail("tcgen05 operations issued by two threads of one CTA: not emulated (thread, the other, kind)", threadIdx.x, q.issuer_thread, op.kind);
  if (vol(q.tail) - load_acquire(q.head) >= uint32_t(kQueue)) {
    vol(q.issuer_waiting) = 1;
    while (vol(q.tail) - load_acquire(q.head) >= uint32_t(kQueue)) run_pending(sm, vol(q.head) + 1);
    vol(q.issuer_waiting) = 0;
  }
  op.seq = vol(q.tail);
  for (int which = 0; which < operand_count(op); ++which)
    for (uint32_t v = 0; v < op.group; ++v) op.sum[which][v] = operand(op, which, v).checksum(op.lo[which][v], op.hi[which][v]);
  const uint32_t written = op.kind == kMma ? ((op.i_desc >> 17) & 63) << 3 : op.kind == kCp ? 4 : 0;
  for (uint32_t v = 0; v < op.group && written; ++v) {
    TmemStandIn& t = pair_tmem(sm, v);
    const uint32_t column = op.d_tmem & 0xFFFF;
    if (column < vol(t.base) || column + written > vol(t.base) + vol(t.columns)) fail("an operation writing TMEM columns outside the allocation (kind, first column, columns)", op.kind, column, written);
    mark_issued(t, column, written, op.seq);
  }
  const uint64_t delay = g_config.max_delay_ns ? mix(g_config.seed * 0x100000001B3ull ^ uint64_t(sm) << 40 ^ op.seq) % (g_config.max_delay_ns + 1ull) : 0;
  const uint64_t now = now_ns();
  op.ready_ns = now + delay;
  vol(q.last_issue_ns) = now;
  q.ops[op.seq % kQueue] = op;
  __threadfence();
  vol(q.tail) = op.seq + 1;
  __threadfence();
}
// A copy of `bytes` bytes into this CTA's shared memory at `dst` is about to be issued: nothing
// pending may still read them.
__device__ __forceinline__ void check_copy_destination(uint32_t dst, uint32_t bytes, const char* what) {
  const uint32_t rank = cluster_ctarank();
  for (uint32_t sm : queues_of_this_cta().sm) {
    if (sm >= kMaxSms) continue;
    Queue& q = g_queue[sm];
    for (uint32_t i = load_acquire(q.head), tail = load_acquire(q.tail); i < tail; ++i) {
      const Op& op = q.ops[i % kQueue];
      for (int which = 0; which < operand_count(op); ++which)
        for (uint32_t v = 0; v < op.group; ++v)
          if (operand(op, which, v).rank == rank && dst < op.hi[which][v] && op.lo[which][v] < dst + bytes) fail(what, kb_of(dst), op.seq, op.kind);
    }
  }
}
}  // namespace emu

// The waits of the sm_100a kernel (both of ptx.cuh's forms): its time-out, and while waiting, the
// emulated tensor core's progress (above). The wait acquires at cluster scope: a pair's stand-ins may have been
// written by a thread of the other CTA.
// Every wait acquires at cluster scope (kClusterAcquire, the real wait's choice, changes nothing here).
template <bool kClusterAcquire = true>
__device__ __forceinline__ void mbar_wait_or_trap(uint32_t bar, uint32_t parity) {
  emu::Queue& q = emu::g_queue[emu::sm_id()];
  const bool issuer = emu::vol(q.issuer_thread) == threadIdx.x;
  if (issuer) emu::vol(q.issuer_waiting) = 1;
  long long start = 0;
  while (!mbar_try_wait<true>(bar, parity)) {
    emu::progress(bar);
    if (start == 0) start = clock64();
    else if (clock64() - start > kWaitTrapCycles) emu::fail("mbarrier wait timed out (barrier, parity)", bar, parity);
    __nanosleep(256);
  }
  if (issuer) emu::vol(q.issuer_waiting) = 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) { mbar_wait_or_trap(bar, parity); }
// box_bytes: the map's box (the map itself does not say its size here).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int x, int y, int z, uint32_t bar, uint64_t policy,
                                            uint32_t box_bytes) {
  emu::check_copy_destination(dst, box_bytes, "TMA load into shared memory a pending operation still reads (KB of shared memory, operation, kind)");
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy) : "memory");
}
__device__ __forceinline__ void bulk_load_cta(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  emu::check_copy_destination(dst, bytes, "bulk copy into shared memory a pending operation still reads (KB of shared memory, operation, kind)");
  bulk_load(dst, src, bytes, bar, policy);
}
// tcgen05.alloc: warp-wide; the columns are placed at the top of the
// 512, so a kernel that assumes address 0 instead of reading the slot back fails. It starts the CTA's
// queue afresh. cta_group::2: each CTA's warp allocates the same columns in its own TMEM, and waits
// until the pair's other CTA has (through the pair record).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_alloc(uint32_t slot, int columns) {
  static_assert(kCtaGroup == 1 || kCtaGroup == 2, ".cta_group is 1 or 2");
  emu::require_whole_warp("tcgen05.alloc by part of a warp");
  const uint32_t sm = emu::sm_id();
  emu::TmemStandIn& t = emu::g_tmem[sm];
  if (columns < 32 || columns > emu::kColumns || (columns & (columns - 1))) emu::fail("tcgen05.alloc of a column count not a power of 2 in [32, 512]", columns, 0);
  if (emu::lane_id() == 0) {
    if (emu::vol(t.columns)) emu::fail("tcgen05.alloc while this SM's TMEM is allocated (base, columns)", emu::vol(t.base), emu::vol(t.columns));
    emu::Queue& q = emu::g_queue[sm];
    q.lock = 0, q.head = 0, q.tail = 0, q.issuer_thread = emu::kNoThread, q.issuer_waiting = 0, q.last_issue_ns = 0;
    for (int c = 0; c < emu::kColumns; ++c) t.issued[c] = t.done[c] = 0;
    t.paired = 0;
    if (kCtaGroup == 2) {
      uint32_t cluster[4];
      asm volatile("mov.u32 %0, %%clusterid.x; mov.u32 %1, %%clusterid.y; mov.u32 %2, %%clusterid.z; mov.u32 %3, %%nclusterid.x;"
                   : "=r"(cluster[0]), "=r"(cluster[1]), "=r"(cluster[2]), "=r"(cluster[3]));
      uint64_t grid;
      asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
      const uint32_t rank = cluster_ctarank(), peer = rank ^ 1u;
      const uint64_t cluster_key = emu::mix(grid * 0x9E3779B97F4A7C15ull ^ (uint64_t(cluster[2]) << 42 | uint64_t(cluster[1]) << 21 | cluster[0]) ^ uint64_t(cluster[3]) << 50);
      emu::g_pair_record.sm = sm, emu::g_pair_record.columns = uint32_t(columns);
      emu::vol(t.base) = uint32_t(emu::kColumns - columns);  // before the record: the even CTA may write here at once
      emu::vol(t.columns) = uint32_t(columns);
      const uint32_t record = smem_u32(&emu::g_pair_record);
      asm volatile("st.release.cluster.shared::cta.u64 [%0], %1;" ::"r"(record), "l"((cluster_key ^ uint64_t(rank) << 1) | 1ull) : "memory");
      const uint32_t peer_record = cluster_address(record, peer);
      uint64_t key = 0;
      for (long long start = clock64(); key != ((cluster_key ^ uint64_t(peer) << 1) | 1ull);) {
        asm volatile("ld.acquire.cluster.shared::cluster.u64 %0, [%1];" : "=l"(key) : "r"(peer_record) : "memory");
        if (clock64() - start > kWaitTrapCycles) emu::fail("tcgen05.alloc.cta_group::2: the pair's other CTA never allocated (rank, peer)", rank, peer);
      }
      const uint32_t peer_sm = emu::ld_cluster_u32(peer_record + 8), peer_columns = emu::ld_cluster_u32(peer_record + 12);
      if (peer_columns != uint32_t(columns)) emu::fail("tcgen05.alloc.cta_group::2 with different column counts in the pair (columns, the other's)", columns, peer_columns);
      t.peer_sm = peer_sm;
      t.paired = 1;
    }
    emu::vol(t.base) = uint32_t(emu::kColumns - columns);
    emu::vol(t.columns) = uint32_t(columns);
    __threadfence();
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(slot), "r"(uint32_t(emu::kColumns - columns)) : "memory");
  }
  __syncwarp();
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, int columns) {
  emu::require_whole_warp("tcgen05.dealloc by part of a warp");
  const uint32_t sm = emu::sm_id();
  emu::TmemStandIn& t = emu::g_tmem[sm];
  __syncwarp();
  if (emu::lane_id() == 0) {
    if (taddr != emu::vol(t.base) || uint32_t(columns) != emu::vol(t.columns)) emu::fail("tcgen05.dealloc of columns not allocated (address, columns)", taddr, uint32_t(columns));
    if (emu::vol(t.paired) != uint32_t(kCtaGroup == 2)) emu::fail("tcgen05.dealloc with a .cta_group other than the allocation's (group, paired)", kCtaGroup, emu::vol(t.paired));
    const uint32_t sms[2] = {sm, kCtaGroup == 2 ? emu::vol(t.peer_sm) : sm};
    for (uint32_t s : sms) {
      emu::Queue& q = emu::g_queue[s];
      const uint32_t head = emu::vol(q.head), tail = emu::vol(q.tail);
      if (head != tail) emu::fail("tcgen05.dealloc with operations pending (pending, the oldest, its kind)", tail - head, head, q.ops[head % emu::kQueue].kind);
    }
    emu::vol(t.columns) = 0;
    emu::vol(t.paired) = 0;
  }
  __syncwarp();
}
// tcgen05.cp .32x128b.warpx4 (see emu::execute_cp).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_cp_scales(uint32_t taddr, uint64_t desc) {
  emu::require_lane_zero(taddr, "tcgen05.cp .32x128b.warpx4 not at lane 0 (lane, column)");
  emu::Op op{};
  op.kind = emu::kCp, op.group = kCtaGroup, op.issuer_rank = cluster_ctarank(), op.desc[0] = desc, op.d_tmem = taddr;
  emu::enqueue(op);
}
// tcgen05.mma .kind::mxf4nvf4.block_scale.scale_vec::4X (see emu::execute_mma). Only the descriptor
// fields the kernel's shapes need are emulated; any other value traps.
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_mma_nvfp4(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t i_desc, uint32_t sfa_tmem,
                                                  uint32_t sfb_tmem, uint32_t accumulate) {
  const uint32_t m_dim = ((i_desc >> 24) & 31) << 4, n_dim = ((i_desc >> 17) & 63) << 3;
  const uint32_t fixed = i_desc & ~((63u << 17) | (31u << 24));
  if (fixed != ((1u << 7) | (1u << 10)) || m_dim != 128u * kCtaGroup || n_dim < 16 || n_dim % 16 || n_dim > 128u)
    emu::fail("instruction descriptor not emulated (need E2M1 x E2M1, E4M3 scales, K-major, M = 128 x .cta_group, N % 16 == 0, N <= 128)", i_desc, n_dim, m_dim);
  emu::require_lane_zero(d_tmem, "tcgen05.mma D not at lane 0 (lane, column)");
  emu::require_lane_zero(sfa_tmem, "tcgen05.mma scale A not at lane 0 (lane, column)");
  emu::require_lane_zero(sfb_tmem, "tcgen05.mma scale B not at lane 0 (lane, column)");
  emu::Op op{};
  op.kind = emu::kMma, op.group = kCtaGroup, op.issuer_rank = cluster_ctarank();
  op.desc[0] = a_desc, op.desc[1] = b_desc, op.d_tmem = d_tmem, op.i_desc = i_desc, op.sfa = sfa_tmem, op.sfb = sfb_tmem, op.accumulate = accumulate;
  emu::enqueue(op);
}
// tcgen05.commit .mbarrier::arrive::one: arrives on the barrier once every earlier operation of this
// thread is complete. The multicast form arrives on the barrier at the same offset in each CTA of
// cta_mask (bit r: cluster rank r).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_commit_multicast(uint32_t bar, uint16_t cta_mask) {
  emu::Op op{};
  op.kind = emu::kCommit, op.group = kCtaGroup, op.issuer_rank = cluster_ctarank(), op.bar = bar, op.cta_mask = cta_mask;
  emu::enqueue(op);
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_commit(uint32_t bar) {
  tcgen05_commit_multicast<kCtaGroup>(bar, uint16_t(1u << cluster_ctarank()));
}
__device__ __forceinline__ void tcgen05_fence_before_sync() { __threadfence_block(); }
__device__ __forceinline__ void tcgen05_fence_after_sync() { __threadfence_block(); }
// tcgen05.ld .32x32b.x32 (+ wait::ld): warp-wide, the warp's lane quarter; thread l gets lane L + l,
// register j column taddr + j. Every column read must have been written, by an operation that has
// completed.
__device__ __forceinline__ void tmem_load_32x32b_x32(float (&v)[32], uint32_t taddr) {
  emu::require_whole_warp("tcgen05.ld by part of a warp");
  if (__shfl_sync(0xFFFFFFFFu, taddr, 0) != taddr) emu::fail("tcgen05.ld address differs within the warp", taddr, 0);
  const uint32_t lane0 = taddr >> 16, column0 = taddr & 0xFFFF, quarter = (threadIdx.x / 32) % 4;
  if (lane0 != 32 * quarter) emu::fail("tcgen05.ld .32x32b not at the warp's lane quarter (lane, quarter)", lane0, quarter);
  emu::TmemStandIn& t = emu::sm_tmem();
  if (column0 < emu::vol(t.base) || column0 + 32 > emu::vol(t.base) + emu::vol(t.columns)) emu::fail("tcgen05.ld outside the allocation (lane, column)", lane0, column0);
  for (uint32_t c = column0; c < column0 + 32; ++c) {
    const uint32_t issued = emu::vol(t.issued[c]), done = emu::vol(t.done[c]);
    if (issued != done) emu::fail("tcgen05.ld of TMEM columns a queued operation has not yet written (first column, columns read from, the operation)", c, column0, issued - 1);
    if (done == 0) emu::fail("tcgen05.ld of TMEM columns nothing has written since tcgen05.alloc (first column, columns read from, 0)", c, column0);
  }
  const uint32_t lane = lane0 + uint32_t(emu::lane_id());
#pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = __uint_as_float(emu::cell(t, lane, column0 + uint32_t(j)));
}
}  // namespace sm100

// The emulation's run-time settings (host side).
inline cudaError_t configure_tcgen05_emulation(uint64_t seed, uint32_t max_delay_ns) {
  const sm100::emu::Config config{seed, max_delay_ns};
  return cudaMemcpyToSymbol(sm100::emu::g_config, &config, sizeof config);
}
}  // namespace nvfp4
#line 6 "csrc/sm100/kernel.cuh"
#else
#line 1 "csrc/sm100/tcgen05.cuh"

// The tcgen05 instructions and sm_100 forms of the bulk copies the sm_100a kernel uses.


namespace nvfp4 {
namespace sm100 {
// box_bytes: the size of the map's box (the emulation checks the destination with it; unused here).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int x, int y, int z, uint32_t bar, uint64_t policy,
                                            uint32_t /*box_bytes*/) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cta.global.mbarrier::complete_tx::bytes.cta_group::1.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy) : "memory");
}
__device__ __forceinline__ void bulk_load_cta(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy) : "memory");
}
// kCtaGroup 2: the instruction of a CTA pair (cta_group::2). alloc and dealloc are issued by a warp
// of each CTA; cp, mma and commit by one thread of the even CTA, for both.
#define NVFP4_CTA_GROUP_ASM(kCtaGroup, text1, text2, ...) \
  do {                                                    \
    if constexpr (kCtaGroup == 1) asm volatile(text1 __VA_ARGS__);  \
    else asm volatile(text2 __VA_ARGS__);                 \
  } while (0)
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_alloc(uint32_t slot, int columns) {
  static_assert(kCtaGroup == 1 || kCtaGroup == 2, ".cta_group is 1 or 2");
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;",
                      "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;", ::"r"(slot), "r"(columns) : "memory");
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
                      "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;", ::: "memory");
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, int columns) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;", "tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;",
                      ::"r"(taddr), "r"(columns) : "memory");
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_cp_scales(uint32_t taddr, uint64_t desc) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;", "tcgen05.cp.cta_group::2.32x128b.warpx4 [%0], %1;",
                      ::"r"(taddr), "l"(desc) : "memory");
}
// D (TMEM) += A x B with per-16-element E4M3 scales of A and B read from TMEM (scale_vec::4X:
// four scales per 64-K MMA step, NVFP4's block size of 16).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_mma_nvfp4(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t i_desc, uint32_t sfa_tmem,
                                                  uint32_t sfb_tmem, uint32_t accumulate) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup,
      "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
      " tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%0], %1, %2, %3, [%4], [%5], p;\n}\n",
      "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
      " tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X [%0], %1, %2, %3, [%4], [%5], p;\n}\n",
      ::"r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(i_desc), "r"(sfa_tmem), "r"(sfb_tmem), "r"(accumulate) : "memory");
}
// Arrives on the barrier once every earlier tcgen05 operation of this thread is complete; the
// multicast form on the barrier at the same offset in each CTA of cta_mask (bit r: cluster rank r).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_commit(uint32_t bar) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];",
                      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%0];", ::"r"(bar) : "memory");
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tcgen05_commit_multicast(uint32_t bar, uint16_t cta_mask) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;",
                      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;",
                      ::"r"(bar), "h"(cta_mask) : "memory");
}
#undef NVFP4_CTA_GROUP_ASM
__device__ __forceinline__ void tcgen05_fence_before_sync() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tcgen05_fence_after_sync() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
// 32 TMEM lanes x 32 fp32 columns: thread l of the warp gets lane L + l, columns taddr .. + 31.
__device__ __forceinline__ void tmem_load_32x32b_x32(float (&v)[32], uint32_t taddr) {
  uint32_t (&r)[32] = reinterpret_cast<uint32_t (&)[32]>(v);
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}
}  // namespace sm100
}  // namespace nvfp4
#line 8 "csrc/sm100/kernel.cuh"
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

template <int kShape>
struct Barriers {
  static constexpr int kStages = TileShape<kShape>::kStages;
  uint32_t base;
  __device__ uint32_t tma(int s) const { return base + 8 * s; }                // stage loaded (in a pair: in both CTAs)
  __device__ uint32_t mma(int s) const { return base + 8 * (kStages + s); }    // stage consumed by the MMAs
  __device__ uint32_t mainloop(int b) const { return base + 8 * (2 * kStages + b); }      // accumulator b complete
  __device__ uint32_t epilogue(int b) const { return base + 8 * (2 * kStages + 2 + b); }  // accumulator b read out (in a pair: by both)
};

// Where tile i lives for this CTA: group, first A row (C row) of the tile, first B row (C column)
// of this CTA's part, and the tile's A rows.
struct TileCoords {
  const GroupArgs* g;
  int group, off_m, off_n, rows;
};
template <int kShape>
__device__ __forceinline__ TileCoords tile_coords(const LaunchArgs& args, int i, uint32_t rank) {
  using S = TileShape<kShape>;
  const Tile t = unpack_tile(args.tiles[i]);
  const GroupArgs* g = &args.groups[t.group];
  const int off_m = t.m_chunk * S::kRowsA;
  return TileCoords{g, t.group, off_m, (t.n_block * S::kCtaGroup + int(rank)) * S::kRowsB, min(S::kRowsA, g->m - off_m)};
}
// The MMA pieces of a tile's N side, each with one 128-row scale atom of A that lies inside the
// matrix (the scales stop at its last atom): one, except in a swapped tile of over 128 A rows.
template <int kShape>
__device__ __forceinline__ int pieces(const TileCoords& tc) { return kShape == kSwapped ? (tc.rows + 127) / 128 : 1; }
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
template <int kShape>
__device__ __forceinline__ void tma_warp(const LaunchArgs& args, uint8_t* smem, Barriers<kShape> bars, int first, int last, uint32_t rank) {
  using S = TileShape<kShape>;
  int stage = 0, filled = 0;
  uint32_t mma_phase = 1;  // a fresh barrier's "previous phase" reads as complete
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords<kShape>(args, i, rank);
    const int k = tc.g->k, atoms = pieces<kShape>(tc), a_row = tc.off_m + int(rank) * S::kCtaRowsA;
    const uint64_t cache_a = kEvictFirst, cache_b = k > 4096 ? kEvictFirst : kEvictLast;
    for (int iter_k = 0; iter_k < k / kBlockK; ++iter_k) {
      if (filled < S::kStages) ++filled;  // the first fill: every stage is free, nothing to wait for
      else mbar_wait_or_trap<S::kIsPair>(bars.mma(stage), mma_phase);
      const StageSmem<kShape> st(smem, stage);
      const int off_k = iter_k * kBlockK;
      tma_load_3d(st.a, &args.tmap_a[tc.group], 0, a_row, off_k / 256, bars.tma(stage), cache_a, S::kABytes);
      tma_load_3d(st.b, &args.tmap_b[tc.group], 0, tc.off_n, off_k / 256, bars.tma(stage), cache_b, S::kBBytes);
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
template <int kShape>
__device__ __forceinline__ void forward_stages(const LaunchArgs& args, Barriers<kShape> bars, int first, int last) {
  using S = TileShape<kShape>;
  int stage = 0;
  uint32_t tma_phase = 0;
  for (int i = first; i < last; ++i)
    for (int iter_k = 0; iter_k < tile_coords<kShape>(args, i, 1).g->k / kBlockK; ++iter_k) {
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
  if constexpr (TileShape<kShape>::kIsPair) tcgen05_commit_multicast<2>(bar, 0b11);
  else tcgen05_commit(bar);
}

// Issues every MMA of the tile (in a pair: the even CTA, for both).
template <int kShape, bool kPersistent>
__device__ __forceinline__ void mma_warp(const LaunchArgs& args, uint8_t* smem, Barriers<kShape> bars, uint32_t tmem, int first, int last) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  constexpr int kGroup = S::kCtaGroup;
  int stage = 0, buffer = 0;
  uint32_t tma_phase = 0, epilogue_phase = 1;
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords<kShape>(args, i, 0);
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
      if (row < tc.g->m && col + 8 * j < n) st_global_8_halves(tc.g->c + int64_t(row) * n + col + 8 * j, v + 8 * j);
  }
}
// Swapped: TMEM lane 32w + l = column off_n + 32w + l of C and TMEM column j = row off_m + j. Each
// 32 x 32 block goes through the warp's staging (32 rows of 32 halves, 64 bytes) so that thread l
// stores 8 consecutive columns (16 bytes) of rows l / 4, l / 4 + 8, ...: each row's 64 bytes in one
// store instruction of four threads.
__device__ __forceinline__ void store_tile_swapped(const TileCoords& tc, uint32_t acc, int warp, int lane, uint8_t* staging) {
  __half* rows = reinterpret_cast<__half*>(staging) + warp * 32 * 32;
  const int n = tc.g->n, col = tc.off_n + warp * 32 + 8 * (lane % 4);
#pragma unroll 1
  for (int chunk = 0; chunk < (tc.rows + 31) / 32; ++chunk) {
    float v[32];
    tmem_load_32x32b_x32(v, acc + chunk * 32);
#pragma unroll
    for (int j = 0; j < 32; ++j) rows[j * 32 + lane] = __float2half_rn(v[j]);
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

template <int kShape, bool kPersistent>
__device__ __forceinline__ void epilogue_warps(const LaunchArgs& args, uint8_t* smem, Barriers<kShape> bars, uint32_t tmem, int first, int last,
                                               uint32_t rank) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int buffer = 0;
  uint32_t mainloop_phase = 0;
  for (int i = first; i < last; ++i) {
    const TileCoords tc = tile_coords<kShape>(args, i, rank);
    mbar_wait_or_trap<S::kIsPair>(bars.mainloop(buffer), mainloop_phase);
    __syncwarp();  // the wait's threads may leave its loop apart; tcgen05.ld is .sync.aligned
    tcgen05_fence_after_sync();
    const uint32_t acc = tmem + (uint32_t(warp * 32) << 16) + buffer * Tmem::kNRows;
    if (S::kIsSwapped) store_tile_swapped(tc, acc, warp, lane, smem + S::kSmemStaging);
    else store_tile(tc, acc, warp, lane);
    // Order this warp's TMEM reads before the MMA warp (of the even CTA) reuses the buffer.
    tcgen05_fence_before_sync();
    if (elect_one()) {
      if (S::kIsPair) mbar_arrive_in(bars.epilogue(buffer), 0);
      else mbar_arrive(bars.epilogue(buffer));
    }
    buffer = (buffer + 1) % Tmem::kBuffers;
    if (buffer == 0) mainloop_phase ^= 1;
  }
}

// One kernel, six instantiations: the three tile shapes, persistent (TMEM double buffer where it
// fits, for more tiles than SMs) or single-tile (one buffer). All wait on the mainloop barrier,
// which tcgen05.commit arrives on once the MMAs are complete, before the epilogue reads TMEM: a
// plain __syncthreads would not order them. A pair's CTAs (a cluster of 2) run the same tiles.
template <int kShape, bool kPersistent>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ LaunchArgs args) {
  using S = TileShape<kShape>;
  using Tmem = TmemPlan<kShape, kPersistent>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const Barriers<kShape> bars{smem_u32(smem + S::kSmemBarriers)};
  const uint32_t tmem_slot = smem_u32(smem + S::kSmemTmemSlot);
  const int warp = threadIdx.x / 32;
  const uint32_t rank = S::kIsPair ? cluster_ctarank() : 0;
  const int unit = blockIdx.x / S::kCtaGroup;
  const int first = args.cta_first_tile[unit], last = args.cta_first_tile[unit + 1];
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
  if (S::kIsPair) cluster_sync();  // the barriers of both CTAs are initialized before either arrives on the other's
  else __syncthreads();
  tcgen05_fence_after_sync();
  // The allocation need not start at column 0: read the address tcgen05.alloc wrote.
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem + S::kSmemTmemSlot);
  if (warp == kTmaWarp) {
    if (elect_one()) tma_warp<kShape>(args, smem, bars, first, last, rank);
  } else if (warp == kMmaWarp) {
    if (elect_one()) {
      if (rank == 0) mma_warp<kShape, kPersistent>(args, smem, bars, tmem, first, last);
      else forward_stages<kShape>(args, bars, first, last);
    }
  } else {
    epilogue_warps<kShape, kPersistent>(args, smem, bars, tmem, first, last, rank);
  }
  tcgen05_fence_before_sync();
  if (S::kIsPair) cluster_sync();  // neither CTA leaves while the other may still read or arrive on its shared memory
  else __syncthreads();
  tcgen05_fence_after_sync();
  if (warp == 1) tmem_dealloc<S::kCtaGroup>(tmem, Tmem::kAllocated);  // .sync.aligned: the whole allocating warp, not one lane
}
}  // namespace sm100

struct Arch {
  using Unswapped = sm100::TileShape<sm100::kUnswapped>;
  static constexpr int kTileM = Unswapped::kRowsA, kTileN = Unswapped::kRowsB, kThreads = sm100::kThreads;
  // Every tile shape takes the same shared memory: their stage counts are chosen to fill it.
  static constexpr int kSmemBytes = std::max({Unswapped::kSmemBytes, sm100::TileShape<sm100::kSwapped>::kSmemBytes,
                                              sm100::TileShape<sm100::kPair>::kSmemBytes});
  static constexpr int kTileShapes = 3;  // sm100::TileShapeId
  // A rows and B rows of a tile of each shape, and the CTAs that run it (a pair: a cluster of 2).
  struct TileGeometry { int a_rows, b_rows, ctas; };
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
  static const void* prepass_kernel() { return nullptr; }
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
  // TMEM columns of a kernel: buffers, M-side scale column, N-side scale column, columns used, columns allocated.
  template <int kShape, bool kPersistent>
  static void tmem_columns(int* out) {
    using T = sm100::TmemPlan<kShape, kPersistent>;
    const int values[5] = {T::kBuffers, T::kSfM, T::kSfN, T::kUsed, T::kAllocated};
    std::memcpy(out, values, sizeof values);
  }
  template <int kShape>
  static void tmem_columns(bool persistent, int* out) { persistent ? tmem_columns<kShape, true>(out) : tmem_columns<kShape, false>(out); }
  static bool tmem_plan(int shape, bool persistent, int* out) {
    shape == 0 ? tmem_columns<0>(persistent, out) : shape == 1 ? tmem_columns<1>(persistent, out) : tmem_columns<2>(persistent, out);
    return true;
  }
  static CUresult encode_dequantized_a(EncodeTiledFn, CUtensorMap*, const void*, int, int, int) { return CUDA_ERROR_NOT_SUPPORTED; }
  template <int kShape>
  static const void* kernel_of(bool persistent) {
    return persistent ? reinterpret_cast<const void*>(&sm100::grouped_gemm<kShape, true>)
                      : reinterpret_cast<const void*>(&sm100::grouped_gemm<kShape, false>);
  }
  static const void* kernel(bool persistent, int /*fixed_n8*/, int shape) {
    return shape == 0 ? kernel_of<0>(persistent) : shape == 1 ? kernel_of<1>(persistent) : kernel_of<2>(persistent);
  }
  static int fixed_n8_at_least(int /*n8*/) { return 0; }  // no kernels built for one wgmma N
  // Packed FP4 as a 3-D tensor of 4-bit elements {256, rows, K/256}, 128B swizzle,
  // 256B L2 promotion; a box is box_rows (128 or 256) x 256 K (one 128-byte swizzled row each). byte_elements
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
#line 10 "csrc/arch.cuh"
#endif
#line 7 "csrc/nvfp4.cu"
#line 1 "csrc/host/plan.cuh"

#line 1 "csrc/host/schedule.cuh"


#line 1 "csrc/host/status.cuh"



namespace nvfp4 {
namespace host {
struct Status {
  char* buf;
  int len;
  bool fail(const char* what, const char* detail = "") {
    if (buf && len > 0) snprintf(buf, size_t(len), "%s%s%s", what, detail[0] ? ": " : "", detail);
    return false;
  }
};
#define NVFP4_CUDA_TRY(status, call)                                            \
  do {                                                                          \
    const cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) return (status).fail(#call, cudaGetErrorString(e_)); \
  } while (0)
}  // namespace host
}  // namespace nvfp4
#line 4 "csrc/host/schedule.cuh"

namespace nvfp4 {
namespace host {
struct GroupShape {
  const void *a, *b, *sfa, *sfb;
  void* c;
  int m, n, k;
  int chunk_rows = Arch::kTileM;  // A rows per tile
  void* a_half = nullptr;         // the prepass's fp16 rows of A (sm_90a)
};

inline bool has_tiles(const GroupShape& s) { return s.m > 0 && s.n > 0; }
// Workspace bytes the prepass needs: fp16 rows of A for every group with work (0 without a prepass).
inline int64_t workspace_bytes(const std::vector<GroupShape>& groups) {
  int64_t bytes = 0;
  for (const GroupShape& s : groups)
    if (Arch::kPrepass && has_tiles(s)) bytes += int64_t(s.m) * s.k * 2;
  return bytes;
}
// Carves the workspace into each group's rows (16-byte aligned: K is a multiple of 64).
inline void assign_workspace(std::vector<GroupShape>& groups, void* workspace) {
  auto* next = static_cast<uint8_t*>(workspace);
  for (GroupShape& s : groups)
    if (Arch::kPrepass && has_tiles(s)) {
      s.a_half = next;
      next += int64_t(s.m) * s.k * 2;
    }
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }
inline int ceil_div(int x, int m) { return (x + m - 1) / m; }
inline int a_box_rows(int m, int chunk_rows, int shape) { return Arch::a_box_rows(m, chunk_rows, shape); }
inline int64_t tile_cost(int m_rows, int k, int shape) { return Arch::tile_cost(m_rows, k, shape); }

struct ScheduledLaunch {
  int fixed_n8 = 0;             // sm_90a: every tile issued with wgmma N = 8 * fixed_n8 (0: each its own)
  int shape = 0;                // the tile shape (Arch::geometry; sm_100a: sm100::TileShapeId)
  std::vector<int> groups;      // global index of each of the launch's groups
  std::vector<uint32_t> tiles;  // packed tiles (launch-local group index), grouped by CTA
  std::vector<int> cta_first;   // CTA c runs tiles [cta_first[c], cta_first[c + 1])
  int64_t busiest = 0;          // the tile costs of its busiest CTA (pair)
  int ctas() const { return int(cta_first.size()) - 1; }
};

inline int count_tiles(const std::vector<GroupShape>& groups, int shape = 0) {
  int tiles = 0;
  for (const GroupShape& s : groups)
    if (has_tiles(s)) tiles += ceil_div(s.m, s.chunk_rows) * ceil_div(s.n, Arch::geometry(shape).b_rows);
  return tiles;
}

// A rows per tile: kTileM, unless the problem has fewer tiles than SMs and the kernel takes tiles of
// any multiple of 8 rows (Arch::kNarrowTiles). Then each group is cut into equal chunks under the
// smallest bound at which the tiles still fit on the SMs, so no SM idles for want of a tile and the
// widest tile, which the others wait for, is as narrow as it can be.
void choose_chunk_rows(std::vector<GroupShape>& groups, int num_sms) {
  for (GroupShape& s : groups) s.chunk_rows = Arch::kTileM;
  if (!Arch::kNarrowTiles || count_tiles(groups) >= num_sms) return;
  auto tiles_under = [&](int bound) {
    for (GroupShape& s : groups) s.chunk_rows = bound;
    return count_tiles(groups);
  };
  int bound = Arch::kTileM;
  while (bound > 8 && tiles_under(bound - 8) <= num_sms) bound -= 8;
  for (GroupShape& s : groups)
    if (has_tiles(s)) s.chunk_rows = round_up(ceil_div(s.m, ceil_div(s.m, bound)), 8);
}

// A tile to schedule: which one, its A rows and K, and its cost.
struct TileItem {
  int group, m_chunk, n_block, rows, k;
  int64_t cost;
};

// After LPT, while it lowers the busiest CTA's cost: move one of its tiles to one of the least
// loaded CTAs, or swap it for a cheaper tile of one of them. LPT leaves the busiest CTA well above
// the average when the tiles are few per CTA and of few sizes (case 1: 448 tiles of 8 sizes on 132
// CTAs, 13% above; after this 5%, and the case runs 8% faster on the H200: docs/PERF.md).
// Every step brings two loads closer together below the old maximum, so it would end by itself;
// the steps are capped to keep the first sight of a large problem short.
void rebalance(const std::vector<TileItem>& tiles, std::vector<int>& cta_of, int ctas) {
  // With several tiles per CTA on average LPT is within a few percent already, and the steps would
  // cost the first sight of a large problem more than they save.
  if (int(tiles.size()) <= ctas || int(tiles.size()) > 4 * ctas) return;
  constexpr int kPartners = 4;  // the least loaded CTAs tried per step
  std::vector<int64_t> load(size_t(ctas), 0);
  std::vector<int> first(size_t(ctas), -1), next(tiles.size(), -1);  // each CTA's tiles as a linked list
  for (size_t t = 0; t < tiles.size(); ++t) {
    load[size_t(cta_of[t])] += tiles[t].cost;
    next[t] = std::exchange(first[size_t(cta_of[t])], int(t));
  }
  std::vector<int> by_load(static_cast<size_t>(ctas));  // the CTAs, least loaded first
  std::iota(by_load.begin(), by_load.end(), 0);
  const auto lighter = [&](int a, int b) { return load[size_t(a)] < load[size_t(b)]; };
  std::stable_sort(by_load.begin(), by_load.end(), lighter);
  auto move = [&](int t, int from, int to) {
    int* link = &first[size_t(from)];
    while (*link != t) link = &next[size_t(*link)];
    *link = next[size_t(t)];
    next[size_t(t)] = std::exchange(first[size_t(to)], t);
    load[size_t(from)] -= tiles[size_t(t)].cost;
    load[size_t(to)] += tiles[size_t(t)].cost;
    cta_of[size_t(t)] = to;
  };
  auto reorder = [&](int c) {  // c's load changed: put it back in order
    by_load.erase(std::find(by_load.begin(), by_load.end(), c));
    by_load.insert(std::upper_bound(by_load.begin(), by_load.end(), c, lighter), c);
  };
  for (int step = 0; step < ctas; ++step) {  // case 1 takes 80
    const int busiest = by_load.back();
    const int64_t top = load[size_t(busiest)];
    int64_t best = top;  // the higher of the two loads a step leaves
    int best_tile = -1, best_cta = -1, best_swap = -1;
    for (int t = first[size_t(busiest)]; t >= 0; t = next[size_t(t)]) {
      const int64_t x = tiles[size_t(t)].cost;
      for (int p = 0; p < std::min(kPartners, ctas - 1); ++p) {
        const int c = by_load[size_t(p)];
        const int64_t moved = std::max(top - x, load[size_t(c)] + x);
        if (moved < best) best = moved, best_tile = t, best_cta = c, best_swap = -1;
        for (int u = first[size_t(c)]; u >= 0; u = next[size_t(u)]) {
          const int64_t y = tiles[size_t(u)].cost;
          const int64_t swapped = std::max(top - x + y, load[size_t(c)] - y + x);
          if (y < x && swapped < best) best = swapped, best_tile = t, best_cta = c, best_swap = u;
        }
      }
    }
    if (best_tile < 0) break;
    move(best_tile, busiest, best_cta);
    if (best_swap >= 0) move(best_swap, best_cta, busiest);
    reorder(busiest);
    reorder(best_cta);
  }
}

// The wgmma N (/ 8) of the kernel built for one N that is to run all of a launch's tiles, or 0 for
// the kernel that chooses each tile's N. Built for one N, the K loop skips that choice (6-10% of a
// K block on the H200: docs/PERF.md) but issues every tile with the widest tile's N (or the
// next N built): taken when, by the tile costs, its busiest CTA is done no later.
int fixed_wgmma_n8(const std::vector<TileItem>& tiles, const std::vector<int>& cta_of, int ctas) {
  int widest = 0;
  for (const TileItem& t : tiles) widest = std::max(widest, ceil_div(t.rows, 8));
  const int n8 = Arch::fixed_n8_at_least(widest);
  if (!n8) return 0;
  std::vector<int64_t> own(size_t(ctas), 0), fixed(size_t(ctas), 0);
  for (size_t t = 0; t < tiles.size(); ++t) {
    own[size_t(cta_of[t])] += tiles[t].cost;
    fixed[size_t(cta_of[t])] += tile_cost(8 * n8, tiles[t].k, 0) * 15 / 16;
  }
  return *std::max_element(fixed.begin(), fixed.end()) <= *std::max_element(own.begin(), own.end()) ? n8 : 0;
}

// Every tile of every group, cut into launches that fit the parameter limits, each spread over
// at most num_sms CTAs largest-first onto the least loaded CTA (LPT), then rebalanced.
// max_pairs: the CTA pairs (clusters of 2) that fit on the GPU at once, which may be fewer than
// half its SMs (a GPU processing cluster with an odd number of free SMs leaves one unpaired).
std::vector<ScheduledLaunch> schedule(const std::vector<GroupShape>& groups, int num_sms, int max_pairs, int shape) {
  const int b_rows = Arch::geometry(shape).b_rows;
  const int units = Arch::geometry(shape).ctas == 1 ? num_sms : std::min(num_sms / 2, max_pairs);  // a pair's two CTAs are one unit
  std::vector<TileItem> items, chunk;
  items.reserve(size_t(count_tiles(groups, shape)));
  for (int g = 0; g < int(groups.size()); ++g) {
    const GroupShape& s = groups[g];
    if (!has_tiles(s)) continue;
    for (int mc = 0; mc < ceil_div(s.m, s.chunk_rows); ++mc)
      for (int nb = 0, rows = std::min(s.chunk_rows, s.m - mc * s.chunk_rows); nb < ceil_div(s.n, b_rows); ++nb)
        items.push_back({g, mc, nb, rows, s.k, tile_cost(rows, s.k, shape)});
  }
  std::vector<ScheduledLaunch> launches;
  std::vector<int> cta_of;                     // per tile of the launch
  std::vector<std::pair<int64_t, int>> load;  // (cost so far, CTA): a min-heap
  for (size_t i = 0; i < items.size();) {
    ScheduledLaunch launch;
    chunk.clear();
    for (; i < items.size(); ++i) {
      const bool new_group = launch.groups.empty() || launch.groups.back() != items[i].group;
      if (int(chunk.size()) == kMaxTilesPerLaunch || (new_group && int(launch.groups.size()) == kMaxGroupsPerLaunch)) break;
      if (new_group) launch.groups.push_back(items[i].group);
      chunk.push_back(items[i]);
      chunk.back().group = int(launch.groups.size()) - 1;
    }
    std::stable_sort(chunk.begin(), chunk.end(), [](const TileItem& x, const TileItem& y) { return x.cost > y.cost; });
    const int ctas = std::min({units, kMaxCtas, int(chunk.size())});
    load.clear();
    for (int c = 0; c < ctas; ++c) load.push_back({0, c});  // equal costs in CTA order: already a heap
    cta_of.resize(chunk.size());
    for (size_t t = 0; t < chunk.size(); ++t) {
      std::pop_heap(load.begin(), load.end(), std::greater<>());
      cta_of[t] = load.back().second;
      load.back().first += chunk[t].cost;
      std::push_heap(load.begin(), load.end(), std::greater<>());
    }
    rebalance(chunk, cta_of, ctas);
    // The tiles grouped by CTA, each CTA's largest first.
    launch.cta_first.assign(size_t(ctas) + 1, 0);
    for (const int c : cta_of) ++launch.cta_first[size_t(c) + 1];
    for (int c = 0; c < ctas; ++c) launch.cta_first[size_t(c) + 1] += launch.cta_first[size_t(c)];
    launch.fixed_n8 = fixed_wgmma_n8(chunk, cta_of, ctas);
    launch.shape = shape;
    std::vector<int64_t> cost(size_t(ctas), 0);
    for (size_t t = 0; t < chunk.size(); ++t) cost[size_t(cta_of[t])] += chunk[t].cost;
    launch.busiest = *std::max_element(cost.begin(), cost.end());
    launch.tiles.resize(chunk.size());
    std::vector<int> next(launch.cta_first.begin(), launch.cta_first.end() - 1);
    for (size_t t = 0; t < chunk.size(); ++t)
      launch.tiles[size_t(next[size_t(cta_of[t])]++)] = pack_tile(chunk[t].group, chunk[t].m_chunk, chunk[t].n_block);
    launches.push_back(std::move(launch));
  }
  return launches;
}

// The launches' summed busiest-CTA costs: what the tile shapes are compared by.
int64_t makespan(const std::vector<ScheduledLaunch>& launches) {
  int64_t total = 0;
  for (const ScheduledLaunch& launch : launches) total += launch.busiest;
  return total;
}

// Which tile shape a problem's launches use: one of Arch's shapes (0 where it has one), or the one
// that leaves the busiest CTAs the lowest cost (ties: the lower shape).
constexpr int kTilesChosen = -1;

// A problem's tile schedule: each group's A chunk rows and the launches. It depends only on every
// group's M, N, K and the SM count, so a plan for a problem seen before on other buffers (a benchmark
// keeps several input sets of one problem alive) takes it from a small cache of recent problems
// instead of recomputing it (12-18 us of a 32-38 us plan for 8 groups on the H200's host).
struct Schedule {
  std::vector<int> chunk_rows;
  std::vector<ScheduledLaunch> launches;
};

// Sets each group's chunk_rows and returns the schedule of the groups.
std::shared_ptr<const Schedule> cached_schedule(std::vector<GroupShape>& groups, int num_sms, int max_pairs, int choice) {
  constexpr size_t kRecentProblems = 16;
  static std::mutex mutex;
  static std::vector<std::pair<std::vector<int>, std::shared_ptr<const Schedule>>> recent;  // most recent first
  if (Arch::kTileShapes == 1) choice = 0;
  std::vector<int> key{num_sms, max_pairs, choice};
  for (const GroupShape& s : groups) key.insert(key.end(), {s.m, s.n, s.k});
  std::shared_ptr<const Schedule> found;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto hit = std::find_if(recent.begin(), recent.end(), [&](const auto& entry) { return entry.first == key; });
    if (hit != recent.end()) {
      std::rotate(recent.begin(), hit, hit + 1);
      found = recent.front().second;
    }
  }
  if (found) {
    for (size_t g = 0; g < groups.size(); ++g) groups[g].chunk_rows = found->chunk_rows[g];
    return found;
  }
  auto made = std::make_shared<Schedule>();
  int64_t best = 0;
  for (int shape = 0; shape < Arch::kTileShapes; ++shape) {
    if (choice != kTilesChosen && choice != shape) continue;
    std::vector<GroupShape> shaped = groups;
    if (shape == 0) choose_chunk_rows(shaped, num_sms);
    else
      for (GroupShape& s : shaped) s.chunk_rows = Arch::geometry(shape).a_rows;
    std::vector<ScheduledLaunch> launches = schedule(shaped, num_sms, max_pairs, shape);
    const int64_t cost = makespan(launches);
    if (made->launches.empty() || cost < best) {
      best = cost;
      groups = std::move(shaped);
      made->launches = std::move(launches);
    }
  }
  for (const GroupShape& s : groups) made->chunk_rows.push_back(s.chunk_rows);
  std::lock_guard<std::mutex> lock(mutex);
  recent.insert(recent.begin(), {std::move(key), made});
  if (recent.size() > kRecentProblems) recent.pop_back();
  return made;
}
}  // namespace host
}  // namespace nvfp4
#line 3 "csrc/host/plan.cuh"

namespace nvfp4 {
namespace host {
// The driver's entry point, looked up once per process (it does not change while the driver is loaded).
bool encode_fn(EncodeTiledFn* fn, Status& st) {
  static EncodeTiledFn cached = nullptr;
  if (!cached) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    NVFP4_CUDA_TRY(st, cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !p) return st.fail("cuTensorMapEncodeTiled is not available from the driver");
    cached = reinterpret_cast<EncodeTiledFn>(p);
  }
  *fn = cached;
  return true;
}

bool encoded(CUresult r, const char* operand, int rows, int k, int box_rows, Status& st) {
  if (r != CUDA_SUCCESS) {
    char detail[112];
    snprintf(detail, sizeof detail, "CUresult %d for %s: %d rows, K=%d, box %d rows", int(r), operand, rows, k, box_rows);
    return st.fail("cuTensorMapEncodeTiled failed", detail);
  }
  return true;
}

struct Plan {
  std::vector<LaunchArgs> launches;
  std::vector<PrepassArgs> prepasses;  // sm_90a: one before each launch
  std::vector<dim3> prepass_grids;     // x: blocks per group, y: the launch's groups
  std::vector<int> grids;
  std::vector<char> persistent;  // per launch: some CTA runs more than one tile
  std::vector<int> fixed_n8;     // per launch: the wgmma N of its kernel / 8 (0: chosen per tile)
  std::vector<int> shapes;       // per launch: its tile shape (Arch::geometry)
  cudaGraphExec_t graph = nullptr;
};

// What submission.py's kernel_unsupported() and kernel_takes() already guarantee, asserted here for
// any other caller of the C API. A group with no output (M = 0 or N = 0) is never read or written,
// so it has no layout to check.
bool check_shape(const GroupShape& s, int g, Status& st) {
  char detail[128];
  if (s.m >= 0 && s.n >= 0 && s.k > 0 && !has_tiles(s)) return true;
  const bool aligned = (reinterpret_cast<uintptr_t>(s.a) | reinterpret_cast<uintptr_t>(s.b) | reinterpret_cast<uintptr_t>(s.c) |
                        reinterpret_cast<uintptr_t>(s.sfa) | reinterpret_cast<uintptr_t>(s.sfb)) % 16 == 0;
  const bool fits_tile_fields = ceil_div(s.m, 128) <= 512 && ceil_div(s.n, Arch::kTileN) <= 65536;
  if (s.m < 0 || s.n < 0 || s.k <= 0 || s.k % Arch::kKMultiple || s.n % 8 || !aligned || !fits_tile_fields) {
    snprintf(detail, sizeof detail, "group %d: M=%d N=%d K=%d (need K %% %d == 0, N %% 8 == 0, 16-byte aligned buffers)", g, s.m,
             s.n, s.k, Arch::kKMultiple);
    return st.fail("unsupported problem", detail);
  }
  return true;
}

// The launch arguments of every launch: schedule, group arguments, tensor maps over the real
// buffers. Touches no kernel, so it also runs (as a dry run) on a GPU that cannot execute them.
bool build_plan(std::vector<GroupShape> groups, int num_sms, int max_pairs, bool byte_elements, int choice, Plan& plan, Status& st) {
  for (int g = 0; g < int(groups.size()); ++g)
    if (!check_shape(groups[g], g, st)) return false;
  const std::shared_ptr<const Schedule> problem = cached_schedule(groups, num_sms, max_pairs, choice);
  EncodeTiledFn encode;
  if (!encode_fn(&encode, st)) return false;
  for (const ScheduledLaunch& sched : problem->launches) {
    LaunchArgs& args = plan.launches.emplace_back();
    std::memset(&args, 0, sizeof args);
    PrepassArgs prepass;
    std::memset(&prepass, 0, sizeof prepass);
    int max_items = 0;
    for (size_t i = 0; i < sched.groups.size(); ++i) {
      const GroupShape& s = groups[size_t(sched.groups[i])];
      GroupArgs& ga = args.groups[i];
      ga.m_chunk_rows = s.chunk_rows;
      ga.a_box_rows = sched.fixed_n8 ? 8 * sched.fixed_n8 : a_box_rows(s.m, s.chunk_rows, sched.shape);  // every row the MMAs read
      if (Arch::kPrepass) {
        if (!s.a_half) return st.fail("no workspace for the dequantized A rows");
        prepass.groups[i] = PrepassGroup{static_cast<const uint8_t*>(s.a), static_cast<const uint8_t*>(s.sfa), static_cast<__half*>(s.a_half),
                                         s.m, s.k};
        max_items = std::max(max_items, s.m * (s.k / Arch::kKMultiple));
      }
      const CUresult a_map = Arch::kPrepass ? Arch::encode_dequantized_a(encode, &args.tmap_a[i], s.a_half, s.m, s.k, ga.a_box_rows)
                                            : Arch::encode_operand(encode, &args.tmap_a[i], s.a, s.m, s.k, ga.a_box_rows, byte_elements);
      if (!encoded(a_map, "A", s.m, s.k, ga.a_box_rows, st) ||
          !encoded(Arch::encode_operand(encode, &args.tmap_b[i], s.b, s.n, s.k, Arch::kTileN, byte_elements), "B", s.n, s.k, Arch::kTileN, st))
        return false;
      ga.sfa = static_cast<const uint8_t*>(s.sfa);
      ga.sfb = static_cast<const uint8_t*>(s.sfb);
      ga.c = static_cast<__half*>(s.c);
      ga.m = s.m;
      ga.n = s.n;
      ga.k = s.k;
    }
    std::copy(sched.tiles.begin(), sched.tiles.end(), args.tiles);
    std::copy(sched.cta_first.begin(), sched.cta_first.end(), args.cta_first_tile);
    plan.grids.push_back(sched.ctas() * Arch::geometry(sched.shape).ctas);
    plan.persistent.push_back(int(sched.tiles.size()) > sched.ctas());
    plan.fixed_n8.push_back(sched.fixed_n8);
    plan.shapes.push_back(sched.shape);
    if (Arch::kPrepass) {
      const int groups = int(sched.groups.size());
      // One thread per 16-byte chunk (8 per item), at most ~16 blocks per SM over all groups.
      const int per_group = std::max(1, std::min(ceil_div(8 * max_items, Arch::kPrepassThreads), ceil_div(16 * num_sms, groups)));
      plan.prepasses.push_back(prepass);
      plan.prepass_grids.push_back(dim3(unsigned(per_group), unsigned(groups)));
    }
  }
  return true;
}

// Every GEMM kernel may use the shared memory it needs: once per device (the attribute is set for
// the current device), not per plan, as the sm_90a kernels are many.
bool prepare_kernels(Status& st) {
  static std::mutex mutex;
  static std::vector<char> prepared;  // per device
  int device = 0;
  NVFP4_CUDA_TRY(st, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) < prepared.size() && prepared[size_t(device)]) return true;
  for (int shape = 0; shape < Arch::kTileShapes; ++shape)
    for (bool persistent : {false, true})
      for (int n8 = 0; n8 <= Arch::kTileM / 8; ++n8)
        if (n8 == 0 || Arch::fixed_n8_at_least(n8) == n8)
          NVFP4_CUDA_TRY(st, cudaFuncSetAttribute(Arch::kernel(persistent, n8, shape), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  Arch::kSmemBytes));
  prepared.resize(std::max(prepared.size(), size_t(device) + 1));
  prepared[size_t(device)] = 1;
  return true;
}

// The cluster a GEMM kernel of the shape launches in: its CTAs per tile (a pair: 2).
cudaLaunchAttribute cluster_of(int shape) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = unsigned(Arch::geometry(shape).ctas), cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  return cluster;
}
// A GEMM launch of `grid` CTAs of the shape on the default queue (the config's zero handle); the
// cluster attribute, which `cluster` holds, only where a tile takes more than one CTA.
cudaLaunchConfig_t gemm_launch(unsigned grid, int shape, cudaLaunchAttribute& cluster) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(Arch::kThreads);
  config.dynamicSmemBytes = size_t(Arch::kSmemBytes);
  cluster = cluster_of(shape);
  config.attrs = &cluster;
  config.numAttrs = Arch::geometry(shape).ctas > 1 ? 1 : 0;
  return config;
}

// How many CTA pairs of the kernels with pair tiles (the last shape, where its tiles take 2 CTAs)
// fit on the current device at once, at most half of num_sms; after prepare_kernels. Once per device.
bool pairs_that_fit(int num_sms, int* max_pairs, Status& st) {
  *max_pairs = num_sms / 2;
  constexpr int kPairShape = Arch::kTileShapes - 1;
  if (Arch::geometry(kPairShape).ctas != 2) return true;
  static std::mutex mutex;
  static std::vector<int> found;  // per device; 0: not asked yet
  int device = 0;
  NVFP4_CUDA_TRY(st, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) >= found.size()) found.resize(size_t(device) + 1, 0);
  if (!found[size_t(device)]) {
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = gemm_launch(2, kPairShape, cluster);
    int clusters = 0;
    NVFP4_CUDA_TRY(st, cudaOccupancyMaxActiveClusters(&clusters, Arch::kernel(true, 0, kPairShape), &config));
    if (clusters < 1) return st.fail("no CTA pair of the sm_100a kernel fits on this GPU");
    found[size_t(device)] = clusters;
  }
  *max_pairs = std::min(*max_pairs, found[size_t(device)]);
  return true;
}

// A plan's first launch, before it has a graph: plain launches on the default queue (nullptr), so
// each kernel starts once the previous one has ended. (Its graph's programmatic edges let the GEMM
// start during the prepass.)
bool launch_plan(Plan& plan, Status& st) {
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    if (Arch::kPrepass) {
      void* prepass_argv[] = {&plan.prepasses[i]};
      NVFP4_CUDA_TRY(st, cudaLaunchKernel(Arch::prepass_kernel(), plan.prepass_grids[i], dim3(Arch::kPrepassThreads), prepass_argv, 0, nullptr));
    }
    void* argv[] = {&plan.launches[i]};
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = gemm_launch(unsigned(plan.grids[i]), plan.shapes[i], cluster);
    NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&config, Arch::kernel(plan.persistent[i], plan.fixed_n8[i], plan.shapes[i]), argv));
  }
  return true;
}

bool instantiate_plan(Plan& plan, Status& st) {
  cudaGraph_t graph;
  NVFP4_CUDA_TRY(st, cudaGraphCreate(&graph, 0));
  cudaGraphNode_t prev = nullptr;
  // One kernel node after the previous one (the nodes form a chain); a programmatic edge lets the
  // GEMM launch before the prepass ends (it waits where it reads the prepass's output). A pair's
  // GEMM node carries its cluster (the prepass passes shape -1).
  auto add = [&](const void* func, dim3 grid, dim3 block, unsigned smem, void* args, bool programmatic, int shape) {
    void* argv[] = {args};
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(func);
    p.gridDim = grid;
    p.blockDim = block;
    p.sharedMemBytes = smem;
    p.kernelParams = argv;
    cudaGraphNode_t node;
    cudaError_t e = cudaGraphAddKernelNode(&node, graph, nullptr, 0, &p);
    if (e == cudaSuccess && shape >= 0 && Arch::geometry(shape).ctas > 1) {
      const cudaLaunchAttribute cluster = cluster_of(shape);
      e = cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeClusterDimension, &cluster.val);
    }
    if (e == cudaSuccess && prev) {
      cudaGraphEdgeData edge{};
      if (programmatic) {
        edge.from_port = cudaGraphKernelNodePortProgrammatic;
        edge.type = cudaGraphDependencyTypeProgrammatic;
      }
#if CUDART_VERSION >= 13000
      e = cudaGraphAddDependencies(graph, &prev, &node, &edge, 1);
#else
      e = cudaGraphAddDependencies_v2(graph, &prev, &node, &edge, 1);  // CUDA 12.3-12.9: edge data in the _v2 form
#endif
    }
    prev = node;
    return e;
  };
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    cudaError_t e = cudaSuccess;
    if (Arch::kPrepass) e = add(Arch::prepass_kernel(), plan.prepass_grids[i], dim3(Arch::kPrepassThreads), 0, &plan.prepasses[i], false, -1);
    if (e == cudaSuccess)
      e = add(Arch::kernel(plan.persistent[i], plan.fixed_n8[i], plan.shapes[i]), dim3(unsigned(plan.grids[i])), dim3(Arch::kThreads),
              unsigned(Arch::kSmemBytes), &plan.launches[i], Arch::kPrepass, plan.shapes[i]);
    if (e != cudaSuccess) {
      cudaGraphDestroy(graph);
      return st.fail("adding the plan's kernels to its graph", cudaGetErrorString(e));
    }
  }
  const cudaError_t e = cudaGraphInstantiate(&plan.graph, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) return st.fail("cudaGraphInstantiate", cudaGetErrorString(e));
  return true;
}
}  // namespace host
}  // namespace nvfp4
#line 8 "csrc/nvfp4.cu"

// ============================================================================ C API (ctypes)
extern "C" {
static std::vector<nvfp4::host::GroupShape> unpack_groups(const int64_t* packed, int num_groups) {
  std::vector<nvfp4::host::GroupShape> groups(size_t(std::max(num_groups, 0)));
  for (int g = 0; g < num_groups; ++g) {
    const int64_t* p = packed + 8 * g;
    groups[size_t(g)] = nvfp4::host::GroupShape{reinterpret_cast<const void*>(p[0]), reinterpret_cast<const void*>(p[1]),
                                                reinterpret_cast<const void*>(p[3]), reinterpret_cast<const void*>(p[4]),
                                                reinterpret_cast<void*>(p[2]), int(p[5]), int(p[6]), int(p[7])};
  }
  return groups;
}

// packed: 8 int64 per group: a, b, c, sfa_reordered, sfb_reordered data pointers, then M, N, K.
// Bytes of device memory a plan for these groups needs as its workspace (0: none).
int64_t nvfp4_workspace_bytes(const int64_t* packed, int num_groups) {
  return nvfp4::host::workspace_bytes(unpack_groups(packed, num_groups));
}
// dry_run 0: a plan to launch. 1: launch arguments only, kernels untouched (for inspection on a GPU
// that cannot run them). 2: as 1, with byte-element tensor maps (sm_100a maps on older drivers).
// workspace: nvfp4_workspace_bytes of device memory that stays with the plan (its graph bakes it in).
// tiles: -1 the tile shape the schedule chooses, or one of Arch's shapes (sm_100a: 0 unswapped, 1
// swapped, 2 swapped over a CTA pair; elsewhere 0, the one shape there is).
int nvfp4_plan_create(const int64_t* packed, int num_groups, int num_sms, int tiles, int dry_run, void* workspace, void** plan_out,
                      char* err, int err_len) {
  using namespace nvfp4::host;
  Status st{err, err_len};
  if (tiles < kTilesChosen || tiles >= nvfp4::Arch::kTileShapes) return st.fail("tiles must be -1 (chosen) or a tile shape of this build"), 1;
  Plan* plan = new (std::nothrow) Plan();
  if (!plan) return st.fail("out of host memory"), 1;
  std::vector<GroupShape> groups = unpack_groups(packed, num_groups);
  assign_workspace(groups, workspace);
  // A dry run assumes that every two SMs can hold a CTA pair; a plan to launch asks the device.
  int max_pairs = num_sms / 2;
  if ((!dry_run && (!prepare_kernels(st) || !pairs_that_fit(num_sms, &max_pairs, st))) ||
      !build_plan(std::move(groups), num_sms, max_pairs, dry_run == 2, tiles, *plan, st)) {
    delete plan;
    return 1;
  }
  *plan_out = plan;
  return 0;
}
// All launches go to the default queue, the one the leaderboard's harness times.
int nvfp4_plan_launch(void* plan, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  return nvfp4::host::launch_plan(*static_cast<nvfp4::host::Plan*>(plan), st) ? 0 : 1;
}
// Builds the plan's CUDA graph; its executable handle is then what nvfp4_graph_launch takes.
int nvfp4_plan_instantiate(void* plan, void** graph_out, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  auto* p = static_cast<nvfp4::host::Plan*>(plan);
  if (!p->graph && !nvfp4::host::instantiate_plan(*p, st)) return 1;
  *graph_out = p->graph;
  return 0;
}
int nvfp4_graph_launch(void* graph) {
  return int(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), nullptr));
}
const char* nvfp4_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }
void nvfp4_plan_destroy(void* plan) {
  auto* p = static_cast<nvfp4::host::Plan*>(plan);
  if (p && p->graph) cudaGraphExecDestroy(p->graph);
  delete p;
}

// ---- inspection, for tests and the dry run
int nvfp4_arch() { return NVFP4_ARCH; }
int nvfp4_tcgen05_emulated() { return NVFP4_TCGEN05_EMULATION; }
// The emulated tensor core's delays (drawn from seed, at most max_delay_ns) and mode (an even seed
// lazy, an odd one eager); a CUDA error code, or -1 in a build without the emulation.
int nvfp4_emulation_configure(uint64_t seed, uint32_t max_delay_ns) {
#if NVFP4_TCGEN05_EMULATION
  return int(nvfp4::configure_tcgen05_emulation(seed, max_delay_ns));
#else
  (void)seed, (void)max_delay_ns;
  return -1;
#endif
}
int nvfp4_plan_launch_count(void* plan) { return int(static_cast<nvfp4::host::Plan*>(plan)->launches.size()); }
// grid (CTAs), persistent flag, fixed wgmma N / 8 (0: chosen per tile), tile shape, number of
// tiles; tiles and cta_first_tile (per CTA, or per pair) copied out (up to the given capacities).
int nvfp4_plan_launch_info(void* plan, int launch, int* grid, int* persistent, int* fixed_n8, int* shape, int* num_tiles,
                           uint32_t* tiles, uint16_t* cta_first) {
  const auto* p = static_cast<nvfp4::host::Plan*>(plan);
  const nvfp4::LaunchArgs& a = p->launches[size_t(launch)];
  *grid = p->grids[size_t(launch)];
  *persistent = p->persistent[size_t(launch)];
  *fixed_n8 = p->fixed_n8[size_t(launch)];
  *shape = p->shapes[size_t(launch)];
  const int units = *grid / nvfp4::Arch::geometry(*shape).ctas;  // a pair's CTAs share one tile range
  *num_tiles = a.cta_first_tile[units];
  std::memcpy(tiles, a.tiles, sizeof(uint32_t) * size_t(*num_tiles));
  std::memcpy(cta_first, a.cta_first_tile, sizeof(uint16_t) * size_t(units + 1));
  return 0;
}
// Group arguments of launch-local group g: sfa, sfb, c, m, n, k, m_chunk_rows, a_box_rows; and its two tensor maps.
int nvfp4_plan_group(void* plan, int launch, int g, int64_t* out, uint8_t* tmap_a, uint8_t* tmap_b) {
  const nvfp4::LaunchArgs& a = static_cast<nvfp4::host::Plan*>(plan)->launches[size_t(launch)];
  const nvfp4::GroupArgs& ga = a.groups[g];
  const int64_t values[8] = {int64_t(reinterpret_cast<uintptr_t>(ga.sfa)), int64_t(reinterpret_cast<uintptr_t>(ga.sfb)),
                             int64_t(reinterpret_cast<uintptr_t>(ga.c)), ga.m, ga.n, ga.k, ga.m_chunk_rows, ga.a_box_rows};
  std::memcpy(out, values, sizeof values);
  std::memcpy(tmap_a, &a.tmap_a[g], sizeof(CUtensorMap));
  std::memcpy(tmap_b, &a.tmap_b[g], sizeof(CUtensorMap));
  return 0;
}
// A rows and B rows per tile of shape 0, the K multiple, and how many tile shapes there are.
int nvfp4_tile_rows(int* tile_m, int* tile_n, int* k_multiple, int* tile_shapes) {
  *tile_m = nvfp4::Arch::kTileM;
  *tile_shapes = nvfp4::Arch::kTileShapes;
  *tile_n = nvfp4::Arch::kTileN;
  *k_multiple = nvfp4::Arch::kKMultiple;
  return 0;
}
// The schedule alone, from sizes (no GPU), for num_sms SMs that hold max_pairs CTA pairs at once,
// tiles as nvfp4_plan_create takes it: per tile 8 ints:
// group, m_chunk, n_block, launch, cta, the tile's A rows, its launch's fixed wgmma N / 8 (0: chosen
// per tile) and tile shape. Returns the tile count.
int nvfp4_schedule(const int* mnk, int num_groups, int num_sms, int max_pairs, int tiles, int* out, int capacity) {
  using namespace nvfp4::host;
  std::vector<GroupShape> groups(static_cast<size_t>(num_groups));
  for (int g = 0; g < num_groups; ++g)
    groups[size_t(g)] = GroupShape{nullptr, nullptr, nullptr, nullptr, nullptr, mnk[3 * g], mnk[3 * g + 1], mnk[3 * g + 2]};
  int count = 0, launch = 0;
  for (const ScheduledLaunch& sched : cached_schedule(groups, num_sms, max_pairs, tiles)->launches) {
    for (int c = 0; c < sched.ctas(); ++c)
      for (int i = sched.cta_first[size_t(c)]; i < sched.cta_first[size_t(c) + 1]; ++i) {
        const nvfp4::Tile t = nvfp4::unpack_tile(sched.tiles[size_t(i)]);
        if (count < capacity) {
          const GroupShape& s = groups[size_t(sched.groups[size_t(t.group)])];
          int* o = out + 8 * count;
          o[0] = sched.groups[size_t(t.group)], o[1] = t.m_chunk, o[2] = t.n_block, o[3] = launch, o[4] = int(c);
          o[5] = std::min(s.chunk_rows, s.m - t.m_chunk * s.chunk_rows), o[6] = sched.fixed_n8, o[7] = sched.shape;
        }
        ++count;
      }
    ++launch;
  }
  return count;
}
// TMEM columns of the sm_100a kernel of a tile shape, persistent (1) or single-tile (0): buffers,
// M-side scale column, N-side scale column, columns used, columns allocated. Returns 1 on
// architectures without TMEM.
int nvfp4_tmem_plan(int shape, int persistent, int* out) {
  return shape >= 0 && shape < nvfp4::Arch::kTileShapes && nvfp4::Arch::tmem_plan(shape, persistent != 0, out) ? 0 : 1;
}
// A rows, B rows and CTAs of a tile of the shape; returns 1 for a shape this build does not have.
int nvfp4_tile_shape(int shape, int* a_rows, int* b_rows, int* ctas) {
  if (shape < 0 || shape >= nvfp4::Arch::kTileShapes) return 1;
  const auto g = nvfp4::Arch::geometry(shape);
  *a_rows = g.a_rows, *b_rows = g.b_rows, *ctas = g.ctas;
  return 0;
}
int64_t nvfp4_scale_byte(int row, int sf_col, int k) {
  return nvfp4::scale_atom_offset(row / 128, sf_col / 4, k) + nvfp4::scale_byte_in_atom(row, sf_col);
}
}
"""
# ----- END BUNDLE


def cuda_source() -> str:
    """The complete CUDA translation unit (built with -DNVFP4_ARCH=90 or 100)."""
    return CUDA_SOURCE


def kernel_target(capability: tuple[int, int]) -> tuple[int, str] | None:
    """(NVFP4_ARCH, nvcc target) of the CUDA kernel for a compute capability, or None: portable path.

    9.0 (H100, H200) runs the sm_90a kernel; 10.x (B200 class) the sm_100a design, built for
    that exact capability ("a" targets run on one capability only); anything else has none.
    """
    major, minor = capability
    if (major, minor) == (9, 0):
        return 90, "90a"
    if major == 10:
        return 100, f"10{minor}a"
    return None


BUILD_TARGETS = {90: "90a", 100: "100a"}  # what `make check-cuda` compiles


def nvcc_flags(arch: int, target: str, emulate_tcgen05: bool = False) -> list[str]:
    """nvcc flags of one build; emulate_tcgen05: the sm_100a kernel with tcgen05 emulated, for sm_90a."""
    flags = ["-O3", "-std=c++17", f"-DNVFP4_ARCH={arch}", f"-gencode=arch=compute_{target},code=sm_{target}"]
    if arch == 90 and not emulate_tcgen05:
        flags.append("-split-compile=0")  # its kernels (one per fixed wgmma N) compiled in parallel, on every core
    return flags + ["-DNVFP4_TCGEN05_EMULATION=1"] if emulate_tcgen05 else flags


EMULATION_ENV = "NVFP4_EMULATE_TCGEN05"  # =1: run the sm_100a kernel with tcgen05 emulated (an sm_90 GPU)
EMULATION_SEED_ENV = "NVFP4_EMULATION_SEED"  # the emulated tensor core's delays (even: lazy, odd: eager); unset: random


# ----------------------------------------------------------------------------- CUDA paths
def _build_library(arch: int, target: str, emulate_tcgen05: bool) -> ctypes.CDLL:
    """JIT-build the CUDA source for one architecture (cached by torch across processes)."""
    import inspect

    from torch.utils.cpp_extension import load_inline

    source = cuda_source()
    flavour = f"sm{target}" + ("_tcgen05_emulated" if emulate_tcgen05 else "")
    name = f"nvfp4_grouped_gemm_{flavour}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
    options = {}
    if "no_implicit_headers" in inspect.signature(load_inline).parameters:
        options["no_implicit_headers"] = True  # no torch header: the build takes seconds, not a minute
    path = load_inline(
        name,
        cpp_sources="",
        cuda_sources=source,
        extra_cuda_cflags=nvcc_flags(arch, target, emulate_tcgen05),
        is_python_module=False,
        **options,
    )
    if not isinstance(path, str):
        from torch.utils.cpp_extension import _get_build_directory

        path = os.path.join(_get_build_directory(name, False), f"{name}.so")
    return bind_library(ctypes.CDLL(path))


def bind_library(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the C API's signatures on a loaded build of cuda_source()."""
    c_int, c_void, c_char = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
    ptr = ctypes.POINTER
    signatures = {
        "nvfp4_workspace_bytes": (ctypes.c_int64, [ptr(ctypes.c_int64), c_int]),
        "nvfp4_plan_create": (c_int, [ptr(ctypes.c_int64), c_int, c_int, c_int, c_int, c_void, ptr(c_void), c_char, c_int]),
        "nvfp4_plan_launch": (c_int, [c_void, c_char, c_int]),
        "nvfp4_plan_instantiate": (c_int, [c_void, ptr(c_void), c_char, c_int]),
        "nvfp4_graph_launch": (c_int, [c_void]),
        "nvfp4_error_string": (c_char, [c_int]),
        "nvfp4_plan_destroy": (None, [c_void]),
        "nvfp4_arch": (c_int, []),
        "nvfp4_tcgen05_emulated": (c_int, []),
        "nvfp4_emulation_configure": (c_int, [ctypes.c_uint64, ctypes.c_uint32]),
        "nvfp4_plan_launch_count": (c_int, [c_void]),
        "nvfp4_plan_launch_info": (c_int, [c_void, c_int, *[ptr(c_int)] * 5, ptr(ctypes.c_uint32), ptr(ctypes.c_uint16)]),
        "nvfp4_plan_group": (c_int, [c_void, c_int, c_int, ptr(ctypes.c_int64), ptr(ctypes.c_uint8), ptr(ctypes.c_uint8)]),
        "nvfp4_tile_rows": (c_int, [ptr(c_int)] * 4),
        "nvfp4_schedule": (c_int, [ptr(c_int), c_int, c_int, c_int, c_int, ptr(c_int), c_int]),
        "nvfp4_scale_byte": (ctypes.c_int64, [c_int, c_int, c_int]),
        "nvfp4_tmem_plan": (c_int, [c_int, c_int, ptr(c_int)]),
        "nvfp4_tile_shape": (c_int, [c_int, *[ptr(c_int)] * 3]),
    }
    for fn, (restype, argtypes) in signatures.items():
        getattr(lib, fn).restype = restype
        getattr(lib, fn).argtypes = argtypes
    return lib


# The sm_100a tile shapes (nvfp4_plan_create's tiles): the one the schedule chooses by its cost,
# 128 rows of A by 128 of B, swapped (128 rows of B by 256 of A), or swapped over a CTA pair (256
# rows of B by 128 of A).
TILES_CHOSEN, TILES_UNSWAPPED, TILES_SWAPPED, TILES_PAIR = -1, 0, 1, 2
TILE_SHAPE_NAMES = {TILES_CHOSEN: "chosen", TILES_UNSWAPPED: "unswapped", TILES_SWAPPED: "swapped", TILES_PAIR: "pair"}

_data_ptr = torch.Tensor.data_ptr  # unbound: one attribute lookup for all the tensors of a call


class _Plan:
    """A launch plan made in C++, the workspace it uses, its CUDA graph once built, and whether it
    still vouches for its tensors.

    The cache key holds the ids of the tensor objects the plan was validated for; the plan vouches
    for them while every one is alive. Once one dies, another object may reuse its id (and its
    address): the next call with that key is validated again before anything runs, and a plan
    nobody revives is released at the next miss.
    """

    __slots__ = ("key", "handle", "workspace", "graph", "alive", "last_used", "_refs", "_dead", "__weakref__")

    def __init__(self, key, handle: int, workspace: torch.Tensor | None, dead: list):
        self.key = key
        self.handle = handle
        self.workspace = workspace  # device memory the plan's launches use (the prepass's fp16 A rows)
        self.graph = None
        self.alive = False
        self.last_used = 0
        self._refs = ()
        self._dead = dead

    def vouch(self, tensors) -> None:
        self._refs = list(map(weakref.ref, tensors, repeat(self._forget)))
        self.alive = True

    def _forget(self, _ref) -> None:
        if self.alive:
            self.alive = False
            self._dead.append(self.key)


class KernelPath:
    """A compiled CUDA path for one architecture: a cache of launch plans and the per-call hot path.

    A plan (tile schedule, tensor maps, kernel arguments, workspace) is keyed by the call's full
    signature: every data pointer and every tensor object of every group, and every problem size.
    Every launch goes to the default queue (CUDA's handle 0, the one the leaderboard's harness
    times), which runs them one after another, so all plans share one workspace (grown when a plan
    needs more) and no two of them ever use it at once.
    The first call with a signature validates the input, makes the plan and launches it directly;
    the second builds the plan's CUDA graph; every later call with the same (still alive) tensors
    replays that graph. Plans whose tensors died are released at the next miss; at most `capacity`
    plans are kept, the least recently used one is released when a new one would exceed that.
    """

    def __init__(self, lib: ctypes.CDLL, device: torch.device, capacity: int = 128):
        self.lib = lib
        self.arch = lib.nvfp4_arch()
        self.emulated = bool(lib.nvfp4_tcgen05_emulated())
        tile_m, tile_n, k_multiple, tile_shapes = (ctypes.c_int() for _ in range(4))
        self.lib.nvfp4_tile_rows(*map(ctypes.byref, (tile_m, tile_n, k_multiple, tile_shapes)))
        self.k_multiple = k_multiple.value
        self.num_sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.tiles = TILES_CHOSEN  # or one of tile_shapes: the tile shape every new plan takes
        self.tile_shapes = tuple(range(tile_shapes.value)) if tile_shapes.value > 1 else (TILES_CHOSEN,)  # what the kernels can run
        self.capacity = capacity
        self._plans = {}
        self._dead = []   # keys of plans whose tensors died (appended by weakref callbacks)
        self._calls = 0   # the clock of last_used
        self._graph_launch = self.lib.nvfp4_graph_launch
        self._workspace = None  # the workspace the plans share
        self._retired = []      # smaller workspaces it replaced, kept (see _shared_workspace)
        if self.emulated:
            seed = os.environ.get(EMULATION_SEED_ENV)
            self.configure_emulation(int(seed) if seed else int.from_bytes(os.urandom(4), "little"))

    def configure_emulation(self, seed: int, max_delay_ns: int = 20000) -> None:
        """The emulated tensor core's run: each operation runs at most max_delay_ns after its issue, the
        delays drawn from seed; an even seed runs operations lazily (only when a wait needs them), an
        odd one eagerly. A detector's message names the seed, so that NVFP4_EMULATION_SEED reproduces it."""
        rc = self.lib.nvfp4_emulation_configure(seed, max_delay_ns)
        if rc:
            raise RuntimeError(f"configuring the tcgen05 emulation failed: {'not an emulation build' if rc < 0 else self.lib.nvfp4_error_string(rc).decode()}")
        self.emulation_seed = seed

    def __call__(self, data: input_t) -> output_t:
        abc, _, sf_reordered, sizes = data
        try:
            tensors = [*chain.from_iterable(abc), *chain.from_iterable(sf_reordered)]  # _flat_tensors, inlined: the hit path
            key = (*map(_data_ptr, tensors), *map(id, tensors), *sizes)
            plan = self._plans.get(key)
        except (TypeError, AttributeError):  # unhashable sizes or non-tensors: let validation say what is wrong
            validate(data)
            if any(type(size) is not tuple for size in sizes):  # sizes given as lists: the same problem
                return self((abc, data[1], sf_reordered, [tuple(size) for size in sizes]))
            raise
        self._calls += 1
        if plan is not None and plan.graph and plan.alive:
            plan.last_used = self._calls
            rc = self._graph_launch(plan.graph)  # _replay, inlined: the hit path
            if rc:
                raise self._launch_error(rc)
            return [group[2] for group in abc]
        return self._uncached_call(key, plan, tensors, data)

    def _replay(self, plan: _Plan) -> None:
        rc = self._graph_launch(plan.graph)
        if rc:
            raise self._launch_error(rc)

    def _launch_error(self, rc: int) -> RuntimeError:
        return RuntimeError(f"nvfp4 grouped gemm: cudaGraphLaunch failed: {self.lib.nvfp4_error_string(rc).decode()}")

    def _shared_workspace(self, nbytes: int, device: torch.device) -> torch.Tensor:
        """At least nbytes of the workspace that the plans share, grown by powers of two. No workspace
        is ever given back to torch's allocator: it tags memory with the queue current at allocation,
        and a caller's side queue could get a block that a graph on the default one still reads. The
        ones a larger workspace replaced stay too (together at most the size of the current one)."""
        if self._workspace is None or self._workspace.numel() < nbytes:
            if self._workspace is not None:
                self._retired.append(self._workspace)
            self._workspace = _new_workspace(1 << (nbytes - 1).bit_length(), device)
        return self._workspace

    def _uncached_call(self, key, plan, tensors, data) -> output_t:
        self._release_dead(keep=key)  # a dead plan with this very key is revived below, after validation
        err = ctypes.create_string_buffer(512)
        pointers, sizes = key[:len(tensors)], key[2 * len(tensors):]  # the key's layout: see __call__
        if plan is None or not plan.alive:
            reason = None
            if not kernel_takes(data[0], data[2], sizes, tensors, pointers, self.k_multiple, torch.cuda.current_device()):
                validate(data)
                reason = kernel_unsupported(data, self.k_multiple)
            if reason:
                warnings.warn(f"nvfp4 grouped gemm: {reason}; using the portable path", stacklevel=3)
                return portable_kernel(data)
        if plan is None:
            while len(self._plans) >= self.capacity:
                self._release(min(self._plans, key=lambda k: self._plans[k].last_used))
            workspace = self._shared_workspace
            plan = self._plans[key] = _Plan(key, *create_plan(self.lib, data, self.num_sms, 0, err, workspace, pointers, self.tiles),
                                            self._dead)
            if self.lib.nvfp4_plan_launch(plan.handle, err, len(err)):
                raise RuntimeError(f"nvfp4 grouped gemm: launch failed: {err.value.decode()}")
        else:
            if not plan.graph:
                graph = ctypes.c_void_p()
                if self.lib.nvfp4_plan_instantiate(plan.handle, ctypes.byref(graph), err, len(err)):
                    raise RuntimeError(f"nvfp4 grouped gemm: graph build failed: {err.value.decode()}")
                plan.graph = graph.value
            self._replay(plan)
        plan.last_used = self._calls
        if not plan.alive:
            plan.vouch(tensors)
        return [group[2] for group in data[0]]

    def _release_dead(self, keep) -> None:
        while self._dead:
            plan = self._plans.get(self._dead.pop())
            if plan is not None and not plan.alive and plan.key != keep:
                self._release(plan.key)

    def _release(self, key) -> None:
        """Drop a plan: its graph is destroyed (CUDA frees an executable graph still in flight when it
        completes); the workspace stays with the path."""
        plan = self._plans.pop(key)
        self.lib.nvfp4_plan_destroy(plan.handle)
        plan.workspace = None  # now, not when the cycle plan -> weakref -> callback is collected
        plan._refs = ()


def _new_workspace(nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def create_plan(lib: ctypes.CDLL, data: input_t, num_sms: int, dry_run: int, err, workspace=_new_workspace,
                pointers=None, tiles: int = TILES_CHOSEN) -> tuple[int, torch.Tensor | None]:
    """A C++ plan for `data` and the workspace it uses (keep it alive as long as the plan).

    workspace(nbytes, device) gives the device memory, when the plan needs any. pointers: the data
    pointers of _flat_tensors(), when the caller has them. Returns (handle, workspace or None);
    dry_run and tiles as nvfp4_plan_create takes them. ValueError on refusal.
    """
    abc, _, sf_reordered, sizes = data
    if pointers is None:
        pointers = [t.data_ptr() for t in _flat_tensors(abc, sf_reordered)]
    g = len(sizes)
    packed = []
    for i, (m, n, k, _) in enumerate(sizes):
        packed += [*pointers[3 * i:3 * i + 3], *pointers[3 * g + 2 * i:3 * g + 2 * i + 2], m, n, k]
    packed = (ctypes.c_int64 * len(packed))(*packed)
    nbytes = lib.nvfp4_workspace_bytes(packed, len(sizes))
    buffer = workspace(nbytes, abc[0][0].device) if nbytes else None
    handle = ctypes.c_void_p()
    pointer = buffer.data_ptr() if buffer is not None else None
    if lib.nvfp4_plan_create(packed, len(sizes), num_sms, tiles, dry_run, pointer, ctypes.byref(handle), err, len(err)):
        raise ValueError(f"nvfp4 grouped gemm: {err.value.decode()}")
    return handle.value, buffer


KERNEL_MAX_M, KERNEL_MAX_N = 512 * 128, 65536 * 128  # the tile fields: 512 row blocks of 128, 65536 column blocks of 128


def kernel_unsupported(data: input_t, k_multiple: int) -> str | None:
    """Why the CUDA kernel cannot take this (valid) input, or None when it can."""
    abc, _, sf_reordered, sizes = data
    if abc[0][0].device.index != torch.cuda.current_device():
        return f"tensors are on {abc[0][0].device}, the current device is cuda:{torch.cuda.current_device()}"
    for g, ((a, b, c), (sfa, sfb), (m, n, k, _)) in enumerate(zip(abc, sf_reordered, sizes)):
        if not (m and n):
            continue  # no output: the kernel reads and writes nothing of this group
        if n % 8:
            return f"group {g}: N={n} is not a multiple of 8"
        if m > KERNEL_MAX_M or n > KERNEL_MAX_N:
            return f"group {g}: M={m}, N={n}: the kernels' tiles take M up to {KERNEL_MAX_M} and N up to {KERNEL_MAX_N}"
        if k % k_multiple:
            return f"group {g}: K={k} is not a multiple of {k_multiple}"
        scale_strides = _packed_scale_strides(k)
        for name, t, strides in (("a", a, None), ("b", b, None), ("c", c, None), ("sfa_reordered", sfa, scale_strides),
                                 ("sfb_reordered", sfb, scale_strides)):
            if t.data_ptr() % 16:
                return f"group {g}: {name} is not 16-byte aligned"
            if strides is None:
                packed = t.is_contiguous()
            else:  # the reordered layout: a permuted view; dimensions of size 1 may have any stride
                packed = t.stride()[:5] == strides or all(s == 1 or st == w for s, st, w in zip(t.shape, t.stride(), strides))
            if not packed:
                return f"group {g}: {name} has strides {t.stride()}, the kernels need the packed layout"
    return None


def _flat_tensors(abc, sf_reordered) -> list:
    """The call's tensors in the order of the plan key: a, b, c of every group, then sfa, sfb of every group."""
    return [*chain.from_iterable(abc), *chain.from_iterable(sf_reordered)]


@lru_cache(maxsize=256)
def _expected_layout(sizes: tuple, k_multiple: int) -> tuple[list, list] | None:
    """For problem sizes that validate() and kernel_unsupported() accept whatever the tensors: the
    shapes of _flat_tensors' tensors, the first five strides of the scale tensors of groups with
    output, and per tensor of _flat_tensors whether the kernel reads or writes it (its group has
    M, N > 0; None when all do). None for any other sizes (the caller then runs the full checks,
    which say what is wrong)."""
    shapes, scale_shapes, scale_strides, used = [], [], [], []
    for size in sizes:
        if type(size) is not tuple or len(size) != 4 or any(type(v) is not int for v in size):
            return None
        m, n, k, l = size
        if l != 1 or k <= 0 or k % 64 or (m and n and (k % k_multiple or n % 8 or m > KERNEL_MAX_M or n > KERNEL_MAX_N)):
            return None
        group = _group_shapes(m, n, k)
        shapes += group[:3]
        scale_shapes += group[3:]
        scale_strides += [_packed_scale_strides(k)] * 2 if m and n else []
        used.append(bool(m and n))
    tensor_used = [u for u in used for _ in range(3)] + [u for u in used for _ in range(2)]
    return shapes + scale_shapes, scale_strides, None if all(used) else tensor_used


_FP4_DTYPES, _F16_DTYPES, _E4M3_DTYPES = frozenset(_FP4), frozenset(_F16), frozenset(_E4M3)
_shape_of, _dtype_of = attrgetter("shape"), attrgetter("dtype")


def kernel_takes(abc, sf_reordered, sizes: tuple, tensors: list, pointers, k_multiple: int, device_index: int) -> bool:
    """True when validate() and kernel_unsupported() would both pass with every tensor on device
    `device_index` (the current device), checked in bulk: C-level maps over the tensors instead of
    a check per attribute (about a third less host time for 8 groups). False means: run them to
    learn why not (they also accept a few rarer layouts that this check does not). `tensors` and
    `pointers` are _flat_tensors(abc, sf_reordered) and their data pointers (so each one is a
    torch.Tensor)."""
    layout = _expected_layout(sizes, k_multiple)
    g = len(sizes)
    if (layout is None or not g or len(abc) != g or len(sf_reordered) != g or set(map(len, abc)) != {3}
            or set(map(len, sf_reordered)) != {2}):
        return False
    shapes, scale_strides, used = layout
    abc_flat, scales = tensors[:3 * g], tensors[3 * g:]
    abc_used, scales_used = abc_flat, scales
    if used is not None:  # groups with no output have no layout to check
        abc_used, scales_used, pointers = [*compress(abc_flat, used)], [*compress(scales, used[3 * g:])], [*compress(pointers, used)]
    return (list(map(_shape_of, tensors)) == shapes
            and set(map(_dtype_of, abc_flat[0::3] + abc_flat[1::3])) <= _FP4_DTYPES
            and set(map(_dtype_of, abc_flat[2::3])) <= _F16_DTYPES
            and set(map(_dtype_of, scales)) <= _E4M3_DTYPES
            and set(map(torch.Tensor.get_device, tensors)) == {device_index}
            and not reduce(or_, pointers, 0) & 15  # every pointer the kernel reads or writes 16-byte aligned
            and all(map(torch.Tensor.is_contiguous, abc_used))
            and [s[:5] for s in map(torch.Tensor.stride, scales_used)] == scale_strides)


# ----------------------------------------------------------------------------- first-use self-check
# Kernels (by NVFP4_ARCH) that this project has never run on a real GPU of their architecture:
# the first call in a process checks them on a small problem before trusting them.
UNVERIFIED_KERNEL_ARCHS = frozenset({100})
SELF_CHECK_ENV = "NVFP4_SELF_CHECK"  # =0: trust the kernel without the check
TOLERANCE = 1e-3  # rtol = atol, the harness's


def self_check_input(device: torch.device) -> input_t:
    """The self-check's problem: three groups (M = 5, below 8; 77, odd; 130, two row blocks), every
    FP4 code, positive E4M3 scales over the whole code range on one side of each group (the other
    at most 0.5, so no output comes near the fp16 limit), random scale padding, NaN-poisoned outputs. Drawn
    on the CPU from its own generator (the global random state is left alone), then moved."""
    generator = torch.Generator().manual_seed(0x5E1F)
    abc, sf_reordered, sizes = [], [], []
    for g, (m, n, k) in enumerate(((5, 128, 256), (77, 256, 512), (130, 136, 256))):
        a, b = (torch.randint(256, (rows, k // 2, 1), dtype=torch.uint8, generator=generator) for rows in (m, n))
        c = torch.full((m, n, 1), float("nan"), dtype=torch.float16)
        scales = []
        for rows, wide in ((m, g % 2 == 0), (n, g % 2 == 1)):
            memory = torch.randint(1, 0x7F if wide else 0x31, (1, -(-rows // 128), k // 64, 32, 4, 4), dtype=torch.uint8, generator=generator)
            scales.append(memory.view(torch.float8_e4m3fn).permute(3, 4, 1, 5, 2, 0).to(device))
        abc.append((a.view(torch.float4_e2m1fn_x2).to(device), b.view(torch.float4_e2m1fn_x2).to(device), c.to(device)))
        sf_reordered.append(tuple(scales))
        sizes.append((m, n, k, 1))
    return abc, [None] * len(sizes), sf_reordered, sizes


def exact_products(data: input_t) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per group, the exact product (float64: every value x scale and every partial sum here is
    exact in it) and how far from it a correct fp16 result may lie: the harness's tolerance, plus
    what fp32 accumulation may add where terms cancel (one rounding per 16-element K block, of at
    most 2^-23 of the sum of |products|, doubled)."""
    abc, _, sf_reordered, sizes = data
    exact = []
    for (a, b, _), (sfa, sfb), (m, n, k, _) in zip(abc, sf_reordered, sizes):
        lhs = _dequantize(a, _plain_scales(sfa, m, k)).double()
        rhs = _dequantize(b, _plain_scales(sfb, n, k)).double()
        value = lhs @ rhs.T
        allowance = TOLERANCE + TOLERANCE * value.abs() + 2 * (k / 16) * 2.0**-23 * (lhs.abs() @ rhs.abs().T)
        exact.append((value.unsqueeze(-1), allowance.unsqueeze(-1)))
    return exact


def first_mismatch(out: output_t, exact: list) -> str | None:
    """Where `out` lies farther from exact_products() than a correct result may (NaN or inf
    included), as one readable phrase; None when nowhere."""
    for g, (got, (value, allowance)) in enumerate(zip(out, exact)):
        bad = ~((got.double() - value).abs() <= allowance)
        if bad.any():
            row, col, _ = bad.nonzero()[0].tolist()
            return (f"group {g}: {int(bad.sum())} of {bad.numel()} elements off, the first at row {row}, column {col}: "
                    f"{got[row, col, 0].item()} instead of {value[row, col, 0].item():.6g}")
    return None


def self_check_failure(path: "KernelPath", device: torch.device) -> str | None:
    """What went wrong when `path` computed self_check_input() (outside exact_products()' bounds,
    or a launch or CUDA error) in any of its tile shapes, or None."""
    chosen = path.tiles
    try:
        for tiles in path.tile_shapes:
            path.tiles = tiles
            data = self_check_input(device)  # new tensors: a plan of their own, in this shape
            try:
                failure = first_mismatch(path(data), exact_products(data))  # waits for the kernel: its CUDA errors surface here
            except (RuntimeError, ValueError) as e:
                failure = f"{type(e).__name__}: {e}"
            if failure is not None:
                return failure if len(path.tile_shapes) == 1 else f"{TILE_SHAPE_NAMES[tiles]} tiles: {failure}"
        return None
    finally:
        path.tiles = chosen


def self_checked(path: "KernelPath", device: torch.device, verdict: str | None = None):
    """`path` when it passes the self-check; otherwise, after one warning on stderr saying what
    failed, a correct fallback: FP4 `torch._scaled_mm` where the GPU has it (not under tcgen05
    emulation), else the portable path.

    verdict: a file through which the processes that use one build share what they found. A
    process about to run the kernel writes "running <pid>" there, then "pass" or "fail: <what>".
    A later process that finds a failure, or a "running" whose process is gone (the kernel killed
    its CUDA context or hung: the leaderboard's compile step runs first and takes that blow), uses
    the fallback without running the kernel; one that finds "pass" checks again all the same."""
    failure = _earlier_failure(verdict)
    if failure is None:
        _record(verdict, f"running {os.getpid()}")
        failure = self_check_failure(path, device)
        _record(verdict, "pass" if failure is None else f"fail: {failure}")
    if failure is None:
        return path
    has_fp4_scaled_mm = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 10
    fallback = Fallback(scaled_mm_kernel if has_fp4_scaled_mm and not path.emulated else portable_kernel, kernel_name(path), failure)
    print(f"nvfp4 grouped gemm: the {fallback.kernel} failed its first-use self-check on {device}: {failure}. Using "
          f"{fallback.path.__name__} for the rest of this process.", file=sys.stderr, flush=True)
    return fallback


class Fallback:
    """A correct path used in place of a kernel that failed its first-use self-check."""

    def __init__(self, path, kernel: str, failure: str):
        self.path, self.kernel, self.failure = path, kernel, failure

    def __call__(self, data: input_t) -> output_t:
        return self.path(data)


def _earlier_failure(verdict: str | None) -> str | None:
    try:
        with open(verdict) as f:
            found = f.read().strip()
    except (OSError, TypeError):  # none yet, or no verdict file in use
        return None
    if found.startswith("fail: "):
        return f"an earlier process found {found[6:]}"
    if found.startswith("running "):
        pid = int(found.split()[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"an earlier check (process {pid}) never finished: the kernel crashed its process or hung"
        except PermissionError:
            pass
    return None


def _record(verdict: str | None, text: str) -> None:
    """Write the verdict file atomically; where it cannot be written, each process checks alone."""
    if verdict is None:
        return
    try:
        with open(f"{verdict}.{os.getpid()}", "w") as f:
            f.write(text + "\n")
        os.replace(f"{verdict}.{os.getpid()}", verdict)
    except OSError:
        pass


def _trusted(path: "KernelPath", device: torch.device):
    if path.arch in UNVERIFIED_KERNEL_ARCHS and os.environ.get(SELF_CHECK_ENV) != "0":
        return self_checked(path, device, verdict=f"{path.lib._name}.self_check")  # beside the library: one per build
    return path


# ----------------------------------------------------------------------------- dispatch
_paths = {}


def select_path(device: torch.device):
    """The implementation for a device: its architecture's CUDA kernel where there is one, else portable.

    NVFP4_PATH=portable forces the portable path; NVFP4_EMULATE_TCGEN05=1 runs the sm_100a kernel
    with its tcgen05 instructions emulated (a test mode for sm_90 GPUs, slow). Both are read when a
    device's path is first chosen; a kernel never run on real hardware is self-checked then.
    """
    if device not in _paths:
        capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        target = kernel_target(capability) if capability else None
        if os.environ.get(EMULATION_ENV) == "1":
            if capability != (9, 0):
                raise RuntimeError(f"{EMULATION_ENV}=1 emulates tcgen05 on an sm_90 GPU; {device} is {capability or 'not a GPU'}")
            _paths[device] = _trusted(KernelPath(_build_library(100, "90a", True), device), device)
        elif target is None or os.environ.get("NVFP4_PATH") == "portable":
            _paths[device] = portable_kernel
        else:
            _paths[device] = _trusted(KernelPath(_build_library(*target, False), device), device)
    return _paths[device]


def custom_kernel(data: input_t) -> output_t:
    path = _paths.get(data[0][0][0].device) or select_path(data[0][0][0].device)
    if not isinstance(path, KernelPath):  # a torch path: the kernel path validates on its own misses
        validate(data)
    return path(data)


def kernel_name(path: "KernelPath") -> str:
    return f"sm_{path.arch}a kernel" + (" with tcgen05 emulated (on an sm_90 GPU)" if path.emulated else "")


def describe_path(path) -> str:
    """A path of select_path() in words."""
    if isinstance(path, KernelPath):
        return kernel_name(path)
    if isinstance(path, Fallback):
        return f"{describe_path(path.path)}, the fallback after the {path.kernel} failed its first-use self-check"
    return {portable_kernel: "portable PyTorch path", scaled_mm_kernel: "FP4 torch._scaled_mm"}[path]


def path_in_use(device: torch.device | None = None) -> str:
    """What custom_kernel runs on `device` (default: the current GPU, else the CPU), in words; the
    harness prints it after the tests."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    path = _paths.get(device)
    return "none yet (custom_kernel has not run on this device)" if path is None else describe_path(path)


# ----------------------------------------------------------------------------- compile step
def build_for_this_machine() -> None:
    """`python3 submission.py`, the leaderboard's compile step: build the kernel for this GPU (and
    self-check it where it has never run on real hardware), so that the test, benchmark and
    leaderboard processes find it in torch's extension cache."""
    if not torch.cuda.is_available():
        print("nvfp4 grouped gemm: no CUDA GPU here, nothing to build (the portable PyTorch path needs none)")
        return
    device = torch.device("cuda", torch.cuda.current_device())
    capability = torch.cuda.get_device_capability(device)
    gpu = f"{torch.cuda.get_device_name(device)} (compute capability {capability[0]}.{capability[1]})"
    start = time.perf_counter()
    path = select_path(device)
    seconds = time.perf_counter() - start
    if isinstance(path, KernelPath):
        checked = ", self-checked" if path.arch in UNVERIFIED_KERNEL_ARCHS and os.environ.get(SELF_CHECK_ENV) != "0" else ""
        print(f"nvfp4 grouped gemm: the {describe_path(path)} for {gpu} is ready in {seconds:.1f} s (built, or loaded from torch's "
              f"extension cache{checked})")
    elif isinstance(path, Fallback):
        print(f"nvfp4 grouped gemm: the CUDA kernel for {gpu} failed its self-check (above); this machine runs the {describe_path(path)}")
    else:
        print(f"nvfp4 grouped gemm: {gpu} runs the {describe_path(path)}, which needs no build")


if __name__ == "__main__":
    build_for_this_machine()
