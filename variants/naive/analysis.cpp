// Naive-kernel analysis with clang libTooling: see naive.h. Compiled with -fno-rtti (LLVM 14).
// analyse_naive and the Analyser's view of the kernel (declared in analyser.h): its parameters,
// thread indices and bounds check, and what an expression depends on (its affine and symbolic
// forms). The body's text and statements are analysis_body.cpp's.
// Must not: emit code or build spaces (the plain C++ side of variants/naive/).
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

#include "variants/cuda_parse.h"
#include "variants/naive/analyser.h"

namespace gputune::naive {

using namespace clang;

Analyser::Analyser(ASTContext& ctx, std::string file) : ctx_(ctx), sm_(ctx.getSourceManager()) {
  k_.file = std::move(file);
  buffer_ = sm_.getBufferData(sm_.getMainFileID());
}

NaiveKernel Analyser::run(const FunctionDecl* f) {
  k_.name = f->getNameAsString();
  for (const ParmVarDecl* p : f->parameters()) {
    Param prm;
    prm.name = p->getNameAsString();
    QualType t = p->getType();
    prm.type = t.getAsString(ctx_.getPrintingPolicy());
    if (t->isPointerType()) {
      prm.pointer = true;
      QualType e = t->getPointeeType();
      if (const auto* row = ctx_.getAsConstantArrayType(e)) {  // T (*a)[N], T a[][N]
        if (row->getElementType()->isArrayType())
          fail(p, "parameter '" + prm.name + "' of type " + prm.type +
                      ": arrays of more than two dimensions are not in the naive subset");
        prm.row = static_cast<long long>(row->getSize().getZExtValue());
        e = row->getElementType();
      } else if (e->isArrayType()) {
        fail(p, "parameter '" + prm.name + "' of type " + prm.type +
                    ": a 2-D array needs a constant row length (T (*a)[N])");
      }
      prm.element = e.getUnqualifiedType().getAsString(ctx_.getPrintingPolicy());
    } else if (t->isArrayType() || t->isReferenceType() || t->isRecordType()) {
      fail(p, "parameter '" + prm.name + "' of type " + prm.type +
                  ": a naive kernel takes pointers and scalars");
    }
    param_ids_[p] = static_cast<int>(k_.params.size());
    k_.params.push_back(prm);
  }
  const auto* body = dyn_cast<CompoundStmt>(f->getBody());
  collect_assigned(body);
  for (const auto& [pv, id] : param_ids_)
    if (assigned_.count(pv)) k_.params[static_cast<size_t>(id)].assigned = true;
  std::vector<const clang::Stmt*> top(body->body_begin(), body->body_end());
  // 1. Index variables and thread-independent declarations before the guard.
  std::vector<const clang::Stmt*> rest;
  for (const clang::Stmt* s : top) {
    if (const auto* ds = dyn_cast<DeclStmt>(s); ds && ds->isSingleDecl() && rest.empty()) {
      if (const auto* v = dyn_cast<VarDecl>(ds->getSingleDecl()); v && v->hasInit()) {
        int d = index_pattern(v->getInit());
        if (d >= 0 && !assigned_.count(v)) {
          index_vars_[v] = d;
          set_index_name(d, v->getNameAsString());
          continue;
        }
      }
    }
    rest.push_back(s);
  }
  // 2. The guard: `if (c) return;` lines and/or one `if (c) { ... }` around everything after.
  size_t i = 0;
  std::vector<const clang::Stmt*> pre;
  for (; i < rest.size(); ++i) {
    const auto* ifs = dyn_cast<IfStmt>(rest[i]);
    if (ifs && !ifs->getElse() && is_return(ifs->getThen())) {
      split_disjuncts_negated(ifs->getCond());
      continue;
    }
    if (isa<DeclStmt>(rest[i]) && guard_follows(rest, i)) {
      pre.push_back(rest[i]);
      continue;
    }
    break;
  }
  std::vector<const clang::Stmt*> work(rest.begin() + static_cast<long>(i), rest.end());
  if (work.size() == 1) {
    if (const auto* ifs = dyn_cast<IfStmt>(work[0]);
        ifs && !ifs->getElse() && !ifs->getInit() && !ifs->getConditionVariable()) {
      split_conjuncts(ifs->getCond());
      work.clear();
      if (const auto* cs = dyn_cast<CompoundStmt>(ifs->getThen()))
        work.assign(cs->body_begin(), cs->body_end());
      else
        work.push_back(ifs->getThen());
    }
  }
  if (!pre.empty() && k_.guard.empty()) {  // declarations were not followed by a guard
    work.insert(work.begin(), pre.begin(), pre.end());
    pre.clear();
  }
  if (!pre.empty()) k_.notes.push_back("declarations before the guard run for every thread");
  for (const clang::Stmt* s : pre) convert_into(s, -1, k_.body);
  pre_count_ = k_.body.size();
  for (const clang::Stmt* s : work) convert_into(s, -1, k_.body);
  if (max_dim_ < 0)
    fail(f, "kernel '" + k_.name + "' never uses a thread index (idx = " +
                "blockIdx.x*blockDim.x+threadIdx.x): not a naive kernel");
  k_.dims = max_dim_ + 1;
  k_.index_names.resize(2);
  for (int d = 0; d < 2; ++d)
    if (k_.index_names[d].empty()) k_.index_names[d] = d == 0 ? "gt_idx" : "gt_idy";
  k_.pre_guard = pre_count_;
  k_.loops = loops_;
  return std::move(k_);
}

[[noreturn]] void Analyser::fail(const Decl* d, const std::string& what) {
  fail_at(d->getLocation(), what);
}

[[noreturn]] void Analyser::fail(const clang::Stmt* s, const std::string& what) {
  fail_at(s->getBeginLoc(), what);
}

[[noreturn]] void Analyser::fail_at(SourceLocation loc, const std::string& what) {
  PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(loc));
  std::string where = p.isValid()
                          ? std::string(p.getFilename()) + ":" + std::to_string(p.getLine()) + ": "
                          : k_.file + ": ";
  throw NaiveError(where + what);
}

