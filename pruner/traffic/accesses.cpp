// The traffic analysis's memory accesses (see sim.h for the layout of pruner/traffic/): the
// address an lvalue denotes, loads and stores, and what one warp request costs: 32-byte sectors
// (coalescing) of global memory, wavefronts (bank conflicts) of shared memory, bytes, and the
// rounds of global loads; a thread's local arrays. Owns: Sim's members listed under accesses.cpp
// in sim.h. Must not: evaluate expressions beyond asking values.cpp (eval) for addresses and
// indices, or walk statements.
#include <clang/AST/Attr.h>
#include <clang/AST/RecordLayout.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "pruner/traffic/sim.h"

namespace gputune::pruner::traffic {

namespace {

// ---------------------------------------------------------------- memory
constexpr const char* kUncoalescedNote =
    "address depends on data or an unknown value: counted as uncoalesced";
constexpr const char* kRelativeNote =
    "address depends on loaded data: lanes that share the data-dependent part are counted as "
    "they lie relative to each other (at an average alignment), other lanes in sectors of "
    "their own";

}  // namespace

int Sim::array_for(const VarDecl* v, const std::string& space, std::int64_t bytes) {
  auto it = array_of_.find(v);
  if (it != array_of_.end()) return it->second;
  arrays_.push_back({v->getNameAsString(), space, bytes});
  int id = static_cast<int>(arrays_.size() - 1);
  array_of_[v] = id;
  return id;
}

/// 32-byte sectors one warp request touches when its address is a Sym: lanes are grouped by
/// symbol; lanes without one touch known sectors, and each group with one lies at an unknown
/// base, so it counts the sectors its offsets touch averaged over every alignment of that base
/// to a sector (in steps of gcd(element size, 32), where such bases fall). Groups are never
/// assumed to share a sector.
double Sim::relative_sectors(const Val& a, std::int64_t bytes, bool& grouped) const {
  std::vector<std::pair<std::uint32_t, std::int64_t>> lanes;
  for (int l = 0; l < W; ++l)
    if (active_ >> l & 1)
      lanes.emplace_back(a.s[static_cast<size_t>(l)], a.v[static_cast<size_t>(l)]);
  std::sort(lanes.begin(), lanes.end());
  const std::int64_t step = std::gcd<std::int64_t>(bytes, 32);
  double total = 0;
  std::vector<std::int64_t> sec;
  for (size_t i = 0; i < lanes.size();) {
    size_t j = i;
    while (j < lanes.size() && lanes[j].first == lanes[i].first) ++j;
    const bool known_base = lanes[i].first == 0;
    grouped |= !known_base && j - i > 1;
    double sum = 0;
    int alignments = 0;
    for (std::int64_t base = 0; base < (known_base ? 1 : 32); base += step, ++alignments) {
      sec.clear();
      for (size_t k = i; k < j; ++k) {
        const std::int64_t lo = base + lanes[k].second;
        for (std::int64_t x = lo >> 5; x <= (lo + bytes - 1) >> 5; ++x) sec.push_back(x);
      }
      std::sort(sec.begin(), sec.end());
      sum += static_cast<double>(std::unique(sec.begin(), sec.end()) - sec.begin());
    }
    total += sum / alignments;
    i = j;
  }
  return total;
}

void Sim::record(const Expr* site, const Val& a, std::int64_t bytes, bool store) {
  if (a.arr < 0 || !active_ || bytes <= 0) return;
  const ArrayDesc& d = arrays_[static_cast<size_t>(a.arr)];
  if (d.space != "global" && d.space != "shared") return;
  Access& acc = accesses_[{site, store}];
  if (acc.line == 0) {
    PresumedLoc p = sm_.getPresumedLoc(site->getExprLoc());
    acc.line = p.isValid() ? static_cast<int>(p.getLine()) : 0;
    acc.column = p.isValid() ? static_cast<int>(p.getColumn()) : 0;
    acc.array = d.name;
    acc.space = d.space;
    acc.kind = store ? "store" : "load";
    acc.element_bytes = static_cast<int>(bytes);
  }
  int n = std::popcount(active_);
  double w = weight_;
  if (d.space == "global" && !store && !round_open_) {
    load_rounds_ += w * round_scale_;
    round_open_ = true;
  }
  acc.requests += w;
  acc.bytes += w * n * static_cast<double>(bytes);
  if (d.space == "global") {
    double ideal = std::max<double>(1, std::ceil(n * static_cast<double>(bytes) / 32.0));
    acc.ideal += w * ideal;
    if (a.k == Val::Sym) {
      bool grouped = false;
      acc.sectors += w * relative_sectors(a, bytes, grouped);
      acc.analysed = false;
      if (grouped)
        acc.note = kRelativeNote;
      else if (acc.note.empty())
        acc.note = kUncoalescedNote;
      return;
    }
    if (a.k != Val::Ptr) {
      acc.analysed = false;
      if (acc.note.empty()) acc.note = kUncoalescedNote;
      acc.sectors += w * n * std::max<double>(1, std::ceil(static_cast<double>(bytes) / 32.0));
      return;
    }
    std::int64_t sec[W * 8];
    int k = 0;
    for (int l = 0; l < W; ++l) {
      if (!(active_ >> l & 1)) continue;
      for (std::int64_t s = a.v[l] >> 5; s <= (a.v[l] + bytes - 1) >> 5 && k < W * 8; ++s)
        sec[k++] = s;
    }
    std::sort(sec, sec + k);
    acc.sectors += w * static_cast<double>(std::unique(sec, sec + k) - sec);
  } else {
    // Shared memory: 32 banks of 4 bytes; an access of e bytes per lane is served in phases of
    // 128/e lanes; each phase takes as many wavefronts as the most distinct words in one bank.
    int per_phase =
        static_cast<int>(std::max<std::int64_t>(1, 128 / std::max<std::int64_t>(4, bytes)));
    double ideal = 0, waves = 0;
    for (int p0 = 0; p0 < W; p0 += per_phase) {
      Mask pm = 0;
      for (int l = p0; l < std::min(W, p0 + per_phase); ++l) pm |= Mask(1) << l;
      pm &= active_;
      if (!pm) continue;
      ideal += 1;
      if (a.k != Val::Ptr) {
        waves += std::popcount(pm);
        continue;
      }
      std::vector<std::int64_t> words;
      for (int l = p0; l < std::min(W, p0 + per_phase); ++l) {
        if (!(pm >> l & 1)) continue;
        for (std::int64_t wd = a.v[l] >> 2; wd <= (a.v[l] + bytes - 1) >> 2; ++wd)
          words.push_back(wd);
      }
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      int per_bank[32] = {};
      int worst = 1;
      for (auto wd : words) worst = std::max(worst, ++per_bank[((wd % 32) + 32) % 32]);
      waves += worst;
    }
    if (a.k != Val::Ptr) acc.analysed = false;
    acc.ideal += w * ideal;
    acc.wavefronts += w * waves;
  }
  if (!acc.analysed && acc.note.empty()) acc.note = kUncoalescedNote;
}

/// The address an lvalue denotes: Ptr into a tracked array, Unknown with arr set (an index we
/// cannot evaluate), or Unknown with arr -1 (a local variable, not memory we track).
Val Sim::addr(const Expr* e) {
  e = e->IgnoreParens();
  if (auto* s = dyn_cast<ArraySubscriptExpr>(e)) {
    Val base = eval(s->getBase());
    Val idx = eval(s->getIdx());
    std::int64_t sz = size_of(s->getType());
    if (!is_address(base) || (idx.k != Val::Int && idx.k != Val::Sym)) {
      Val r;
      r.arr = base.arr;
      return r;
    }
    return offset_ptr(base, idx, sz, 1);
  }
  if (auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Deref)
    return eval(u->getSubExpr());
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    if (auto* v = dyn_cast<VarDecl>(d->getDecl())) {
      if (v->getType()->isArrayType()) {
        Val r;
        r.k = Val::Ptr;
        r.arr = array_for(v, space_of(v), size_of(v->getType()));
        return r;
      }
    }
    return Val{};
  }
  if (auto* m = dyn_cast<MemberExpr>(e)) {
    Val base = m->isArrow() ? eval(m->getBase()) : addr(m->getBase());
    if (is_address(base))
      if (auto* f = dyn_cast<FieldDecl>(m->getMemberDecl())) {
        std::int64_t off = static_cast<std::int64_t>(ctx_.getFieldOffset(f) / 8);
        for (auto& x : base.v) x += off;
      }
    return base;
  }
  eval(e);
  return Val{};
}

