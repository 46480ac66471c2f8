// Naive-kernel analysis: the kernel's body (the Analyser, declared in analyser.h; compiled with
// -fno-rtti). The source text split around holes (locals, thread indices, array accesses), each
// access site's dependences and coefficients, the statements, the loops every thread runs alike
// and the atomicAdd reductions. Must not: emit code or build spaces.
#include <algorithm>
#include <functional>
#include <optional>

#include "variants/naive/analyser.h"

namespace gputune::naive {

using namespace clang;

/// The source of `s` with holes for locals, inline thread indices and array accesses.
Text Analyser::text_of(const clang::Stmt* s, bool guard) {
  return text_range(s, begin_of(s), end_of(s), guard);
}

Text Analyser::text_range(const clang::Stmt* s, unsigned b, unsigned e, bool guard) {
  std::vector<Hole> holes;
  collect_holes(s, holes, false, guard, false);
  std::sort(holes.begin(), holes.end(),
            [](const Hole& x, const Hole& y) { return x.begin < y.begin; });
  Text t;
  unsigned pos = b;
  for (Hole& h : holes) {
    if (h.begin < pos || h.end > e) continue;
    if (h.begin > pos)
      t.push_back(Piece{Piece::Lit, std::string(buffer_.substr(pos, h.begin - pos)), -1, 0, {}});
    t.push_back(std::move(h.piece));
    pos = h.end;
  }
  if (e > pos) t.push_back(Piece{Piece::Lit, std::string(buffer_.substr(pos, e - pos)), -1, 0, {}});
  return t;
}

void Analyser::collect_holes(const clang::Stmt* n, std::vector<Hole>& out, bool store, bool guard,
                             bool conditional) {
  if (!n) return;
  if (const auto* e = dyn_cast<Expr>(n)) {
    if (int d = index_pattern(e); d >= 0) {
      set_index_name(d, "");
      out.push_back({begin_of(e), end_of(e), Piece{Piece::ThreadIndex, "", -1, d, {}}});
      return;
    }
    if (auto b = builtin_member(e)) {
      fail(e, "uses " + b->first + "." + std::string(1, "xyz"[b->second]) +
                  " directly: a naive kernel reaches the thread only through idx/idy " +
                  "(blockIdx.x*blockDim.x+threadIdx.x); variants change the block shape");
    }
  }
  if (const auto* r = dyn_cast<DeclRefExpr>(n)) {
    if (const auto* v = dyn_cast<VarDecl>(r->getDecl())) {
      if (auto it = index_vars_.find(v); it != index_vars_.end())
        set_index_name(it->second, v->getNameAsString());
      if (auto it = local_ids_.find(v); it != local_ids_.end())
        out.push_back(
            {begin_of(r), end_of(r), Piece{Piece::Local, v->getNameAsString(), it->second, 0, {}}});
    }
    return;
  }
  if (const auto* a = dyn_cast<ArraySubscriptExpr>(n)) {
    // a[i][j] on a 2-D parameter: one access at the linear index i*row + j.
    if (const auto* inner = dyn_cast<ArraySubscriptExpr>(a->getBase()->IgnoreParenImpCasts())) {
      const auto* base = dyn_cast<DeclRefExpr>(inner->getBase()->IgnoreParenImpCasts());
      const auto* pv = base ? dyn_cast<ParmVarDecl>(base->getDecl()) : nullptr;
      if (pv && param_ids_.count(pv) && k_.params[param_ids_[pv]].row > 0) {
        add_access(a, pv, {inner->getIdx(), a->getIdx()}, out, store, guard, conditional);
        return;
      }
    }
    const auto* base = dyn_cast<DeclRefExpr>(a->getBase()->IgnoreParenImpCasts());
    const auto* pv = base ? dyn_cast<ParmVarDecl>(base->getDecl()) : nullptr;
    if (pv && param_ids_.count(pv) && k_.params[param_ids_[pv]].row > 0)
      fail(a, "row " + pv->getNameAsString() +
                  "[...] of a 2-D array used on its own: index it as " + pv->getNameAsString() +
                  "[i][j]");
    if (pv && param_ids_.count(pv) && k_.params[param_ids_[pv]].pointer) {
      add_access(a, pv, {a->getIdx()}, out, store, guard, conditional);
      return;
    }
    if (pv) fail(a, "subscript of '" + pv->getNameAsString() + "', which is not a pointer");
  }
  if (const auto* b = dyn_cast<BinaryOperator>(n)) {
    if (b->isAssignmentOp()) {
      collect_holes(b->getLHS(), out, true, guard, conditional);
      if (b->isCompoundAssignmentOp()) mark_read_of_store(out);
      collect_holes(b->getRHS(), out, false, guard, conditional);
      return;
    }
    if (b->getOpcode() == BO_LAnd || b->getOpcode() == BO_LOr) {
      collect_holes(b->getLHS(), out, false, guard, conditional);
      collect_holes(b->getRHS(), out, false, guard, true);
      return;
    }
  }
  if (const auto* u = dyn_cast<UnaryOperator>(n);
      u && (u->isIncrementDecrementOp() || u->getOpcode() == UO_AddrOf)) {
    collect_holes(u->getSubExpr(), out, true, guard, conditional);
    mark_read_of_store(out);
    return;
  }
  if (const auto* c = dyn_cast<ConditionalOperator>(n)) {
    collect_holes(c->getCond(), out, false, guard, conditional);
    collect_holes(c->getTrueExpr(), out, false, guard, true);
    collect_holes(c->getFalseExpr(), out, false, guard, true);
    return;
  }
  if (const auto* i = dyn_cast<IfStmt>(n)) {
    collect_holes(i->getCond(), out, false, guard, conditional);
    collect_holes(i->getThen(), out, false, guard, true);
    collect_holes(i->getElse(), out, false, guard, true);
    return;
  }
  if (isa<WhileStmt>(n) || isa<DoStmt>(n) || isa<ForStmt>(n)) {
    for (const clang::Stmt* c : n->children()) collect_holes(c, out, false, guard, true);
    return;
  }
  if (const auto* call = dyn_cast<CallExpr>(n)) {
    if (const FunctionDecl* fd = call->getDirectCallee()) {
      std::string name = fd->getNameAsString();
      if (name == "__syncthreads" || name.rfind("__shfl", 0) == 0 || name == "__syncwarp")
        fail(call, "calls " + name + ": a naive kernel has no block- or warp-level cooperation");
    }
  }
  for (const clang::Stmt* c : n->children()) collect_holes(c, out, false, guard, conditional);
}

/// One access site `a[i]` (or `a[i][j]` on a 2-D parameter, described at i*row + j): its
/// dependences and constant coefficients, and a hole whose subscript text is `i` (or `i][j`, so
/// that name[subscript] renders it as written).
void Analyser::add_access(const ArraySubscriptExpr* a, const ParmVarDecl* pv,
                          const std::vector<const Expr*>& subs, std::vector<Hole>& out, bool store,
                          bool guard, bool conditional) {
  if (guard) fail(a, "the bounds check reads memory: a guard uses only indices and sizes");
  AccessSite site;
  site.param = param_ids_[pv];
  site.store = store;
  site.line = line_of(a);
  site.loop = current_loop_;
  site.conditional = conditional;
  site.ranged = ranged_;
  const long long row = k_.params[site.param].row;
  Affine af;
  af.constant.reset();
  Sym total;
  Piece piece{Piece::Access, pv->getNameAsString(), -1, 0, {}};
  for (size_t i = 0; i < subs.size(); ++i) {
    const Expr* e = subs[i];
    if (isa<ArraySubscriptExpr>(e->IgnoreParenImpCasts()) || deps_of(e).count("access"))
      k_.notes.push_back("line " + std::to_string(line_of(a)) + ": '" + pv->getNameAsString() +
                         "' is indexed by loaded data; it stays on the global path");
    for (const std::string& d : deps_of(e)) site.depends.insert(d);
    Affine part = affine(e);
    af.ok = af.ok && part.ok;
    // The first subscript of a 2-D access counts `row` elements per step.
    const long long scale = i + 1 < subs.size() ? row : 1;
    Sym ps = sym(e);
    total.ok = total.ok && ps.ok;
    if (ps.ok) sym_add(total, ps, scale);
    for (auto& [v, c] : part.coef) {
      std::optional<long long> add = c ? std::optional<long long>(*c * scale) : std::nullopt;
      auto it = af.coef.find(v);
      if (it == af.coef.end())
        af.coef[v] = add;
      else
        it->second =
            (it->second && add) ? std::optional<long long>(*it->second + *add) : std::nullopt;
    }
    if (i) piece.index.push_back(Piece{Piece::Lit, "][", -1, 0, {}});
    for (Piece& p : text_range(e, begin_of(e), end_of(e), false))
      piece.index.push_back(std::move(p));
  }
  if (af.ok)
    for (auto& [v, c] : af.coef)
      if (c) site.unit[v] = *c;
  if (total.ok) {
    site.sym = total.c;
    site.sym.try_emplace("1", std::vector<long long>(kSymPoints, 0));
  }
  if (!af.ok || site.depends.count("access") || site.depends.count("call"))
    site.depends.insert("opaque");
  Param& p = k_.params[site.param];
  (store ? p.written : p.read) = true;
  piece.id = static_cast<int>(k_.accesses.size());  // after the accesses inside the subscript
  k_.accesses.push_back(site);
  out.push_back({begin_of(a), end_of(a), std::move(piece)});
}

/// The last array access collected was written: mark it read too (`a[i] += v`, atomics).
void Analyser::mark_read_of_store(std::vector<Hole>& out) {
  if (out.empty() || out.back().piece.kind != Piece::Access) return;
  AccessSite& s = k_.accesses[out.back().piece.id];
  if (!s.store) return;
  k_.params[s.param].read = true;  // a read-modify-write stays a store: never staged or read-only
}

// --- statements ---------------------------------------------------------------------------
namespace {

/// Whether a statement's source range stops before the ';' that ends it: an expression, or a
/// statement whose last part is one (`for (...) s += x;`, `if (c) a = b;`, `do ... while (c);`).
bool ends_before_semicolon(const clang::Stmt* s) {
  if (!s || isa<Expr>(s) || isa<DoStmt>(s)) return s != nullptr;
  if (const auto* f = dyn_cast<ForStmt>(s)) return ends_before_semicolon(f->getBody());
  if (const auto* w = dyn_cast<WhileStmt>(s)) return ends_before_semicolon(w->getBody());
  if (const auto* i = dyn_cast<IfStmt>(s))
    return ends_before_semicolon(i->getElse() ? i->getElse() : i->getThen());
  return false;
}

}  // namespace

void Analyser::convert_into(const clang::Stmt* s, int loop, std::vector<Stmt>& out) {
  current_loop_ = loop;
  if (const auto* ds = dyn_cast<DeclStmt>(s)) {
    for (const Decl* d : ds->decls()) {
      const auto* v = dyn_cast<VarDecl>(d);
      if (!v) fail(s, "a declaration that is not a variable");
      if (v->getType()->isArrayType())
        fail(s, "local array '" + v->getNameAsString() +
                    "': not in the naive subset yet (use scalars per output)");
      Local l;
      l.name = v->getNameAsString();
      l.type = v->getType().getAsString(ctx_.getPrintingPolicy());
      std::set<std::string> deps = v->hasInit() ? deps_of(v->getInit()) : std::set<std::string>{};
      l.replicated = assigned_.count(v) || thread_dependent(deps) || deps.count("call");
      int id = static_cast<int>(k_.locals.size());
      k_.locals.push_back(l);
      Stmt st;
      st.kind = l.replicated ? Stmt::RepDecl : Stmt::KeepDecl;
      st.local = id;
      if (v->hasInit()) st.text = text_of(v->getInit());
      local_ids_[v] = id;  // after the initialiser: it cannot refer to itself
      out.push_back(std::move(st));
    }
    return;
  }
  if (const auto* fs = dyn_cast<ForStmt>(s)) {
    if (auto st = kept_loop(fs, loop)) {
      out.push_back(std::move(*st));
      return;
    }
    if (!loop_refusal_.empty()) k_.rewrites.push_back(loop_refusal_);
  }
  if (isa<ReturnStmt>(s) || isa<BreakStmt>(s) || isa<ContinueStmt>(s))
    fail(s, "a jump in the thread's work: only `if (...) return;` bounds checks at the top");
  if (loop < 0)
    if (auto r = reduction(s)) {
      out.push_back(std::move(*r));
      return;
    }
  Stmt st;
  st.kind = Stmt::Rep;
  st.text = text_of(s);
  // An expression statement's range ends before its ';', and so does a statement that ends in
  // one (`for (...) s += x;`, an `if` without braces): the ';' is put back.
  if (ends_before_semicolon(s)) st.text.push_back(Piece{Piece::Lit, ";", -1, 0, {}});
  // `a[i] = v;` as a whole statement: its store may be staged (the first access is a[i]).
  if (const auto* b = dyn_cast<BinaryOperator>(s);
      b && b->getOpcode() == BO_Assign &&
      isa<ArraySubscriptExpr>(b->getLHS()->IgnoreParenImpCasts()))
    for (const Piece& p : st.text)
      if (p.kind == Piece::Access) {
        if (k_.accesses[p.id].store) k_.accesses[p.id].whole_store = true;
        break;
      }
  out.push_back(std::move(st));
}

/// `atomicAdd(address, value);` where every thread adds to the same address (`sum`,
/// `&sum[0]`, `sum + c`): a sum the variant may first reduce per block.
std::optional<Stmt> Analyser::reduction(const clang::Stmt* s) {
  const auto* e = dyn_cast<Expr>(s);
  const auto* call = e ? dyn_cast<CallExpr>(e->IgnoreParenImpCasts()) : nullptr;
  if (!call || call->getNumArgs() != 2 || !call->getDirectCallee() ||
      call->getDirectCallee()->getNameAsString() != "atomicAdd")
    return std::nullopt;
  const Expr* addr = call->getArg(0)->IgnoreParenImpCasts();
  const Expr* base = addr;
  if (const auto* u = dyn_cast<UnaryOperator>(addr); u && u->getOpcode() == UO_AddrOf) {
    const auto* a = dyn_cast<ArraySubscriptExpr>(u->getSubExpr()->IgnoreParens());
    if (!a) return std::nullopt;
    base = a->getBase();
  } else if (const auto* b = dyn_cast<BinaryOperator>(addr); b && b->getOpcode() == BO_Add) {
    base = b->getLHS();
  }
  const auto* r = dyn_cast<DeclRefExpr>(base->IgnoreParenImpCasts());
  const auto* pv = r ? dyn_cast<ParmVarDecl>(r->getDecl()) : nullptr;
  if (!pv || !param_ids_.count(pv) || !k_.params[param_ids_[pv]].pointer) return std::nullopt;
  std::set<std::string> d = deps_of(addr);
  if (thread_dependent(d) || d.count("call")) return std::nullopt;
  for (const std::string& x : d)
    if (x.rfind("loop:", 0) == 0) return std::nullopt;
  Stmt st;
  st.kind = Stmt::Reduce;
  st.target = param_ids_[pv];
  st.address = text_of(call->getArg(0));
  st.text = text_of(call->getArg(1));
  st.element = call->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy());
  Param& p = k_.params[st.target];
  p.read = p.written = true;  // a read-modify-write: never staged or read-only
  k_.notes.push_back("line " + std::to_string(line_of(call)) + ": every thread adds to " +
                     pv->getNameAsString() + ": a variant may sum per block first");
  return st;
}

