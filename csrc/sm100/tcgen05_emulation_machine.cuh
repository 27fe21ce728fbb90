#pragma once
// ---------------------------------------------------------------------------- tcgen05, emulated: the machine
// The emulated tensor core of tcgen05_emulation.cuh (which says how it behaves): TMEM stand-ins, the
// per-SM operation queues, operands read from shared memory, and the execution of cp, mma and commit.
#include "config.cuh"
#include "../ptx.cuh"

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
  uint32_t base, columns;            // the live allocation; columns == 0: none
  uint32_t paired, peer_sm;          // a cta_group::2 allocation and the SM of the pair's other CTA
  uint32_t issued[kColumns];         // per column: 1 + sequence number of the last operation issued to write it (0: none)
  uint32_t done[kColumns];           // the same, of the last one executed
  uint32_t cells[kLanes][kColumns];  // 32-bit TMEM words
  float a_scaled[kLanes][64];        // mma scratch: A x SFA of the operation being executed
};
__device__ TmemStandIn g_tmem[kMaxSms];

enum OpKind : uint32_t { kCp = 1, kMma = 2, kCommit = 3 };
struct Op {
  uint32_t kind, group, seq, issuer_rank;  // group: the .cta_group; issuer_rank: %cluster_ctarank of the issuing CTA
  uint64_t ready_ns;                       // issue time + delay
  uint64_t desc[2];                        // mma: A, B; cp: the source
  uint32_t d_tmem, i_desc, sfa, sfb, accumulate;
  uint32_t bar, cta_mask;       // commit: the barrier offset and the CTAs it arrives at
  uint32_t sum[2][2];           // checksum at issue [operand][CTA of the pair]
  uint32_t lo[2][2], hi[2][2];  // shared-memory bytes read [lo, hi) [operand][CTA of the pair]
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
__device__ __forceinline__ volatile T& vol(T& x) {
  return const_cast<volatile T&>(x);
}
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
struct SmemDesc {
  uint32_t start, lbo, sbo, swizzle;
};
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
  if (d.swizzle == 0)
    return d.start + uint32_t(row / 8) * d.sbo + uint32_t(row % 8) * 16 + uint32_t(byte / 16) * d.lbo + uint32_t(byte % 16);
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
    if (cell(t, uint32_t(32 * q + r % 32), column + uint32_t(r / 32)) != w)
      fail("scale factors differ between lane quarters (row, column)", r, column);
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
        fail(
            "a shared-memory source of a queued operation changed between its issue and its execution (operation, KB of shared memory, "
            "source: 0 A or a cp's, 1 B; + 2 in the pair's odd CTA)",
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
    require_written(t, op.sfb & 0xFFFF, uint32_t(n_dim + 31) / 32, op.seq,
                    "a tcgen05.mma reads B scale columns nothing has written (operation, column)");
    if (op.accumulate)
      require_written(t, op.d_tmem & 0xFFFF, uint32_t(n_dim), op.seq,
                      "a tcgen05.mma accumulates into columns nothing has written (operation, column)");
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
  if (op.kind == kCp)
    execute_cp(op, issuer_sm);
  else if (op.kind == kMma)
    execute_mma(op, issuer_sm);
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
}  // namespace emu
}  // namespace sm100
}  // namespace nvfp4