std::string Sim::space_of(const VarDecl* v) const {
  if (v->hasAttr<CUDASharedAttr>()) return "shared";
  if (v->hasAttr<CUDAConstantAttr>()) return "constant";
  if (v->hasGlobalStorage()) return "global";
  return "local";
}

Val Sim::load(const Expr* lv) {
  const Expr* e = lv->IgnoreParens();
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    if (auto* v = dyn_cast<VarDecl>(d->getDecl())) {
      if (!v->getType()->isArrayType()) return var_value(v);
    }
  }
  if (auto* m = dyn_cast<MemberExpr>(e)) {
    if (auto b = builtin(m)) return *b;
    if (!m->isArrow() && !is_memory(m->getBase())) return Val{};
  }
  Val a = addr(e);
  if (a.arr >= 0 && arrays_[static_cast<size_t>(a.arr)].space == "local") return recall_local(a);
  if (a.arr >= 0) record(e, a, size_of(lv->getType()), false);
  return loaded(a, lv->getType());
}

/// Whether an lvalue is in memory we track (not a local scalar or struct variable).
bool Sim::is_memory(const Expr* e) {
  e = e->IgnoreParens();
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    auto* v = dyn_cast<VarDecl>(d->getDecl());
    return v && v->getType()->isArrayType() && space_of(v) != "local";
  }
  if (auto* m = dyn_cast<MemberExpr>(e)) return m->isArrow() || is_memory(m->getBase());
  return true;  // subscripts and dereferences: decided by addr()
}

