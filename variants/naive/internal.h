/** \file variants/naive/internal.h
 * Internal to variants/naive/: included by this folder's files only (the interface is naive.h).
 * Owns: what the generator's files share: the plans (TilePlan, HaloPlan and the checks that decide
 * what a variant may do, plan.cpp; halo windows, plan_halo.cpp) and the Emitter, the one class
 * that writes a variant's source.
 * The Emitter is declared here and its member functions are defined across files grouped by
 * purpose (as Halide splits its simplifier); each is documented where it is defined:
 *   emitter.cpp       the kernel's skeleton: what the variant holds, its shared memory, signature,
 *                     set-up and header comment;
 *   emit_text.cpp     the rendering of the kernel's text for the variant, its lists of statements;
 *   emit_loops.cpp    loops every thread runs alike: unrolled, split, strip-mined through shared
 *                     tiles (pipelined with cp.async), vector loads along the loop;
 *   emit_halo.cpp     halo windows in dynamic shared memory, register windows sliding along a loop;
 *   emit_merge.cpp    thread merge: loads the merged outputs share, work without the bounds check,
 *                     arrays kept in registers, the split lanes' partial sums;
 *   emit_runs.cpp     merged outputs in runs of consecutive idx: a vector load or store per run;
 *   emit_outputs.cpp  after the work: stores staged in a tile written back, block sums.
 * Must not: be included outside variants/naive/, or include clang headers (the analysis,
 * analyser.h and analysis*.cpp, is built without RTTI and shares only naive.h with this side). */
#pragma once

#include <array>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "variants/naive/naive.h"

namespace gputune::naive {

// plan.cpp: what each access allows, decided before any code is written (documented there).
int element_bytes(const std::string& t);
std::string literal_text(const Text& t);
std::string strip_const(std::string t);

/// How one access site can be staged in shared memory: the tile's dimensions, slowest first.
struct TilePlan {
  bool ok = false;
  std::string reason;
  std::vector<std::string> dims;  ///< "y", "x", "loop"
  bool paddable = false;          ///< a thread dimension is the slow one: a pitch pad helps
  bool contiguous = false;  ///< consecutive elements of the fast dimension are adjacent in memory
                            ///< (unit coefficient) and 4-byte float/int: vector loads apply
  int bytes = 0;
  int loop = -1;
  std::string key;  ///< sites with the same key share one tile
};

TilePlan plan_site(const NaiveKernel& k, const AccessSite& s);
/// Whether a read's tile may be stored transposed (Choice::transpose): 2-D, a thread index slow
/// and the loop fast (contiguous) in memory, 4-byte elements, not in a triangular loop. The
/// thread dimension (0: idx, syrk's a[idx * m + k]; 1: idy, mm's a[idy * n + k]), or -1.
int transposable_dim(const NaiveKernel& k, const AccessSite& s);
int staged_store_site(const NaiveKernel& k, const std::string& array);
const Piece* access_in(const Text& t, int site);
const Piece* access_in(const std::vector<Stmt>& list, int site);
std::string register_refusal(const NaiveKernel& k, int param);
/// "the read at line 7", "the 2 reads at line 7", "the reads at lines 7, 9".
std::string reads_at(const NaiveKernel& k, const std::vector<int>& sites);
/// Why read site `site` of an array the kernel writes cannot be shown, at launch, never to read
/// an element the kernel writes ("" when it can; see plan.cpp).
std::string apart_refusal(const NaiveKernel& k, int site);
bool vector_global_site(const NaiveKernel& k, const AccessSite& s);
bool vector_store_site(const NaiveKernel& k, int site);
const Stmt* find_loop(const std::vector<Stmt>& list, int loop);

/// A halo tile: one shared-memory window per block holding every element the block's threads read
/// from an input array whose reads are all the same affine function of (idx + ox, idy + oy): ox
/// and oy are small constant steps (a stencil's neighbours) plus loop counters that advance the
/// subscript exactly as idx or idy does (a convolution's filter window). The window is the block's
/// outputs widened by the offsets' span, so its size follows the loop bounds at run time: it lives
/// in dynamic shared memory, sized at launch from the kernel's scalar arguments.
/// Reads whose offsets differ by a launch constant that is not a small step (a 3-D stencil's
/// planes i - 1, i, i + 1 with the plane i a kernel argument) get one window per plane: `planes`
/// holds them (each a whole plan of its own reads; this plan then says only ok, why and the
/// array), and a plane with one read and no loop stays off the windows (nothing to reuse).
struct HaloPlan {
  bool ok = false;
  std::string reason;
  int param = -1;
  int plane = 0;                 ///< which plane of the array's windows (names its variables)
  std::vector<HaloPlan> planes;  ///< one window per plane, when the reads span several
  std::vector<int> unwindowed;   ///< reads left off the windows (alone in their plane)
  std::vector<int> sites;        ///< the reads; sites[0] is the reference
  std::vector<std::array<long long, 2>> off;  ///< per site: its offset from the window's corner
  std::array<long long, 2> span{0, 0};        ///< largest constant offset per axis
  std::array<std::vector<int>, 2> loops;      ///< loop ids that advance it along x, y
  bool contiguous = false;  ///< consecutive columns are consecutive 4-byte elements (vector loads)
};

std::string trip_text(const Stmt& l);
std::map<int, HaloPlan> halo_plans(const NaiveKernel& k);
void reductions(const std::vector<Stmt>& list, std::vector<const Stmt*>& out);

// emitter.cpp: the subscripts and the array dimensions of a replicated local ([gt_my][gt_mx]).
std::string suffix(const Choice& c, int dims);
std::string array_dims(const Choice& c, int dims);

/// Writes the source of one variant of a naive kernel (emit_variant) and sizes its shared memory
/// (shared_bytes, dynamic_shared_bytes): one per variant, used once.
class Emitter {
 public:
  Emitter(const NaiveKernel& k, const Choice& c);
  long long shared_bytes() const;
  long long dynamic_bytes(const std::map<std::string, double>& scalars) const;
  std::string run();

