// The naive kernel's normal form (declared in analyser.h): spellings of the structure the
// analysis handles, rewritten into the one it reads before it reads them (issue #63). Each
// rewrite keeps the meaning and the line numbers (text moves only within its line, and what is
// removed becomes spaces), so every message still names the user's line:
//   1. a loop counter declared before its loop(s) (`int k; for (k = 0; ...)`, also several loops
//      sharing it) becomes each loop's own (`for (int k = 0; ...)`), when nothing outside those
//      loops reads or writes it and no such loop runs inside another;
//   2. a declaration without a value followed by its first assignment in the same block
//      (`float c; c = 0.2f;`) becomes one initialised declaration (`float c = 0.2f;`);
//   3. (accumulator_form, applied only where it lets the analysis split a loop) an array element
//      a loop adds to (`for (...) t[i] += E;`) becomes a local accumulator, loaded before the loop
//      and stored after it, as the `registers` load path would keep it.
// What looks like one of them but cannot be rewritten is a note saying why and what to change.
// Compiled with -fno-rtti, in the analysis target. Must not: emit variants.
#include <clang/AST/ExprCXX.h>
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <map>
#include <set>

#include "variants/naive/analyser.h"

namespace gputune::naive {

using namespace clang;

namespace {

/// Walks a function body once: its declarations, references and loops, with their parents.
class Census {
 public:
  struct Ref {
    const DeclRefExpr* e;
    std::vector<const ForStmt*> loops;  ///< the for statements around it, outermost first
    const clang::Stmt* top = nullptr;   ///< the statement of its block that holds it
  };
  std::map<const VarDecl*, std::vector<Ref>> refs;
  std::map<const VarDecl*, const DeclStmt*> decl_of;
  std::map<const DeclStmt*, std::pair<const CompoundStmt*, size_t>> where;  ///< block, position
  std::map<const VarDecl*, std::vector<const ForStmt*>> counted;  ///< loops whose init assigns it

  explicit Census(const clang::Stmt* body) { walk(body, nullptr); }

  /// `v = E` as a statement (or a for init): v, else nullptr.
  static const VarDecl* assigned_var(const clang::Stmt* s) {
    const auto* b = dyn_cast_or_null<BinaryOperator>(s);
    if (!b || b->getOpcode() != BO_Assign) return nullptr;
    const auto* r = dyn_cast<DeclRefExpr>(b->getLHS()->IgnoreParenImpCasts());
    return r ? dyn_cast<VarDecl>(r->getDecl()) : nullptr;
  }

