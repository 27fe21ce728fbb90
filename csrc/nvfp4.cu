// The translation unit: the kernel of one architecture (NVFP4_ARCH = 90 or 100), the host side
// and the extern "C" API that submission.py calls through ctypes (no torch header). The sm_90a
// FP4 decode is in every build: the host tests call it (nvfp4_decode_words_on_host).
#include "prelude.cuh"
#include "launch_params.cuh"
#include "ptx.cuh"
#include "timeline.cuh"
#include "sm90/decode.cuh"
#include "arch.cuh"
#include "host/plan.cuh"
#include "host/experts.cuh"
#include "boundary_generated.cuh"

// ============================================================================ C API (ctypes)
extern "C" {
static std::vector<nvfp4::host::GroupShape> unpack_groups(const nvfp4::GroupDesc* groups, int num_groups) {
  auto ptr = [](int64_t address) { return reinterpret_cast<void*>(address); };
  std::vector<nvfp4::host::GroupShape> shapes(size_t(std::max(num_groups, 0)));
  for (int g = 0; g < num_groups; ++g) {
    const nvfp4::GroupDesc& d = groups[g];
    shapes[size_t(g)] = nvfp4::host::GroupShape{ptr(d.a), ptr(d.b), ptr(d.sfa), ptr(d.sfb), ptr(d.c), int(d.m), int(d.n), int(d.k)};
  }
  return shapes;
}

// groups: one descriptor per group (nvfp4/boundary.py). Bytes of device memory a plan for these
// groups needs as its workspace (0: none).
int64_t nvfp4_workspace_bytes(const nvfp4::GroupDesc* groups, int num_groups) {
  return nvfp4::host::workspace_bytes(unpack_groups(groups, num_groups));
}
// dry_run 0: a plan to launch. 1: launch arguments only, kernels untouched (for inspection on a GPU
// that cannot run them). 2: as 1, with byte-element tensor maps (sm_100a maps on older drivers).
// workspace: nvfp4_workspace_bytes of device memory that stays with the plan (its graph bakes it in).
// tiles: -1 the tile shape the schedule chooses, or one of Arch's shapes (sm_100a: 0 unswapped, 1
// swapped, 2 swapped over a CTA pair; elsewhere 0, the one shape there is).
// alpha: null, or a float32 device array of one value per group (read by the kernels only);
// out_bf16: 1 when every C is bf16, 0 when fp16.
int nvfp4_plan_create(const nvfp4::GroupDesc* groups, int num_groups, int num_sms, int tiles, int dry_run, void* workspace,
                      const float* alpha, int out_bf16, void** plan_out, char* err, int err_len) {
  using namespace nvfp4::host;
  Status st{err, err_len};
  if (tiles < kTilesChosen || tiles >= nvfp4::Arch::kTileShapes)
    return st.fail("tiles must be -1 (chosen) or a tile shape of this build"), 1;
  Plan* plan = new (std::nothrow) Plan();
  if (!plan) return st.fail("out of host memory"), 1;
  std::vector<GroupShape> shapes = unpack_groups(groups, num_groups);
  assign_workspace(shapes, workspace);
  // A dry run assumes that every two SMs can hold a CTA pair; a plan to launch asks the device.
  int max_pairs = num_sms / 2;
  if ((!dry_run && (!prepare_kernels(st) || !pairs_that_fit(num_sms, &max_pairs, st))) ||
      !build_plan(std::move(shapes), num_sms, max_pairs, dry_run == 2, tiles, nvfp4::OutputArgs{alpha, 0, out_bf16 != 0}, *plan, st)) {
    delete plan;
    return 1;
  }
  *plan_out = plan;
  return 0;
}
// Loads and configures every kernel on the current device, and looks up what plans need of the
// device and the driver, so that no later call does (a later call may run inside a graph capture).
int nvfp4_prepare_device(char* err, int err_len) {
  using namespace nvfp4::host;
  Status st{err, err_len};
  int device = 0, num_sms = 0, max_pairs = 0;
  nvfp4::EncodeTiledFn encode = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return st.fail("no current CUDA device"), 1;
  return prepare_kernels(st) && pairs_that_fit(num_sms, &max_pairs, st) && encode_fn(&encode, st) ? 0 : 1;
}
// queue: the CUDA handle of the queue to launch on (0: the default one); the build for
// submission.py launches on the default queue whatever it is given (host/queue_default.cuh).
int nvfp4_plan_launch(void* plan, void* queue, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  return nvfp4::host::launch_plan(*static_cast<nvfp4::host::Plan*>(plan), nvfp4::host::queue_of(queue), st) ? 0 : 1;
}
// Builds the plan's CUDA graph; its executable handle is then what nvfp4_graph_launch takes.
int nvfp4_plan_instantiate(void* plan, void** graph_out, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  auto* p = static_cast<nvfp4::host::Plan*>(plan);
  if (!p->graph && !nvfp4::host::instantiate_plan(*p, st)) return 1;
  *graph_out = p->graph;
  return 0;
}
int nvfp4_graph_launch(void* graph, void* queue) {
  return int(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), nvfp4::host::queue_of(queue)));
}
const char* nvfp4_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }
void nvfp4_plan_destroy(void* plan) {
  auto* p = static_cast<nvfp4::host::Plan*>(plan);
  if (p && p->graph) cudaGraphExecDestroy(p->graph);
  delete p;
}

