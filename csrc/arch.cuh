#pragma once
// The kernel of the target architecture and its traits (nvfp4::Arch), which the host side uses.
#include "prelude.cuh"
#include "launch_params.cuh"
#include "ptx.cuh"
#include "output.cuh"
#include "experts.cuh"
#include "arch_tiles.cuh"
#if NVFP4_ARCH == 90
#include "sm90/arch.cuh"
#elif NVFP4_ARCH == 100
#include "sm100/arch.cuh"
#endif

namespace nvfp4 {
// The contract between an architecture's Arch and the host side (csrc/host/, csrc/nvfp4.cu): every
// member the host uses, with its type. An Arch that lacks one, or gives it another signature, fails
// here with the member's name and what it is for, not deep inside a host template.
template <class A>
struct ArchContract {
  using Geometry = typename A::TileGeometry;
  static_assert(std::is_same_v<decltype(A::kTileM), const int>, "kTileM: the most A rows of a tile (of the first shape)");
  static_assert(std::is_same_v<decltype(A::kTileN), const int>, "kTileN: B rows of a TMA box and a scale atom");
  static_assert(std::is_same_v<decltype(A::kSmemBytes), const int>, "kSmemBytes: the most dynamic shared memory of any GEMM kernel");
  static_assert(std::is_same_v<decltype(A::kKMultiple), const int>, "kKMultiple: K must be a multiple of it");
  static_assert(std::is_same_v<decltype(A::kPrepass), const bool>, "kPrepass: A is dequantized into a workspace before the GEMM");
  static_assert(std::is_same_v<decltype(A::kPrepassThreads), const int>, "kPrepassThreads: a prepass block's threads");
  static_assert(std::is_same_v<decltype(A::kTileShapes), const int>, "kTileShapes: how many tile shapes the schedule weighs");
  static_assert(std::is_same_v<decltype(A::kNarrowTiles), const bool>, "kNarrowTiles: a tile may have any multiple of 8 A rows");
  static_assert(std::is_same_v<decltype(Geometry::a_rows), int> && std::is_same_v<decltype(Geometry::b_rows), int> &&
                    std::is_same_v<decltype(Geometry::ctas), int>,
                "TileGeometry: a_rows, b_rows and ctas of a tile shape");
  static_assert(std::is_same_v<decltype(&A::geometry), Geometry (*)(int)>, "geometry(shape)");
  static_assert(std::is_same_v<decltype(&A::threads), int (*)(int)>, "threads(shape): a GEMM CTA's threads");
  static_assert(std::is_same_v<decltype(&A::smem_bytes), int (*)(int)>, "smem_bytes(shape): a GEMM CTA's dynamic shared memory");
  static_assert(std::is_same_v<decltype(&A::worth_trying), bool (*)(int, int)>,
                "worth_trying(most_rows, shape): the schedule weighs the shape");
  static_assert(std::is_same_v<decltype(&A::kernel), const void* (*)(bool, int, int)>,
                "kernel(persistent, fixed_n8, shape): the list form's GEMM");
  static_assert(std::is_same_v<decltype(&A::fixed_n8_at_least), int (*)(int, int)>,
                "fixed_n8_at_least(n8, shape): the GEMMs built for one N");
  static_assert(std::is_same_v<decltype(&A::prepass_kernel), const void* (*)()>,
                "prepass_kernel(): the list form's prepass (null without)");
  static_assert(std::is_same_v<decltype(&A::expert_shape), int (*)(int, int, int, int, int)>,
                "expert_shape(most_rows, experts, n, k, units): the MoE forms' tile shape");
  static_assert(std::is_same_v<decltype(&A::expert_kernel), const void* (*)(int, int)>,
                "expert_kernel(shape, fixed_n8): the MoE forms' GEMM");
  static_assert(std::is_same_v<decltype(&A::expert_schedule_kernel), const void* (*)()>, "expert_schedule_kernel(): the kernel before it");
  static_assert(std::is_same_v<decltype(&A::a_box_rows), int (*)(int, int, int)>,
                "a_box_rows(m, chunk_rows, shape): rows a TMA load of A brings");
  static_assert(std::is_same_v<decltype(&A::tile_cost), int64_t (*)(int, int, int)>, "tile_cost(m_rows, k, shape): for load balancing");
  static_assert(std::is_same_v<decltype(&A::tmem_plan), bool (*)(int, bool, int*)>,
                "tmem_plan(shape, persistent, out): TMEM columns (sm_100a)");
  static_assert(std::is_same_v<decltype(&A::encode_operand), CUresult (*)(EncodeTiledFn, CUtensorMap*, const void*, int, int, int, bool)>,
                "encode_operand(...): a tensor map of packed FP4 rows");
  static_assert(std::is_same_v<decltype(&A::encode_dequantized_a), CUresult (*)(EncodeTiledFn, CUtensorMap*, const void*, int, int, int)>,
                "encode_dequantized_a(...): a tensor map of the prepass's fp16 rows");
};
template struct ArchContract<Arch>;
}  // namespace nvfp4