 private:
  std::vector<const ForStmt*> loops_;
  void walk(const clang::Stmt* s, const clang::Stmt* top) {
    if (!s) return;
    if (const auto* c = dyn_cast<CompoundStmt>(s)) {
      size_t k = 0;
      for (const clang::Stmt* child : c->body()) {
        if (const auto* ds = dyn_cast<DeclStmt>(child)) {
          where[ds] = {c, k};
          for (const Decl* d : ds->decls())
            if (const auto* v = dyn_cast<VarDecl>(d)) decl_of[v] = ds;
        }
        walk(child, child);
        ++k;
      }
      return;
    }
    if (const auto* r = dyn_cast<DeclRefExpr>(s))
      if (const auto* v = dyn_cast<VarDecl>(r->getDecl())) refs[v].push_back({r, loops_, top});
    const auto* f = dyn_cast<ForStmt>(s);
    if (f)
      if (const VarDecl* v = assigned_var(f->getInit())) counted[v].push_back(f);
    if (f) loops_.push_back(f);
    for (const clang::Stmt* child : s->children()) walk(child, top ? top : s);
    if (f) loops_.pop_back();
    if (const auto* ds = dyn_cast<DeclStmt>(s))  // initialisers are not children of the DeclStmt
      for (const Decl* d : ds->decls())
        if (const auto* v = dyn_cast<VarDecl>(d); v && v->getInit()) walk(v->getInit(), top);
  }
};

bool references(const clang::Stmt* s, const VarDecl* v) {
  if (!s) return false;
  if (const auto* r = dyn_cast<DeclRefExpr>(s); r && r->getDecl() == v) return true;
  for (const clang::Stmt* c : s->children())
    if (references(c, v)) return true;
  return false;
}

/// A local a rewrite may move: a plain scalar declared without a value, not static.
bool movable(const VarDecl* v) {
  return v && v->hasLocalStorage() && !v->getInit() && !isa<ParmVarDecl>(v) &&
         (v->getType()->isIntegerType() || v->getType()->isRealFloatingType()) &&
         !v->getType().isVolatileQualified();
}

/// The for statements of a body, each with whether its parent is a block.
void loops_of(const clang::Stmt* s, bool in_block,
              std::vector<std::pair<const ForStmt*, bool>>& out) {
  if (!s) return;
  if (const auto* f = dyn_cast<ForStmt>(s)) out.emplace_back(f, in_block);
  for (const clang::Stmt* c : s->children()) loops_of(c, isa<CompoundStmt>(s), out);
}

/// Whether s writes v (an assignment, compound assignment or increment of it).
bool writes(const clang::Stmt* s, const ValueDecl* v) {
  if (!s) return false;
  auto is_v = [&](const Expr* e) {
    const auto* r = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts());
    return r && r->getDecl() == v;
  };
  if (const auto* b = dyn_cast<BinaryOperator>(s); b && b->isAssignmentOp() && is_v(b->getLHS()))
    return true;
  if (const auto* u = dyn_cast<UnaryOperator>(s);
      u && u->isIncrementDecrementOp() && is_v(u->getSubExpr()))
    return true;
  if (const auto* ds = dyn_cast<DeclStmt>(s))
    for (const Decl* d : ds->decls())
      if (d == v) return true;
  for (const clang::Stmt* c : s->children())
    if (writes(c, v)) return true;
  return false;
}

/// Every variable s reads.
void read_vars(const clang::Stmt* s, std::set<const ValueDecl*>& out) {
  if (!s) return;
  if (const auto* r = dyn_cast<DeclRefExpr>(s)) out.insert(r->getDecl());
  for (const clang::Stmt* c : s->children()) read_vars(c, out);
}

bool has_continue(const clang::Stmt* s) {
  if (!s) return false;
  if (isa<ContinueStmt>(s)) return true;
  for (const clang::Stmt* c : s->children())
    if (has_continue(c)) return true;
  return false;
}

/// The user's source as the parse holds it (after `skip` bytes of prelude): offsets into it,
/// lines as the user numbers them, and text of it on one line.
class Source {
 public:
  Source(ASTContext& ctx, size_t skip)
      : sm_(ctx.getSourceManager()),
        lo_(ctx.getLangOpts()),
        buffer_(sm_.getBufferData(sm_.getMainFileID())),
        skip_(skip) {}
  /// Where a location written in the file (not in a macro) is.
  std::optional<size_t> offset(SourceLocation l) const {
    if (l.isInvalid() || l.isMacroID() || !sm_.isInMainFile(l)) return std::nullopt;
    const size_t o = sm_.getFileOffset(l);
    if (o < skip_) return std::nullopt;
    return o - skip_;
  }
  /// The same, where a macro may begin or end it (`DATA_TYPE c11, c12;`): its name in the file.
  std::optional<size_t> expanded(SourceLocation l) const { return offset(sm_.getExpansionLoc(l)); }
  /// Just after the token at l, written in the file.
  std::optional<size_t> end_of(SourceLocation l) const {
    return offset(Lexer::getLocForEndOfToken(l, 0, sm_, lo_));
  }
  /// The same, where l may be in a macro: just after the macro's name.
  std::optional<size_t> expanded_end(SourceLocation l) const {
    return end_of(sm_.getExpansionLoc(l));
  }
  int line(SourceLocation l) const {
    const PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(l));
    return p.isValid() ? static_cast<int>(p.getLine()) : 0;
  }
  /// [b, e) of the source, when it is on one line.
  std::optional<std::string> text(std::optional<size_t> b, std::optional<size_t> e) const {
    if (!b || !e || *e < *b) return std::nullopt;
    std::string t(buffer_.substr(*b + skip_, *e - *b));
    if (t.find('\n') != std::string::npos) return std::nullopt;
    return t;
  }
  /// A statement's text, as written, when it is on one line.
  std::optional<std::string> text_of(const clang::Stmt* s) const {
    return text(expanded(s->getBeginLoc()), expanded_end(s->getEndLoc()));
  }
  /// Just after the ';' that follows offset o (spaces between), if one does.
  std::optional<size_t> after_semicolon(std::optional<size_t> o) const {
    if (!o) return std::nullopt;
    while (*o + skip_ < buffer_.size() && (at(*o) == ' ' || at(*o) == '\t')) ++*o;
    if (*o + skip_ >= buffer_.size() || at(*o) != ';') return std::nullopt;
    return *o + 1;
  }
  /// The text of [b, b + n), whatever it holds.
  std::string raw(size_t b, size_t n) const { return std::string(buffer_.substr(b + skip_, n)); }