 private:
  struct Tile {
    TilePlan plan;
    int id;
    int site;
    /// Stored [loop][x] or [loop][y] although read from memory (and staged, coalesced) in the
    /// plan's [x or y][loop] order (Choice::transpose); plan.dims keeps the order of memory.
    bool transposed = false;
  };
  /// An array kept in registers: one per merged row/column its element depends on.
  struct Reg {
    int param = -1;
    int site = -1;              ///< its first access (every access is the same element)
    bool x = false, y = false;  ///< one register per merged column (x), row (y)
    std::string name;
    std::string index() const { return std::string(y ? "[gt_my]" : "") + (x ? "[gt_mx]" : ""); }
  };
  /// One address every thread adds to, summed per block first.
  struct Sum {
    std::string key;
    const Stmt* stmt;  ///< the first Reduce statement to it
    std::string name;  ///< the thread's accumulator
  };

  // emitter.cpp: the kernel's skeleton and its header comment; emit_text.cpp: rendering,
  // statement lists.
  std::string guard_text() const;
  Cache cache_of(int param) const;
  bool read_only_path(int param) const;
  bool merged() const;
  const Piece* find_access(int site) const;
  std::string index_text(int site) const;
  std::string render_access(int site) const;
  std::string render_index(int site) const;
  void line(std::ostringstream& o, const std::string& s) const;
  std::string render(const Text& t) const;
  void emit_text_lines(std::ostringstream& o, const std::string& text) const;
  void emit_list(std::ostringstream& o, const std::vector<Stmt>& list, bool guarded);
  void header(std::ostringstream& o) const;
  void signature(std::ostringstream& o);
  void thread_place(std::ostringstream& o);
  void block_storage(std::ostringstream& o);

