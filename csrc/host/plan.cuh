#pragma once
#include "queue.cuh"
#include "schedule.cuh"

namespace nvfp4 {
namespace host {
// The driver's entry point, looked up once per process (it does not change while the driver is loaded).
bool encode_fn(EncodeTiledFn* fn, Status& st) {
  static EncodeTiledFn cached = nullptr;
  if (!cached) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    NVFP4_CUDA_TRY(st, cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !p) return st.fail("cuTensorMapEncodeTiled is not available from the driver");
    cached = reinterpret_cast<EncodeTiledFn>(p);
  }
  *fn = cached;
  return true;
}

bool encoded(CUresult r, const char* operand, int rows, int k, int box_rows, Status& st) {
  if (r != CUDA_SUCCESS) {
    char detail[112];
    snprintf(detail, sizeof detail, "CUresult %d for %s: %d rows, K=%d, box %d rows", int(r), operand, rows, k, box_rows);
    return st.fail("cuTensorMapEncodeTiled failed", detail);
  }
  return true;
}

struct Plan {
  std::vector<LaunchArgs> launches;
  std::vector<PrepassArgs> prepasses;  // sm_90a: one before each launch
  std::vector<dim3> prepass_grids;     // x: blocks per group, y: the launch's groups
  std::vector<int> grids;
  std::vector<char> persistent;  // per launch: some CTA runs more than one tile
  std::vector<int> fixed_n8;     // per launch: the wgmma N of its kernel / 8 (0: chosen per tile)
  std::vector<int> shapes;       // per launch: its tile shape (Arch::geometry)
  cudaGraphExec_t graph = nullptr;
};

// What submission.py's kernel_unsupported() and kernel_takes() already guarantee, asserted here for
// any other caller of the C API. A group with no output (M = 0 or N = 0) is never read or written,
// so it has no layout to check.
bool check_shape(const GroupShape& s, int g, Status& st) {
  char detail[128];
  if (s.m >= 0 && s.n >= 0 && s.k > 0 && !has_tiles(s)) return true;
  const bool aligned = (reinterpret_cast<uintptr_t>(s.a) | reinterpret_cast<uintptr_t>(s.b) | reinterpret_cast<uintptr_t>(s.c) |
                        reinterpret_cast<uintptr_t>(s.sfa) | reinterpret_cast<uintptr_t>(s.sfb)) %
                           16 ==
                       0;
  const bool fits_tile_fields = ceil_div(s.m, 128) <= 512 && ceil_div(s.n, Arch::kTileN) <= 65536;
  if (s.m < 0 || s.n < 0 || s.k <= 0 || s.k % Arch::kKMultiple || s.n % 8 || !aligned || !fits_tile_fields) {
    snprintf(detail, sizeof detail, "group %d: M=%d N=%d K=%d (need K %% %d == 0, N %% 8 == 0, 16-byte aligned buffers)", g, s.m, s.n, s.k,
             Arch::kKMultiple);
    return st.fail("unsupported problem", detail);
  }
  return true;
}

// The launch arguments of every launch: schedule, group arguments, tensor maps over the real
// buffers. Touches no kernel, so it also runs (as a dry run) on a GPU that cannot execute them.
bool build_plan(std::vector<GroupShape> groups, int num_sms, int max_pairs, bool byte_elements, int choice, const OutputArgs& out,
                Plan& plan, Status& st) {
  for (int g = 0; g < int(groups.size()); ++g)
    if (!check_shape(groups[g], g, st)) return false;
  const std::shared_ptr<const Schedule> problem = cached_schedule(groups, num_sms, max_pairs, choice);
  if (problem->launches.empty() && std::any_of(groups.begin(), groups.end(), has_tiles))
    return st.fail("unsupported problem", "a group has more chunks of the tile shape asked for than a tile can number");
  EncodeTiledFn encode;
  if (!encode_fn(&encode, st)) return false;
  for (const ScheduledLaunch& sched : problem->launches) {
    LaunchArgs& args = plan.launches.emplace_back();
    std::memset(&args, 0, sizeof args);
    args.out = out;
    PrepassArgs prepass;
    std::memset(&prepass, 0, sizeof prepass);
    int max_items = 0;
    for (size_t i = 0; i < sched.groups.size(); ++i) {
      const GroupShape& s = groups[size_t(sched.groups[i])];
      GroupArgs& ga = args.groups[i];
      ga.m_chunk_rows = s.chunk_rows;
      ga.alpha_index = sched.groups[i];  // alpha holds one value per group of the call
      ga.a_box_rows = sched.fixed_n8 ? 8 * sched.fixed_n8 : a_box_rows(s.m, s.chunk_rows, sched.shape);  // every row the MMAs read
      if (Arch::kPrepass) {
        if (!s.a_half) return st.fail("no workspace for the dequantized A rows");
        prepass.groups[i] =
            PrepassGroup{static_cast<const uint8_t*>(s.a), static_cast<const uint8_t*>(s.sfa), static_cast<__half*>(s.a_half), s.m, s.k};
        max_items = std::max(max_items, s.m * (s.k / Arch::kKMultiple));
      }
      const CUresult a_map = Arch::kPrepass ? Arch::encode_dequantized_a(encode, &args.tmap_a[i], s.a_half, s.m, s.k, ga.a_box_rows)
                                            : Arch::encode_operand(encode, &args.tmap_a[i], s.a, s.m, s.k, ga.a_box_rows, byte_elements);
      if (!encoded(a_map, "A", s.m, s.k, ga.a_box_rows, st) ||
          !encoded(Arch::encode_operand(encode, &args.tmap_b[i], s.b, s.n, s.k, Arch::kTileN, byte_elements), "B", s.n, s.k, Arch::kTileN,
                   st))
        return false;
      ga.sfa = static_cast<const uint8_t*>(s.sfa);
      ga.sfb = static_cast<const uint8_t*>(s.sfb);
      ga.c = static_cast<__half*>(s.c);
      ga.m = s.m;
      ga.n = s.n;
      ga.k = s.k;
    }
    std::copy(sched.tiles.begin(), sched.tiles.end(), args.tiles);
    std::copy(sched.cta_first.begin(), sched.cta_first.end(), args.cta_first_tile);
    plan.grids.push_back(sched.ctas() * Arch::geometry(sched.shape).ctas);
    plan.persistent.push_back(int(sched.tiles.size()) > sched.ctas());
    plan.fixed_n8.push_back(sched.fixed_n8);
    plan.shapes.push_back(sched.shape);
    if (Arch::kPrepass) {
      const int groups = int(sched.groups.size());
      // One thread per 16-byte chunk (8 per item), at most ~16 blocks per SM over all groups.
      const int per_group = std::max(1, std::min(ceil_div(8 * max_items, Arch::kPrepassThreads), ceil_div(16 * num_sms, groups)));
      plan.prepasses.push_back(prepass);
      plan.prepass_grids.push_back(dim3(unsigned(per_group), unsigned(groups)));
    }
  }
  return true;
}

// Every GEMM kernel may use the shared memory it needs, and every kernel is loaded: once per device
// (the attribute is set for the current device), not per plan, as the sm_90a kernels are many.
bool prepare_kernels(Status& st) {
  static std::mutex mutex;
  static std::vector<char> prepared;  // per device
  int device = 0;
  NVFP4_CUDA_TRY(st, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) < prepared.size() && prepared[size_t(device)]) return true;
  for (int shape = 0; shape < Arch::kTileShapes; ++shape)
    for (bool persistent : {false, true})
      for (int n8 = 0; n8 <= Arch::kTileM / 8; ++n8)
        if (n8 == 0 || Arch::fixed_n8_at_least(n8, shape) == n8)
          NVFP4_CUDA_TRY(
              st, cudaFuncSetAttribute(Arch::kernel(persistent, n8, shape), cudaFuncAttributeMaxDynamicSharedMemorySize, Arch::kSmemBytes));
  for (int shape = 0; shape < Arch::kTileShapes; ++shape)
    for (int n8 = 0; n8 <= Arch::kTileM / 8; ++n8)
      if (const void* kernel = Arch::expert_kernel(shape, n8))
        NVFP4_CUDA_TRY(st, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Arch::kSmemBytes));
  cudaFuncAttributes attributes;
  if (Arch::kPrepass) NVFP4_CUDA_TRY(st, cudaFuncGetAttributes(&attributes, Arch::prepass_kernel()));
  NVFP4_CUDA_TRY(st, cudaFuncGetAttributes(&attributes, Arch::expert_schedule_kernel()));
  prepared.resize(std::max(prepared.size(), size_t(device) + 1));
  prepared[size_t(device)] = 1;
  return true;
}