 private:
  char at(size_t o) const { return buffer_[o + skip_]; }
  const SourceManager& sm_;
  const LangOptions& lo_;
  llvm::StringRef buffer_;
  size_t skip_;
};

/// The rewrites of one function, in the order they are tried (1, 2, then 1b), and the notes of
/// what could not be rewritten: each a member that adds to `taken`, `inserts` and `out`.
class Normaliser {
 public:
  Normaliser(ASTContext& ctx, const clang::Stmt* body, size_t skip)
      : ctx_(ctx), src(ctx, skip), c(body) {}

  NormalForm run() {
    counters_before_loops();
    first_assignments();
    counted_whiles();
    // The declarations lose what moved: what they keep is declared again, one declaration each,
    // on their first line; the rest of their text becomes spaces (its line breaks stay).
    for (const auto& [ds, gone] : taken) {
      const size_t b = *src.expanded(ds->getBeginLoc()), e = *offset(ds->getEndLoc());
      std::string kept;
      for (const Decl* d : ds->decls())
        if (const auto* v = cast<VarDecl>(d); !gone.count(v)) kept += *declarator(v) + " ";
      const std::string text = src.raw(b, e + 1 - b);
      std::string repl = kept;
      for (char ch : text)
        if (ch == '\n') repl += '\n';
      if (repl.size() < text.size()) repl.append(text.size() - repl.size(), ' ');
      out.edits.push_back({b, text.size(), repl});
    }
    out.edits.insert(out.edits.end(), inserts.begin(), inserts.end());
    return std::move(out);
  }

 private:
  std::optional<size_t> offset(SourceLocation l) const { return src.offset(l); }
  int line(SourceLocation l) const { return src.line(l); }
  std::string type_of(const VarDecl* v) const {
    return v->getType().getUnqualifiedType().getAsString(ctx_.getPrintingPolicy());
  }
  // A declaration the rewrites may take variables out of: in the file (not a macro), and each
  // variable it keeps can be declared again on its own (not an array or a function pointer,
  // whose declarators would have to be rewritten).
  std::optional<std::string> declarator(const VarDecl* v) const {
    const QualType t = v->getType();
    if (t->isArrayType() || t->isFunctionPointerType() || t->isReferenceType()) return {};
    const std::optional<std::string> text =
        src.text(offset(v->getLocation()), src.expanded_end(v->getEndLoc()));
    if (!text) return {};
    return (t.isConstQualified() ? "const " : "") + type_of(v) + " " + *text + ";";
  }
  bool splittable(const DeclStmt* ds) const {
    if (!src.expanded(ds->getBeginLoc()) || !offset(ds->getEndLoc())) return false;
    for (const Decl* d : ds->decls()) {
      const auto* v = dyn_cast<VarDecl>(d);
      if (!v || !declarator(v)) return false;
    }
    return true;
  }
  void unsplittable_note(const VarDecl* v, const char* what) {
    out.notes.push_back("line " + std::to_string(line(v->getLocation())) + ": '" +
                        v->getNameAsString() + "' " + what +
                        ", but its declaration has a macro, an array or a function pointer in "
                        "it. Fix: declare it on a line of its own");
  }