// ---- the MoE forms and quantization (host/experts.cuh)
// desc: the call's descriptor (nvfp4/boundary.py names its fields).
static nvfp4::host::ExpertProblem unpack_experts(const nvfp4::ExpertDesc& d) {
  auto ptr = [](int64_t address) { return reinterpret_cast<void*>(address); };
  return nvfp4::host::ExpertProblem{ptr(d.a),
                                    ptr(d.b),
                                    ptr(d.sfa),
                                    ptr(d.sfb),
                                    ptr(d.masked_m),
                                    ptr(d.offsets),
                                    ptr(d.sf_offsets),
                                    ptr(d.c),
                                    int(d.experts),
                                    int(d.total_rows),
                                    int(d.rows_per_expert),
                                    int(d.sf_rows),
                                    int(d.n),
                                    int(d.k),
                                    nvfp4::OutputArgs{static_cast<const float*>(ptr(d.alpha)), int(d.alpha_stride), int(d.out_bf16)}};
}
int64_t nvfp4_experts_workspace_bytes(const nvfp4::ExpertDesc* desc) { return nvfp4::host::expert_workspace_bytes(unpack_experts(*desc)); }
// workspace: nvfp4_experts_workspace_bytes of device memory, used until the launches end.
int nvfp4_experts_launch(const nvfp4::ExpertDesc* desc, int num_sms, void* workspace, void* queue, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  return nvfp4::host::launch_experts(unpack_experts(*desc), num_sms, workspace, nvfp4::host::queue_of(queue), st) ? 0 : 1;
}
int nvfp4_quantize(const nvfp4::QuantizeDesc* desc, int num_sms, void* queue, char* err, int err_len) {
  nvfp4::host::Status st{err, err_len};
  const nvfp4::QuantizeDesc& d = *desc;
  auto ints = [](int64_t address) { return reinterpret_cast<const int*>(address); };
  const nvfp4::QuantizeArgs q{reinterpret_cast<const void*>(d.x),
                              reinterpret_cast<uint8_t*>(d.q),
                              reinterpret_cast<uint8_t*>(d.sf),
                              ints(d.masked_m),
                              int(d.batch),
                              int(d.rows),
                              int(d.k),
                              int(d.bf16),
                              reinterpret_cast<const float*>(d.global_scale),
                              int(d.global_scale_batch_stride),
                              int(d.global_scale_row_stride),
                              ints(d.source_row),
                              ints(d.offsets),
                              ints(d.sf_offsets),
                              int(d.experts)};
  return nvfp4::host::launch_quantize(q, num_sms, nvfp4::host::queue_of(queue), st) ? 0 : 1;
}