// The cluster a GEMM kernel of the shape launches in: its CTAs per tile (a pair: 2).
cudaLaunchAttribute cluster_of(int shape) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = unsigned(Arch::geometry(shape).ctas), cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  return cluster;
}
// A GEMM launch of `grid` CTAs of the shape; its attributes in attrs (room for two): the cluster,
// only where a tile takes more than one CTA.
cudaLaunchConfig_t gemm_launch(unsigned grid, int shape, cudaLaunchAttribute* attrs) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(unsigned(Arch::threads(shape)));
  config.dynamicSmemBytes = size_t(Arch::smem_bytes(shape));
  attrs[0] = cluster_of(shape);
  config.attrs = attrs;
  config.numAttrs = Arch::geometry(shape).ctas > 1 ? 1 : 0;
  return config;
}

// How many CTA pairs of the kernels with pair tiles (the last shape, where its tiles take 2 CTAs)
// fit on the current device at once, at most half of num_sms; after prepare_kernels. Once per device.
bool pairs_that_fit(int num_sms, int* max_pairs, Status& st) {
  *max_pairs = num_sms / 2;
  constexpr int kPairShape = Arch::kTileShapes - 1;
  if (Arch::geometry(kPairShape).ctas != 2) return true;
  static std::mutex mutex;
  static std::vector<int> found;  // per device; 0: not asked yet
  int device = 0;
  NVFP4_CUDA_TRY(st, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) >= found.size()) found.resize(size_t(device) + 1, 0);
  if (!found[size_t(device)]) {
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t config = gemm_launch(2, kPairShape, attrs);
    int clusters = 0;
    NVFP4_CUDA_TRY(st, cudaOccupancyMaxActiveClusters(&clusters, Arch::kernel(true, 0, kPairShape), &config));
    if (clusters < 1) return st.fail("no CTA pair of the sm_100a kernel fits on this GPU");
    found[size_t(device)] = clusters;
  }
  *max_pairs = std::min(*max_pairs, found[size_t(device)]);
  return true;
}

