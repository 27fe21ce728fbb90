#pragma once
#include "../prelude.cuh"

namespace nvfp4 {
// ============================================================================ FP4 / FP8 decoding
// Two E2M1 codes, nibbles q and q + 4 of w, to a half2 holding value * 2^-14 each, exactly: the
// sign goes to bit 15 and the exponent and mantissa bits to bits 11..9, so E2M1's subnormal
// (0.5) becomes an fp16 subnormal and every other code a normal with the same significand.
// (With q a constant the compiler folds the shifts into one per half.)
__host__ __device__ __forceinline__ uint32_t fp4x2_to_half2(uint32_t w, int q) {
  const uint32_t x = w >> (4 * q);
  return ((x << 12) & 0x80008000u) | ((x << 9) & 0x0E000E00u);
}
// All eight codes of w at once, h[q] = fp4x2_to_half2(w, q), in 13 instructions where four calls take
// 16-17 (the B fragments' decode is most of a K block's instructions when A has few rows). Each
// byte's high code is spread with its magnitude at bits 1..3 and its sign at bit 7, the low code
// the same way; the halves of h[2] and h[3] are then a mask away (bytes 1 and 3: magnitude at bits
// 9..11, sign at 15), those of h[0] and h[1] a shift by a byte and a mask.
__host__ __device__ __forceinline__ void fp4x8_to_half2x4(uint32_t w, uint32_t (&h)[4]) {
  const uint32_t hi = w & 0xF0F0F0F0u, hi_spread = hi | (hi >> 3);
  const uint32_t lo = w & 0x0F0F0F0Fu, lo_spread = (lo << 1) | (lo << 4);
  h[0] = (lo_spread << 8) & 0x8E008E00u;  // codes 0 and 4 (bytes 0 and 2)
  h[1] = (hi_spread << 8) & 0x8E008E00u;  // codes 1 and 5
  h[2] = lo_spread & 0x8E008E00u;         // codes 2 and 6 (bytes 1 and 3)
  h[3] = hi_spread & 0x8E008E00u;         // codes 3 and 7
}
// E4M3 scale byte to fp16 scale * 2^7, exactly (at most 448 * 128 = 57344). Multiplying a decoded
// code (value * 2^-14) by it gives value * scale * 2^-7: at most 6 significant bits, so exact in
// fp16, and normal for every product of the official data. The kernel undoes 2^-14 at the end.
__device__ __forceinline__ __half2 scale_to_half2(uint32_t byte) {
  const unsigned short bits = static_cast<unsigned short>(((byte & 0x80u) << 8) | ((byte & 0x7Fu) << 7));  // scale * 2^-8
  const __half scaled = __hmul(__ushort_as_half(bits), __ushort_as_half(0x7800));                     // * 2^15
  return __half2half2(scaled);
}
__device__ __forceinline__ uint32_t half2_as_bits(__half2 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t x, uint32_t s) {
  return half2_as_bits(__hmul2(*reinterpret_cast<__half2*>(&x), *reinterpret_cast<__half2*>(&s)));
}
constexpr float kUnscale = 16384.0f;  // 2^14: undoes the 2^-7 of both operands
}  // namespace nvfp4
