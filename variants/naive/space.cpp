// The tunable space of a naive kernel (naive.h): the names of its values, a Choice read back from
// a configuration, and apply_to_job, which turns a naive job into a tunable one (generated
// parameters, their conditions, the launch geometry). Must not: emit code; where a condition
// mirrors the Emitter's sizes (shared memory, pads), it names the member it follows.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

std::string cache_name(Cache c) {
  switch (c) {
    case Cache::Global:
      return "global";
    case Cache::ReadOnly:
      return "readonly";
    case Cache::Shared:
      return "shared";
    case Cache::Registers:
      return "registers";
  }
  return "global";
}

namespace {
constexpr LaunchBounds kLaunchBounds[] = {LaunchBounds::Threads, LaunchBounds::None,
                                          LaunchBounds::TwoBlocks};
}

std::string launch_bounds_name(LaunchBounds b) {
  switch (b) {
    case LaunchBounds::None:
      return "none";
    case LaunchBounds::TwoBlocks:
      return "two_blocks";
    case LaunchBounds::Threads:
      break;
  }
  return "threads";
}

Choice choice_from_config(const NaiveKernel& k, const Config& c) {
  Choice ch;
  auto find = [&](const std::string& name) -> const Value* {
    for (size_t i = 0; i < c.names->size(); ++i)
      if ((*c.names)[i] == name) return &c.values[i];
    return nullptr;
  };
  auto get = [&](const char* name, int def) {
    const Value* v = find(name);
    return v ? static_cast<int>(v->as_int()) : def;
  };
  auto str = [&](const std::string& name) {
    const Value* v = find(name);
    return v ? v->as_str() : std::string();
  };
  ch.block_x = get("block_size_x", 32);
  ch.block_y = k.dims == 2 ? get("block_size_y", 1) : 1;
  ch.merge_x = get("merge_x", 1);
  ch.merge_y = k.dims == 2 ? get("merge_y", 1) : 1;
  ch.unroll = get("unroll", 1);
  ch.tile_k = get("tile_k", 16);
  ch.pad = get("pad", 0) != 0;
  ch.vector = get("vector", 1);
  ch.split = get("split", 1);
  ch.stages = get("stages", 1);
  ch.transpose = get("transpose", 0) != 0;
  ch.warp_x = get("warp_x", 0);
  for (LaunchBounds b : kLaunchBounds)
    if (str("launch_bounds") == launch_bounds_name(b)) ch.bounds = b;
  for (const ArrayOptions& a : array_options(k)) {
    if (!find("cache_" + a.array)) continue;
    const std::string v = str("cache_" + a.array);
    ch.cache[a.array] = v == "shared"      ? Cache::Shared
                        : v == "readonly"  ? Cache::ReadOnly
                        : v == "registers" ? Cache::Registers
                                           : Cache::Global;
  }
  for (const OutputOptions& o : output_options(k)) {
    if (o.stage && str("write_" + o.array) == "shared") ch.stage_store.insert(o.array);
    if (o.reduce && str("reduce_" + o.array) == "block") ch.block_reduce.insert(o.array);
  }
  return ch;
}

