#include "variants/expr.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gputune
