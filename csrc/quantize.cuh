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
// E2M1 value of x / s (fp32 division), saturated at 6. nvfp4/quantize.py holds the same recipe in
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

// The nearest-even E2M1 magnitude code of |v| (ties: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
// 3.5 -> 4, 5 -> 4), 6 and above saturated; NaN gives 0.
__device__ __forceinline__ uint32_t e2m1_magnitude(float v) {
  const float a = fabsf(v);
  return uint32_t(a > 0.25f) + uint32_t(a >= 0.75f) + uint32_t(a > 1.25f) + uint32_t(a >= 1.75f) + uint32_t(a > 2.5f) +
         uint32_t(a >= 3.5f) + uint32_t(a > 5.0f);
}

template <bool kBf16>
__device__ __forceinline__ void load_64(const void* x, int64_t element, float (&v)[64]) {
  const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + element);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
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

// One thread per (row, 64-element K block): its 64 codes as 32 bytes, its four scales as one word of
// their atom (scale columns 4kb .. 4kb + 3 of a row are consecutive bytes). Scale rows past `rows`
// up to the atom's 128 are written as zeros; rows a mask leaves out are not written.
template <bool kBf16>
__global__ void __launch_bounds__(kQuantizeThreads) quantize_nvfp4(const __grid_constant__ QuantizeArgs a) {
  const int k_blocks = a.k / 64, padded_rows = (a.rows + 127) / 128 * 128;
  const int64_t items = int64_t(a.batch) * padded_rows * k_blocks;
  for (int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; item < items; item += int64_t(gridDim.x) * blockDim.x) {
    const int kb = int(item % k_blocks);
    const int64_t row_of_all = item / k_blocks;
    const int b = int(row_of_all / padded_rows), r = int(row_of_all % padded_rows);
    const int rows = a.masked_m ? min(max(a.masked_m[b], 0), a.rows) : a.rows;
    if (r >= rows && (a.masked_m || r < a.rows)) continue;  // masked out (padding rows of an unmasked call get zero scales)
    uint32_t* scale_word = reinterpret_cast<uint32_t*>(a.sf + (int64_t(b) * (padded_rows / 128) * k_blocks * 512) +
                                                       scale_atom_offset(r / 128, kb, a.k) + scale_byte_in_atom(r, 0));
    if (r >= a.rows) {
      *scale_word = 0;
      continue;
    }
    const int64_t row = int64_t(b) * a.rows + r;
    float v[64];
    load_64<kBf16>(a.x, row * a.k + kb * 64, v);
    uint32_t scales = 0, codes[8];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) amax = fmaxf(amax, isnan(v[16 * s + i]) ? INFINITY : fabsf(v[16 * s + i]));
      const __nv_fp8_storage_t byte = __nv_cvt_float_to_fp8(__fdiv_rn(amax, 6.0f), __NV_SATFINITE, __NV_E4M3);
      const float scale = __half2float(__half(__nv_cvt_fp8_to_halfraw(byte, __NV_E4M3)));
      scales |= uint32_t(byte) << (8 * s);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float x = v[16 * s + 8 * w + i];
          const uint32_t magnitude = scale > 0.0f ? e2m1_magnitude(__fdiv_rn(x, scale)) : 0u;
          word |= ((signbit(x) ? 8u : 0u) | magnitude) << (4 * i);
        }
        codes[2 * s + w] = word;
      }
    }
    uint4* q = reinterpret_cast<uint4*>(a.q + row * (a.k / 2) + kb * 32);
    q[0] = uint4{codes[0], codes[1], codes[2], codes[3]};
    q[1] = uint4{codes[4], codes[5], codes[6], codes[7]};
    *scale_word = scales;
  }
}
}  // namespace nvfp4