  // 1. Loop counters declared before their loops.
  void counters_before_loops() {
    for (const auto& [v, loops] : c.counted) {
      if (!movable(v) || !v->getType()->isIntegerType() || !c.decl_of.count(v)) continue;
      const std::string name = v->getNameAsString();
      std::string why;
      int at = 0;
      std::set<const ForStmt*> own(loops.begin(), loops.end());
      for (const ForStmt* l : loops)
        if (references(cast<BinaryOperator>(l->getInit())->getRHS(), v))
          why = "its loop's start reads it", at = line(l->getBeginLoc());
      for (const auto& r : c.refs.at(v)) {
        if (!why.empty()) break;
        const size_t mine = static_cast<size_t>(
            std::count_if(r.loops.begin(), r.loops.end(), [&](auto* l) { return own.count(l); }));
        if (mine == 0)
          why = "it is used outside its loops", at = line(r.e->getLocation());
        else if (mine > 1)
          why = "a loop counting with it runs inside another one", at = line(r.e->getLocation());
      }
      std::vector<size_t> where;
      for (const ForStmt* l : loops) {
        const auto* init = cast<BinaryOperator>(l->getInit());
        const auto o = offset(init->getLHS()->getBeginLoc());
        if (!o && why.empty()) why = "its loop is written in a macro", at = line(l->getBeginLoc());
        if (o) where.push_back(*o);
      }
      if (!why.empty()) {
        out.notes.push_back(
            "line " + std::to_string(line(v->getLocation())) + ": '" + name +
            "' is declared before its loop(s) and not read as their counter: " + why + " (line " +
            std::to_string(at) +
            "), so the loop is not one every thread runs alike. Fix: declare it in " +
            "the loop header (`for (int " + name + " = ...`)");
        continue;
      }
      if (!splittable(c.decl_of.at(v))) {
        unsplittable_note(v, "is declared before its loop(s)");
        continue;
      }
      taken[c.decl_of.at(v)].insert(v);
      std::string lines;
      for (const ForStmt* l : loops)
        lines += (lines.empty() ? "" : ", ") + std::to_string(line(l->getBeginLoc()));
      for (size_t o : where) inserts.push_back({o, 0, type_of(v) + " "});
      out.notes.push_back("line " + std::to_string(line(v->getLocation())) + ": '" + name +
                          "' is declared before its loop(s) (line" +
                          (loops.size() > 1 ? "s " : " ") + lines + "): read as `for (" +
                          type_of(v) + " " + name + " = ...`, each loop's own counter");
    }
  }

  // 2. A declaration, then its first assignment in the same block.
  void first_assignments() {
    for (const auto& [ds, pos] : c.where) {
      const auto [block, k] = pos;
      for (const Decl* d : ds->decls()) {
        const auto* v = dyn_cast<VarDecl>(d);
        if (!movable(v) || c.counted.count(v)) continue;
        const clang::Stmt* first = nullptr;
        for (size_t j = k + 1; j < block->size() && !first; ++j)
          if (references(block->body_begin()[j], v)) first = block->body_begin()[j];
        if (!first || Census::assigned_var(first) != v ||
            references(cast<BinaryOperator>(first)->getRHS(), v))
          continue;
        const auto o = offset(first->getBeginLoc());
        if (!o) continue;
        if (!splittable(ds)) {
          unsplittable_note(v, "is first set after its declaration");
          continue;
        }
        taken[ds].insert(v);
        inserts.push_back({*o, 0, type_of(v) + " "});
        out.notes.push_back("line " + std::to_string(line(first->getBeginLoc())) + ": '" +
                            v->getNameAsString() + "' (declared at line " +
                            std::to_string(line(v->getLocation())) +
                            ") is first set here: read as one initialised declaration");
      }
    }
  }

  // 1b. A counted while loop: `int k = 0; while (k < n) { ...; k++; }` is that for loop.
  void counted_whiles() {
    for (const auto& [ds, pos] : c.where) {
      const auto [block, k] = pos;
      for (const Decl* d : ds->decls()) {
        const auto* v = dyn_cast<VarDecl>(d);
        if (!v || !v->hasLocalStorage() || !v->getInit() || !v->getType()->isIntegerType() ||
            v->getType().isVolatileQualified() || taken[ds].count(v) || c.counted.count(v))
          continue;
        counted_while(ds, block, k, v);
      }
    }
  }