  // emit_loops.cpp: loops every thread runs alike, strip-mined through shared tiles.
  long long extent(const Tile& t, size_t j) const;
  static std::vector<size_t> storage_order(const Tile& t);
  long long extent_product(const Tile& t) const;
  std::string tile_name(const Tile& t, const std::string& buffer = "") const;
  std::string tile_array(const Tile& t) const;
  bool pipelined() const;
  static std::string stage_var(int loop);
  std::string describe_tile(const Tile& t) const;
  std::string loop_var(int loop) const;
  static std::string find_loop_var(const std::vector<Stmt>& list, int loop);
  bool loop_vector_tile(const Tile& t) const;
  std::vector<int> loop_vector_sites(const Stmt& loop) const;
  void hoist_loop_vector(std::ostringstream& o, const Stmt& loop, int site, const std::string& k0);
  bool vector_tile(const Tile& t) const;
  bool aligned_rows(const Tile& t) const;
  int pad_amount(const Tile& t) const;
  bool vector_access(const Tile& t) const;
  void emit_loop(std::ostringstream& o, const Stmt& s, bool guarded);
  void open_strips(std::ostringstream& o, const Stmt& s, const std::vector<const Tile*>& here,
                   const std::string& lo, const std::string& hi);
  std::string block_bound(const Text& t, bool upper) const;
  std::string range_check(const Stmt& s) const;
  bool triangular() const;
  void stage_tile(std::ostringstream& o, const Stmt& s, const Tile& t, const std::string& k0,
                  const std::string& hi, const std::string& buffer = "");
  int vector_width(const Tile& t) const;

  // emit_halo.cpp: halo windows and the register windows that slide along a loop.
  bool halo_of(int param) const;
  std::string halo_name(const HaloPlan& h, const std::string& what) const;
  std::string loop_advance(const HaloPlan& h, size_t d) const;
  int halo_vector(const HaloPlan& h) const;
  std::string halo_read(const HaloPlan& h, size_t n) const;
  void stage_halos(std::ostringstream& o);
  std::string halo_valid_outputs(std::ostringstream& o) const;
  std::string stage_halo(std::ostringstream& o, const HaloPlan& h, const std::string& always,
                         const std::string& offset);
  std::array<std::string, 2> halo_reach(std::ostringstream& o, const HaloPlan& h,
                                        std::string& trips) const;
  std::string halo_needed(const HaloPlan& h, const std::array<std::string, 2>& reach,
                          const std::string& run) const;
  void halo_bind(std::ostringstream& o, const HaloPlan& h, const std::string& shift) const;
  void load_halo(std::ostringstream& o, const HaloPlan& h, const std::string& needed);
  std::vector<int> sliding_sites(const Stmt& s) const;
  enum class Slide { Before, Newest, Shift };
  void slide_window(std::ostringstream& o, const Stmt& s, int site, Slide part);

  // emit_merge.cpp: thread merge: shared loads, unguarded work, registers, split lanes.
  void hoist_shared_loads(std::ostringstream& o, const std::vector<const Stmt*>& group,
                          bool guarded);
  template <class F>
  void per_register(std::ostringstream& o, bool x, bool y, F body);
  bool unguarded(const std::vector<const Stmt*>& group);
  bool float_element(int site) const;
  std::string ok_flag(bool x, bool y) const;
  std::string memory_access(int site, bool load) const;
  void load_registers(std::ostringstream& o);
  void store_registers(std::ostringstream& o);
  std::string merged_index(int d, bool merged) const;
  std::string bound_text(const GuardBound& b, const std::string& open) const;
  std::string x_index(bool merged_x) const { return merged_index(0, merged_x); }
  std::string y_index(bool merged_y) const { return merged_index(1, merged_y); }
  void combine_split(std::ostringstream& o);

  // emit_runs.cpp: runs of consecutive outputs along x (or y, transposed tiles): a vector access
  // per run.
  void hoist_runs(std::ostringstream& o, int site, int d);
  void open_runs(std::ostringstream& o, bool y);
  std::string run_member(int j) const;
  std::string member_flag(std::string f, int j) const;
  std::string run_flags(const std::string& f) const;
  bool run_store_candidate(int site) const;
  std::string run_store_row() const;
  std::vector<int> declare_run_stores(std::ostringstream& o, const std::vector<const Stmt*>& group);
  void store_runs(std::ostringstream& o, const std::vector<int>& sites, bool guarded);
  bool global_run_candidate(int site) const;
  void hoist_global_runs(std::ostringstream& o, int site, bool guarded);

  // emit_outputs.cpp: after the work: staged stores written back, block sums.
  std::string sum_key(const Stmt& r) const;
  int sum_of(const Stmt& r) const;
  std::string store_tile(int site) const;
  bool staged_store(int site) const;
  int store_vector(int site) const;
  void write_back(std::ostringstream& o, int site);
  void block_sum(std::ostringstream& o, const Sum& x);

