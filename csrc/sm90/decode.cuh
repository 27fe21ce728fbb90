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
// All eight codes of w at once, h[q] = fp4x2_to_half2(w, q), in 11 SASS instructions where four
// calls take 16-17 (the B fragments' decode is most of a K block's instructions when A has few rows).
// Each byte's high code and its low code are laid out as a half wants them, magnitude at bits 1..3
// and sign at bit 7 of the byte; the halves of h[2] and h[3] (bytes 1 and 3: bits 9..11 and 15)
// are then a mask away, those of h[0] and h[1] a byte permutation.
__host__ __device__ __forceinline__ void fp4x8_to_half2x4(uint32_t w, uint32_t (&h)[4]) {
  const uint32_t hi = ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u);
  const uint32_t lo = ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u);
  h[0] = byte_perm(lo, 0, 0x2404);  // codes 0 and 4: bytes 0 and 2 to bytes 1 and 3, zeros below
  h[1] = byte_perm(hi, 0, 0x2404);  // codes 1 and 5
  h[2] = lo & 0xFF00FF00u;          // codes 2 and 6: bytes 1 and 3
  h[3] = hi & 0xFF00FF00u;          // codes 3 and 7
}
// E4M3 scale byte to fp16 scale * 2^7, exactly (at most 448 * 128 = 57344). Multiplying a decoded
// code (value * 2^-14) by it gives value * scale * 2^-7: at most 6 significant bits, so exact in
// fp16, and normal for every product of the official data. The kernel undoes 2^-14 at the end.
__device__ __forceinline__ __half2 scale_to_half2(uint32_t byte) {
  const unsigned short bits = static_cast<unsigned short>(((byte & 0x80u) << 8) | ((byte & 0x7Fu) << 7));  // scale * 2^-8
  const __half scaled = __hmul(__ushort_as_half(bits), __ushort_as_half(0x7800));                          // * 2^15
  return __half2half2(scaled);
}
__device__ __forceinline__ uint32_t bits_of(__half2 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t x, uint32_t s) {
  return bits_of(__hmul2(*reinterpret_cast<__half2*>(&x), *reinterpret_cast<__half2*>(&s)));
}
constexpr float kUnscale = 16384.0f;  // 2^14: undoes the 2^-7 of both operands
}  // namespace nvfp4
