#pragma once
#include "../prelude.cuh"

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
