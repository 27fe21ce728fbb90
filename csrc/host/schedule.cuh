#pragma once
#include "../launch_params.cuh"
#include "../arch_tiles.cuh"
#include "status.cuh"

namespace nvfp4 {
namespace host {
struct GroupShape {
  const void *a, *b, *sfa, *sfb;
  void* c;
  int m, n, k;
  int chunk_rows = ArchTiles::kTileM;  // A rows per tile
  void* a_half = nullptr;              // the prepass's fp16 rows of A (sm_90a)
};

inline bool has_tiles(const GroupShape& s) { return s.m > 0 && s.n > 0; }
// Workspace bytes the prepass needs: fp16 rows of A for every group with work (0 without a prepass).
inline int64_t workspace_bytes(const std::vector<GroupShape>& groups) {
  int64_t bytes = 0;
  for (const GroupShape& s : groups)
    if (ArchTiles::kPrepass && has_tiles(s)) bytes += int64_t(s.m) * s.k * 2;
  return bytes;
}
// Carves the workspace into each group's rows (16-byte aligned: K is a multiple of 64).
inline void assign_workspace(std::vector<GroupShape>& groups, void* workspace) {
  auto* next = static_cast<uint8_t*>(workspace);
  for (GroupShape& s : groups)
    if (ArchTiles::kPrepass && has_tiles(s)) {
      s.a_half = next;
      next += int64_t(s.m) * s.k * 2;
    }
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }
inline int ceil_div(int x, int m) { return (x + m - 1) / m; }
inline int a_box_rows(int m, int chunk_rows, int shape) { return ArchTiles::a_box_rows(m, chunk_rows, shape); }
inline int64_t tile_cost(int m_rows, int k, int shape) { return ArchTiles::tile_cost(m_rows, k, shape); }

struct ScheduledLaunch {
  int fixed_n8 = 0;             // sm_90a: every tile issued with wgmma N = 8 * fixed_n8 (0: each its own)
  int shape = 0;                // the tile shape (ArchTiles::geometry; sm_100a: sm100::TileShapeId)
  std::vector<int> groups;      // global index of each of the launch's groups
  std::vector<uint32_t> tiles;  // packed tiles (launch-local group index), grouped by CTA
  std::vector<int> cta_first;   // CTA c runs tiles [cta_first[c], cta_first[c + 1])
  int64_t busiest = 0;          // the tile costs of its busiest CTA (pair)
  int ctas() const { return int(cta_first.size()) - 1; }
};

inline int count_tiles(const std::vector<GroupShape>& groups, int shape = 0) {
  int tiles = 0;
  for (const GroupShape& s : groups)
    if (has_tiles(s)) tiles += ceil_div(s.m, s.chunk_rows) * ceil_div(s.n, ArchTiles::geometry(shape).b_rows);
  return tiles;
}

// A rows per tile: the tile shape's, unless the problem has fewer tiles than SMs and the kernel
// takes tiles of any multiple of 8 rows (ArchTiles::kNarrowTiles). Then each group is cut into equal
// chunks under the smallest bound at which the tiles still fit on the SMs, so no SM idles for want
// of a tile and the widest tile, which the others wait for, is as narrow as it can be.
void choose_chunk_rows(std::vector<GroupShape>& groups, int num_sms, int shape) {
  const int widest = ArchTiles::geometry(shape).a_rows;
  for (GroupShape& s : groups) s.chunk_rows = widest;
  if (!ArchTiles::kNarrowTiles || count_tiles(groups, shape) >= num_sms) return;
  auto tiles_under = [&](int bound) {
    for (GroupShape& s : groups) s.chunk_rows = bound;
    return count_tiles(groups, shape);
  };
  int bound = widest;
  while (bound > 8 && tiles_under(bound - 8) <= num_sms) bound -= 8;
  for (GroupShape& s : groups)
    if (has_tiles(s)) s.chunk_rows = round_up(ceil_div(s.m, ceil_div(s.m, bound)), 8);
}

// A tile to schedule: which one, its A rows and K, and its cost.
struct TileItem {
  int group, m_chunk, n_block, rows, k;
  int64_t cost;
};

// After LPT, while it lowers the busiest CTA's cost: move one of its tiles to one of the least
// loaded CTAs, or swap it for a cheaper tile of one of them. LPT leaves the busiest CTA well above
// the average when the tiles are few per CTA and of few sizes (case 1: 448 tiles of 8 sizes on 132
// CTAs, 13% above; after this 5%, and the case runs 8% faster on the H200: docs/perf-log/log.md).
// Every step brings two loads closer together below the old maximum, so it would end by itself;
// the steps are capped to keep the first sight of a large problem short.
void rebalance(const std::vector<TileItem>& tiles, std::vector<int>& cta_of, int ctas) {
  // With several tiles per CTA on average LPT is within a few percent already, and the steps would
  // cost the first sight of a large problem more than they save.
  if (int(tiles.size()) <= ctas || int(tiles.size()) > 4 * ctas) return;
  constexpr int kPartners = 4;  // the least loaded CTAs tried per step
  std::vector<int64_t> load(size_t(ctas), 0);
  std::vector<int> first(size_t(ctas), -1), next(tiles.size(), -1);  // each CTA's tiles as a linked list
  for (size_t t = 0; t < tiles.size(); ++t) {
    load[size_t(cta_of[t])] += tiles[t].cost;
    next[t] = std::exchange(first[size_t(cta_of[t])], int(t));
  }
  std::vector<int> by_load(static_cast<size_t>(ctas));  // the CTAs, least loaded first
  std::iota(by_load.begin(), by_load.end(), 0);
  const auto lighter = [&](int a, int b) { return load[size_t(a)] < load[size_t(b)]; };
  std::stable_sort(by_load.begin(), by_load.end(), lighter);
  auto move = [&](int t, int from, int to) {
    int* link = &first[size_t(from)];
    while (*link != t) link = &next[size_t(*link)];
    *link = next[size_t(t)];
    next[size_t(t)] = std::exchange(first[size_t(to)], t);
    load[size_t(from)] -= tiles[size_t(t)].cost;
    load[size_t(to)] += tiles[size_t(t)].cost;
    cta_of[size_t(t)] = to;
  };
  auto reorder = [&](int c) {  // c's load changed: put it back in order
    by_load.erase(std::find(by_load.begin(), by_load.end(), c));
    by_load.insert(std::upper_bound(by_load.begin(), by_load.end(), c, lighter), c);
  };
  for (int step = 0; step < ctas; ++step) {  // case 1 takes 80
    const int busiest = by_load.back();
    const int64_t top = load[size_t(busiest)];
    int64_t best = top;  // the higher of the two loads a step leaves
    int best_tile = -1, best_cta = -1, best_swap = -1;
    for (int t = first[size_t(busiest)]; t >= 0; t = next[size_t(t)]) {
      const int64_t x = tiles[size_t(t)].cost;
      for (int p = 0; p < std::min(kPartners, ctas - 1); ++p) {
        const int c = by_load[size_t(p)];
        const int64_t moved = std::max(top - x, load[size_t(c)] + x);
        if (moved < best) best = moved, best_tile = t, best_cta = c, best_swap = -1;
        for (int u = first[size_t(c)]; u >= 0; u = next[size_t(u)]) {
          const int64_t y = tiles[size_t(u)].cost;
          const int64_t swapped = std::max(top - x + y, load[size_t(c)] - y + x);
          if (y < x && swapped < best) best = swapped, best_tile = t, best_cta = c, best_swap = u;
        }
      }
    }
    if (best_tile < 0) break;
    move(best_tile, busiest, best_cta);
    if (best_swap >= 0) move(best_swap, best_cta, busiest);
    reorder(busiest);
    reorder(best_cta);
  }
}

// The wgmma N (/ 8) of the kernel built for one N that is to run all of a launch's tiles, or 0 for
// the kernel that chooses each tile's N. Built for one N, the K loop skips that choice (6-10% of a
// K block on the H200: docs/perf-log/log.md) but issues every tile with the widest tile's N (or the
// next N built): taken when, by the tile costs, its busiest CTA is done no later.
int fixed_wgmma_n8(const std::vector<TileItem>& tiles, const std::vector<int>& cta_of, int ctas, int shape) {
  int widest = 0;
  for (const TileItem& t : tiles) widest = std::max(widest, ceil_div(t.rows, 8));
  const int n8 = ArchTiles::fixed_n8_at_least(widest, shape);
  if (!n8) return 0;
  std::vector<int64_t> own(size_t(ctas), 0), fixed(size_t(ctas), 0);
  for (size_t t = 0; t < tiles.size(); ++t) {
    own[size_t(cta_of[t])] += tiles[t].cost;
    fixed[size_t(cta_of[t])] += tile_cost(8 * n8, tiles[t].k, shape) * 15 / 16;
  }
  return *std::max_element(fixed.begin(), fixed.end()) <= *std::max_element(own.begin(), own.end()) ? n8 : 0;
}

// Every tile of every group, cut into launches that fit the parameter limits, each spread over
// at most num_sms CTAs largest-first onto the least loaded CTA (LPT), then rebalanced.
// max_pairs: the CTA pairs (clusters of 2) that fit on the GPU at once, which may be fewer than
// half its SMs (a GPU processing cluster with an odd number of free SMs leaves one unpaired).
std::vector<ScheduledLaunch> schedule(const std::vector<GroupShape>& groups, int num_sms, int max_pairs, int shape) {
  const int b_rows = ArchTiles::geometry(shape).b_rows;
  const int units = ArchTiles::geometry(shape).ctas == 1 ? num_sms : std::min(num_sms / 2, max_pairs);  // a pair's two CTAs are one unit
  std::vector<TileItem> items, chunk;
  items.reserve(size_t(count_tiles(groups, shape)));
  for (int g = 0; g < int(groups.size()); ++g) {
    const GroupShape& s = groups[g];
    if (!has_tiles(s)) continue;
    for (int mc = 0; mc < ceil_div(s.m, s.chunk_rows); ++mc)
      for (int nb = 0, rows = std::min(s.chunk_rows, s.m - mc * s.chunk_rows); nb < ceil_div(s.n, b_rows); ++nb)
        items.push_back({g, mc, nb, rows, s.k, tile_cost(rows, s.k, shape)});
  }
  std::vector<ScheduledLaunch> launches;
  std::vector<int> cta_of;                    // per tile of the launch
  std::vector<std::pair<int64_t, int>> load;  // (cost so far, CTA): a min-heap
  for (size_t i = 0; i < items.size();) {
    ScheduledLaunch launch;
    chunk.clear();
    for (; i < items.size(); ++i) {
      const bool new_group = launch.groups.empty() || launch.groups.back() != items[i].group;
      if (int(chunk.size()) == kMaxTilesPerLaunch || (new_group && int(launch.groups.size()) == kMaxGroupsPerLaunch)) break;
      if (new_group) launch.groups.push_back(items[i].group);
      chunk.push_back(items[i]);
      chunk.back().group = int(launch.groups.size()) - 1;
    }
    std::stable_sort(chunk.begin(), chunk.end(), [](const TileItem& x, const TileItem& y) { return x.cost > y.cost; });
    const int ctas = std::min({units, kMaxCtas, int(chunk.size())});
    load.clear();
    for (int c = 0; c < ctas; ++c) load.push_back({0, c});  // equal costs in CTA order: already a heap
    cta_of.resize(chunk.size());
    for (size_t t = 0; t < chunk.size(); ++t) {
      std::pop_heap(load.begin(), load.end(), std::greater<>());
      cta_of[t] = load.back().second;
      load.back().first += chunk[t].cost;
      std::push_heap(load.begin(), load.end(), std::greater<>());
    }
    rebalance(chunk, cta_of, ctas);
    // The tiles grouped by CTA, each CTA's largest first.
    launch.cta_first.assign(size_t(ctas) + 1, 0);
    for (const int c : cta_of) ++launch.cta_first[size_t(c) + 1];
    for (int c = 0; c < ctas; ++c) launch.cta_first[size_t(c) + 1] += launch.cta_first[size_t(c)];
    launch.fixed_n8 = fixed_wgmma_n8(chunk, cta_of, ctas, shape);
    launch.shape = shape;
    std::vector<int64_t> cost(size_t(ctas), 0);
    for (size_t t = 0; t < chunk.size(); ++t) cost[size_t(cta_of[t])] += chunk[t].cost;
    launch.busiest = *std::max_element(cost.begin(), cost.end());
    launch.tiles.resize(chunk.size());
    std::vector<int> next(launch.cta_first.begin(), launch.cta_first.end() - 1);
    for (size_t t = 0; t < chunk.size(); ++t)
      launch.tiles[size_t(next[size_t(cta_of[t])]++)] = pack_tile(chunk[t].group, chunk[t].m_chunk, chunk[t].n_block);
    launches.push_back(std::move(launch));
  }
  return launches;
}

// The launches' summed busiest-CTA costs: what the tile shapes are compared by.
int64_t makespan(const std::vector<ScheduledLaunch>& launches) {
  int64_t total = 0;
  for (const ScheduledLaunch& launch : launches) total += launch.busiest;
  return total;
}

// Which tile shape a problem's launches use: one of Arch's shapes, or of those worth trying for the
// problem (ArchTiles::worth_trying) the one that leaves the busiest CTAs the lowest cost (ties: the lower
// shape).
constexpr int kTilesChosen = -1;

// Whether every group's chunks fit the tile's chunk field (pack_tile: 9 bits).
inline bool chunks_fit(const std::vector<GroupShape>& groups) {
  for (const GroupShape& s : groups)
    if (has_tiles(s) && ceil_div(s.m, s.chunk_rows) > 512) return false;
  return true;
}

// A problem's tile schedule: each group's A chunk rows and the launches. It depends only on every
// group's M, N, K and the SM count, so a plan for a problem seen before on other buffers (a benchmark
// keeps several input sets of one problem alive) takes it from a small cache of recent problems
// instead of recomputing it (12-18 us of a 32-38 us plan for 8 groups on the H200's host).
struct Schedule {
  std::vector<int> chunk_rows;
  std::vector<ScheduledLaunch> launches;
};

// Sets each group's chunk_rows and returns the schedule of the groups: no launches when the shape
// asked for cannot hold the groups' chunks.
std::shared_ptr<const Schedule> cached_schedule(std::vector<GroupShape>& groups, int num_sms, int max_pairs, int choice) {
  constexpr size_t kRecentProblems = 16;
  static std::mutex mutex;
  static std::vector<std::pair<std::vector<int>, std::shared_ptr<const Schedule>>> recent;  // most recent first
  std::vector<int> key{num_sms, max_pairs, choice};
  for (const GroupShape& s : groups) key.insert(key.end(), {s.m, s.n, s.k});
  std::shared_ptr<const Schedule> found;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto hit = std::find_if(recent.begin(), recent.end(), [&](const auto& entry) { return entry.first == key; });
    if (hit != recent.end()) {
      std::rotate(recent.begin(), hit, hit + 1);
      found = recent.front().second;
    }
  }
  if (found) {
    for (size_t g = 0; g < groups.size(); ++g) groups[g].chunk_rows = found->chunk_rows[g];
    return found;
  }
  auto made = std::make_shared<Schedule>();
  int64_t best = 0;
  int most_rows = 0;
  for (const GroupShape& s : groups)
    if (has_tiles(s)) most_rows = std::max(most_rows, s.m);
  for (int shape = 0; shape < ArchTiles::kTileShapes; ++shape) {
    if (choice == kTilesChosen ? !ArchTiles::worth_trying(most_rows, shape) : choice != shape) continue;
    std::vector<GroupShape> shaped = groups;
    choose_chunk_rows(shaped, num_sms, shape);
    if (!chunks_fit(shaped)) continue;
    std::vector<ScheduledLaunch> launches = schedule(shaped, num_sms, max_pairs, shape);
    const int64_t cost = makespan(launches);
    if (made->launches.empty() || cost < best) {
      best = cost;
      groups = std::move(shaped);
      made->launches = std::move(launches);
    }
  }
  for (const GroupShape& s : groups) made->chunk_rows.push_back(s.chunk_rows);
  std::lock_guard<std::mutex> lock(mutex);
  recent.insert(recent.begin(), {std::move(key), made});
  if (recent.size() > kRecentProblems) recent.pop_back();
  return made;
}
}  // namespace host
}  // namespace nvfp4