int Analyser::line_of(const clang::Stmt* s) const {
  PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(s->getBeginLoc()));
  return p.isValid() ? static_cast<int>(p.getLine()) : 0;
}

unsigned Analyser::begin_of(const clang::Stmt* s) const {
  return sm_.getFileOffset(sm_.getExpansionLoc(s->getBeginLoc()));
}

unsigned Analyser::end_of(const clang::Stmt* s) const {
  SourceLocation e = sm_.getExpansionLoc(s->getEndLoc());
  SourceLocation after = Lexer::getLocForEndOfToken(e, 0, sm_, ctx_.getLangOpts());
  return sm_.getFileOffset(after);
}

void Analyser::set_index_name(int d, const std::string& name) {
  if (k_.index_names.size() < 2) k_.index_names.resize(2);
  if (k_.index_names[d].empty()) k_.index_names[d] = name;
  max_dim_ = std::max(max_dim_, d);
}

/// `builtin.x` where builtin is threadIdx/blockIdx/blockDim/gridDim: the builtin and the dim.
std::optional<std::pair<std::string, int>> Analyser::builtin_member(const Expr* e) {
  e = e->IgnoreParenImpCasts();
  const auto* m = dyn_cast<MemberExpr>(e);
  if (!m) return std::nullopt;
  const auto* base = dyn_cast<DeclRefExpr>(m->getBase()->IgnoreParenImpCasts());
  if (!base) return std::nullopt;
  std::string b = base->getDecl()->getNameAsString();
  if (b != "threadIdx" && b != "blockIdx" && b != "blockDim" && b != "gridDim") return std::nullopt;
  std::string f = m->getMemberDecl()->getNameAsString();
  int d = f == "x" ? 0 : f == "y" ? 1 : 2;
  return std::make_pair(b, d);
}

/// blockIdx.d*blockDim.d+threadIdx.d in any operand order: d, else -1.
int Analyser::index_pattern(const Expr* e) {
  e = e->IgnoreParenImpCasts();
  const auto* add = dyn_cast<BinaryOperator>(e);
  if (!add || add->getOpcode() != BO_Add) return -1;
  for (int side = 0; side < 2; ++side) {
    const Expr* t = side ? add->getLHS() : add->getRHS();
    const Expr* m = side ? add->getRHS() : add->getLHS();
    auto tb = builtin_member(t);
    const auto* mul = dyn_cast<BinaryOperator>(m->IgnoreParenImpCasts());
    if (!tb || tb->first != "threadIdx" || !mul || mul->getOpcode() != BO_Mul) continue;
    auto l = builtin_member(mul->getLHS()), r = builtin_member(mul->getRHS());
    if (!l || !r || l->second != tb->second || r->second != tb->second) continue;
    if ((l->first == "blockIdx" && r->first == "blockDim") ||
        (l->first == "blockDim" && r->first == "blockIdx"))
      return tb->second > 1 ? -1 : tb->second;
  }
  return -1;
}

