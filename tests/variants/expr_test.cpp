#include "variants/expr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <typeinfo>

namespace gputune {
namespace {

Value ev(const std::string& s, const std::vector<std::pair<std::string, Value>>& b = {}) {
  return eval_expression(s, b);
}

TEST(Expr, IntegerArithmeticFollowsPython) {
  EXPECT_EQ(ev("7 // 2").as_int(), 3);
  EXPECT_EQ(ev("-7 // 2").as_int(), -4);
  EXPECT_EQ(ev("-7 % 3").as_int(), 2);
  EXPECT_EQ(ev("7 % -3").as_int(), -2);
  EXPECT_EQ(ev("2 ** 10").as_int(), 1024);
  EXPECT_EQ(ev("-2 ** 2").as_int(), -4);       // ** binds tighter than unary minus
  EXPECT_EQ(ev("2 ** 3 ** 2").as_int(), 512);  // right-associative
  EXPECT_EQ(ev("1 + 2 * 3 - 4").as_int(), 3);
  EXPECT_EQ(ev("(262144 // 16) // 3").as_int(), 5461);
}

TEST(Expr, TrueDivisionGivesFloat) {
  Value v = ev("7 / 2");
  ASSERT_TRUE(v.is_float());
  EXPECT_DOUBLE_EQ(v.as_double(), 3.5);
  EXPECT_TRUE(ev("4 / 2").is_float());
  EXPECT_TRUE(ev("2 ** -1").is_float());
}

TEST(Expr, ChainedComparisons) {
  std::vector<std::pair<std::string, Value>> b = {{"x", Value(4)}, {"y", Value(64)}};
  EXPECT_TRUE(ev("32 <= x * y <= 1024", b).truthy());
  b[1].second = Value(512);
  EXPECT_FALSE(ev("32 <= x * y <= 1024", b).truthy());
  EXPECT_TRUE(ev("1 < 2 < 3 != 4", b).truthy());
  EXPECT_FALSE(ev("1 < 3 < 2", b).truthy());
}

TEST(Expr, BooleanOperatorsShortCircuitAndReturnOperands) {
  EXPECT_EQ(ev("0 or 5").as_int(), 5);
  EXPECT_EQ(ev("3 and 5").as_int(), 5);
  EXPECT_EQ(ev("0 and undefined_name").as_int(), 0);  // right side never evaluated
  EXPECT_TRUE(ev("not 0").truthy());
  EXPECT_TRUE(ev("tile > 1 or stride == 0", {{"tile", Value(1)}, {"stride", Value(0)}}).truthy());
}

TEST(Expr, ListsComprehensionsAndRange) {
  Value v = ev("[16*i for i in range(1,9)]");
  ASSERT_TRUE(v.is_list());
  ASSERT_EQ(v.as_list().size(), 8u);
  EXPECT_EQ(v.as_list()[7].as_int(), 128);
  EXPECT_EQ(ev("[2**i for i in range(10) if i % 2 == 0]").str(), "[1, 4, 16, 64, 256]");
  EXPECT_EQ(ev("[i*j for i in range(1,3) for j in range(2)]").str(), "[0, 1, 0, 2]");
  EXPECT_EQ(ev("list(range(10, 0, -3))").str(), "[10, 7, 4, 1]");
  EXPECT_EQ(ev("[1, 2] + [3]").str(), "[1, 2, 3]");
  EXPECT_EQ(ev("[0] * 3").str(), "[0, 0, 0]");
  // Repeating nothing a huge number of times is nothing, at once (expr_fuzz found `n*`
  // looping 2**63 times).
  EXPECT_EQ(ev("'' * 10**18").as_str(), "");
  EXPECT_EQ(ev("10**18 * []").str(), "[]");
  EXPECT_EQ(ev("(1, 2)").str(), "[1, 2]");  // tuples behave as lists
  EXPECT_EQ(ev("[x for x in [3, 1, 2]][1:]").str(), "[1, 2]");
}

TEST(Expr, ComprehensionVariableDoesNotLeakOrShadow) {
  Symbols syms;
  Expr e = Expr::parse("[i for i in range(3)] + [i]", syms);
  Env env(syms);
  env.set(syms.find("i"), Value(42));
  EXPECT_EQ(e.eval(env).str(), "[0, 1, 2, 42]");
  EXPECT_EQ(env.values[static_cast<size_t>(syms.find("i"))].as_int(), 42);
  // The comprehension variable is not a free name; `i` outside it is.
  Symbols s2;
  Expr f = Expr::parse("max(j*2 for j in range(n))", s2);
  ASSERT_EQ(f.free_slots().size(), 1u);
  EXPECT_EQ(s2.name(f.free_slots()[0]), "n");
}

TEST(Expr, BuiltinsAndMembership) {
  EXPECT_EQ(ev("min(3, 1, 2)").as_int(), 1);
  EXPECT_EQ(ev("max([3, 9, 2])").as_int(), 9);
  EXPECT_EQ(ev("max(x for x in range(5))").as_int(), 4);
  EXPECT_EQ(ev("len([1,2,3])").as_int(), 3);
  EXPECT_EQ(ev("int(7.9)").as_int(), 7);
  EXPECT_EQ(ev("int('12')").as_int(), 12);
  EXPECT_DOUBLE_EQ(ev("float(3)").as_double(), 3.0);
  EXPECT_EQ(ev("abs(-4)").as_int(), 4);
  EXPECT_EQ(ev("sum([1, 2, 3])").as_int(), 6);
  EXPECT_TRUE(ev("3 in [1, 2, 3]").truthy());
  EXPECT_TRUE(ev("4 not in [1, 2, 3]").truthy());
  EXPECT_TRUE(ev("'ab' in 'cabd'").truthy());
  EXPECT_EQ(ev("'a' + 'b'").as_str(), "ab");
  EXPECT_EQ(ev("ProblemSize[0] + max(fw) - 1", {{"ProblemSize", Value(List{Value(100), Value(1)})},
                                                {"fw", Value(List{Value(3), Value(7)})}})
                .as_int(),
            106);
  EXPECT_EQ(ev("x if x > 2 else -x", {{"x", Value(1)}}).as_int(), -1);
  EXPECT_EQ(ev("True + True").as_int(), 2);
  EXPECT_TRUE(ev("1 == 1.0 == True").truthy());
}

TEST(Expr, PythonFormattingOfValues) {
  EXPECT_EQ(ev("1.0").str(), "1.0");
  EXPECT_EQ(ev("0.1").str(), "0.1");
  EXPECT_EQ(ev("1e20").str(), "1e+20");
  EXPECT_EQ(ev("1.5e-5").str(), "1.5e-05");
  EXPECT_EQ(ev("True").str(), "True");
  EXPECT_EQ(ev("['a', 1]").str(), "['a', 1]");
  EXPECT_EQ(ev("None").str(), "None");
}

TEST(Expr, SyntaxErrorsNameTheColumn) {
  try {
    ev("1 + * 2");
    FAIL() << "no error";
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("column 5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ev("[1, 2"), ExprError);
  EXPECT_THROW(ev("1 +"), ExprError);
  EXPECT_THROW(ev("'unterminated"), ExprError);
  EXPECT_THROW(ev("a $ b"), ExprError);
}

TEST(Expr, NeverCallsAnythingOutsideTheSubset) {
  // No imports, attribute access or arbitrary calls: these are rejected at parse time.
  EXPECT_THROW(ev("__import__('os').system('true')"), ExprError);
  EXPECT_THROW(ev("open('/etc/passwd')"), ExprError);
  EXPECT_THROW(ev("(1).real"), ExprError);
  EXPECT_THROW(ev("lambda x: x"), ExprError);
}

TEST(Expr, RuntimeErrorsAreReported) {
  EXPECT_THROW(ev("1 // 0"), ExprError);
  EXPECT_THROW(ev("1 % 0"), ExprError);
  EXPECT_THROW(ev("[1][3]"), ExprError);
  EXPECT_THROW(ev("undefined + 1"), ExprError);
  EXPECT_THROW(ev("'a' < 1"), ExprError);
  EXPECT_THROW(ev("max([])"), ExprError);
  try {
    ev("block + 1");
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("name 'block' is not defined"), std::string::npos)
        << e.what();
  }
}

// Python's integers are unbounded; ours are int64, so a result beyond 64 bits must be an error,
// never a silently wrapped value (undefined behaviour in C++, and a wrong space or size).
TEST(Expr, IntegersBeyondSixtyFourBitsAreAnErrorNotAWrap) {
  for (const char* text : {"9223372036854775807 + 1", "-9223372036854775807 - 2", "2**63", "-2**63",
                           "3**40", "4294967296 * 4294967296", "-(-9223372036854775807 - 1)",
                           "(-9223372036854775807 - 1) // -1", "abs(-9223372036854775807 - 1)",
                           "1 << 63", "1 << 64", "3 << 62", "sum([2**62, 2**62])"}) {
    try {
      Value v = ev(text);
      ADD_FAILURE() << text << " gave " << v.str();
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("integer overflow"), std::string::npos) << e.what();
    }
  }
  // The edges themselves still work, and so do results whose intermediate squares would not fit.
  EXPECT_EQ(ev("2**62 - 1 + 2**62").as_int(), INT64_MAX);
  EXPECT_EQ(ev("-2**62 * 2").as_int(), INT64_MIN);
  EXPECT_EQ(ev("2**40").as_int(), std::int64_t{1} << 40);
  EXPECT_EQ(ev("(-1)**63").as_int(), -1);
  EXPECT_EQ(ev("(-9223372036854775807 - 1) % -1").as_int(), 0);
  EXPECT_EQ(ev("(-9223372036854775807 - 1) // 1").as_int(), INT64_MIN);
  EXPECT_EQ(ev("1 << 62").as_int(), std::int64_t{1} << 62);
  EXPECT_EQ(ev("-1 << 62").as_int(), -(std::int64_t{1} << 62));
  EXPECT_EQ(ev("-5 >> 100").as_int(), -1);
  EXPECT_EQ(ev("5 >> 100").as_int(), 0);
  EXPECT_EQ(ev("0 << 1000").as_int(), 0);
  EXPECT_THROW(ev("1 << -1"), ExprError);
  EXPECT_THROW(ev("1 >> -1"), ExprError);
}

TEST(Expr, LiteralsOutsideSixtyFourBitsAreSyntaxErrors) {
  for (const char* text : {"0xFFFFFFFFFFFFFFFFFF", "99999999999999999999", "0x", "1 + 0x"}) {
    try {
      ev(text);
      ADD_FAILURE() << text << " parsed";
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("column"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ev("0x7FFFFFFFFFFFFFFF").as_int(), INT64_MAX);
}

TEST(Expr, FloatsBecomeIntegersOnlyWhereTheyFit) {
  for (const char* text :
       {"int(float('inf'))", "int(float('nan'))", "int(-1e19)", "int(9.3e18)", "round(1e300)"}) {
    try {
      Value v = ev(text);
      ADD_FAILURE() << text << " gave " << v.str();
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot convert float"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ev("int(-2.7)").as_int(), -2);
  EXPECT_EQ(ev("int(-9.2e18)").as_int(), static_cast<std::int64_t>(-9.2e18));
  EXPECT_EQ(ev("round(2.5)").as_int(), 2);
  // Python returns x itself when ndigits is beyond a double's precision, and a signed zero far
  // to the left of the point.
  EXPECT_DOUBLE_EQ(ev("round(1.5, 10**6)").as_double(), 1.5);
  EXPECT_DOUBLE_EQ(ev("round(2.675, 2)").as_double(), 2.68);
  Value z = ev("round(-3.5, -400)");
  EXPECT_EQ(z.as_double(), 0.0);
  EXPECT_TRUE(std::signbit(z.as_double()));
}

// A T1 file is user input: no expression in it may exhaust the machine's memory or hang.
TEST(Expr, ListsStringsAndComprehensionsAreCappedAtTenMillion) {
  for (const char* text : {"'ab' * 10**10", "[1] * 10**10", "[1, 2] * (5 * 10**6 + 1)",
                           "range(-2**62, 2**62)", "range(10**7 + 1)", "range(0, -10**8, -3)",
                           "len([1 for i in range(3163) for j in range(3163) if 0])"}) {
    try {
      Value v = ev(text);
      ADD_FAILURE() << text << " gave a value of length " << v.str().size();
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("10000000"), std::string::npos) << e.what();
    }
  }
  // Ranges at the edges of int64: stepping past the last element would overflow.
  EXPECT_EQ(ev("range(9223372036854775806, 9223372036854775807, 5)").str(),
            "[9223372036854775806]");
  EXPECT_EQ(ev("range(-9223372036854775807 - 1, 9223372036854775807, 2**62)").str(),
            "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]");
  EXPECT_EQ(ev("range(9223372036854775807, -9223372036854775807 - 1, -2**62)").str(),
            "[9223372036854775807, 4611686018427387903, -1, -4611686018427387905]");
  EXPECT_EQ(ev("len('a' * 10**7)").as_int(), 10'000'000);
  EXPECT_EQ(ev("len(range(0, -3 * 10**7, -3))").as_int(), 10'000'000);
  EXPECT_EQ(ev("'ab' * -3").as_str(), "");
  EXPECT_EQ(ev("[1] * 0").str(), "[]");
}

// Every list under the cap, but many of them: one evaluation creates at most 25 million list and
// string elements in all (expr_fuzz's finding 9 built lists of millions in a comprehension until
// it held 3.1 GB). Python-sized work below the budget still evaluates, and the budget is per
// evaluation: the next one starts afresh.
TEST(Expr, OneEvaluationCreatesAtMostTwentyFiveMillionElementsInAll) {
  for (const char* text :
       {"[[0] * 5000000 for i in range(6)]", "[len(list(range(10**7))) for i in range(3)]",
        "[str(range(10**6)) for i in range(30)]", "sum([len('ab' * 4000000) for i in range(4)])",
        "[31*3*[72*2**i for i in range(1*36)]*i for i in range(30*3*[72*2**i for i in range(1*36)]"
        "*i for i in range(ProblemSize[0]*23))]"}) {
    try {
      Value v = eval_expression(text, {{"ProblemSize", Value(List{Value(std::int64_t{4096})})}});
      ADD_FAILURE() << text << " gave a value of length " << v.str().size();
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("more than 25000000 list and string elements in all"),
                std::string::npos)
          << text << ": " << e.what();
    }
  }
  EXPECT_EQ(ev("len([x for x in range(10**7)])").as_int(), 10'000'000);  // 2 x 10^7 created
  EXPECT_EQ(ev("len([x for x in range(10**7)])").as_int(), 10'000'000);  // afresh
  EXPECT_EQ(ev("sum([len([0] * 1000) for i in range(1000)])").as_int(), 1'000'000);
}

TEST(Expr, NestingIsBoundedAndEachBracketIsParsedOnce) {
  // Every bracket used to be parsed twice (once to look for `for`), so 30 nested parentheses took
  // 2^30 parses. Python's tokenizer allows 200 levels; so do we, at once.
  std::string deep = std::string(200, '(') + "1" + std::string(200, ')');
  EXPECT_EQ(ev(deep).as_int(), 1);
  std::string lists = std::string(60, '[') + "x for x in [7]" + std::string(60, ']');
  EXPECT_NE(ev(lists).str().find("7"), std::string::npos);
  // Beyond that, and for chains the evaluator would recurse through, an error and not a crash,
  // with the expression cut short in the message.
  for (const std::string& text :
       {std::string(201, '(') + "1" + std::string(201, ')'),
        std::string(100'000, '[') + std::string(100'000, ']'), std::string(100'000, '-') + "1",
        [] {
          std::string s = "1";
          for (int i = 0; i < 300'000; ++i) s += "+1";
          return s;
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10'000; ++i) s += "not ";
          return s + "1";
        }()}) {
    try {
      ev(text);
      ADD_FAILURE() << text.size() << " characters evaluated";
    } catch (const ExprError& e) {
      std::string m = e.what();
      EXPECT_TRUE(m.find("levels deep") != std::string::npos ||
                  m.find("operations deep") != std::string::npos)
          << m;
      EXPECT_LT(m.size(), 400u) << m;
      EXPECT_NE(m.find("characters)"), std::string::npos) << m;
    }
  }
  std::string chain = "1";
  for (int i = 0; i < 998; ++i) chain += "+1";
  EXPECT_EQ(ev(chain).as_int(), 999);
}

TEST(Expr, NamesBoundByNestedComprehensionsAreNotFree) {
  Symbols syms;
  Expr e = Expr::parse("[[x * y + c for x in range(a)] for y in range(b) if y != d] + [x]", syms);
  std::vector<std::string> free;
  for (int s : e.free_slots()) free.push_back(syms.name(s));
  std::sort(free.begin(), free.end());
  EXPECT_EQ(free, (std::vector<std::string>{"a", "b", "c", "d", "x"}));
  Env env(syms);
  for (auto [name, v] : {std::pair{"a", 2}, {"b", 3}, {"c", 10}, {"d", 1}, {"x", 5}})
    env.set(syms.find(name), Value(v));
  EXPECT_EQ(e.eval(env).str(), "[[10, 10], [10, 12], 5]");
}

// Random token soup, including the literals at the edges of int64 and double: each string either
// evaluates or raises ExprError; nothing else escapes, nothing crashes.
TEST(Expr, RandomTokenSoupEvaluatesOrRaisesExprError) {
  const std::vector<std::string> vocab = {"0",
                                          "1",
                                          "-1",
                                          "2",
                                          "63",
                                          "64",
                                          "9223372036854775807",
                                          "0x7FFFFFFFFFFFFFFF",
                                          "0x",
                                          "1e308",
                                          "1e-320",
                                          "2.5",
                                          "'a'",
                                          "\"\"",
                                          "True",
                                          "None",
                                          "x",
                                          "n",
                                          "+",
                                          "-",
                                          "*",
                                          "/",
                                          "//",
                                          "%",
                                          "**",
                                          "<<",
                                          ">>",
                                          "&",
                                          "|",
                                          "^",
                                          "~",
                                          "<",
                                          "<=",
                                          "==",
                                          "!=",
                                          "in",
                                          "not",
                                          "and",
                                          "or",
                                          "is",
                                          "if",
                                          "else",
                                          "for",
                                          "(",
                                          ")",
                                          "[",
                                          "]",
                                          ",",
                                          ":",
                                          "range",
                                          "min",
                                          "max",
                                          "len",
                                          "int",
                                          "float",
                                          "str",
                                          "abs",
                                          "sum",
                                          "round",
                                          "list",
                                          "10**7",
                                          "10**18"};
  std::mt19937 rng(20261123);
  int evaluated = 0, errors = 0;
  for (int i = 0; i < 20'000; ++i) {
    std::string text;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += vocab[rng() % vocab.size()] + " ";
    try {
      ev(text, {{"x", Value(std::int64_t{3})}, {"n", Value(INT64_MAX)}});
      ++evaluated;
    } catch (const ExprError&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "\"" << text << "\" threw " << typeid(e).name() << ": " << e.what();
    }
  }
  EXPECT_GT(evaluated, 100);  // the soup is not all syntax errors
  EXPECT_GT(errors, 100);
}

}  // namespace
}  // namespace gputune