  /// 1b for v, declared by ds at position k of block.
  void counted_while(const DeclStmt* ds, const CompoundStmt* block, size_t k, const VarDecl* v) {
    const clang::Stmt* first = nullptr;
    for (size_t j = k + 1; j < block->size() && !first; ++j)
      if (references(block->body_begin()[j], v)) first = block->body_begin()[j];
    const auto* w = dyn_cast_or_null<WhileStmt>(first);
    if (!w) return;
    const auto* cond = dyn_cast<BinaryOperator>(w->getCond()->IgnoreParenImpCasts());
    const auto* cv = cond ? dyn_cast<DeclRefExpr>(cond->getLHS()->IgnoreParenImpCasts()) : nullptr;
    const auto* body = dyn_cast<CompoundStmt>(w->getBody());
    if (!cv || cv->getDecl() != v || (cond->getOpcode() != BO_LT && cond->getOpcode() != BO_LE) ||
        !body || body->size() == 0 || references(v->getInit(), v))
      return;
    const clang::Stmt* step = body->body_back();
    bool unit = false;
    if (const auto* u = dyn_cast<UnaryOperator>(step))
      unit = u->isIncrementOp() && isa<DeclRefExpr>(u->getSubExpr()->IgnoreParenImpCasts()) &&
             cast<DeclRefExpr>(u->getSubExpr()->IgnoreParenImpCasts())->getDecl() == v;
    if (const auto* ca = dyn_cast<CompoundAssignOperator>(step);
        ca && ca->getOpcode() == BO_AddAssign)
      if (const auto* r = dyn_cast<DeclRefExpr>(ca->getLHS()->IgnoreParenImpCasts());
          r && r->getDecl() == v)
        if (const auto* lit = dyn_cast<IntegerLiteral>(ca->getRHS()->IgnoreParenImpCasts()))
          unit = lit->getValue() == 1;
    if (!unit) return;
    const int wl = line(w->getBeginLoc());
    std::string why;
    if (writes(w->getCond(), v)) why = "its condition changes it";
    for (auto it = body->body_begin(); it + 1 != body->body_end() && why.empty(); ++it)
      if (writes(*it, v)) why = "its body changes it before the last step";
    if (why.empty() && has_continue(body))
      why = "its body has a `continue` (it would skip the step)";
    const auto wb = offset(w->getBeginLoc()), we = offset(w->getEndLoc());
    if (why.empty())
      for (const auto& r : c.refs.at(v)) {
        const auto o = offset(r.e->getLocation());
        if (!o || !wb || !we || *o < *wb || *o > *we) {
          why =
              "it is used outside the loop (line " + std::to_string(line(r.e->getLocation())) + ")";
          break;
        }
      }
    const auto lp = offset(w->getLParenLoc()), rp = offset(w->getRParenLoc());
    const auto init = src.text_of(v->getInit()), inc = src.text_of(step);
    const auto semi = src.after_semicolon(src.expanded_end(step->getEndLoc()));
    const auto sb = offset(step->getBeginLoc());
    if (why.empty() && (!wb || !lp || !rp || !init || !inc || !semi || !sb))
      why = "it is written in a macro or over several lines";
    if (why.empty() && !splittable(ds))
      why = "its declaration has a macro, an array or a function pointer in it";
    if (!why.empty()) {
      out.notes.push_back("line " + std::to_string(wl) + ": the while loop counted by '" +
                          v->getNameAsString() + "' is not read as a for loop: " + why +
                          ", so it is not a loop every thread runs alike. Fix: write it as " +
                          "`for (int " + v->getNameAsString() + " = ...; ...; " +
                          v->getNameAsString() + "++)`");
      return;
    }
    taken[ds].insert(v);
    const std::string head =
        "for (" + type_of(v) + " " + v->getNameAsString() + " = " + *init + "; ";
    inserts.push_back({*wb, *lp + 1 - *wb, head});
    inserts.push_back({*rp, 0, "; " + *inc});
    inserts.push_back({*sb, *semi - *sb, std::string(*semi - *sb, ' ')});
    out.notes.push_back("line " + std::to_string(wl) + ": the while loop counted by '" +
                        v->getNameAsString() + "' (declared at line " +
                        std::to_string(line(v->getLocation())) + ", stepped at line " +
                        std::to_string(line(step->getBeginLoc())) + ") is read as `" + head +
                        "...; " + *inc + ")`");
  }