bool Analyser::is_return(const clang::Stmt* s) {
  if (isa<ReturnStmt>(s)) return true;
  if (const auto* cs = dyn_cast<CompoundStmt>(s))
    return cs->size() == 1 && isa<ReturnStmt>(cs->body_front());
  return false;
}

bool Analyser::guard_follows(const std::vector<const clang::Stmt*>& rest, size_t i) {
  for (size_t j = i + 1; j < rest.size(); ++j) {
    if (isa<DeclStmt>(rest[j])) continue;
    const auto* ifs = dyn_cast<IfStmt>(rest[j]);
    return ifs && !ifs->getElse() && (is_return(ifs->getThen()) || j + 1 == rest.size());
  }
  return false;
}

void Analyser::add_guard(const Expr* e, bool negate) {
  Text t = text_of(e, /*guard=*/true);
  if (negate) {
    t.insert(t.begin(), Piece{Piece::Lit, "!(", -1, 0, {}});
    t.push_back(Piece{Piece::Lit, ")", -1, 0, {}});
  }
  k_.guard.push_back(std::move(t));
  k_.guard_depends.push_back(deps_of(e));
  k_.guard_bounds.push_back(guard_bound(e, negate));
}

/// The index a whole expression is (`idx`, `blockIdx.x*blockDim.x+threadIdx.x`), or -1.
int Analyser::index_of(const Expr* e) const {
  e = e->IgnoreParenImpCasts();
  if (int d = index_pattern(e); d >= 0) return d;
  if (const auto* r = dyn_cast<DeclRefExpr>(e))
    if (const auto* v = dyn_cast<VarDecl>(r->getDecl()))
      if (auto it = index_vars_.find(v); it != index_vars_.end()) return it->second;
  return -1;
}

/// Whether an expression names a variable the kernel assigns (its value changes over the work).
bool Analyser::uses_assigned(const clang::Stmt* s) const {
  if (!s) return false;
  if (const auto* r = dyn_cast<DeclRefExpr>(s))
    if (const auto* v = dyn_cast<VarDecl>(r->getDecl()); v && assigned_.count(v)) return true;
  for (const clang::Stmt* c : s->children())
    if (uses_assigned(c)) return true;
  return false;
}

/// `idx < E`, `E >= idy`, ... (negated for `if (c) return;`) as an interval bound.
GuardBound Analyser::guard_bound(const Expr* e, bool negate) {
  GuardBound g;
  const auto* b = dyn_cast<BinaryOperator>(e->IgnoreParens());
  if (!b || !b->isRelationalOp()) return g;
  BinaryOperatorKind op = b->getOpcode();
  const Expr* other = b->getRHS();
  int dim = index_of(b->getLHS());
  if (dim < 0) {
    dim = index_of(b->getRHS());
    other = b->getLHS();
    op = op == BO_LT ? BO_GT : op == BO_GT ? BO_LT : op == BO_LE ? BO_GE : BO_LE;
  }
  if (dim < 0 || !deps_of(other).empty() || uses_assigned(other)) return g;
  if (negate) op = op == BO_LT ? BO_GE : op == BO_GT ? BO_LE : op == BO_LE ? BO_GT : BO_LT;
  g.dim = dim;
  g.upper = op == BO_LT || op == BO_LE;
  g.adjust = op == BO_LT ? -1 : op == BO_GT ? 1 : 0;
  g.bound = text_of(other, /*guard=*/true);
  return g;
}

void Analyser::split_conjuncts(const Expr* e) {
  const auto* b = dyn_cast<BinaryOperator>(e->IgnoreParens());
  if (b && b->getOpcode() == BO_LAnd) {
    split_conjuncts(b->getLHS());
    split_conjuncts(b->getRHS());
  } else {
    add_guard(e, false);
  }
}

void Analyser::split_disjuncts_negated(const Expr* e) {
  const auto* b = dyn_cast<BinaryOperator>(e->IgnoreParens());
  if (b && b->getOpcode() == BO_LOr) {
    split_disjuncts_negated(b->getLHS());
    split_disjuncts_negated(b->getRHS());
  } else {
    add_guard(e, true);
  }
}

