// The expression evaluator's front half (expr.h): the Symbols table, the tokenizer and the
// recursive-descent parser that builds the tree of expr_node.h; Expr::parse. Evaluating the tree
// is expr_eval.cpp's. Must not: evaluate anything.
#include "variants/expr.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "variants/expr_node.h"

namespace gputune {

int Symbols::slot(const std::string& name) {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  int s = static_cast<int>(names_.size());
  names_.push_back(name);
  index_.emplace(name, s);
  return s;
}

int Symbols::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

namespace detail {

/// The expression in quotes for a message; a long one is cut (the column still locates the error).
std::string quoted(std::string_view text) {
  constexpr size_t kShown = 100;
  if (text.size() <= kShown) return "\"" + std::string(text) + "\"";
  return "\"" + std::string(text.substr(0, kShown)) + "...\" (" + std::to_string(text.size()) +
         " characters)";
}

}  // namespace detail

namespace {

using detail::Builtin;
using detail::Cmp;
using detail::Node;
using detail::NodePtr;
using detail::Op;
using detail::quoted;

enum class Tok { Int, Float, Str, Name, Op, End };
struct Token {
  Tok kind;
  std::string text;
  size_t pos;
  Value value;
};

const std::unordered_map<std::string, Builtin>& builtins() {
  static const std::unordered_map<std::string, Builtin> b = {
      {"range", Builtin::Range}, {"min", Builtin::Min},     {"max", Builtin::Max},
      {"len", Builtin::Len},     {"int", Builtin::Int},     {"float", Builtin::Float},
      {"bool", Builtin::Bool},   {"str", Builtin::Str},     {"abs", Builtin::Abs},
      {"sum", Builtin::Sum},     {"round", Builtin::Round}, {"list", Builtin::ListFn},
      {"tuple", Builtin::ListFn}};
  return b;
}

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  auto err = [&](const std::string& what) {
    throw ExprError("bad expression " + quoted(s) + ": " + what + " at column " +
                    std::to_string(i + 1));
  };
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    size_t start = i;
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      if (c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        i += 2;
        while (i < s.size() && std::isxdigit(static_cast<unsigned char>(s[i]))) ++i;
        std::string t(s.substr(start, i - start));
        if (t.size() == 2) err("invalid hexadecimal literal");
        try {
          out.push_back(
              {Tok::Int, t, start, Value(static_cast<std::int64_t>(std::stoll(t, nullptr, 16)))});
        } catch (const std::out_of_range&) {
          err("number out of range (integers are 64-bit)");
        }
        continue;
      }
      bool is_float = false;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      if (i < s.size() && s[i] == '.') {
        is_float = true;
        ++i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
          is_float = true;
          i = j;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        }
      }
      std::string t(s.substr(start, i - start));
      t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
      try {
        if (is_float)
          out.push_back({Tok::Float, t, start, Value(std::stod(t))});
        else
          out.push_back({Tok::Int, t, start, Value(static_cast<std::int64_t>(std::stoll(t)))});
      } catch (const std::out_of_range&) {
        err("number out of range (integers are 64-bit)");
      }
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      out.push_back({Tok::Name, std::string(s.substr(start, i - start)), start, {}});
      continue;
    }
    if (c == '\'' || c == '"') {
      ++i;
      std::string str;
      while (i < s.size() && s[i] != c) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          ++i;
          char e = s[i];
          str += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          str += s[i];
        }
        ++i;
      }
      if (i >= s.size()) err("unterminated string");
      ++i;
      out.push_back({Tok::Str, str, start, Value(str)});
      continue;
    }
    static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "<<", ">>", "+",
                                "-",  "*",  "/",  "%",  "<",  ">",  "(",  ")",  "[",
                                "]",  ",",  ":",  "~",  "&",  "|",  "^"};
    bool matched = false;
    for (const char* op : ops) {
      size_t n = std::char_traits<char>::length(op);
      if (s.substr(i, n) == op) {
        out.push_back({Tok::Op, op, start, {}});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) err(std::string("unexpected character '") + c + "'");
  }
  out.push_back({Tok::End, "", s.size(), {}});
  return out;
}