namespace {

/// " or cache_a == 'shared' or cache_b == 'shared'": a condition's clause per array ("" for none).
std::string any_shared(const std::vector<std::string>& arrays) {
  std::string any;
  for (const std::string& a : arrays) any += " or cache_" + a + " == 'shared'";
  return any;
}

Parameter int_param(const std::string& name, std::vector<int> values, int def) {
  Parameter p;
  p.name = name;
  p.type = "int";
  for (int v : values) p.values.emplace_back(v);
  p.default_value.emplace(def);
  return p;
}

/// A string parameter whose first value is the default.
Parameter str_param(const std::string& name, const std::vector<std::string>& values) {
  Parameter p;
  p.name = name;
  p.type = "string";
  for (const std::string& v : values) p.values.emplace_back(v);
  p.default_value.emplace(values.front());
  return p;
}

void require_thread_counts(const Job& job) {
  if (job.global_size_type != "OpenCL")
    throw JobError(job.file.string(), "KernelSpecification.GlobalSizeType",
                   "a naive kernel's GlobalSize must count threads (one per output element)",
                   "set \"GlobalSizeType\": \"OpenCL\" and GlobalSize to the output's extent");
}

/// The block-shape dimensions (powers of two, 32..1024 threads) and the block the job launches.
void block_shape(Job& job, int dims, std::vector<Parameter>& params,
                 std::vector<Condition>& conds) {
  if (dims == 2) {
    params.push_back(int_param("block_size_x", {4, 8, 16, 32, 64, 128, 256}, 32));
    params.push_back(int_param("block_size_y", {1, 2, 4, 8, 16, 32}, 4));
    conds.push_back(
        {"32 <= block_size_x * block_size_y <= 1024", {"block_size_x", "block_size_y"}});
  } else {
    params.push_back(int_param("block_size_x", {32, 64, 128, 256, 512, 1024}, 128));
  }
  job.local_size.x = "block_size_x";
  job.local_size.y = dims == 2 ? "block_size_y" : "1";
  job.local_size.z = "1";
}

/// The generated space while apply_to_job builds it: the dimensions and conditions so far, and
/// what the later dimensions depend on.
struct Generated {
  std::vector<Parameter> gen;
  std::vector<Condition> conds;
  std::vector<std::string> shared_arrays;  ///< inputs with shared tiles
  std::vector<std::string> pad_arrays;     ///< inputs whose tiles or windows a pitch pad changes
  std::vector<std::string> vector_arrays;  ///< inputs whose shared-memory loads take vectors
  std::vector<std::string> pad_uses;       ///< the choices a pitch pad changes
  /// Per thread dimension (0: x, 1: y): inputs with a tile that may be stored transposed.
  std::array<std::vector<std::string>, 2> transposable;
  std::string smem;      ///< the static shared memory of a configuration, an expression (or "")
  bool copyable = true;  ///< every tile's elements can be copied by cp.async (4 or 8 bytes)
  bool split = false;    ///< some loop can be shared by several threads per output (split_loop)
};

/// Thread merge along each dimension, and the unrolling of the loops.
void merge_and_unroll(const NaiveKernel& k, Generated& g) {
  g.gen.push_back(int_param("merge_x", {1, 2, 4, 8}, 1));
  if (k.dims == 2) g.gen.push_back(int_param("merge_y", {1, 2, 4, 8}, 1));
  // A loop keeps every merged output's accumulator live across it, and the registers per thread
  // are at most 64K / threads (every launch bound here: `none` only up to 256 threads): at or
  // below the outputs per thread the accumulators alone fill them and the variant spills (mm
  // 64x16 threads merge 8x8: 64 registers), so it is not offered.
  if (k.dims == 2 && k.loops)
    g.conds.push_back({"merge_x*merge_y < 65536 // (block_size_x*block_size_y)", {}});
  if (k.loops) g.gen.push_back(int_param("unroll", {1, 2, 4, 8}, 1));
}

/// The load path of each input that has a choice (cache_<array>), and the shared memory of its
/// tiles; which inputs a pad and vector loads concern.
void input_dimensions(const NaiveKernel& k, Generated& g) {
  const std::map<int, HaloPlan> halos = halo_plans(k);
  for (const ArrayOptions& a : array_options(k)) {
    if (a.allowed.size() < 2) continue;
    std::vector<std::string> values;
    for (Cache c : a.allowed) values.push_back(cache_name(c));  // global first
    g.gen.push_back(str_param("cache_" + a.array, values));
    if (std::find(a.allowed.begin(), a.allowed.end(), Cache::Shared) == a.allowed.end()) continue;
    int prm = 0;
    while (k.params[static_cast<size_t>(prm)].name != a.array) ++prm;
    if (halos.at(prm).ok) {  // a halo window: dynamic shared memory, sized at launch
      g.pad_arrays.push_back(a.array);
      // Loaded `vector` columns at a time where its rows are contiguous (Emitter::halo_vector).
      if (halos.at(prm).contiguous) g.vector_arrays.push_back(a.array);
      continue;
    }
    g.shared_arrays.push_back(a.array);
    // Shared bytes of this array's tiles, as an expression of the parameters.
    std::string bytes;
    for (size_t i = 0; i < k.accesses.size(); ++i) {
      const AccessSite& s = k.accesses[i];
      if (k.params[s.param].name != a.array || s.store) continue;
      TilePlan t = plan_site(k, s);
      if (!t.ok) continue;
      if (t.paddable) g.pad_arrays.push_back(a.array);
      if (t.contiguous) g.vector_arrays.push_back(a.array);
      // Padded: the last dimension as stored (Emitter::extent); transposed, idy's.
      auto tile_bytes = [&](size_t padded) {
        std::string e = std::to_string(t.bytes);
        for (size_t j = 0; j < t.dims.size(); ++j) {
          std::string d = t.dims[j] == "x"   ? "block_size_x*merge_x"
                          : t.dims[j] == "y" ? "block_size_y*merge_y"
                                             : "tile_k";
          if (j == padded && t.dims.size() == 2 && t.paddable)
            d = "(" + d + (t.contiguous ? " + pad*vector)" : " + pad)");  // Emitter::pad_amount
          e += "*" + d;
        }
        return e;
      };
      std::string e = tile_bytes(t.dims.size() - 1);
      if (const int d = transposable_dim(k, s); d >= 0) {  // Emitter: with runs along d
        auto& list = g.transposable[static_cast<size_t>(d)];
        if (std::find(list.begin(), list.end(), a.array) == list.end()) list.push_back(a.array);
        e = "(" + tile_bytes(0) + " if transpose == 1 and vector > 1 and merge_" +
            (d == 1 ? "y" : "x") + " > 1 else " + e + ")";
      }
      bytes += (bytes.empty() ? "" : " + ") + e;
      g.copyable = g.copyable && (t.bytes == 4 || t.bytes == 8);
    }
    g.smem += (g.smem.empty() ? "" : " + ") +
              ("((" + bytes + ") * stages if cache_" + a.array + " == 'shared' else 0)");
  }
}

/// What each output may do (write_<array>: stores staged through a tile; reduce_<array>: block
/// sums of its atomicAdds), and the shared memory either takes.
void output_dimensions(const NaiveKernel& k, Generated& g) {
  for (const OutputOptions& o : output_options(k)) {
    int prm = 0;
    while (k.params[prm].name != o.array) ++prm;
    const std::string eb = std::to_string(element_bytes(k.params[prm].element));
    if (o.stage) {
      g.gen.push_back(str_param("write_" + o.array, {"direct", "shared"}));
      g.pad_uses.push_back("write_" + o.array + " == 'shared'");
      // The pad is `vector` elements where the write-back stores vectors (Emitter::store_vector).
      const std::string pad =
          eb == "4" ? "pad * (vector if (block_size_y*merge_y) % vector == 0 else 1)" : "pad";
      g.smem += (g.smem.empty() ? "" : " + ") +
                ("((" + eb + "*block_size_x*merge_x*(block_size_y*merge_y + " + pad +
                 ")) if write_" + o.array + " == 'shared' else 0)");
    }
    if (o.reduce) {
      g.gen.push_back(str_param("reduce_" + o.array, {"atomic", "block"}));
      std::vector<const Stmt*> sums;
      reductions(k.body, sums);
      std::set<std::string> addresses;
      std::string rb = "0";
      for (const Stmt* r : sums)
        if (r->target == prm && addresses.insert(literal_text(r->address)).second)
          rb += " + (" + std::to_string(element_bytes(r->element)) + "*(block_size_x" +
                (k.dims == 2 ? "*block_size_y" : "") + (g.split ? "*split" : "") +
                "//32) if block_size_x" + (k.dims == 2 ? "*block_size_y" : "") +
                (g.split ? "*split" : "") + " > 32 else 0)";  // Emitter::block_sum
      g.smem += (g.smem.empty() ? "" : " + ") +
                ("((" + rb + ") if reduce_" + o.array + " == 'block' else 0)");
    }
  }
}

/// With shared tiles: their strip (tile_k), their buffers (stages) and, in 2-D, the register
/// budget (launch_bounds).
void tile_dimensions(const NaiveKernel& k, Generated& g) {
  g.gen.push_back(int_param("tile_k", {8, 16, 32}, 16));
  const std::string any = any_shared(g.shared_arrays);
  g.conds.push_back({"tile_k == 16" + any, {}});
  // S buffers per tile: the next S-1 strips are copied asynchronously while the threads work
  // on this one (Emitter::pipelined); the shared-memory condition below counts every buffer.
  g.gen.push_back(g.copyable ? int_param("stages", {1, 2, 3, 4}, 1) : int_param("stages", {1}, 1));
  if (g.copyable) g.conds.push_back({"stages == 1" + any, {}});
  // Register-tiled 2-D blocks with shared tiles use the most registers, and there ptxas's
  // choice under __launch_bounds__(threads) swings (mm 16x16 merge 8x8 tk16, NVRTC: 128
  // registers and 36 bytes of spills with two stages, 171 and none with three): `none` leaves
  // the compiler up to 255 (offered up to 256 threads, where any count launches), `two_blocks`
  // caps them for two blocks per SM (where that is under 128: 2 x threads >= 512), and only
  // where the cap (64K registers per SM, as on every GPU since Kepler, over 2 x threads) is
  // above the outputs per thread: at or below it the accumulators alone fill the registers and
  // every such variant spills (mm 32x16 merge 8x8: 64 registers, 2-3 KB of spills). Only for
  // the heaviest register tiles (32 outputs or more per thread): the rest fit either way.
  if (k.dims == 2) {
    std::vector<std::string> names;
    for (LaunchBounds b : kLaunchBounds) names.push_back(launch_bounds_name(b));
    g.gen.push_back(str_param("launch_bounds", names));  // "threads" first: the default
    g.conds.push_back({"launch_bounds == 'threads' or (merge_x*merge_y >= 32 and (" +
                           any.substr(4) +
                           ") and (block_size_x*block_size_y <= 256 if launch_bounds == 'none' "
                           "else 256 <= block_size_x*block_size_y and merge_x*merge_y < 32768 // "
                           "(block_size_x*block_size_y)))",
                       {}});
  }
}

/// The vector width, where some access can take vectors: shared-memory loads, a staged store's
/// write-back, or runs of merged outputs.
void vector_dimension(const NaiveKernel& k, Generated& g) {
  // Arrays read straight from global memory at consecutive idx (vector_global_site): with
  // merge_x > 1 their reads take one vector per run of `vector` consecutive outputs.
  // Stores at consecutive idx (vector_store_site) go out one vector per run unless staged.
  std::vector<std::string> runs;    // when each such access is a run (condition clauses)
  std::vector<std::string> stored;  // when a staged store's write-back takes vectors
  for (size_t i = 0; i < k.accesses.size(); ++i) {
    const AccessSite& s = k.accesses[i];
    const std::string& a = k.params[static_cast<size_t>(s.param)].name;
    std::string when;
    if (vector_global_site(k, s)) {
      when = "cache_" + a + " in ('global', 'readonly')";
    } else if (vector_store_site(k, static_cast<int>(i))) {
      const bool stage = staged_store_site(k, a) >= 0;
      when = stage ? "write_" + a + " == 'direct'" : "True";
    }
    if (!when.empty() && std::find(runs.begin(), runs.end(), when) == runs.end())
      runs.push_back(when);
    // A staged store's write-back takes `vector` elements per store (Emitter::store_vector).
    if (s.store && staged_store_site(k, a) == static_cast<int>(i) &&
        element_bytes(k.params[static_cast<size_t>(s.param)].element) == 4)
      stored.push_back("(write_" + a + " == 'shared' and (block_size_y*merge_y) % vector == 0)");
  }
  if (!g.vector_arrays.empty() || !runs.empty() || !stored.empty()) {
    g.gen.push_back(int_param("vector", {1, 2, 4}, 1));
    std::string any = any_shared(g.vector_arrays);
    for (const std::string& w : stored) any += " or " + w;
    if (!runs.empty()) {  // runs of min(vector, merge_x): vector > merge_x adds nothing
      std::string direct;
      for (const std::string& w : runs) direct += std::string(direct.empty() ? "" : " or ") + w;
      any += " or (vector <= merge_x" + std::string(g.split ? " and split == 1" : "") + " and (" +
             direct + "))";
    }
    g.conds.push_back({"vector == 1" + any, {}});
  }
}

/// Several threads per output share the reduction loop (too few outputs to fill a GPU: mv and
/// tmv at 4096 rows are 128 warps). Not with shared tiles or windows (the tile's cooperative
/// loads would need the split's lanes too; a tile gives a thread's loop its reuse already).
void split_dimension(Job& job, const NaiveKernel& k, Generated& g) {
  const SplitOption sp = split_loop(k);
  g.gen.push_back(int_param("split", {1, 2, 4, 8, 16, 32}, 1));
  std::string none;
  for (const std::string& a : g.shared_arrays) none += " and cache_" + a + " != 'shared'";
  for (const std::string& a : g.pad_arrays)
    if (std::find(g.shared_arrays.begin(), g.shared_arrays.end(), a) == g.shared_arrays.end())
      none += " and cache_" + a + " != 'shared'";
  g.conds.push_back({"split == 1 or (True" + none + ")", {}});
  g.conds.push_back({"block_size_x * split <= 1024", {"block_size_x", "split"}});
  if (sp.across_warps) {  // lanes along y, parts added in shared memory (Emitter::combine_split)
    job.local_size.y = "split";
    std::string b;
    for (int id : sp.locals)
      b += (b.empty() ? "" : " + ") +
           std::to_string(element_bytes(strip_const(k.locals[static_cast<size_t>(id)].type))) +
           "*split*block_size_x*merge_x";
    g.smem += (g.smem.empty() ? "" : " + ") + ("((" + b + ") if split > 1 else 0)");
  } else {
    job.local_size.x = "block_size_x*split";
  }
}

/// The job's own parameters narrow the generated ones of the same name (or it lists none). A
/// narrowing value must be one the emitter understands: a listed choice for a string dimension
/// (an unknown one would silently mean the default), an integer for a numeric one (at least 1
/// where every generated value is). Throws JobError for any other parameter or value.
void narrow_by_job(const Job& job, const NaiveKernel& k, std::vector<Parameter>& gen) {
  for (const Parameter& p : job.parameters) {
    auto it =
        std::find_if(gen.begin(), gen.end(), [&](const Parameter& g) { return g.name == p.name; });
    if (it == gen.end()) {
      std::string names;
      for (const Parameter& g : gen) names += (names.empty() ? "" : ", ") + g.name;
      throw JobError(job.file.string(), "ConfigurationSpace.TuningParameters." + p.name,
                     "not a dimension of the generated space of naive kernel '" + k.name + "'",
                     "use the generated names (" + names + ") or drop the parameter");
    }
    const Parameter& g = *it;
    std::string offered;
    for (const Value& v : g.values) offered += (offered.empty() ? "" : ", ") + v.repr();
    const bool positive = std::all_of(g.values.begin(), g.values.end(),
                                      [](const Value& v) { return v.is_int() && v.as_int() >= 1; });
    for (const Value& v : p.values) {
      const bool ok = g.type == "string"
                          ? std::any_of(g.values.begin(), g.values.end(),
                                        [&](const Value& x) { return py_equal(x, v); })
                          : v.is_int() && v.as_int() >= (positive ? 1 : 0);
      if (!ok)
        throw JobError(
            job.file.string(), "ConfigurationSpace.TuningParameters." + p.name,
            "value " + v.repr() + " is not one naive kernel '" + k.name + "' can be generated with",
            g.type == "string" ? "use values among " + offered
                               : std::string("use ") + (positive ? "positive " : "") +
                                     "integers, as generated: " + offered);
    }
  }
  for (Parameter& g : gen)
    for (const Parameter& p : job.parameters)
      if (p.name == g.name) g = p;
}

/// The launch geometry: the job's GlobalSize counts the naive kernel's threads; the grid is
/// blocks of block_size x merge outputs.
void naive_geometry(Job& job, const NaiveKernel& k) {
  Dim3Expr threads = job.global_size;
  job.naive_threads = threads;
  job.global_size.x = "((" + threads.x + ") + block_size_x*merge_x - 1) // (block_size_x*merge_x)";
  job.global_size.y =
      k.dims == 2 ? "((" + threads.y + ") + block_size_y*merge_y - 1) // (block_size_y*merge_y)"
                  : "(" + threads.y + ")";
  job.global_size.z = "(" + threads.z + ")";
  job.global_size_type = "CUDA";
}

}  // namespace

