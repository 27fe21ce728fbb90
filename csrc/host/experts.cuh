#pragma once
#include "../quantize.cuh"
#include "plan.cuh"

namespace nvfp4 {
namespace host {
// The MoE forms (experts.cuh) from the host: two launches on the caller's queue, no host sync and
// no state kept between calls, so a captured call replays with whatever counts the GPU holds then.
struct ExpertProblem {
  const void *a, *b, *sfa, *sfb, *masked_m, *offsets, *sf_offsets;
  void* c;
  int experts, total_rows, rows_per_expert, sf_rows, n, k;
  OutputArgs out;
};

// The most rows an expert can have (the masked form's rows per expert; the offset form's total).
inline int expert_rows_bound(const ExpertProblem& p) { return p.masked_m ? p.rows_per_expert : p.total_rows; }
// The wgmma N (/ 8) the MoE GEMM is built for, from the most rows an expert can have, or 0 for the
// kernel choosing each tile's N. Built for one N, the K loop skips that choice (as the list form's
// fixed_wgmma_n8) but runs every tile at the bound's N: taken when, by the tile costs, that N with
// its K loop 1/16 cheaper (as the list form weighs it) costs no more than an expert of half the
// bound at its own N would.
inline int expert_fixed_n8(int most_rows, int k, int shape) {
  if (most_rows > Arch::geometry(shape).a_rows) return 0;
  const int n8 = Arch::fixed_n8_at_least((std::max(most_rows, 1) + 7) / 8, shape);
  if (!n8 || !Arch::expert_kernel(shape, n8)) return 0;
  return tile_cost(8 * n8, k, shape) * 15 / 16 <= tile_cost((most_rows + 1) / 2, k, shape) ? n8 : 0;
}
inline int64_t expert_workspace_bytes(const ExpertProblem& p) {
  return expert_table_bytes(p.experts) + (Arch::kPrepass ? int64_t(p.total_rows) * p.k * 2 : 0);
}

bool check_experts(const ExpertProblem& p, Status& st) {
  char detail[160];
  const bool aligned = (reinterpret_cast<uintptr_t>(p.a) | reinterpret_cast<uintptr_t>(p.b) | reinterpret_cast<uintptr_t>(p.c) |
                        reinterpret_cast<uintptr_t>(p.sfa) | reinterpret_cast<uintptr_t>(p.sfb)) %
                           16 ==
                       0;
  const int64_t most_tiles = (int64_t(expert_rows_bound(p)) / 8 + 1) * p.experts * ((p.n + 127) / 128);
  if (p.experts < 1 || p.experts > kMaxExperts || p.n <= 0 || p.n % 8 || p.k <= 0 || p.k % Arch::kKMultiple || p.total_rows < 0 ||
      p.sf_rows < 0 || !aligned || most_tiles >= (int64_t(1) << 31) || int64_t(p.experts) * p.n >= (int64_t(1) << 31) ||
      (!p.masked_m && !(p.offsets && p.sf_offsets)) || (p.out.alpha_stride != 0 && p.out.alpha_stride != 1) ||
      reinterpret_cast<uintptr_t>(p.out.alpha) % 4) {
    snprintf(detail, sizeof detail, "E=%d (1..%d) N=%d K=%d rows=%d (need N %% 8 == 0, K %% %d == 0, 16-byte aligned buffers, alpha to 4)",
             p.experts, kMaxExperts, p.n, p.k, p.total_rows, Arch::kKMultiple);
    return st.fail("unsupported MoE problem", detail);
  }
  // The masked form's experts e * rows_per_expert ... and their scale rows e * round_up(rows_per_expert, 128) ...
  // must lie inside the rows and scale rows given.
  const int64_t rows_needed = int64_t(p.experts) * p.rows_per_expert;
  const int64_t sf_rows_needed = int64_t(p.experts) * ((int64_t(p.rows_per_expert) + 127) / 128 * 128);
  if (p.masked_m && (p.rows_per_expert < 0 || rows_needed > p.total_rows || sf_rows_needed > p.sf_rows)) {
    snprintf(detail, sizeof detail, "E=%d experts of %d rows need %lld rows and %lld scale rows; given %d and %d", p.experts,
             p.rows_per_expert, static_cast<long long>(rows_needed), static_cast<long long>(sf_rows_needed), p.total_rows, p.sf_rows);
    return st.fail("unsupported MoE problem", detail);
  }
  return true;
}

// On sm_90a one grid that dequantizes every expert's rows and writes the schedule, then the
// persistent GEMM, which may start during it and waits for it before it reads either. On sm_100a
// the schedule kernel, then the GEMM.
bool launch_experts(const ExpertProblem& p, int num_sms, void* workspace, Queue queue, Status& st) {
  if (!check_experts(p, st)) return false;
  if (p.total_rows == 0) return true;
  EncodeTiledFn encode;
  if (!prepare_kernels(st) || !encode_fn(&encode, st)) return false;
  ExpertLaunchArgs args;
  std::memset(&args, 0, sizeof args);
  ExpertArgs& e = args.e;
  e.masked_m = static_cast<const int*>(p.masked_m);
  e.offsets = static_cast<const int*>(p.offsets);
  e.sf_offsets = static_cast<const int*>(p.sf_offsets);
  e.a = static_cast<const uint8_t*>(p.a);
  e.sfa = static_cast<const uint8_t*>(p.sfa);
  e.sfb = static_cast<const uint8_t*>(p.sfb);
  e.c = static_cast<__half*>(p.c);
  e.out = p.out;
  e.table = static_cast<int*>(workspace);
  e.a_half = Arch::kPrepass ? reinterpret_cast<__half*>(static_cast<uint8_t*>(workspace) + expert_table_bytes(p.experts)) : nullptr;
  e.experts = p.experts, e.total_rows = p.total_rows, e.rows_per_expert = p.rows_per_expert, e.sf_rows = p.sf_rows, e.n = p.n, e.k = p.k;
  const int shape = Arch::expert_shape(expert_rows_bound(p), p.experts, p.n, p.k, num_sms);
  const int fixed_n8 = expert_fixed_n8(expert_rows_bound(p), p.k, shape);
  e.units = num_sms;
  e.narrow = Arch::kNarrowTiles;
  e.max_chunk_rows = Arch::geometry(shape).a_rows;
  e.b_tile_rows = Arch::geometry(shape).b_rows;
  // The A maps a tile can use: none has more rows than the most a tile or an expert can have, so
  // the maps of larger boxes are left unencoded (each encode costs host time on every call).
  const int box_classes = Arch::kPrepass ? std::max(1, (std::min(e.max_chunk_rows, expert_rows_bound(p)) + 7) / 8) : 1;
  for (int c = 0; c < box_classes; ++c) {
    const int box = Arch::kPrepass ? 8 * (c + 1) : Arch::geometry(shape).a_rows;
    const CUresult r = Arch::kPrepass ? Arch::encode_dequantized_a(encode, &args.tmap_a[c], e.a_half, p.total_rows, p.k, box)
                                      : Arch::encode_operand(encode, &args.tmap_a[c], p.a, p.total_rows, p.k, box, false);
    if (!encoded(r, "A", p.total_rows, p.k, box, st)) return false;
  }
  if (!encoded(Arch::encode_operand(encode, &args.tmap_b, p.b, p.experts * p.n, p.k, Arch::kTileN, false), "B", p.experts * p.n, p.k,
               Arch::kTileN, st))
    return false;

  // The schedule, on sm_90a in one grid with the prepass: as the list form's prepass, one thread per
  // 16-byte chunk of the most rows an expert can have, at most ~16 blocks per SM over all experts
  // (blocks past an expert's rows return at once), and one more row of blocks, the first, of which
  // the first block writes the schedule; every block has at least a thread per expert.
  const int schedule_threads = (p.experts + 31) / 32 * 32;
  cudaLaunchConfig_t schedule{};
  schedule.gridDim = dim3(1);
  schedule.blockDim = dim3(unsigned(std::max(Arch::kPrepassThreads, schedule_threads)));
  if (Arch::kPrepass) {
    const int64_t most_chunks = int64_t(std::min(expert_rows_bound(p), p.total_rows)) * (p.k / Arch::kKMultiple) * 8;
    const int per_expert = int(std::max<int64_t>(
        1, std::min<int64_t>((most_chunks + schedule.blockDim.x - 1) / schedule.blockDim.x, ceil_div(16 * num_sms, p.experts))));
    schedule.gridDim = dim3(unsigned(per_expert), unsigned(p.experts + 1));
  }
  unsigned none = 0;
  launch_on(schedule, nullptr, &none, queue, false);
  void* expert_argv[] = {&e};
  NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&schedule, Arch::expert_schedule_kernel(), expert_argv));
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t config = gemm_launch(unsigned(num_sms), shape, attrs);
  launch_on(config, attrs, &config.numAttrs, queue, Arch::kPrepass);
  void* argv[] = {&args};
  NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&config, Arch::expert_kernel(shape, fixed_n8), argv));
  return true;
}

