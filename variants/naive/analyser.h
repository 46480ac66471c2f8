/** \file variants/naive/analyser.h
 * Internal to the naive-kernel analysis: the gputune_naive_analysis target (analysis.cpp,
 * analysis_body.cpp), compiled with -fno-rtti as LLVM 14 is. It exposes clang types: nothing else
 * includes it, least of all the plain C++ side of this folder (internal.h and its files).
 * Owns: the Analyser, the one class that walks a kernel's clang AST into a NaiveKernel (naive.h),
 * declared here and defined across two files, each member documented where it is defined:
 *   analysis.cpp       analyse_naive; the kernel's parameters, thread indices and bounds check;
 *                      what an expression depends on (its affine and symbolic forms);
 *   analysis_body.cpp  the body: text with holes, access sites, statements, loops, reductions;
 *   normal_form.cpp    the spellings of the same structure rewritten, before the analysis reads
 *                      them, into the one it reads (a counter declared before its loop, ...).
 * Must not: be included outside the analysis target. */
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "variants/naive/naive.h"

namespace gputune::naive {

/// Constant coefficients of an affine subscript; nullopt coefficient = symbolic (a parameter).
struct Affine {
  bool ok = true;
  std::optional<long long> constant = 0;  ///< value when there are no variables
  std::map<std::string, std::optional<long long>> coef;
};

/// A replacement of [offset, offset + length) of the kernel's source by `text`.
struct SourceEdit {
  size_t offset = 0, length = 0;
  std::string text;
};
/// normal_form's rewrites of one kernel: its edits (disjoint, in any order) and one
/// note per rewrite, or per construct that looked like one and could not be rewritten (why, and
/// what to change).
struct NormalForm {
  std::vector<SourceEdit> edits;
  std::vector<std::string> notes;
};
/// The rewrites (normal_form.cpp) of kernel `f`: offsets are into the user's source, which the
/// parsed buffer holds after `skip` bytes (the prelude). They keep the meaning and every line.
NormalForm normal_form(clang::ASTContext& ctx, const clang::FunctionDecl* f, size_t skip);
/// Where a loop adds to an array element (`for (...) t[i] += E;`) that its own split would need
/// as an accumulator: the element kept in a local for the loop, loaded before and stored after it.
NormalForm accumulator_form(clang::ASTContext& ctx, const clang::FunctionDecl* f, size_t skip);
/// `source` with the edits made (from its end, so that each offset holds).
std::string apply_edits(std::string source, std::vector<SourceEdit> edits);

/// Describes one kernel for analyse_naive: one per kernel, used once.
class Analyser {
 public:
  Analyser(clang::ASTContext& ctx, std::string file);
  NaiveKernel run(const clang::FunctionDecl* f);

 private:
  /// An affine form evaluated at kSymPoints assignments of the scalars (see AccessSite::sym).
  struct Sym {
    bool ok = true;
    std::map<std::string, std::vector<long long>> c;  ///< "1": the constant term
  };
  /// A piece of a Text that replaces [begin, end) of the buffer (collect_holes, text_range).
  struct Hole {
    unsigned begin, end;
    Piece piece;
  };

  // analysis.cpp: errors and locations, the kernel's shape, what an expression depends on.
  [[noreturn]] void fail(const clang::Decl* d, const std::string& what);
  [[noreturn]] void fail(const clang::Stmt* s, const std::string& what);
  [[noreturn]] void fail_at(clang::SourceLocation loc, const std::string& what);
  int line_of(const clang::Stmt* s) const;
  unsigned begin_of(const clang::Stmt* s) const;
  unsigned end_of(const clang::Stmt* s) const;
  void set_index_name(int d, const std::string& name);
  static std::optional<std::pair<std::string, int>> builtin_member(const clang::Expr* e);
  static int index_pattern(const clang::Expr* e);
  static bool is_return(const clang::Stmt* s);
  static bool guard_follows(const std::vector<const clang::Stmt*>& rest, size_t i);
  void add_guard(const clang::Expr* e, bool negate);
  int index_of(const clang::Expr* e) const;
  bool uses_assigned(const clang::Stmt* s) const;
  GuardBound guard_bound(const clang::Expr* e, bool negate);
  void split_conjuncts(const clang::Expr* e);
  void split_disjuncts_negated(const clang::Expr* e);
  void collect_assigned(const clang::Stmt* s);
  std::set<std::string> deps_of(const clang::Stmt* s) const;
  static bool thread_dependent(const std::set<std::string>& d);
  Affine affine(const clang::Expr* e) const;
  static std::vector<long long> sym_value(const std::string& name);
  static void sym_add(Sym& r, const Sym& a, long long scale);
  Sym sym(const clang::Expr* e) const;

  // analysis_body.cpp: text with holes, access sites, statements.
  Text text_of(const clang::Stmt* s, bool guard = false);
  Text text_range(const clang::Stmt* s, unsigned b, unsigned e, bool guard);
  void collect_holes(const clang::Stmt* n, std::vector<Hole>& out, bool store, bool guard,
                     bool conditional);
  void add_access(const clang::ArraySubscriptExpr* a, const clang::ParmVarDecl* pv,
                  const std::vector<const clang::Expr*>& subs, std::vector<Hole>& out, bool store,
                  bool guard, bool conditional);
  void mark_read_of_store(std::vector<Hole>& out);
  void convert_into(const clang::Stmt* s, int loop, std::vector<Stmt>& out);
  std::optional<Stmt> reduction(const clang::Stmt* s);
  static bool has_jump(const clang::Stmt* s);
  std::optional<Stmt> kept_loop(const clang::ForStmt* fs, int outer);

  clang::ASTContext& ctx_;
  clang::SourceManager& sm_;
  llvm::StringRef buffer_;
  NaiveKernel k_;
  std::unordered_map<const clang::ParmVarDecl*, int> param_ids_;
  std::unordered_map<const clang::VarDecl*, int> index_vars_, loop_vars_, local_ids_;
  std::unordered_set<const clang::VarDecl*> assigned_;
  int max_dim_ = -1;
  int loops_ = 0;
  int current_loop_ = -1;
  int ranged_ = 0;  ///< triangular loops around what is being converted
  /// Why the last kept_loop refused a loop whose bound follows the thread ("": another reason).
  std::string loop_refusal_;
  size_t pre_count_ = 0;
};

}  // namespace gputune::naive
