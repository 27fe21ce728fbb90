#pragma once
#include "prelude.cuh"
#include "launch_params.cuh"
#include "ptx.cuh"

namespace nvfp4 {
// ============================================================================ the MoE forms: sizes on the GPU
// Every expert e multiplies its rows of A by its own B ([N][K/2], expert after expert) into the same
// rows of C. How many rows each expert has is read on the GPU only, so a CUDA graph replays with
// whatever counts the tensors hold then. The masked form gives expert e rows e * rows_per_expert ..
// + masked_m[e] of A and C and scale rows from e * round_up(rows_per_expert, 128); the offset form
// rows offsets[e] .. offsets[e + 1] and scale rows from sf_offsets[e] (docs/MOE.md).
//
// One CTA (build_schedule) reads the counts and writes the schedule into the workspace: the
// experts in the order their tiles are walked, widest tiles first, each with its rows, first
// row, first scale row, A rows per tile and the running count of tiles. CTA u of the persistent
// GEMM runs tile u of the first round of `units` tiles, units - 1 - u of the second, u of the third
// and so on (a snake, which on tiles sorted by cost balances the CTAs about as well as the host's
// LPT), and finds the expert of a tile by a binary search in the running counts. An expert without
// rows has no tiles.
constexpr int kMaxExperts = 1024;  // one schedule thread each
constexpr int kABoxClasses = 32;   // sm_90a: A is loaded in boxes of 8 (c + 1) rows, the tile's rows rounded up to 8

struct ExpertArgs {
  const int* masked_m;    // masked form: [E] rows of each expert; null in the offset form
  const int* offsets;     // offset form: [E + 1] first row of each expert, then the total
  const int* sf_offsets;  // offset form: [E] first scale row of each expert
  const uint8_t* a;       // packed FP4 rows [total_rows][K/2]
  const uint8_t* sfa;     // A's scale atoms [sf_rows / 128][K/64][512]
  const uint8_t* sfb;     // B's, expert after expert: [E][ceil(N/128)][K/64][512]
  __half* c;              // [total_rows][N], fp16 or bf16 (out.bf16)
  OutputArgs out;         // alpha per expert (alpha_stride 0) or per expert and column ([E][N], alpha_stride 1); C's type
  __half* a_half;         // sm_90a: the prepass's fp16 rows [total_rows][K]
  int* table;             // the schedule: 6 arrays of E ints (ExpertTable)
  int experts, total_rows, rows_per_expert, sf_rows, n, k;
  int units;           // the GEMM's CTAs (each walks every units-th tile)
  int max_chunk_rows;  // the most A rows of a tile
  int b_tile_rows;     // B rows of a tile (the tile shape's; 128 or 256)
  int narrow;          // 1: tiles may have any multiple of 8 rows up to max_chunk_rows (sm_90a)
};

// The schedule in the workspace, written by build_schedule, read by the GEMM: per position in the
// walk's order, the expert there and its figures.
struct ExpertTable {
  int *tile_end, *chunk_rows, *rows, *first_row, *first_sf_row, *expert;
  __host__ __device__ explicit ExpertTable(const ExpertArgs& a)
      : tile_end(a.table),
        chunk_rows(a.table + a.experts),
        rows(a.table + 2 * a.experts),
        first_row(a.table + 3 * a.experts),
        first_sf_row(a.table + 4 * a.experts),
        expert(a.table + 5 * a.experts) {}
};
__host__ __device__ inline int64_t expert_table_bytes(int experts) { return (int64_t(6) * experts * 4 + 255) / 256 * 256; }
// Tiles of an expert's rows along N (the tile shape's B rows each).
__host__ __device__ inline int n_tiles_of(const ExpertArgs& a) { return (a.n + a.b_tile_rows - 1) / a.b_tile_rows; }
// Bytes of one expert's B scales: an atom per 128 rows of B and 64 of K.
__host__ __device__ inline int64_t sfb_bytes_per_expert(const ExpertArgs& a) { return int64_t((a.n + 127) / 128) * (a.k / 64) * 512; }

// Expert e's rows, first row and first scale row, from the counts as given. Counts the layout cannot
// hold give the expert no rows (its rows of C are not written): a masked count is clamped to
// [0, rows_per_expert]; an offset expert needs 0 <= offsets[e] <= offsets[e + 1] <= total_rows, its
// first row at or past every earlier expert's (`earlier`: the most of offsets[0 .. e - 1], 0 for
// the first), so that no two experts claim a row, and its scale rows, from a multiple of 128,
// inside the sf_rows of sfa.
__device__ __forceinline__ void expert_rows(const ExpertArgs& a, int e, int earlier, int& rows, int& first, int& first_sf) {
  if (a.masked_m) {
    rows = min(max(a.masked_m[e], 0), a.rows_per_expert);
    first = e * a.rows_per_expert;
    first_sf = e * ((a.rows_per_expert + 127) / 128 * 128);
    return;
  }
  first = a.offsets[e], first_sf = a.sf_offsets[e];
  const int end = a.offsets[e + 1];
  const bool valid = 0 <= first && earlier <= first && first <= end && end <= a.total_rows && first_sf >= 0 && first_sf % 128 == 0 &&
                     int64_t(first_sf) + (end - first) <= a.sf_rows;
  rows = valid ? end - first : 0;
  if (!valid) first = 0, first_sf = 0;
}

// A rows per tile of an expert of m rows under the bound: its rows cut into equal chunks of at most
// `bound` rows, a multiple of 8 (the host's choose_chunk_rows, on the device).
__device__ __forceinline__ int narrow_chunk(int m, int bound) {
  const int chunks = (m + bound - 1) / bound;
  return ((m + chunks - 1) / chunks + 7) / 8 * 8;
}

constexpr int kScheduleWarps = kMaxExperts / 32;
constexpr int kBoundCandidates = 32;  // bounds 8, 16, ..., 256
constexpr int kWidthClasses = 34;     // a tile width / 8 (1 to 32); 0: an expert without rows; 33: a thread past the experts

// The schedule, by a CTA of at least a thread per expert (whole warps), every count in registers.
// With narrow tiles it picks the bound the host schedule would (choose_chunk_rows): max_chunk_rows,
// unless the tiles are fewer than the GEMM's CTAs; then the smallest bound at which they still fit.
// It orders the experts by tile width, widest first, then by index, experts without rows last,
// counting its place among the widths instead of comparing with every other expert. Every tile
// count stays below 2^31 (check_experts), so sums are 32-bit.
__device__ __forceinline__ void build_schedule(const ExpertArgs& a) {
  __shared__ int counts[kScheduleWarps][kBoundCandidates];  // per warp and bound candidate: its experts' tiles
  __shared__ int widths[kScheduleWarps][kWidthClasses];     // per warp and width: its experts, then those of earlier warps
  __shared__ int width_start[kWidthClasses];                // per width: the experts of wider tiles
  __shared__ int tiles_at[kMaxExperts];                     // per position: its expert's tiles
  __shared__ int per_warp[kScheduleWarps];                  // a warp's last running value (max, then sum)
  __shared__ int bound_shared;
  const int e = threadIdx.x, warp = e / 32, lane = e % 32, warps = blockDim.x / 32, nb = n_tiles_of(a);
  const bool is_expert = e < a.experts;
  // The offset form: the most first row of the experts before e (an exclusive max scan).
  int earlier = 0;
  if (!a.masked_m) {
    int most = is_expert ? a.offsets[e] : 0;
#pragma unroll
    for (int s = 1; s < 32; s *= 2) {
      const int x = __shfl_up_sync(0xFFFFFFFFu, most, s);
      if (lane >= s) most = max(most, x);
    }
    if (lane == 31) per_warp[warp] = most;
    __syncthreads();
    const int before = __shfl_up_sync(0xFFFFFFFFu, most, 1);
    earlier = lane ? before : 0;
    for (int w = 0; w < warp; ++w) earlier = max(earlier, per_warp[w]);
    __syncthreads();  // per_warp is written again below
  }
  int rows = 0, first = 0, first_sf = 0;
  if (is_expert) expert_rows(a, e, earlier, rows, first, first_sf);
  int bound = a.max_chunk_rows;
  if (a.narrow) {
#pragma unroll
    for (int c = 0; c < kBoundCandidates; ++c) {
      const int tiles = __reduce_add_sync(0xFFFFFFFFu, (rows + 8 * c + 7) / (8 * (c + 1)) * nb);
      if (lane == 0) counts[warp][c] = tiles;
    }
    __syncthreads();
    if (warp == 0) {  // lane c: the tiles under the bound 8 (c + 1), which fall as the bound grows
      int total = 0;
      for (int w = 0; w < warps; ++w) total += counts[w][lane];
      const unsigned fits = __ballot_sync(0xFFFFFFFFu, total <= a.units);
      const bool widest_fills = __shfl_sync(0xFFFFFFFFu, total, a.max_chunk_rows / 8 - 1) >= a.units;
      if (lane == 0) bound_shared = widest_fills ? a.max_chunk_rows : 8 * __ffs(fits);
    }
    __syncthreads();
    bound = bound_shared;
  }
  const int chunk = a.narrow && rows > 0 ? narrow_chunk(rows, bound) : a.max_chunk_rows;
  const int tiles = rows > 0 ? (rows + chunk - 1) / chunk * nb : 0;
  // The place in the walk: experts of wider tiles, then those of this width in earlier warps, then
  // in earlier lanes of this warp.
  const int width = !is_expert ? kWidthClasses - 1 : rows > 0 ? chunk / 8 : 0;
  for (int i = e; i < kScheduleWarps * kWidthClasses; i += blockDim.x) (&widths[0][0])[i] = 0;
  __syncthreads();
  const unsigned same = __match_any_sync(0xFFFFFFFFu, width);
  if (lane == __ffs(same) - 1) widths[warp][width] = __popc(same);
  __syncthreads();
  for (int c = e; c < kWidthClasses; c += blockDim.x) {  // per warp, the experts of width c in the warps before it
    int running = 0;
    for (int w = 0; w < warps; ++w) {
      const int here = widths[w][c];
      widths[w][c] = running;
      running += here;
    }
    width_start[c] = running;  // for now: the experts of width c
  }
  __syncthreads();
  if (e == 0) {  // the experts of wider tiles, widest first; threads past the experts come last
    int wider = 0;
    for (int c = kWidthClasses - 2; c >= 0; --c) {
      const int here = width_start[c];
      width_start[c] = wider;
      wider += here;
    }
  }
  __syncthreads();
  const int position = width_start[width] + widths[warp][width] + __popc(same & ((1u << lane) - 1));
  if (is_expert) tiles_at[position] = tiles;
  __syncthreads();
  // Thread p: the running count of tiles up to position p, by a scan within each warp, then over the
  // warps' totals.
  int running = e < a.experts ? tiles_at[e] : 0;
#pragma unroll
  for (int s = 1; s < 32; s *= 2) {
    const int x = __shfl_up_sync(0xFFFFFFFFu, running, s);
    if (lane >= s) running += x;
  }
  if (lane == 31) per_warp[warp] = running;
  __syncthreads();
  for (int w = 0; w < warp; ++w) running += per_warp[w];
  if (is_expert) {
    const ExpertTable t(a);
    t.tile_end[e] = running;
    t.chunk_rows[position] = chunk, t.rows[position] = rows, t.first_row[position] = first, t.first_sf_row[position] = first_sf;
    t.expert[position] = e;
  }
}

// A tile for the GEMM's roles: its group's (or expert's) arguments and output (output_of_group), the
// tensor maps it loads from, the group's first row in them, and which chunk of rows and block of
// columns it is.
struct TileJob {
  GroupArgs g;
  OutputArgs out;
  const CUtensorMap* tmap_a;
  const CUtensorMap* tmap_b;
  int a_row0, b_row0;  // the group's first row in tmap_a (and C's rows) and in tmap_b
  int m_chunk, n_block;
};

// The list form: the host's schedule, CTA (or pair) `unit` runs tiles cta_first_tile[unit] ... [unit + 1] - 1.
struct ListTiles {
  static constexpr bool kReadsEarlierGrids = false;  // the schedule is in the kernel's parameters
  const LaunchArgs& args;
  int first, last;
  __device__ ListTiles(const LaunchArgs& a, int unit, int /*units*/)
      : args(a), first(a.cta_first_tile[unit]), last(a.cta_first_tile[unit + 1]) {}
  __device__ int count() const { return last - first; }
  __device__ TileJob job(int i) const {
    const Tile t = unpack_tile(args.tiles[first + i]);
    const GroupArgs& g = args.groups[t.group];
    return TileJob{g, output_of_group(args.out, g.alpha_index), &args.tmap_a[t.group], &args.tmap_b[t.group], 0, 0, t.m_chunk, t.n_block};
  }
};

struct ExpertLaunchArgs {
  CUtensorMap tmap_a[kABoxClasses];  // A over every row (sm_90a: the prepass's fp16 rows, one map per box; sm_100a: one)
  CUtensorMap tmap_b;                // B over every expert's rows, [E * N][K/2]
  ExpertArgs e;
};

// The snake of the MoE forms: CTA `unit` of `units` runs, as its i-th tile, tile walk_tile(i) of
// the walk; of a walk of `total` tiles, walk_tiles of them.
__host__ __device__ inline int walk_tile(int i, int unit, int units) { return i * units + (i % 2 ? units - 1 - unit : unit); }
__host__ __device__ inline int walk_tiles(int total, int unit, int units) {
  const int rounds = total / units;
  return rounds + (walk_tile(rounds, unit, units) < total);
}

// The MoE forms' tiles of one CTA (sm_100a: one pair), by the snake over the schedule's walk. The
// schedule is read with plain loads: on sm_90a the grid that writes it may still run when the GEMM
// starts (programmatic launch), and __ldg's non-coherent loads, whose data the compiler takes as
// fixed for the whole kernel, may be moved above the GEMM's wait for that grid.
struct ExpertTiles {
  static constexpr bool kReadsEarlierGrids = true;  // the grid before the GEMM writes the walk's table
  const ExpertLaunchArgs& args;
  ExpertTable table;
  int unit, units, tiles;
  __device__ ExpertTiles(const ExpertLaunchArgs& a, int u, int n)
      : args(a), table(a.e), unit(u), units(n), tiles(walk_tiles(a.e.experts ? table.tile_end[a.e.experts - 1] : 0, u, n)) {}
  __device__ int count() const { return tiles; }
  __device__ TileJob job(int i) const {
    const ExpertArgs& a = args.e;
    const int t = walk_tile(i, unit, units);
    int lo = 0, hi = a.experts - 1;  // the first position whose tiles end after t
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (table.tile_end[mid] > t)
        hi = mid;
      else
        lo = mid + 1;
    }
    const int p = lo, e = table.expert[p], nb = n_tiles_of(a);
    const int local = t - (p ? table.tile_end[p - 1] : 0), chunk = table.chunk_rows[p], rows = table.rows[p];
    const int first = table.first_row[p], m_chunk = local / nb;
    const int box_class = a.narrow ? (min(chunk, rows - m_chunk * chunk) + 7) / 8 - 1 : 0;
    GroupArgs g;
    g.sfa = a.sfa + int64_t(table.first_sf_row[p] / 128) * (a.k / 64) * 512;
    g.sfb = a.sfb + int64_t(e) * sfb_bytes_per_expert(a);
    g.c = a.c + int64_t(first) * a.n;
    g.m = rows, g.n = a.n, g.k = a.k;
    g.m_chunk_rows = chunk;
    g.a_box_rows = a.narrow ? 8 * (box_class + 1) : chunk;
    return TileJob{g,
                   output_of_group(a.out, int64_t(e) * (a.out.alpha_stride ? a.n : 1)),
                   &args.tmap_a[box_class],
                   &args.tmap_b,
                   first,
                   e * a.n,
                   m_chunk,
                   local % nb};
  }
};

template <class Args>
struct TilesOf;
template <>
struct TilesOf<LaunchArgs> {
  using type = ListTiles;
};
template <>
struct TilesOf<ExpertLaunchArgs> {
  using type = ExpertTiles;
};
}  // namespace nvfp4
