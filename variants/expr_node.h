/** \file variants/expr_node.h
 * Internal to the expression evaluator: the tree of a parsed expression (detail::Node, which
 * expr.h only forward-declares). expr.cpp parses text into it, expr_eval.cpp evaluates it.
 * Must not: be included by any other file. */
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "variants/expr.h"

namespace gputune::detail {

enum class Op {
  Const,
  Name,
  List,
  Comp,
  Call,
  Subscript,
  Slice,
  Neg,
  Pos,
  Invert,
  Not,
  And,
  Or,
  IfElse,
  Compare,
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr
};
enum class Cmp { Lt, Le, Gt, Ge, Eq, Ne, In, NotIn, Is, IsNot };
enum class Builtin { Range, Min, Max, Len, Int, Float, Bool, Str, Abs, Sum, Round, ListFn };

struct Clause {
  int slot;
  std::unique_ptr<Node> iter;
  std::vector<std::unique_ptr<Node>> conds;
};

struct Node {
  Op op;
  Value constant;
  int slot = -1;
  Builtin builtin = Builtin::Range;
  std::vector<Cmp> cmps;
  std::vector<std::unique_ptr<Node>> kids;
  std::vector<Clause> clauses;  // Comp: kids[0] is the element
  int height = 1;               // levels of the tree below and including this node
};

using NodePtr = std::unique_ptr<Node>;

/// The expression in quotes for a message (expr.cpp).
std::string quoted(std::string_view text);

}  // namespace gputune::detail