  ASTContext& ctx_;
  const Source src;
  const Census c;
  NormalForm out;
  // Which variables each rewrite takes out of their declaration, and the type put where each is
  // first set.
  std::map<const DeclStmt*, std::set<const VarDecl*>> taken;
  std::vector<SourceEdit> inserts;
};

}  // namespace

NormalForm normal_form(ASTContext& ctx, const FunctionDecl* f, size_t skip) {
  const clang::Stmt* body = f->getBody();
  if (!body) return {};
  return Normaliser(ctx, body, skip).run();
}

NormalForm accumulator_form(ASTContext& ctx, const FunctionDecl* f, size_t skip) {
  NormalForm out;
  if (!f->getBody()) return out;
  const Source src(ctx, skip);
  std::vector<std::pair<const ForStmt*, bool>> loops;
  loops_of(f->getBody(), false, loops);
  int n = 0;
  for (const auto& [loop, in_block] : loops) {
    const clang::Stmt* s = loop->getBody();
    if (const auto* cs = dyn_cast<CompoundStmt>(s))
      s = cs->size() == 1 ? cs->body_front() : nullptr;
    const auto* add = dyn_cast_or_null<CompoundAssignOperator>(s);
    if (!add || add->getOpcode() != BO_AddAssign) continue;
    const auto* at = dyn_cast<ArraySubscriptExpr>(add->getLHS()->IgnoreParenImpCasts());
    if (!at) continue;
    const auto* base = dyn_cast<DeclRefExpr>(at->getBase()->IgnoreParenImpCasts());
    const auto* array = base ? dyn_cast<ParmVarDecl>(base->getDecl()) : nullptr;
    const QualType t = add->getLHS()->getType();
    if (!array || !(t->isIntegerType() || t->isRealFloatingType())) continue;
    // The element is the same at every step: its subscript reads nothing the loop writes, and
    // the added value does not read the array.
    std::set<const ValueDecl*> subscript, added;
    read_vars(at->getIdx(), subscript);
    read_vars(add->getRHS(), added);
    if (added.count(array) || writes(loop, array)) continue;
    const ForStmt* body_loop = loop;  // clang 14 does not capture a structured binding
    if (std::any_of(subscript.begin(), subscript.end(),
                    [&](const ValueDecl* v) { return writes(body_loop, v); }))
      continue;
    const auto lb = src.offset(loop->getBeginLoc()), eb = src.offset(at->getBeginLoc()),
               ee = src.end_of(at->getEndLoc());
    const std::optional<size_t> le = isa<CompoundStmt>(loop->getBody())
                                         ? src.end_of(loop->getEndLoc())
                                         : src.after_semicolon(src.end_of(loop->getEndLoc()));
    const std::optional<std::string> element = src.text(eb, ee);
    if (!lb || !le || !element) continue;
    const std::string name = "gt_sum" + std::to_string(n++);
    const std::string type = t.getUnqualifiedType().getAsString(ctx.getPrintingPolicy());
    out.edits.push_back({*le, 0, " " + *element + " += " + name + ";" + (in_block ? "" : " }")});
    out.edits.push_back({*eb, *ee - *eb, name});
    out.edits.push_back({*lb, 0, std::string(in_block ? "" : "{ ") + type + " " + name + " = 0; "});
    out.notes.push_back("line " + std::to_string(src.line(loop->getBeginLoc())) +
                        ": loop adds to " + *element +
                        ": read as a local sum the loop adds to, added to " + *element +
                        " after it, so the loop can be split among threads");
  }
  return out;
}

std::string apply_edits(std::string source, std::vector<SourceEdit> edits) {
  // From the end, so earlier offsets stay valid.
  std::sort(edits.begin(), edits.end(),
            [](const SourceEdit& a, const SourceEdit& b) { return a.offset > b.offset; });
  for (const SourceEdit& e : edits)
    if (e.offset <= source.size() && e.offset + e.length <= source.size())
      source.replace(e.offset, e.length, e.text);
  return source;
}

}  // namespace gputune::naive
