#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include "prelude.cuh"
#include "launch_params.cuh"

namespace nvfp4 {
// ============================================================================ NVFP4 quantization of activations
// x [batch][rows][K] fp16 or bf16 to packed E2M1 codes [batch][rows][K/2] (two a byte, the lower K
// in the low nibble) and E4M3 scales, one per 16 elements, in the reordered layout per batch entry
// ([ceil(rows/128)][K/64][512-byte atom]). Per 16 elements: amax = max |x| in fp32, the scale s =
// amax / 6 (fp32) rounded to nearest-even E4M3 and saturated at 448, each code the nearest-even
// E2M1 value of x / s (the fp32 quotient), saturated at 6. nvfp4/quantize.py holds the same recipe in
// PyTorch; the two agree bit for bit (tests). What special values become (docs/MOE.md): NaN counts
// as +inf in amax and becomes a zero code; inf saturates its block's scale to 448 and itself to
// +-6; a block whose scale rounds to 0 gets zero codes; the sign of every code is the sign bit of x.
struct QuantizeArgs {
  const void* x;
  uint8_t* q;
  uint8_t* sf;
  const int* masked_m;  // optional [batch]: only rows below masked_m[b] (clamped to [0, rows]) are written
  int batch, rows, k, bf16;
};
constexpr int kQuantizeThreads = 256;

// The nearest-even E2M1 magnitude code of x / s, saturated at 6, NaN giving 0, from |x| against
// the scale's bounds t * s for the rounding thresholds t = 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 (ties
// to even: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4). No division: t * s
// is exact in fp32 (at most 7 significant bits), and x (fp16 or bf16: at most 11) either equals it
// or differs by at least 2^-12 of it, far more than the 2^-24 by which rounding x / s to fp32 could
// move the quotient, so the rounded quotient passes t exactly when x passes t * s. A zero scale's
// bounds are NaN, which nothing passes.
struct E2m1Bounds {
  float t[7];
  __device__ explicit E2m1Bounds(float s) {
    const float thresholds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
#pragma unroll
    for (int i = 0; i < 7; ++i) t[i] = s > 0.0f ? thresholds[i] * s : __int_as_float(0x7FFFFFFF);
  }
  __device__ uint32_t magnitude(float x) const {
    const float a = fabsf(x);
    return uint32_t(a > t[0]) + uint32_t(a >= t[1]) + uint32_t(a > t[2]) + uint32_t(a >= t[3]) + uint32_t(a > t[4]) + uint32_t(a >= t[5]) +
           uint32_t(a > t[6]);
  }
};

template <bool kBf16>
__device__ __forceinline__ void load_16(const void* x, int64_t element, float (&v)[16]) {
  const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + element);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint4 w = __ldcs(p + i);  // read once: evict first
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (kBf16) {
        const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&words[j]);
        v[8 * i + 2 * j] = __bfloat162float(h.x), v[8 * i + 2 * j + 1] = __bfloat162float(h.y);
      } else {
        const __half2 h = *reinterpret_cast<const __half2*>(&words[j]);
        v[8 * i + 2 * j] = __half2float(h.x), v[8 * i + 2 * j + 1] = __half2float(h.y);
      }
    }
  }
}

// One thread per (row, 16-element block): its 16 codes as 8 bytes and its scale byte. Scale rows
// past `rows` up to the atom's 128 are written as zeros; rows a mask leaves out are not written.
template <bool kBf16>
__global__ void __launch_bounds__(kQuantizeThreads) quantize_nvfp4(const __grid_constant__ QuantizeArgs a) {
  const int blocks_per_row = a.k / 16, padded_rows = (a.rows + 127) / 128 * 128;
  const int64_t items = int64_t(a.batch) * padded_rows * blocks_per_row;
  for (int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; item < items; item += int64_t(gridDim.x) * blockDim.x) {
    const int j = int(item % blocks_per_row);
    const int64_t row_of_all = item / blocks_per_row;
    const int b = int(row_of_all / padded_rows), r = int(row_of_all % padded_rows);
    const int rows = a.masked_m ? min(max(a.masked_m[b], 0), a.rows) : a.rows;
    if (r >= rows && (a.masked_m || r < a.rows)) continue;  // masked out (padding rows of an unmasked call get zero scales)
    uint8_t* scale = a.sf + (int64_t(b) * (padded_rows / 128) * (a.k / 64) * 512) + scale_atom_offset(r / 128, j / 4, a.k) + scale_byte_in_atom(r, j);
    if (r >= a.rows) {
      *scale = 0;
      continue;
    }
    const int64_t row = int64_t(b) * a.rows + r;
    float v[16];
    load_16<kBf16>(a.x, row * a.k + j * 16, v);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) amax = fmaxf(amax, isnan(v[i]) ? INFINITY : fabsf(v[i]));
    const __nv_fp8_storage_t byte = __nv_cvt_float_to_fp8(__fdiv_rn(amax, 6.0f), __NV_SATFINITE, __NV_E4M3);
    const E2m1Bounds bounds(__half2float(__half(__nv_cvt_fp8_to_halfraw(byte, __NV_E4M3))));
    uint32_t codes[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i) codes[i / 8] |= ((signbit(v[i]) ? 8u : 0u) | bounds.magnitude(v[i])) << (4 * (i % 8));
    *reinterpret_cast<uint2*>(a.q + row * (a.k / 2) + j * 8) = uint2{codes[0], codes[1]};
    *scale = byte;
  }
}
}  // namespace nvfp4