NodePtr make(Op op) {
  auto n = std::make_unique<Node>();
  n->op = op;
  return n;
}

class Parser {
 public:
  Parser(std::string_view text, Symbols& syms) : text_(text), toks_(tokenize(text)), syms_(syms) {}

  NodePtr parse_all(std::set<int>& free) {
    auto n = expr();
    if (peek().kind != Tok::End) fail("unexpected '" + peek().text + "'");
    free = std::move(free_);
    return n;
  }

 private:
  std::string_view text_;
  std::vector<Token> toks_;
  size_t p_ = 0;
  Symbols& syms_;
  std::set<int> free_;  // names read so far; a comprehension takes back the ones it binds
  // The parser recurses once per nested bracket, unary operator or conditional, and evaluation once
  // per tree level, so both are bounded: Python's tokenizer also stops at 200 nested brackets.
  static constexpr int kMaxNesting = 200;
  static constexpr int kMaxDepth = 1000;
  int nesting_ = 0;

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (p.nesting_ == kMaxNesting)
        p.fail("expression nested more than " + std::to_string(kMaxNesting) + " levels deep");
      ++p.nesting_;
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };

  /// Makes `kid` a child of `parent`, keeping the tree no deeper than evaluation may recurse (a
  /// chain like 1+1+...+1 is as deep as it is long). Checked while building, so that not even
  /// the tree's destructor recurses further.
  void adopt(Node& parent, NodePtr kid) {
    if (kid) grow(parent, *kid);
    parent.kids.push_back(std::move(kid));
  }
  void grow(Node& parent, const Node& kid) {
    parent.height = std::max(parent.height, kid.height + 1);
    if (parent.height > kMaxDepth)
      fail("expression more than " + std::to_string(kMaxDepth) +
           " operations deep (evaluation recurses once per level)");
  }

  const Token& peek(size_t k = 0) const { return toks_[std::min(p_ + k, toks_.size() - 1)]; }
  bool is_op(const char* o, size_t k = 0) const {
    return peek(k).kind == Tok::Op && peek(k).text == o;
  }
  bool is_kw(const char* w, size_t k = 0) const {
    return peek(k).kind == Tok::Name && peek(k).text == w;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const Token& t = peek();
    throw ExprError("bad expression " + quoted(text_) + ": " + what + " at column " +
                    std::to_string(t.pos + 1) + (t.kind == Tok::End ? " (end of expression)" : ""));
  }
  void expect(const char* o) {
    if (!is_op(o)) fail(std::string("expected '") + o + "'");
    ++p_;
  }

  NodePtr expr() {  // conditional expression
    auto body = or_expr();
    if (is_kw("if")) {
      ++p_;
      auto cond = or_expr();
      if (!is_kw("else")) fail("expected 'else'");
      ++p_;
      Nest nest(*this);
      auto other = expr();
      auto n = make(Op::IfElse);
      adopt(*n, std::move(cond));
      adopt(*n, std::move(body));
      adopt(*n, std::move(other));
      return n;
    }
    return body;
  }
  NodePtr or_expr() {
    auto l = and_expr();
    while (is_kw("or")) {
      ++p_;
      auto n = make(Op::Or);
      adopt(*n, std::move(l));
      adopt(*n, and_expr());
      l = std::move(n);
    }
    return l;
  }
  NodePtr and_expr() {
    auto l = not_expr();
    while (is_kw("and")) {
      ++p_;
      auto n = make(Op::And);
      adopt(*n, std::move(l));
      adopt(*n, not_expr());
      l = std::move(n);
    }
    return l;
  }
  NodePtr not_expr() {
    if (is_kw("not")) {
      Nest nest(*this);
      ++p_;
      auto n = make(Op::Not);
      adopt(*n, not_expr());
      return n;
    }
    return comparison();
  }
  bool cmp_op(Cmp& c) {
    static const std::pair<const char*, Cmp> table[] = {{"<", Cmp::Lt},  {"<=", Cmp::Le},
                                                        {">", Cmp::Gt},  {">=", Cmp::Ge},
                                                        {"==", Cmp::Eq}, {"!=", Cmp::Ne}};
    for (auto& [s, v] : table)
      if (is_op(s)) {
        c = v, ++p_;
        return true;
      }
    if (is_kw("in")) return c = Cmp::In, ++p_, true;
    if (is_kw("not") && is_kw("in", 1)) return c = Cmp::NotIn, p_ += 2, true;
    if (is_kw("is") && is_kw("not", 1)) return c = Cmp::IsNot, p_ += 2, true;
    if (is_kw("is")) return c = Cmp::Is, ++p_, true;
    return false;
  }
  NodePtr comparison() {
    auto first = bitor_expr();
    Cmp c;
    if (!cmp_op(c)) return first;
    auto n = make(Op::Compare);
    adopt(*n, std::move(first));
    do {
      n->cmps.push_back(c);
      adopt(*n, bitor_expr());
    } while (cmp_op(c));
    return n;
  }
  NodePtr binary_level(NodePtr (Parser::*next)(),
                       std::initializer_list<std::pair<const char*, Op>> ops) {
    auto l = (this->*next)();
    for (;;) {
      bool found = false;
      for (auto& [s, op] : ops) {
        if (is_op(s)) {
          ++p_;
          auto n = make(op);
          adopt(*n, std::move(l));
          adopt(*n, (this->*next)());
          l = std::move(n);
          found = true;
          break;
        }
      }
      if (!found) return l;
    }
  }
  NodePtr bitor_expr() { return binary_level(&Parser::bitxor_expr, {{"|", Op::BitOr}}); }
  NodePtr bitxor_expr() { return binary_level(&Parser::bitand_expr, {{"^", Op::BitXor}}); }
  NodePtr bitand_expr() { return binary_level(&Parser::shift_expr, {{"&", Op::BitAnd}}); }
  NodePtr shift_expr() { return binary_level(&Parser::arith, {{"<<", Op::Shl}, {">>", Op::Shr}}); }
  NodePtr arith() { return binary_level(&Parser::term, {{"+", Op::Add}, {"-", Op::Sub}}); }
  NodePtr term() {
    return binary_level(&Parser::unary,
                        {{"*", Op::Mul}, {"//", Op::FloorDiv}, {"/", Op::Div}, {"%", Op::Mod}});
  }
  NodePtr unary() {
    Op op;
    if (is_op("-"))
      op = Op::Neg;
    else if (is_op("+"))
      op = Op::Pos;
    else if (is_op("~"))
      op = Op::Invert;
    else
      return power();
    Nest nest(*this);
    ++p_;
    auto n = make(op);
    adopt(*n, unary());
    return n;
  }
  NodePtr power() {
    auto base = postfix();
    if (is_op("**")) {
      Nest nest(*this);
      ++p_;
      auto n = make(Op::Pow);
      adopt(*n, std::move(base));
      adopt(*n, unary());  // right-associative, binds unary on the right
      return n;
    }
    return base;
  }
  NodePtr postfix() {
    auto n = atom();
    while (is_op("[")) {
      Nest nest(*this);
      ++p_;
      NodePtr lo, hi;
      bool slice = false;
      if (!is_op(":")) lo = expr();
      if (is_op(":")) {
        slice = true;
        ++p_;
        if (!is_op("]")) hi = expr();
      }
      expect("]");
      auto s = make(slice ? Op::Slice : Op::Subscript);
      adopt(*s, std::move(n));
      adopt(*s, lo ? std::move(lo) : nullptr);
      if (slice) adopt(*s, hi ? std::move(hi) : nullptr);
      n = std::move(s);
    }
    return n;
  }
  // Parses what follows an opening bracket: an element, and the comprehension it heads if `for`
  // follows. Every name goes into free_ as it is read; a comprehension takes the names its own
  // clauses bind back out afterwards, so each element is parsed once, however deep the nesting.
  NodePtr element_or_comprehension(bool& comprehension) {
    std::set<int> outer;
    std::swap(outer, free_);
    auto n = expr();
    comprehension = is_kw("for");
    if (comprehension) {
      auto c = make(Op::Comp);
      adopt(*c, std::move(n));
      while (is_kw("for")) {
        ++p_;
        if (peek().kind != Tok::Name) fail("expected a loop variable name");
        detail::Clause cl;
        cl.slot = syms_.slot(peek().text);
        ++p_;
        if (!is_kw("in")) fail("expected 'in'");
        ++p_;
        cl.iter = or_expr();
        while (is_kw("if")) {
          ++p_;
          cl.conds.push_back(or_expr());
        }
        grow(*c, *cl.iter);
        for (auto& cond : cl.conds) grow(*c, *cond);
        c->clauses.push_back(std::move(cl));
      }
      for (auto& cl : c->clauses) free_.erase(cl.slot);
      n = std::move(c);
    }
    free_.merge(outer);
    return n;
  }
  NodePtr atom() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Int:
      case Tok::Float:
      case Tok::Str: {
        auto n = make(Op::Const);
        n->constant = t.value;
        ++p_;
        // Adjacent string literals concatenate.
        while (n->constant.is_str() && peek().kind == Tok::Str) {
          n->constant = Value(n->constant.as_str() + peek().value.as_str());
          ++p_;
        }
        return n;
      }
      case Tok::Name: {
        if (t.text == "True" || t.text == "False" || t.text == "None") {
          auto n = make(Op::Const);
          n->constant = t.text == "None" ? Value() : Value(t.text == "True");
          ++p_;
          return n;
        }
        static const std::set<std::string> reserved = {"and", "or",   "not", "in",     "is",
                                                       "if",  "else", "for", "lambda", "import"};
        if (reserved.count(t.text)) fail("unexpected keyword '" + t.text + "'");
        if (is_op("(", 1)) return call();
        auto n = make(Op::Name);
        n->slot = syms_.slot(t.text);
        free_.insert(n->slot);
        ++p_;
        return n;
      }
      case Tok::Op:
        if (t.text == "(" || t.text == "[") return sequence(t.text == "(" ? ")" : "]");
        fail("unexpected '" + t.text + "'");
      case Tok::End:
        fail("unexpected end of expression");
    }
    fail("unexpected token");
  }
  NodePtr sequence(const char* close) {
    Nest nest(*this);
    bool paren = std::string(close) == ")";
    ++p_;
    auto list = make(Op::List);
    if (is_op(close)) {
      ++p_;
      return list;
    }
    bool comprehension;
    auto first = element_or_comprehension(comprehension);
    if (comprehension) {
      expect(close);
      return first;
    }
    adopt(*list, std::move(first));
    bool tuple = false;
    while (is_op(",")) {
      ++p_;
      tuple = true;
      if (is_op(close)) break;
      adopt(*list, expr());
    }
    expect(close);
    if (paren && !tuple) return std::move(list->kids[0]);  // parenthesised expression
    return list;
  }
  NodePtr call() {
    const std::string name = peek().text;
    auto it = builtins().find(name);
    if (it == builtins().end())
      fail("call of unknown function '" + name +
           "' (allowed: range, min, max, len, int, float, bool, str, abs, sum, round, list)");
    Nest nest(*this);
    p_ += 2;  // name (
    auto n = make(Op::Call);
    n->builtin = it->second;
    if (is_op(")")) {
      ++p_;
      return n;
    }
    bool comprehension;
    adopt(*n, element_or_comprehension(comprehension));
    if (comprehension) {
      expect(")");
      return n;
    }
    while (is_op(",")) {
      ++p_;
      if (is_op(")")) break;
      adopt(*n, expr());
    }
    expect(")");
    return n;
  }
};

}  // namespace

Expr Expr::parse(std::string_view text, Symbols& symbols) {
  Expr e;
  e.text_ = std::string(text);
  std::set<int> free;
  Parser p(text, symbols);
  e.root_ = p.parse_all(free);
  e.free_.assign(free.begin(), free.end());
  e.symbols_ = &symbols;
  return e;
}

}  // namespace gputune