bool Analyser::has_jump(const clang::Stmt* s) {
  if (!s) return false;
  if (isa<ReturnStmt>(s) || isa<BreakStmt>(s) || isa<ContinueStmt>(s) || isa<GotoStmt>(s))
    return true;
  for (const clang::Stmt* c : s->children())
    if (has_jump(c)) return true;
  return false;
}

/// A for loop that every thread runs alike: `for (int v = lo; v < hi; ++v)` (or <=, v++,
/// v += 1) with lo and hi independent of the thread and v not assigned in the body.
std::optional<Stmt> Analyser::kept_loop(const ForStmt* fs, int outer) {
  const auto* init = dyn_cast_or_null<DeclStmt>(fs->getInit());
  if (!init || !init->isSingleDecl()) return std::nullopt;
  const auto* v = dyn_cast<VarDecl>(init->getSingleDecl());
  if (!v || !v->hasInit() || !v->getType()->isIntegerType()) return std::nullopt;
  const auto* cond = dyn_cast_or_null<BinaryOperator>(fs->getCond());
  if (!cond || (cond->getOpcode() != BO_LT && cond->getOpcode() != BO_LE)) return std::nullopt;
  const auto* cv = dyn_cast<DeclRefExpr>(cond->getLHS()->IgnoreParenImpCasts());
  if (!cv || cv->getDecl() != v) return std::nullopt;
  const Expr* inc = fs->getInc();
  bool unit = false;
  if (const auto* u = dyn_cast_or_null<UnaryOperator>(inc))
    unit = u->isIncrementOp();
  else if (const auto* ca = dyn_cast_or_null<CompoundAssignOperator>(inc))
    if (ca->getOpcode() == BO_AddAssign)
      if (const auto* lit = dyn_cast<IntegerLiteral>(ca->getRHS()->IgnoreParenImpCasts()))
        unit = lit->getValue() == 1;
  if (!unit) return std::nullopt;
  // A bound may follow one thread index with coefficient 1 (`j = i`, `j < i + 1`): a triangular
  // loop, run over the block's range with each output doing its own steps.
  loop_refusal_.clear();
  auto follows = [&](const Expr* e, int& dim) {
    const std::set<std::string> d = deps_of(e);
    if (d.count("call")) return false;
    if (!thread_dependent(d)) return true;
    const std::string what = "line " + std::to_string(line_of(fs)) + ": loop '" +
                             v->getNameAsString() + "' not recognised: its bound `" +
                             buffer_.substr(begin_of(e), end_of(e) - begin_of(e)).str() + "` ";
    if (d.count("thread") || d.count("access")) {
      loop_refusal_ = what +
                      "depends on the thread through a local or loaded data. Fix: write it "
                      "from the thread's index and scalar arguments (`j = i`, `j < i + 1`)";
      return false;
    }
    const Affine a = affine(e);
    auto coef = [&](const char* n) {
      auto it = a.coef.find(n);
      return it == a.coef.end() ? std::optional<long long>(0) : it->second;
    };
    const std::optional<long long> cx = coef("x"), cy = coef("y");
    if (a.ok && cx && cy && ((*cx == 1 && *cy == 0) || (*cx == 0 && *cy == 1))) {
      dim = *cx == 1 ? 0 : 1;
      return true;
    }
    loop_refusal_ = what +
                    "is not the thread's index plus a constant of the launch. Fix: write it as "
                    "`i + E` with E the same for every thread";
    return false;
  };
  int lo_dim = -1, hi_dim = -1;
  if (!follows(v->getInit(), lo_dim) || !follows(cond->getRHS(), hi_dim) || has_jump(fs->getBody()))
    return std::nullopt;
  // v assigned in the body (beyond the increment)?
  int writes = 0;
  std::function<void(const clang::Stmt*)> count = [&](const clang::Stmt* n) {
    if (!n) return;
    auto is_v = [&](const Expr* e) {
      const auto* r = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts());
      return r && r->getDecl() == v;
    };
    if (const auto* b = dyn_cast<BinaryOperator>(n); b && b->isAssignmentOp() && is_v(b->getLHS()))
      ++writes;
    if (const auto* u = dyn_cast<UnaryOperator>(n);
        u && (u->isIncrementDecrementOp() || u->getOpcode() == UO_AddrOf) && is_v(u->getSubExpr()))
      ++writes;
    for (const clang::Stmt* c : n->children()) count(c);
  };
  count(fs->getBody());
  if (writes) return std::nullopt;
  Stmt st;
  st.kind = Stmt::Loop;
  st.loop = loops_++;
  st.var = v->getNameAsString();
  current_loop_ = outer;
  st.lo = text_of(v->getInit());
  st.hi = text_of(cond->getRHS());
  st.inclusive = cond->getOpcode() == BO_LE;
  st.lo_dim = lo_dim;
  st.hi_dim = hi_dim;
  const bool ranged = lo_dim >= 0 || hi_dim >= 0;
  if (ranged)
    k_.notes.push_back(
        "line " + std::to_string(line_of(fs)) + ": loop " + st.var + " is triangular (its " +
        (lo_dim >= 0 && hi_dim >= 0 ? "bounds follow "
         : lo_dim >= 0              ? "start follows "
                                    : "end follows ") +
        k_.index_names[static_cast<size_t>(std::max(lo_dim, hi_dim))] +
        "): a variant runs it over the block's outputs, each output doing its own steps");
  ranged_ += ranged;
  loop_vars_[v] = st.loop;
  std::vector<const clang::Stmt*> body;
  if (const auto* cs = dyn_cast<CompoundStmt>(fs->getBody()))
    body.assign(cs->body_begin(), cs->body_end());
  else
    body.push_back(fs->getBody());
  for (const clang::Stmt* b : body) convert_into(b, st.loop, st.body);
  ranged_ -= ranged;
  current_loop_ = outer;
  return st;
}

}  // namespace gputune::naive