// Quantization of x [batch][rows][K] (quantize.cuh) on the queue.
bool launch_quantize(const QuantizeArgs& q, int num_sms, Queue queue, Status& st) {
  if (q.batch < 0 || q.rows < 0 || q.k <= 0 || q.k % 64 ||
      (reinterpret_cast<uintptr_t>(q.x) | reinterpret_cast<uintptr_t>(q.q) | reinterpret_cast<uintptr_t>(q.sf)) % 16 ||
      reinterpret_cast<uintptr_t>(q.global_scale) % 4)
    return st.fail("unsupported quantization", "K must be a positive multiple of 64, the buffers 16-byte aligned and the global scale 4");
  if (q.offsets && (!q.global_scale || !q.source_row || !q.sf_offsets || q.batch != 1 || q.experts < 1 || q.masked_m))
    return st.fail("unsupported quantization",
                   "the routed form needs a global scale per expert, source rows, both offsets, one batch entry, no mask");
  const int64_t units = int64_t(q.batch) * ((q.rows + 127) / 128 * 128) * (q.k / (16 * kQuantizeBlocksPerThread));
  if (!units) return true;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(std::min<int64_t>((units + kQuantizeThreads - 1) / kQuantizeThreads, int64_t(num_sms) * 16)));
  config.blockDim = dim3(kQuantizeThreads);
  unsigned none = 0;
  launch_on(config, nullptr, &none, queue, false);
  QuantizeArgs args = q;
  void* argv[] = {&args};
  const void* kernels[2][2] = {
      {reinterpret_cast<const void*>(&quantize_nvfp4<false, false>), reinterpret_cast<const void*>(&quantize_nvfp4<false, true>)},
      {reinterpret_cast<const void*>(&quantize_nvfp4<true, false>), reinterpret_cast<const void*>(&quantize_nvfp4<true, true>)}};
  const void* kernel = kernels[q.bf16 ? 1 : 0][q.global_scale ? 1 : 0];
  NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&config, kernel, argv));
  return true;
}
}  // namespace host
}  // namespace nvfp4