// A plan's launches without its graph (its first call, or a call inside the caller's own graph
// capture) on the queue, each kernel after the previous one; the GEMM may start during the prepass
// where the queue allows it (queue.cuh), as the graph's programmatic edges let it.
bool launch_plan(Plan& plan, Queue queue, Status& st) {
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    if (Arch::kPrepass) {
      void* prepass_argv[] = {&plan.prepasses[i]};
      cudaLaunchConfig_t prepass{};
      prepass.gridDim = plan.prepass_grids[i];
      prepass.blockDim = dim3(Arch::kPrepassThreads);
      unsigned none = 0;
      // A plain launch: it starts after all earlier work on the queue, which the GEMM's loads of B
      // before its wait for the prepass rely on.
      launch_on(prepass, nullptr, &none, queue, false);
      NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&prepass, Arch::prepass_kernel(), prepass_argv));
    }
    void* argv[] = {&plan.launches[i]};
    cudaLaunchAttribute attrs[2];
    cudaLaunchConfig_t config = gemm_launch(unsigned(plan.grids[i]), plan.shapes[i], attrs);
    launch_on(config, attrs, &config.numAttrs, queue, Arch::kPrepass);
    NVFP4_CUDA_TRY(st, cudaLaunchKernelExC(&config, Arch::kernel(plan.persistent[i], plan.fixed_n8[i], plan.shapes[i]), argv));
  }
  return true;
}

bool instantiate_plan(Plan& plan, Status& st) {
  cudaGraph_t graph;
  NVFP4_CUDA_TRY(st, cudaGraphCreate(&graph, 0));
  cudaGraphNode_t prev = nullptr;
  // One kernel node after the previous one (the nodes form a chain); a programmatic edge lets the
  // GEMM launch before the prepass ends (it waits where it reads the prepass's output). A pair's
  // GEMM node carries its cluster (the prepass passes shape -1).
  auto add = [&](const void* func, dim3 grid, dim3 block, unsigned smem, void* args, bool programmatic, int shape) {
    void* argv[] = {args};
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(func);
    p.gridDim = grid;
    p.blockDim = block;
    p.sharedMemBytes = smem;
    p.kernelParams = argv;
    cudaGraphNode_t node;
    cudaError_t e = cudaGraphAddKernelNode(&node, graph, nullptr, 0, &p);
    if (e == cudaSuccess && shape >= 0 && Arch::geometry(shape).ctas > 1) {
      const cudaLaunchAttribute cluster = cluster_of(shape);
      e = cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeClusterDimension, &cluster.val);
    }
    if (e == cudaSuccess && prev) {
      cudaGraphEdgeData edge{};
      if (programmatic) {
        edge.from_port = cudaGraphKernelNodePortProgrammatic;
        edge.type = cudaGraphDependencyTypeProgrammatic;
      }
#if CUDART_VERSION >= 13000
      e = cudaGraphAddDependencies(graph, &prev, &node, &edge, 1);
#else
      e = cudaGraphAddDependencies_v2(graph, &prev, &node, &edge, 1);  // CUDA 12.3-12.9: edge data in the _v2 form
#endif
    }
    prev = node;
    return e;
  };
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    cudaError_t e = cudaSuccess;
    // The prepass's edge is a plain one (see launch_plan), the GEMM's a programmatic one.
    if (Arch::kPrepass)
      e = add(Arch::prepass_kernel(), plan.prepass_grids[i], dim3(Arch::kPrepassThreads), 0, &plan.prepasses[i], false, -1);
    if (e == cudaSuccess)
      e = add(Arch::kernel(plan.persistent[i], plan.fixed_n8[i], plan.shapes[i]), dim3(unsigned(plan.grids[i])),
              dim3(unsigned(Arch::threads(plan.shapes[i]))), unsigned(Arch::smem_bytes(plan.shapes[i])), &plan.launches[i], Arch::kPrepass,
              plan.shapes[i]);
    if (e != cudaSuccess) {
      cudaGraphDestroy(graph);
      return st.fail("adding the plan's kernels to its graph", cudaGetErrorString(e));
    }
  }
  const cudaError_t e = cudaGraphInstantiate(&plan.graph, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) return st.fail("cudaGraphInstantiate", cudaGetErrorString(e));
  return true;
}
}  // namespace host
}  // namespace nvfp4