// --- what is assigned, what depends on the thread ---------------------------------------
void Analyser::collect_assigned(const clang::Stmt* s) {
  if (!s) return;
  auto mark = [&](const Expr* e) {
    if (const auto* r = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts()))
      if (const auto* v = dyn_cast<VarDecl>(r->getDecl())) assigned_.insert(v);
  };
  if (const auto* b = dyn_cast<BinaryOperator>(s); b && b->isAssignmentOp()) mark(b->getLHS());
  if (const auto* u = dyn_cast<UnaryOperator>(s);
      u && (u->isIncrementDecrementOp() || u->getOpcode() == UO_AddrOf))
    mark(u->getSubExpr());
  for (const clang::Stmt* c : s->children()) collect_assigned(c);
}

/// What an expression depends on: "x", "y", "loop:<id>", "local:<id>", "access".
std::set<std::string> Analyser::deps_of(const clang::Stmt* s) const {
  std::set<std::string> out;
  std::function<void(const clang::Stmt*)> walk = [&](const clang::Stmt* n) {
    if (!n) return;
    if (const auto* e = dyn_cast<Expr>(n)) {
      int d = index_pattern(e);
      if (d >= 0) {
        out.insert(d == 0 ? "x" : "y");
        return;
      }
    }
    if (const auto* r = dyn_cast<DeclRefExpr>(n)) {
      if (const auto* v = dyn_cast<VarDecl>(r->getDecl())) {
        if (auto it = index_vars_.find(v); it != index_vars_.end())
          out.insert(it->second == 0 ? "x" : "y");
        if (auto it = loop_vars_.find(v); it != loop_vars_.end())
          out.insert("loop:" + std::to_string(it->second));
        if (auto it = local_ids_.find(v); it != local_ids_.end()) {
          out.insert("local:" + std::to_string(it->second));
          if (k_.locals[it->second].replicated) out.insert("thread");
        }
      }
    }
    if (const auto* a = dyn_cast<ArraySubscriptExpr>(n)) {
      out.insert("access");
      (void)a;
    }
    if (isa<CallExpr>(n)) out.insert("call");
    for (const clang::Stmt* c : n->children()) walk(c);
  };
  walk(s);
  return out;
}

bool Analyser::thread_dependent(const std::set<std::string>& d) {
  return d.count("x") || d.count("y") || d.count("thread") || d.count("access");
}

Affine Analyser::affine(const Expr* e) const {
  e = e->IgnoreParenImpCasts();
  Affine r;
  if (const auto* lit = dyn_cast<IntegerLiteral>(e)) {
    r.constant = static_cast<long long>(lit->getValue().getSExtValue());
    return r;
  }
  if (int d = index_pattern(e); d >= 0) {
    r.constant.reset();
    r.coef[d == 0 ? "x" : "y"] = 1;
    return r;
  }
  if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
    r.constant.reset();
    if (const auto* v = dyn_cast<VarDecl>(ref->getDecl())) {
      if (auto it = index_vars_.find(v); it != index_vars_.end()) {
        r.coef[it->second == 0 ? "x" : "y"] = 1;
      } else if (auto lt = loop_vars_.find(v); lt != loop_vars_.end()) {
        r.coef["loop:" + std::to_string(lt->second)] = 1;
      } else if (local_ids_.count(v) && k_.locals[local_ids_.at(v)].replicated) {
        r.ok = false;
      }
    }
    return r;  // a scalar parameter or a kept local: a symbolic constant
  }
  if (const auto* b = dyn_cast<BinaryOperator>(e)) {
    Affine l = affine(b->getLHS()), rr = affine(b->getRHS());
    if (!l.ok || !rr.ok) return Affine{false, {}, {}};
    switch (b->getOpcode()) {
      case BO_Add:
      case BO_Sub: {
        bool sub = b->getOpcode() == BO_Sub;
        r.constant = (l.constant && rr.constant)
                         ? std::optional<long long>(sub ? *l.constant - *rr.constant
                                                        : *l.constant + *rr.constant)
                         : std::nullopt;
        r.coef = l.coef;
        for (auto& [v, c] : rr.coef) {
          auto it = r.coef.find(v);
          std::optional<long long> add = c && sub ? std::optional<long long>(-*c) : c;
          if (it == r.coef.end())
            r.coef[v] = add;
          else
            it->second =
                (it->second && add) ? std::optional<long long>(*it->second + *add) : std::nullopt;
        }
        return r;
      }
      case BO_Mul: {
        if (!l.coef.empty() && !rr.coef.empty()) return Affine{false, {}, {}};
        const Affine& var = l.coef.empty() ? rr : l;
        const Affine& k = l.coef.empty() ? l : rr;
        r.constant = (l.constant && rr.constant)
                         ? std::optional<long long>(*l.constant * *rr.constant)
                         : std::nullopt;
        for (auto& [v, c] : var.coef)
          r.coef[v] = (c && k.constant) ? std::optional<long long>(*c * *k.constant) : std::nullopt;
        return r;
      }
      default:
        if (l.coef.empty() && rr.coef.empty()) {
          r.constant.reset();
          return r;
        }
        return Affine{false, {}, {}};
    }
  }
  if (const auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Minus) {
    Affine s = affine(u->getSubExpr());
    if (s.constant) s.constant = -*s.constant;
    for (auto& [v, c] : s.coef)
      if (c) c = -*c;
    return s;
  }
  Affine any;
  any.constant.reset();
  if (!deps_of(e).empty()) any.ok = false;
  return any;
}