// ---- inspection, for tests and the dry run
int nvfp4_arch() { return NVFP4_ARCH; }
int nvfp4_tcgen05_emulated() { return NVFP4_TCGEN05_EMULATION; }
#if NVFP4_TIMELINE
// bench/timeline.py's build: the marks (timeline.cuh) of the last kernels run, kTimelineCtas x kTimelineMarks.
int nvfp4_read_timeline(unsigned long long* out) { return int(cudaMemcpyFromSymbol(out, nvfp4::timeline, sizeof nvfp4::timeline)); }
#endif
// The emulated tensor core's delays (drawn from seed, at most max_delay_ns) and mode (an even seed
// lazy, an odd one eager); a CUDA error code, or -1 in a build without the emulation.
int nvfp4_emulation_configure(uint64_t seed, uint32_t max_delay_ns) {
#if NVFP4_TCGEN05_EMULATION
  return int(nvfp4::configure_tcgen05_emulation(seed, max_delay_ns));
#else
  (void)seed, (void)max_delay_ns;
  return -1;
#endif
}
int nvfp4_plan_launch_count(void* plan) { return int(static_cast<nvfp4::host::Plan*>(plan)->launches.size()); }
// grid (CTAs), persistent flag, fixed wgmma N / 8 (0: chosen per tile), tile shape, number of
// tiles; tiles and cta_first_tile (per CTA, or per pair) copied out (up to the given capacities).
int nvfp4_plan_launch_info(void* plan, int launch, int* grid, int* persistent, int* fixed_n8, int* shape, int* num_tiles, uint32_t* tiles,
                           uint16_t* cta_first) {
  const auto* p = static_cast<nvfp4::host::Plan*>(plan);
  const nvfp4::LaunchArgs& a = p->launches[size_t(launch)];
  *grid = p->grids[size_t(launch)];
  *persistent = p->persistent[size_t(launch)];
  *fixed_n8 = p->fixed_n8[size_t(launch)];
  *shape = p->shapes[size_t(launch)];
  const int units = *grid / nvfp4::Arch::geometry(*shape).ctas;  // a pair's CTAs share one tile range
  *num_tiles = a.cta_first_tile[units];
  std::memcpy(tiles, a.tiles, sizeof(uint32_t) * size_t(*num_tiles));
  std::memcpy(cta_first, a.cta_first_tile, sizeof(uint16_t) * size_t(units + 1));
  return 0;
}
// Group arguments of launch-local group g: sfa, sfb, c, m, n, k, m_chunk_rows, a_box_rows; and its two tensor maps.
int nvfp4_plan_group(void* plan, int launch, int g, int64_t* out, uint8_t* tmap_a, uint8_t* tmap_b) {
  const nvfp4::LaunchArgs& a = static_cast<nvfp4::host::Plan*>(plan)->launches[size_t(launch)];
  const nvfp4::GroupArgs& ga = a.groups[g];
  const int64_t values[8] = {int64_t(reinterpret_cast<uintptr_t>(ga.sfa)),
                             int64_t(reinterpret_cast<uintptr_t>(ga.sfb)),
                             int64_t(reinterpret_cast<uintptr_t>(ga.c)),
                             ga.m,
                             ga.n,
                             ga.k,
                             ga.m_chunk_rows,
                             ga.a_box_rows};
  std::memcpy(out, values, sizeof values);
  std::memcpy(tmap_a, &a.tmap_a[g], sizeof(CUtensorMap));
  std::memcpy(tmap_b, &a.tmap_b[g], sizeof(CUtensorMap));
  return 0;
}
// A rows and B rows per tile of shape 0, the K multiple, and how many tile shapes there are.
int nvfp4_tile_rows(int* tile_m, int* tile_n, int* k_multiple, int* tile_shapes) {
  *tile_m = nvfp4::Arch::kTileM;
  *tile_shapes = nvfp4::Arch::kTileShapes;
  *tile_n = nvfp4::Arch::kTileN;
  *k_multiple = nvfp4::Arch::kKMultiple;
  return 0;
}
// The schedule alone, from sizes (no GPU), for num_sms SMs that hold max_pairs CTA pairs at once,
// tiles as nvfp4_plan_create takes it: per tile 8 ints:
// group, m_chunk, n_block, launch, cta, the tile's A rows, its launch's fixed wgmma N / 8 (0: chosen
// per tile) and tile shape. Returns the tile count.
int nvfp4_schedule(const int* mnk, int num_groups, int num_sms, int max_pairs, int tiles, int* out, int capacity) {
  using namespace nvfp4::host;
  std::vector<GroupShape> groups(static_cast<size_t>(num_groups));
  for (int g = 0; g < num_groups; ++g)
    groups[size_t(g)] = GroupShape{nullptr, nullptr, nullptr, nullptr, nullptr, mnk[3 * g], mnk[3 * g + 1], mnk[3 * g + 2]};
  int count = 0, launch = 0;
  for (const ScheduledLaunch& sched : cached_schedule(groups, num_sms, max_pairs, tiles)->launches) {
    for (int c = 0; c < sched.ctas(); ++c)
      for (int i = sched.cta_first[size_t(c)]; i < sched.cta_first[size_t(c) + 1]; ++i) {
        const nvfp4::Tile t = nvfp4::unpack_tile(sched.tiles[size_t(i)]);
        if (count < capacity) {
          const GroupShape& s = groups[size_t(sched.groups[size_t(t.group)])];
          int* o = out + 8 * count;
          o[0] = sched.groups[size_t(t.group)], o[1] = t.m_chunk, o[2] = t.n_block, o[3] = launch, o[4] = int(c);
          o[5] = std::min(s.chunk_rows, s.m - t.m_chunk * s.chunk_rows), o[6] = sched.fixed_n8, o[7] = sched.shape;
        }
        ++count;
      }
    ++launch;
  }
  return count;
}
// TMEM columns of the sm_100a kernel of a tile shape, persistent (1) or single-tile (0): buffers,
// M-side scale column, N-side scale column, columns used, columns allocated. Returns 1 on
// architectures without TMEM.
int nvfp4_tmem_plan(int shape, int persistent, int* out) {
  return shape >= 0 && shape < nvfp4::Arch::kTileShapes && nvfp4::Arch::tmem_plan(shape, persistent != 0, out) ? 0 : 1;
}
// A rows, B rows and CTAs of a tile of the shape; returns 1 for a shape this build does not have.
int nvfp4_tile_shape(int shape, int* a_rows, int* b_rows, int* ctas) {
  if (shape < 0 || shape >= nvfp4::Arch::kTileShapes) return 1;
  const auto g = nvfp4::Arch::geometry(shape);
  *a_rows = g.a_rows, *b_rows = g.b_rows, *ctas = g.ctas;
  return 0;
}
// The MoE forms' GEMM for experts of at most most_rows rows: its tile shape and the wgmma N (/ 8)
// it is built for (0: each tile's own).
void nvfp4_expert_kernel_choice(int most_rows, int experts, int n, int k, int units, int* shape, int* fixed_n8) {
  *shape = nvfp4::Arch::expert_shape(most_rows, experts, n, k, units);
  *fixed_n8 = nvfp4::host::expert_fixed_n8(most_rows, k, *shape);
}
// The smallest wgmma N (/ 8) at least n8 that a GEMM of the tile shape is built for alone; 0 for none
// (sm_100a builds none), -1 for a shape this build does not have.
int nvfp4_fixed_n8_at_least(int n8, int shape) {
  return shape >= 0 && shape < nvfp4::Arch::kTileShapes ? nvfp4::Arch::fixed_n8_at_least(n8, shape) : -1;
}
int64_t nvfp4_scale_byte(int row, int sf_col, int k) {
  return nvfp4::scale_atom_offset(row / 128, sf_col / 4, k) + nvfp4::scale_byte_in_atom(row, sf_col);
}
// The MoE forms' snake: the walk's tiles that CTA `unit` of `units` runs, in its order, up to
// capacity of them into tiles. Returns how many it runs.
int nvfp4_expert_walk(int total, int unit, int units, int* tiles, int capacity) {
  const int count = nvfp4::walk_tiles(total, unit, units);
  for (int i = 0; i < std::min(count, capacity); ++i) tiles[i] = nvfp4::walk_tile(i, unit, units);
  return count;
}
// quantize's walk: the (batch entry, row, unit) of each item one thread visits from item `first`
// by `stride`, into out (three ints each). Returns how many it visits, or -1 when that is more than
// capacity (the walk is cut there).
int64_t nvfp4_quantize_walk(int batch, int padded_rows, int units_per_row, int64_t first, int64_t stride, int* out, int64_t capacity) {
  if (padded_rows <= 0 || units_per_row <= 0 || stride <= 0) return 0;  // no items (the kernel is not launched then)
  int64_t count = 0;
  for (nvfp4::QuantizeCursor at(first, stride, padded_rows, units_per_row); at.b < batch; at.advance(), ++count) {
    if (count == capacity) return -1;
    out[3 * count] = at.b, out[3 * count + 1] = at.r, out[3 * count + 2] = at.j;
  }
  return count;
}
}