/// Stores to an lvalue: a local variable takes the value; memory records a store.
void Sim::store(const Expr* lhs, const Val& value, const Expr* site) {
  const Expr* e = lhs->IgnoreParens();
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    if (auto* v = dyn_cast<VarDecl>(d->getDecl()); v && !v->getType()->isArrayType()) {
      assign_var(v, value);
      return;
    }
  }
  if (auto* m = dyn_cast<MemberExpr>(e); m && !m->isArrow() && !is_memory(m->getBase())) return;
  Val a = addr(e);
  if (a.arr >= 0 && arrays_[static_cast<size_t>(a.arr)].space == "local") {
    if (a.k == Val::Ptr)
      remember_local(a.arr, a, value);
    else
      forget_local(a.arr);  // an element we cannot tell: none of the array is known now
    return;
  }
  if (a.arr >= 0) record(site, a, size_of(lhs->getType()), true);
}

/// Values of a thread's local arrays (`bool gt_ok[2][4]` in the generated code, indexed by
/// unrolled constants), per element and lane, so that branches on them are decided per lane
/// rather than counted both ways.
void Sim::remember_local(int arr, const Val& at, const Val& value) {
  for (int l = 0; l < W; ++l) {
    if (!(active_ >> l & 1)) continue;
    auto& [v, known] = local_vals_[{arr, at.v[l]}];
    if (value.k == Val::Int) {
      v.v[l] = value.v[l];
      known |= Mask(1) << l;
    } else {
      known &= ~(Mask(1) << l);
    }
  }
}

void Sim::forget_local(int arr) {
  for (auto it = local_vals_.lower_bound({arr, std::numeric_limits<std::int64_t>::min()});
       it != local_vals_.end() && it->first.first == arr;)
    it = local_vals_.erase(it);
}

Val Sim::recall_local(const Val& at) const {
  if (at.k != Val::Ptr) return Val{};
  Val out = Val::constant(0);
  for (int l = 0; l < W; ++l) {
    if (!(active_ >> l & 1)) continue;
    auto it = local_vals_.find({at.arr, at.v[l]});
    if (it == local_vals_.end() || !(it->second.second >> l & 1)) return Val{};
    out.v[l] = it->second.first.v[l];
  }
  return out;
}

}  // namespace gputune::pruner::traffic