std::vector<long long> Analyser::sym_value(const std::string& name) {
  std::vector<long long> v;
  for (int p = 0; p < kSymPoints; ++p) {
    std::uint64_t h = 1469598103934665603ull;
    for (char ch : name + "#" + std::to_string(p))
      h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    v.push_back(static_cast<long long>(3 + h % 997));
  }
  return v;
}

void Analyser::sym_add(Sym& r, const Sym& a, long long scale) {
  for (const auto& [k, v] : a.c) {
    auto& t = r.c[k];
    t.resize(kSymPoints, 0);
    for (int p = 0; p < kSymPoints; ++p) t[p] += scale * v[p];
  }
}

Analyser::Sym Analyser::sym(const Expr* e) const {
  e = e->IgnoreParenImpCasts();
  Sym r;
  if (const auto* lit = dyn_cast<IntegerLiteral>(e)) {
    r.c["1"] = std::vector<long long>(kSymPoints, lit->getValue().getSExtValue());
    return r;
  }
  if (int d = index_of(e); d >= 0) {
    r.c[d == 0 ? "x" : "y"] = std::vector<long long>(kSymPoints, 1);
    return r;
  }
  if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
    const auto* v = dyn_cast<VarDecl>(ref->getDecl());
    if (!v) return Sym{false, {}};
    if (auto lt = loop_vars_.find(v); lt != loop_vars_.end()) {
      r.c["loop:" + std::to_string(lt->second)] = std::vector<long long>(kSymPoints, 1);
      return r;
    }
    if (assigned_.count(v) || (local_ids_.count(v) && k_.locals[local_ids_.at(v)].replicated))
      return Sym{false, {}};
    r.c["1"] = sym_value(v->getNameAsString());  // a scalar parameter or a kept local
    return r;
  }
  if (const auto* b = dyn_cast<BinaryOperator>(e)) {
    if (b->getOpcode() == BO_Add || b->getOpcode() == BO_Sub) {
      Sym l = sym(b->getLHS()), rr = sym(b->getRHS());
      if (!l.ok || !rr.ok) return Sym{false, {}};
      sym_add(r, l, 1);
      sym_add(r, rr, b->getOpcode() == BO_Sub ? -1 : 1);
      return r;
    }
    if (b->getOpcode() == BO_Mul) {
      Sym l = sym(b->getLHS()), rr = sym(b->getRHS());
      if (!l.ok || !rr.ok) return Sym{false, {}};
      auto constant = [](const Sym& s) { return s.c.size() == 1 && s.c.count("1"); };
      if (!constant(l) && !constant(rr)) return Sym{false, {}};
      const Sym& var = constant(l) ? rr : l;
      const std::vector<long long>& k = (constant(l) ? l : rr).c.at("1");
      for (const auto& [name, v] : var.c) {
        auto& t = r.c[name];
        t.resize(kSymPoints, 0);
        for (int p = 0; p < kSymPoints; ++p) t[p] = v[p] * k[p];
      }
      return r;
    }
  }
  if (const auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Minus) {
    Sym s = sym(u->getSubExpr());
    if (s.ok) sym_add(r, s, -1);
    return s.ok ? r : s;
  }
  return Sym{false, {}};
}