namespace nvfp4 {
// The quantization kernel's pair operations emulated one half at a time, for the host tests
// (host-and-device code only so that quantize_block may call it; it runs on the host).
template <bool kBf16>
struct HostPairs {
  enum Op { kMax, kGe, kGt };
  static __host__ __device__ float value(uint32_t bits) {
    const uint32_t word = bits << 16;
    float f;
    memcpy(&f, &word, 4);
    return kBf16 ? f : __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  }
  static __host__ __device__ uint32_t half(Op op, uint32_t x, uint32_t y) {
    const float a = value(x), b = value(y);
    if (op == kMax) return isnan(a) || isnan(b) ? 0x7FFFu : a >= b ? x : y;
    return (op == kGe ? a >= b : a > b) ? 0xFFFFu : 0u;
  }
  static __host__ __device__ uint32_t each(Op op, uint32_t a, uint32_t b) {
    return half(op, a & 0xFFFFu, b & 0xFFFFu) | half(op, a >> 16, b >> 16) << 16;
  }
  static __host__ __device__ uint32_t max_nan(uint32_t a, uint32_t b) { return each(kMax, a, b); }
  static __host__ __device__ uint32_t ge(uint32_t a, uint32_t b) { return each(kGe, a, b); }
  static __host__ __device__ uint32_t gt(uint32_t a, uint32_t b) { return each(kGt, a, b); }
  static __host__ __device__ uint32_t both(float x) {  // x is exact in 16 bits here (E2m1Bounds)
    uint32_t bits;
    memcpy(&bits, &x, 4);
    bits = kBf16 ? bits >> 16 : __half_as_ushort(__float2half_rn(x));
    return bits | bits << 16;
  }
  static __host__ __device__ float low(uint32_t w) { return value(w & 0xFFFFu); }
};
}  // namespace nvfp4