  // Templates several of the files above use, defined below the class.
  template <class At, class Vector, class Element>
  void vector_or_elements(std::ostringstream& o, int v, const std::string& cond, At at,
                          const std::string& pointer, int align, Vector vector, Element element);
  template <class F>
  void replica_block(std::ostringstream& o, F body);

  const NaiveKernel& k_;
  Choice c_;
  int tx_ = 0, ty_ = 0;
  int xrun_ = 1;       ///< merged outputs along x per run of consecutive elements (1: strided)
  int yrun_ = 1;       ///< merged outputs along y per run of consecutive rows (transposed tiles)
  SplitOption split_;  ///< the loop `split` threads share (split > 1)
  std::array<int, 2> lb_{1, 1};  ///< the launched block (launch_block)
  bool lane0_ = false;           ///< past the split loop: statements run on lane 0 of each output
  int ind_ = 0;
  std::vector<Tile> tiles_;
  std::map<int, int> site_tile_;
  std::vector<int> store_sites_;                     ///< stores staged through a tile
  std::vector<HaloPlan> halos_;                      ///< arrays read through a halo window
  std::map<int, std::pair<int, size_t>> halo_site_;  ///< site -> (halo, its index in the plan)
  std::map<int, std::string> hoisted_;       ///< site -> the register holding it (current group)
  std::map<int, std::string> loop_hoisted_;  ///< site -> its register (current vector loop step)
  std::set<int> tile_hoisted_;  ///< hoisted_ sites loaded from a shared tile, for every output
  std::set<int> defined_;       ///< replicated locals set for every merged output, in range or not
  std::vector<Sum> sums_;
  std::vector<const Stmt*> ranges_;  ///< the triangular loops around what is being emitted
  std::set<int> apart_;  ///< reads of written arrays on the read-only path where checked apart
  void check_apart(std::ostringstream& o);
  std::vector<Reg> regs_;           ///< arrays kept in registers
  std::map<int, size_t> reg_site_;  ///< site -> its array's register (regs_)
};

/// `v` consecutive elements as one vector access where every one passes `cond` (with the
/// kernel's indices set by `at(" + gt_j")` for element gt_j) and the address `gt_p` declared by
/// `pointer` is a multiple of `align` bytes: `vector()`; element by element otherwise:
/// `element()` with element gt_j's indices set.
template <class At, class Vector, class Element>
void Emitter::vector_or_elements(std::ostringstream& o, int v, const std::string& cond, At at,
                                 const std::string& pointer, int align, Vector vector,
                                 Element element) {
  const std::string vs = std::to_string(v);
  line(o, "bool gt_all = true;");
  line(o, "for (int gt_j = 0; gt_j < " + vs + "; ++gt_j) {");
  ++ind_;
  at(" + gt_j");
  line(o, "gt_all = gt_all && (" + cond + ");");
  --ind_;
  line(o, "}");
  line(o, "{");
  ++ind_;
  at("");
  line(o, pointer);
  line(o, "if (gt_all && reinterpret_cast<unsigned long long>(gt_p) % " + std::to_string(align) +
              " == 0) {");
  ++ind_;
  vector();
  --ind_;
  line(o, "} else {");
  ++ind_;
  line(o, "for (int gt_j = 0; gt_j < " + vs + "; ++gt_j) {");
  ++ind_;
  at(" + gt_j");
  element();
  --ind_;
  line(o, "}");
  --ind_;
  line(o, "}");
  --ind_;
  line(o, "}");
}

/// Runs `body` once per merged thread with idx/idy (the kernel's names) set for it.
template <class F>
void Emitter::replica_block(std::ostringstream& o, F body) {
  if (k_.dims == 2 && c_.merge_y > 1) {
    line(o, "#pragma unroll");
    line(o, "for (int gt_my = 0; gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my)");
  }
  if (c_.merge_x > 1) {
    line(o, "#pragma unroll");
    line(o, "for (int gt_mx = 0; gt_mx < " + std::to_string(c_.merge_x) + "; ++gt_mx)");
  }
  line(o, "{");
  ++ind_;
  line(o, "const int " + k_.index_names[0] + " = " + x_index(c_.merge_x > 1) + ";");
  if (k_.dims == 2)
    line(o, "const int " + k_.index_names[1] + " = " + y_index(c_.merge_y > 1) + ";");
  body(o);
  --ind_;
  line(o, "}");
}

}  // namespace gputune::naive