namespace {

/// One parse of a kernel's source: the AST, the kernel, and where `source` starts in the buffer.
struct Parsed {
  ParsedCuda cuda;
  const FunctionDecl* f = nullptr;
  size_t skip = 0;
};

Parsed parse_kernel(const std::string& source, const std::string& kernel, const std::string& file,
                    const std::vector<std::string>& options) {
  Parsed p;
  p.cuda = parse_cuda(source, options, file, "gputune-generate");
  if (!p.cuda.ast) throw NaiveSourceError("clang could not parse " + file + ": " + p.cuda.error);
  ASTContext& ctx = p.cuda.ast->getASTContext();
  p.f = find_kernel(ctx, kernel);
  if (!p.f) {
    std::string names;
    for (const std::string& n : kernel_names(ctx)) names += (names.empty() ? "" : ", ") + n;
    throw NaiveSourceError(
        file + ": no __global__ function named '" + kernel + "' with a body" +
        (names.empty() ? std::string(" (the file has none)") : " (the file has: " + names + ")"));
  }
  // The parsed buffer is the prelude, a #line and then `source`.
  const size_t buffer =
      ctx.getSourceManager().getBufferData(ctx.getSourceManager().getMainFileID()).size();
  p.skip = buffer >= source.size() ? buffer - source.size() : 0;
  return p;
}

NaiveKernel describe(Parsed& p, const std::string& source, const std::string& file) {
  ASTContext& ctx = p.cuda.ast->getASTContext();
  Analyser a(ctx, file);
  NaiveKernel k = a.run(p.f);
  // What surrounds the definition (`extern "C"` without braces belongs to it) stays in every
  // variant: the kernel may use the file's macros, helpers and headers.
  const SourceManager& sm = ctx.getSourceManager();
  const Decl* outer = p.f;
  if (const auto* ls = dyn_cast<LinkageSpecDecl>(p.f->getDeclContext()); ls && !ls->hasBraces())
    outer = ls;
  const SourceLocation b = sm.getExpansionLoc(outer->getBeginLoc());
  const SourceLocation e =
      Lexer::getLocForEndOfToken(sm.getExpansionLoc(outer->getEndLoc()), 0, sm, ctx.getLangOpts());
  if (b.isValid() && e.isValid() && sm.isInMainFile(b) && sm.isInMainFile(e) &&
      sm.getFileOffset(b) >= p.skip) {
    const size_t from = sm.getFileOffset(b) - p.skip, to = sm.getFileOffset(e) - p.skip;
    if (from <= to && to <= source.size()) {
      k.before = source.substr(0, from);
      k.after = source.substr(to);
    }
  }
  return k;
}

}  // namespace

NaiveKernel analyse_naive(const std::string& source, const std::string& kernel,
                          const std::string& file, const std::vector<std::string>& options,
                          bool as_written) {
  Parsed p = parse_kernel(source, kernel, file, options);
  if (as_written) return describe(p, source, file);
  // The same structure in another spelling is read in the one the analysis knows (normal_form.cpp:
  // the meaning and every line kept, so messages name the user's lines).
  NormalForm nf = normal_form(p.cuda.ast->getASTContext(), p.f, p.skip);
  std::string text = source;
  if (!nf.edits.empty()) {
    text = apply_edits(source, nf.edits);
    p = parse_kernel(text, kernel, file, options);
  }
  NaiveKernel k = describe(p, text, file);
  // What was rewritten, then what the analysis of the rewritten text did not understand.
  k.rewrites.insert(k.rewrites.begin(), nf.notes.begin(), nf.notes.end());
  // A loop that adds to an array element, in a kernel whose loop could be split among threads if
  // that element were a local sum: read it so, when that is what stops the split.
  const SplitOption split = split_loop(k);
  if (split.loop < 0 && split.reason.find("does more than add") != std::string::npos) {
    const NormalForm af = accumulator_form(p.cuda.ast->getASTContext(), p.f, p.skip);
    if (!af.edits.empty()) {
      const std::string summed = apply_edits(text, af.edits);
      try {
        Parsed q = parse_kernel(summed, kernel, file, options);
        NaiveKernel ks = describe(q, summed, file);
        if (split_loop(ks).loop >= 0) {
          ks.rewrites = k.rewrites;
          ks.rewrites.insert(ks.rewrites.end(), af.notes.begin(), af.notes.end());
          k = std::move(ks);
        }
      } catch (const NaiveError&) {
        // The kernel as first read stands.
      }
    }
  }
  return k;
}

}  // namespace gputune::naive