extern "C" {
// The quantization kernel's arithmetic (quantize_block) on the host: `blocks` blocks of 16 fp16
// (bf16: 1) elements to 8 code bytes and a scale byte each; global_scale: null (the one-level
// recipe) or one global scale per block.
void nvfp4_quantize_blocks_on_host(const uint16_t* x, int64_t blocks, int bf16, const float* global_scale, uint8_t* codes,
                                   uint8_t* scales) {
  using nvfp4::HostPairs, nvfp4::quantize_block;
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t w[8];
    std::memcpy(w, x + 16 * b, sizeof w);
    const nvfp4::QuantizedBlock q =
        global_scale ? (bf16 ? quantize_block<HostPairs<true>>(w, global_scale[b]) : quantize_block<HostPairs<false>>(w, global_scale[b]))
                     : (bf16 ? quantize_block<HostPairs<true>>(w) : quantize_block<HostPairs<false>>(w));
    std::memcpy(codes + 8 * b, q.codes, 8);
    scales[b] = q.scale;
  }
}
// The sm_90a kernels' FP4 decode on the host: for each of n words, the four half2 of
// fp4x8_to_half2x4 (the GEMM's B fragments) in all_codes, and fp4x2_to_half2 for q = 0..3 (the
// prepass) in code_pairs.
void nvfp4_decode_words_on_host(const uint32_t* words, int64_t n, uint32_t* all_codes, uint32_t* code_pairs) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t h[4];
    nvfp4::fp4x8_to_half2x4(words[i], h);
    for (int q = 0; q < 4; ++q) {
      all_codes[4 * i + q] = h[q];
      code_pairs[4 * i + q] = nvfp4::fp4x2_to_half2(words[i], q);
    }
  }
}
}