void apply_to_job(Job& job, const NaiveKernel& k) {
  require_thread_counts(job);
  Generated g;
  block_shape(job, k.dims, g.gen, g.conds);
  merge_and_unroll(k, g);
  input_dimensions(k, g);
  g.split = split_loop(k).loop >= 0;
  for (const std::string& a : g.pad_arrays) g.pad_uses.push_back("cache_" + a + " == 'shared'");
  output_dimensions(k, g);
  if (!g.shared_arrays.empty()) tile_dimensions(k, g);
  vector_dimension(k, g);
  if (!g.pad_uses.empty()) {
    g.gen.push_back(int_param("pad", {0, 1}, 0));
    std::string anyp;
    for (const std::string& u : g.pad_uses) anyp += " or " + u;
    g.conds.push_back({"pad == 0" + anyp, {}});
  }
  // Tiles read along the loop by a thread index stored transposed (Choice::transpose): with
  // shared tiles of such an array, a vector width and outputs merged along that index (the runs
  // the transposed tile serves; 2-D, so never with split). After the other dimensions, so they
  // keep their place in the keys.
  if ((!g.transposable[0].empty() || !g.transposable[1].empty()) && !g.shared_arrays.empty()) {
    g.gen.push_back(int_param("transpose", {0, 1}, 0));
    std::string any;
    for (int d : {1, 0}) {
      const std::string shared = any_shared(g.transposable[static_cast<size_t>(d)]);
      if (!shared.empty())
        any += std::string(" or (merge_") + (d == 1 ? "y" : "x") + " > 1 and (" + shared.substr(4) +
               "))";
    }
    g.conds.push_back({"transpose == 0 or (vector > 1 and (" + any.substr(4) + "))", {}});
  }
  // Warps arranged over the block (Choice::warp_x): for 2-D register tiles (16 outputs or more
  // per thread) read from shared tiles, an arrangement other than the launched one (whose warp
  // is min(block_size_x, 32) threads wide), tiling the block.
  if (k.dims == 2 && !g.shared_arrays.empty()) {
    const std::string any = any_shared(g.shared_arrays);
    g.gen.push_back(int_param("warp_x", {0, 4, 8, 16}, 0));
    g.conds.push_back(
        {"warp_x == 0 or (merge_x * merge_y >= 16 and warp_x < min(block_size_x, "
         "32) and block_size_x % warp_x == 0 and block_size_y % (32 // warp_x) == "
         "0 and (" +
             any.substr(4) + "))",
         {}});
  }
  if (g.split) split_dimension(job, k, g);
  if (!g.smem.empty()) g.conds.push_back({g.smem + " <= 48 * 1024", {}});
  narrow_by_job(job, k, g.gen);
  job.parameters = g.gen;
  job.conditions.insert(job.conditions.begin(), g.conds.begin(), g.conds.end());
  naive_geometry(job, k);
}

void apply_block_shape_only(Job& job, int dims) {
  require_thread_counts(job);
  std::vector<Parameter> params;
  std::vector<Condition> conds;
  block_shape(job, dims, params, conds);
  if (job.parameters.empty()) {
    job.parameters = params;
    job.conditions.insert(job.conditions.begin(), conds.begin(), conds.end());
  }
}

}  // namespace gputune::naive
