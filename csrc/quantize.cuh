#pragma once
#include <cuda_fp8.h>
#include "prelude.cuh"
#include "launch_params.cuh"

namespace nvfp4 {
// ============================================================================ NVFP4 quantization of activations
// x [batch][rows][K] fp16 or bf16 to packed E2M1 codes [batch][rows][K/2] (two a byte, the lower K
// in the low nibble) and E4M3 scales, one per 16 elements, in the reordered layout per batch entry
// ([ceil(rows/128)][K/64][512-byte atom]). Per 16 elements: amax = max |x| in fp32, the scale s =
// amax / 6 (fp32) rounded to nearest-even E4M3 and saturated at 448, each code the nearest-even
// E2M1 value of x / s (the fp32 quotient), saturated at 6. With a global scale G (the dequantization
// scale a checkpoint stores as input_scale, so that x ~ code * s * G): s = E4M3((amax / 6) / G), two
// fp32 quotients, and each code that of x / (s * G), the fp32 product then the fp32 quotient; G = 1
// gives the one-level recipe exactly. nvfp4/quantize.py holds the same recipe in PyTorch; the two
// agree bit for bit (tests). What special values become (docs/MOE.md): NaN counts as +inf in amax
// and becomes a zero code; inf saturates its block's scale to 448 and itself to +-6; a block whose
// scale rounds to 0 gets zero codes; the sign of every code is the sign bit of x.
struct QuantizeArgs {
  const void* x;
  uint8_t* q;
  uint8_t* sf;
  const int* masked_m;  // optional [batch]: only rows below masked_m[b] (clamped to [0, rows]) are written
  int batch, rows, k, bf16;
  const float* global_scale;  // optional: G of (batch entry b, row r) at b * batch_stride + r * row_stride
  int global_scale_batch_stride, global_scale_row_stride;
  // The routed form (nvfp4.fused_moe; batch 1, with a global scale): output row r quantizes x row
  // source_row[r], with the global scale of its expert e (offsets[e] <= r < offsets[e + 1]), its
  // scales at row sf_offsets[e] + r - offsets[e] of the offset form's layout; rows of no expert are
  // not written. Null offsets: not routed.
  const int* source_row;
  const int* offsets;     // [experts + 1]
  const int* sf_offsets;  // [experts]
  int experts;
};

// The expert whose rows [offsets[e], offsets[e + 1]) hold row r, or -1 (offsets non-decreasing).
__device__ __forceinline__ int expert_of_row(const int* offsets, int experts, int r) {
  if (r < offsets[0] || r >= offsets[experts]) return -1;
  int lo = 0, hi = experts - 1;  // the last expert whose first row is at or before r
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
constexpr int kQuantizeThreads = 256;
// Each thread quantizes two neighbouring blocks: four 16-byte loads in flight, one 16-byte store of
// codes and one 2-byte store of scales. At most 40 registers, so that six CTAs fit an SM: on the
// H200 the kernel is latency-bound, and 2 blocks a thread at 6 CTAs an SM beat 1 block at 6 or 8
// and 2 at 2 or 8 (docs/perf-log/log.md).
constexpr int kQuantizeBlocksPerThread = 2;
constexpr int kQuantizeCtasPerSm = 6;
static_assert(kQuantizeBlocksPerThread == 2, "quantize_nvfp4 loads, packs and stores exactly two blocks a thread");

// Two elements at a time, as the halves of a 32-bit word: fp16x2 or bf16x2 instructions (sm_90+).
// The host tests give quantize_block the same operations emulated (nvfp4_quantize_blocks_on_host).
template <bool kBf16>
struct Pairs;
template <>
struct Pairs<false> {
  static __device__ uint32_t max_nan(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t ge(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("set.ge.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t gt(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("set.gt.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t both(float x) {
    uint32_t d;
    asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(d) : "f"(x));
    return d;
  }
  static __device__ float low(uint32_t w) {
    float f;
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.f32.f16 %0, l;\n}" : "=f"(f) : "r"(w));
    return f;
  }
};
template <>
struct Pairs<true> {
  static __device__ uint32_t max_nan(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t ge(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("set.ge.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t gt(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("set.gt.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ uint32_t both(float x) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(d) : "f"(x));
    return d;
  }
  static __device__ float low(uint32_t w) { return __uint_as_float(w << 16); }
};

// The nearest-even E2M1 magnitude codes of a pair's x / s, saturated at 6, NaN giving 0, found by
// comparing |x| with the scale's bounds t * s for the rounding thresholds t = 0.25, 0.75, 1.25,
// 1.75, 2.5, 3.5, 5 (ties to even: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4,
// 5 -> 4) in a binary search of three compares. No division: t * s is exact in 16 bits (at most 7
// significant bits, from 2^-11 to 2240), and x (fp16 or bf16: at most 11 bits) either equals it
// or differs by at least 2^-12 of it, far more than the 2^-24 by which rounding x / s to fp32 could
// move the quotient, so the rounded quotient passes t exactly when x passes t * s. A zero scale's
// bounds are NaN, which nothing passes. Each half of the result holds its element's code.
template <class P>
struct E2m1Bounds {
  uint32_t t[7];  // t_i * s in both halves
  __host__ __device__ explicit E2m1Bounds(float s) {
    const float thresholds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (int i = 0; i < 7; ++i) t[i] = s > 0.0f ? P::both(thresholds[i] * s) : 0x7FFF7FFFu;
  }
  __host__ __device__ uint32_t magnitudes(uint32_t abs_pair) const {
    const uint32_t four = P::ge(abs_pair, t[3]);                           // code >= 4
    const uint32_t two = P::ge(abs_pair, (four & t[5]) | (~four & t[1]));  // code % 4 >= 2
    const uint32_t upper = (two & t[6]) | (~two & t[4]), lower = (two & t[2]) | (~two & t[0]);
    const uint32_t one = P::gt(abs_pair, (four & upper) | (~four & lower));  // code odd
    return (four & 0x00040004u) | (two & 0x00020002u) | (one & 0x00010001u);
  }
};

// One block of 16 elements (8 pairs, element 2i in the low half of w[i]): its 16 codes, two a byte
// with the lower element in the low nibble, and its E4M3 scale byte.
struct QuantizedBlock {
  uint32_t codes[2];
  uint8_t scale;
};
// The block's |x| pairs and its amax in fp32 (NaN as +inf).
template <class P>
__host__ __device__ inline float block_amax(const uint32_t (&w)[8], uint32_t (&abs_pair)[8]) {
  uint32_t amax = 0;
  for (int i = 0; i < 8; ++i) abs_pair[i] = w[i] & 0x7FFF7FFFu, amax = P::max_nan(amax, abs_pair[i]);
  amax = P::max_nan(amax, byte_perm(amax, 0, 0x1032));  // both halves: the block's, NaN if any is
  const float amax_f = P::low(amax);
  return isnan(amax_f) ? INFINITY : amax_f;
}
// A block's codes from each pair's two magnitude codes (magnitude(i): the low half's in bits 0-2,
// the high half's in bits 16-18), with the signs of x, and its scale byte.
template <class Magnitudes>
__host__ __device__ inline QuantizedBlock pack_block(const uint32_t (&w)[8], Magnitudes magnitude, __nv_fp8_storage_t scale) {
  // Per pair, each half's code and sign as a nibble (low half in bits 0-3, high in 16-19), then the
  // two nibbles as byte 0, four pairs to a word.
  uint32_t packed[8];
  for (int i = 0; i < 8; ++i) {
    const uint32_t nibbles = magnitude(i) | ((w[i] >> 12) & 0x00080008u);
    packed[i] = nibbles | (nibbles >> 12);
  }
  QuantizedBlock q;
  for (int h = 0; h < 2; ++h)
    q.codes[h] =
        byte_perm(byte_perm(packed[4 * h], packed[4 * h + 1], 0x0040), byte_perm(packed[4 * h + 2], packed[4 * h + 3], 0x0040), 0x5410);
  q.scale = scale;
  return q;
}
__host__ __device__ inline float e4m3_value(__nv_fp8_storage_t byte) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(byte, __NV_E4M3)));
}

template <class P>
__host__ __device__ inline QuantizedBlock quantize_block(const uint32_t (&w)[8]) {
  uint32_t abs_pair[8];
  const __nv_fp8_storage_t byte = __nv_cvt_float_to_fp8(block_amax<P>(w, abs_pair) / 6.0f, __NV_SATFINITE, __NV_E4M3);
  const E2m1Bounds<P> bounds(e4m3_value(byte));
  return pack_block(w, [&](int i) { return bounds.magnitudes(abs_pair[i]); }, byte);
}

// The nearest-even E2M1 magnitude code of a non-negative fp32 quotient (NaN: 0), saturated at 6:
// the count of rounding thresholds it passes (E2m1Bounds' ties).
__host__ __device__ inline uint32_t e2m1_magnitude(float v) {
  return uint32_t(v > 0.25f) + uint32_t(v >= 0.75f) + uint32_t(v > 1.25f) + uint32_t(v >= 1.75f) + uint32_t(v > 2.5f) +
         uint32_t(v >= 3.5f) + uint32_t(v > 5.0f);
}
// The two-level recipe (global scale g): the codes from fp32 quotients x / (s * g), which are not
// exact in 16 bits, so each is divided rather than compared with the scale's bounds.
template <class P>
__host__ __device__ inline QuantizedBlock quantize_block(const uint32_t (&w)[8], float g) {
  uint32_t abs_pair[8];
  const __nv_fp8_storage_t byte = __nv_cvt_float_to_fp8(block_amax<P>(w, abs_pair) / 6.0f / g, __NV_SATFINITE, __NV_E4M3);
  const float scale = e4m3_value(byte) * g;
  auto magnitude = [&](float x) { return scale > 0.0f ? e2m1_magnitude(x / scale) : 0u; };
  return pack_block(w, [&](int i) { return magnitude(P::low(abs_pair[i])) | magnitude(P::low(abs_pair[i] >> 16)) << 16; }, byte);
}

// Where a thread's grid-stride walk over the items [batch][padded rows][units of a row] stands (a
// unit: the kQuantizeBlocksPerThread blocks of 16 elements a thread quantizes at once), advanced by
// the stride without dividing: the divisions happen once per thread, not once per item, and would
// otherwise be the kernel's most expensive instructions (64-bit integer division is a long
// software sequence). b reaches batch when the walk is done.
struct QuantizeCursor {
  int b, r, j;                // batch entry, row (up to the padded rows), unit along K
  int step_rows, step_units;  // the stride as whole rows and the units left over
  int padded_rows, units_per_row;
  __host__ __device__ QuantizeCursor(int64_t item, int64_t stride, int padded_rows_, int units_per_row_)
      : padded_rows(padded_rows_), units_per_row(units_per_row_) {
    const int64_t row_of_all = item / units_per_row;
    j = int(item % units_per_row);
    b = int(row_of_all / padded_rows), r = int(row_of_all % padded_rows);
    step_rows = int(stride / units_per_row), step_units = int(stride % units_per_row);
  }
  __host__ __device__ void advance() {
    j += step_units;
    r += step_rows;
    if (j >= units_per_row) j -= units_per_row, ++r;
    if (r >= padded_rows) {  // past the entry's rows: into a later entry (several when rows are few)
      const int entries = r / padded_rows;
      b += entries, r -= entries * padded_rows;
    }
  }
};

// One thread per (row, two 16-element blocks j, j + 1): their 16 codes as 16 bytes and their scale
// bytes, neighbours in one atom (j is even). Scale rows past `rows` up to the atom's 128 are written
// as zeros; rows a mask leaves out are not written. kTwoLevel: with a global scale, whose divisions
// need more registers than the one-level recipe's 40 (fewer CTAs an SM instead of spills).
template <bool kBf16, bool kTwoLevel>
__global__ void __launch_bounds__(kQuantizeThreads, kTwoLevel ? kQuantizeCtasPerSm - 2 : kQuantizeCtasPerSm)
    quantize_nvfp4(const __grid_constant__ QuantizeArgs a) {
  const int units_per_row = a.k / (16 * kQuantizeBlocksPerThread), padded_rows = (a.rows + 127) / 128 * 128;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  for (QuantizeCursor at(first, stride, padded_rows, units_per_row); at.b < a.batch; at.advance()) {
    const int b = at.b, r = at.r, j = at.j * kQuantizeBlocksPerThread;
    const int rows = a.masked_m ? min(max(a.masked_m[b], 0), a.rows) : a.rows;
    if (r >= rows && (a.masked_m || a.offsets || r < a.rows)) continue;  // masked out (padding rows of an unmasked call get zero scales)
    int sf_row = r, expert = b, source = r;                              // the row's scale row, the global scale's batch index, x's row
    if (kTwoLevel && a.offsets) {
      expert = expert_of_row(a.offsets, a.experts, r);
      if (expert < 0) continue;
      sf_row = a.sf_offsets[expert] + r - a.offsets[expert], source = a.source_row[r];
    }
    uint16_t* scales = reinterpret_cast<uint16_t*>(a.sf + (int64_t(b) * (padded_rows / 128) * (a.k / 64) * 512) +
                                                   scale_atom_offset(sf_row / 128, j / 4, a.k) + scale_byte_in_atom(sf_row, j));
    if (r >= a.rows) {
      *scales = 0;
      continue;
    }
    const int64_t row = int64_t(b) * a.rows + r;
    const uint4* x = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.x) + (int64_t(b) * a.rows + source) * a.k + j * 16);
    uint4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __ldcs(x + i);  // read once: evict first
    const uint32_t w0[8] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
    const uint32_t w1[8] = {v[2].x, v[2].y, v[2].z, v[2].w, v[3].x, v[3].y, v[3].z, v[3].w};
    QuantizedBlock q0, q1;
    if constexpr (kTwoLevel) {
      const float g = a.global_scale[int64_t(expert) * a.global_scale_batch_stride + int64_t(r) * a.global_scale_row_stride];
      q0 = quantize_block<Pairs<kBf16>>(w0, g), q1 = quantize_block<Pairs<kBf16>>(w1, g);
    } else {
      q0 = quantize_block<Pairs<kBf16>>(w0), q1 = quantize_block<Pairs<kBf16>>(w1);
    }
    *reinterpret_cast<uint4*>(a.q + row * (a.k / 2) + j * 8) = uint4{q0.codes[0], q0.codes[1], q1.codes[0], q1.codes[1]};
    *scales = uint16_t(q0.scale | (q1.scale << 8));
  }
}
}  // namespace nvfp4
