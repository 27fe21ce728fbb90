#pragma once
// The tcgen05 instructions and sm_100 forms of the bulk copies the sm_100a kernel uses.
#include "config.cuh"

namespace nvfp4 {
namespace sm100 {
// box_bytes: the size of the map's box (the emulation checks the destination with it; unused here).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int x, int y, int z, uint32_t bar, uint64_t policy,
                                            uint32_t /*box_bytes*/) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cta.global.mbarrier::complete_tx::bytes.cta_group::1.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulk_load_cta(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar), "l"(policy)
               : "memory");
}
// kCtaGroup 2: the instruction of a CTA pair (cta_group::2). alloc and dealloc are issued by a warp
// of each CTA; cp, mma and commit by one thread of the even CTA, for both.
#define NVFP4_CTA_GROUP_ASM(kCtaGroup, text1, text2, ...) \
  do {                                                    \
    if constexpr (kCtaGroup == 1)                         \
      asm volatile(text1 __VA_ARGS__);                    \
    else                                                  \
      asm volatile(text2 __VA_ARGS__);                    \
  } while (0)
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_alloc(uint32_t slot, int columns) {
  static_assert(kCtaGroup == 1 || kCtaGroup == 2, ".cta_group is 1 or 2");
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;",
                      "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;", ::"r"(slot), "r"(columns) : "memory");
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
                      "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;", :: : "memory");
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, int columns) {
  NVFP4_CTA_GROUP_ASM(kCtaGroup, "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;",
                      "tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;", ::"r"(taddr), "r"(columns) : "memory");
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
                      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;", ::"r"(bar),
                      "h"(cta_mask) : "memory");
}
#undef NVFP4_CTA_GROUP_ASM
__device__ __forceinline__ void tcgen05_fence_before_sync() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tcgen05_fence_after_sync() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
// 32 TMEM lanes x 32 fp32 columns: thread l of the warp gets lane L + l, columns taddr .. + 31.
__device__ __forceinline__ void tmem_load_32x32b_x32(float (&v)[32], uint32_t taddr) {
  uint32_t (&r)[32] = reinterpret_cast<uint32_t (&)[32]>(v);
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]),
        "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]),
        "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]),
        "=r"(r[31])
      : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}
}  // namespace sm100
}  // namespace nvfp4
