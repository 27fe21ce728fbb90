#pragma once
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
#include "tcgen05_emulation_machine.cuh"

namespace nvfp4 {
namespace sm100 {
namespace emu {
// The SMs whose queues may write this CTA's TMEM or read its shared memory: its own, and in a pair
// the other CTA's (kMaxSms: none).
struct QueueSms {
  uint32_t sm[2];
};
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
    if (g_config.seed & 1)
      limit = tail;
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
  if (op.group == 2 && (op.issuer_rank & 1))
    fail("a .cta_group::2 operation issued by the odd CTA of the pair (kind, rank)", op.kind, op.issuer_rank);
  if (op.group != 1 + vol(g_tmem[sm].paired))
    fail("an operation of a .cta_group other than the allocation's (kind, group, paired)", op.kind, op.group, vol(g_tmem[sm].paired));
  if (vol(q.issuer_thread) == kNoThread) vol(q.issuer_thread) = threadIdx.x;
  if (vol(q.issuer_thread) != threadIdx.x)
    fail("tcgen05 operations issued by two threads of one CTA: not emulated (thread, the other, kind)", threadIdx.x, q.issuer_thread,
         op.kind);
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
    if (column < vol(t.base) || column + written > vol(t.base) + vol(t.columns))
      fail("an operation writing TMEM columns outside the allocation (kind, first column, columns)", op.kind, column, written);
    mark_issued(t, column, written, op.seq);
  }
  const uint64_t delay =
      g_config.max_delay_ns ? mix(g_config.seed * 0x100000001B3ull ^ uint64_t(sm) << 40 ^ op.seq) % (g_config.max_delay_ns + 1ull) : 0;
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
          if (operand(op, which, v).rank == rank && dst < op.hi[which][v] && op.lo[which][v] < dst + bytes)
            fail(what, kb_of(dst), op.seq, op.kind);
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
    if (start == 0)
      start = clock64();
    else if (clock64() - start > kWaitTrapCycles)
      emu::fail("mbarrier wait timed out (barrier, parity)", bar, parity);
    __nanosleep(256);
  }
  if (issuer) emu::vol(q.issuer_waiting) = 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) { mbar_wait_or_trap(bar, parity); }
// box_bytes: the map's box (the map itself does not say its size here).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int x, int y, int z, uint32_t bar, uint64_t policy,
                                            uint32_t box_bytes) {
  emu::check_copy_destination(dst, box_bytes,
                              "TMA load into shared memory a pending operation still reads (KB of shared memory, operation, kind)");
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulk_load_cta(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  emu::check_copy_destination(dst, bytes,
                              "bulk copy into shared memory a pending operation still reads (KB of shared memory, operation, kind)");
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
  if (columns < 32 || columns > emu::kColumns || (columns & (columns - 1)))
    emu::fail("tcgen05.alloc of a column count not a power of 2 in [32, 512]", columns, 0);
  if (emu::lane_id() == 0) {
    if (emu::vol(t.columns))
      emu::fail("tcgen05.alloc while this SM's TMEM is allocated (base, columns)", emu::vol(t.base), emu::vol(t.columns));
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
      const uint64_t cluster_key =
          emu::mix(grid * 0x9E3779B97F4A7C15ull ^ (uint64_t(cluster[2]) << 42 | uint64_t(cluster[1]) << 21 | cluster[0]) ^
                   uint64_t(cluster[3]) << 50);
      emu::g_pair_record.sm = sm, emu::g_pair_record.columns = uint32_t(columns);
      emu::vol(t.base) = uint32_t(emu::kColumns - columns);  // before the record: the even CTA may write here at once
      emu::vol(t.columns) = uint32_t(columns);
      const uint32_t record = smem_u32(&emu::g_pair_record);
      asm volatile("st.release.cluster.shared::cta.u64 [%0], %1;" ::"r"(record), "l"((cluster_key ^ uint64_t(rank) << 1) | 1ull)
                   : "memory");
      const uint32_t peer_record = cluster_address(record, peer);
      uint64_t key = 0;
      for (long long start = clock64(); key != ((cluster_key ^ uint64_t(peer) << 1) | 1ull);) {
        asm volatile("ld.acquire.cluster.shared::cluster.u64 %0, [%1];" : "=l"(key) : "r"(peer_record) : "memory");
        if (clock64() - start > kWaitTrapCycles)
          emu::fail("tcgen05.alloc.cta_group::2: the pair's other CTA never allocated (rank, peer)", rank, peer);
      }
      const uint32_t peer_sm = emu::ld_cluster_u32(peer_record + 8), peer_columns = emu::ld_cluster_u32(peer_record + 12);
      if (peer_columns != uint32_t(columns))
        emu::fail("tcgen05.alloc.cta_group::2 with different column counts in the pair (columns, the other's)", columns, peer_columns);
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
    if (taddr != emu::vol(t.base) || uint32_t(columns) != emu::vol(t.columns))
      emu::fail("tcgen05.dealloc of columns not allocated (address, columns)", taddr, uint32_t(columns));
    if (emu::vol(t.paired) != uint32_t(kCtaGroup == 2))
      emu::fail("tcgen05.dealloc with a .cta_group other than the allocation's (group, paired)", kCtaGroup, emu::vol(t.paired));
    const uint32_t sms[2] = {sm, kCtaGroup == 2 ? emu::vol(t.peer_sm) : sm};
    for (uint32_t s : sms) {
      emu::Queue& q = emu::g_queue[s];
      const uint32_t head = emu::vol(q.head), tail = emu::vol(q.tail);
      if (head != tail)
        emu::fail("tcgen05.dealloc with operations pending (pending, the oldest, its kind)", tail - head, head,
                  q.ops[head % emu::kQueue].kind);
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
    emu::fail("instruction descriptor not emulated (need E2M1 x E2M1, E4M3 scales, K-major, M = 128 x .cta_group, N % 16 == 0, N <= 128)",
              i_desc, n_dim, m_dim);
  emu::require_lane_zero(d_tmem, "tcgen05.mma D not at lane 0 (lane, column)");
  emu::require_lane_zero(sfa_tmem, "tcgen05.mma scale A not at lane 0 (lane, column)");
  emu::require_lane_zero(sfb_tmem, "tcgen05.mma scale B not at lane 0 (lane, column)");
  emu::Op op{};
  op.kind = emu::kMma, op.group = kCtaGroup, op.issuer_rank = cluster_ctarank();
  op.desc[0] = a_desc, op.desc[1] = b_desc, op.d_tmem = d_tmem, op.i_desc = i_desc, op.sfa = sfa_tmem, op.sfb = sfb_tmem,
  op.accumulate = accumulate;
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
  if (column0 < emu::vol(t.base) || column0 + 32 > emu::vol(t.base) + emu::vol(t.columns))
    emu::fail("tcgen05.ld outside the allocation (lane, column)", lane0, column0);
  for (uint32_t c = column0; c < column0 + 32; ++c) {
    const uint32_t issued = emu::vol(t.issued[c]), done = emu::vol(t.done[c]);
    if (issued != done)
      emu::fail("tcgen05.ld of TMEM columns a queued operation has not yet written (first column, columns read from, the operation)", c,
                column0, issued - 1);
    if (done == 0)
      emu::fail("tcgen05.ld of TMEM columns nothing has written since tcgen05.alloc (first column, columns read from, 0)", c, column0);
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
