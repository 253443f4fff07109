// Tests of the .strata program parser: the six benchmark programs, attributes, nesting,
// one test per kind of bad input (exact location and key words), and random mutations.
#include <gtest/gtest.h>

#include <cstdlib>

#include <random>
#include <regex>

#include "strata/frontend/program_parser.h"

namespace strata {
namespace {

constexpr const char* kFile = "prog.strata";

KernelGraph parse_ok(const std::string& text) {
  auto g = parse_program(text, kFile);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

/// The shape of the program's i-th output.
Shape output_shape(const KernelGraph& g, int i) {
  return g.tensor(g.outputs()[i]).shape;
}

/// The kinds of all non-input ops, in order.
std::vector<OpKind> op_kinds(const KernelGraph& g) {
  std::vector<OpKind> kinds;
  for (const KernelOp& op : g.ops())
    if (op.kind != OpKind::Input) kinds.push_back(op.kind);
  return kinds;
}

// ---- the six benchmark programs of bench/README.md (b = 1) -------------------------------------

const char* kGqa = R"(# grouped-query attention without max-subtraction
input Q: f16[2, 256, 64]
input K: f16[2, 64, 4096]
input V: f16[2, 4096, 64]
S = exp(matmul(Q, K))
O = matmul(div(S, sum(S, dim=2)), V)
output O
)";

const char* kQkNorm = R"(input Q: f16[2, 256, 64]
input K: f16[2, 64, 4096]
input V: f16[2, 4096, 64]
S = exp(matmul(rms_norm(Q), rms_norm(K, dim=1)))   # both over the head dim (64)
O = matmul(div(S, sum(S, dim=2)), V)
output O
)";

const char* kRmsNorm = R"(input X: f16[2, 4096]
input W: f16[4096, 6144]
O = matmul(rms_norm(X), W)
output O
)";

const char* kLora = R"(input X: f16[16, 256]
input W: f16[256, 4096]
input A: f16[256, 16]
input B: f16[16, 4096]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
)";

const char* kGatedMlp = R"(input X: f16[8, 4096]
input W1: f16[4096, 4096]
input W3: f16[4096, 4096]
O = mul(silu(matmul(X, W1)), matmul(X, W3))
output O
)";

const char* kNTrans = R"(input H: f16[1, 4096]
input X: f16[1, 4096]
input A: f16[1, 4096]
O = rms_norm(add(X, mul(A, sub(rms_norm(H), X))))
output O
)";

TEST(ParserBenchmarks, Gqa) {
  KernelGraph g = parse_ok(kGqa);
  EXPECT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(output_shape(g, 0), (Shape{2, 256, 64}));
  EXPECT_EQ(op_kinds(g), (std::vector<OpKind>{OpKind::Matmul, OpKind::Exp, OpKind::Sum, OpKind::Div,
                                              OpKind::Matmul}));
  EXPECT_EQ(g.tensor(g.find_tensor("S")).shape, (Shape{2, 256, 4096}));
  const KernelOp& sum = g.op(5);
  ASSERT_EQ(sum.kind, OpKind::Sum);
  EXPECT_EQ(sum.attrs.dim, 2);
  EXPECT_EQ(g.tensor(sum.outputs[0]).shape, (Shape{2, 256, 1}));
}

TEST(ParserBenchmarks, QkNorm) {
  KernelGraph g = parse_ok(kQkNorm);
  EXPECT_EQ(output_shape(g, 0), (Shape{2, 256, 64}));
  std::vector<OpKind> kinds = op_kinds(g);
  ASSERT_EQ(kinds.size(), 7u);
  EXPECT_EQ(kinds[0], OpKind::RmsNorm);
  EXPECT_EQ(kinds[1], OpKind::RmsNorm);
  EXPECT_EQ(g.op(3).attrs.dim, 2);  // rms_norm(Q): default dim -1 of a rank-3 tensor
  EXPECT_EQ(g.op(4).attrs.dim, 1);  // rms_norm(K, dim=1)
}

TEST(ParserBenchmarks, RmsNorm) {
  KernelGraph g = parse_ok(kRmsNorm);
  EXPECT_EQ(output_shape(g, 0), (Shape{2, 6144}));
  EXPECT_EQ(op_kinds(g), (std::vector<OpKind>{OpKind::RmsNorm, OpKind::Matmul}));
  EXPECT_EQ(g.op(2).attrs.dim, 1);
  EXPECT_EQ(g.tensor(g.outputs()[0]).name, "O");
  EXPECT_EQ(g.tensor(g.op(2).outputs[0]).name, "");  // nested call: unnamed
}

TEST(ParserBenchmarks, Lora) {
  KernelGraph g = parse_ok(kLora);
  EXPECT_EQ(output_shape(g, 0), (Shape{16, 4096}));
  EXPECT_EQ(op_kinds(g),
            (std::vector<OpKind>{OpKind::Matmul, OpKind::Matmul, OpKind::Matmul, OpKind::Add}));
}

TEST(ParserBenchmarks, GatedMlp) {
  KernelGraph g = parse_ok(kGatedMlp);
  EXPECT_EQ(output_shape(g, 0), (Shape{8, 4096}));
  EXPECT_EQ(op_kinds(g),
            (std::vector<OpKind>{OpKind::Matmul, OpKind::Silu, OpKind::Matmul, OpKind::Mul}));
}

TEST(ParserBenchmarks, NTrans) {
  KernelGraph g = parse_ok(kNTrans);
  EXPECT_EQ(output_shape(g, 0), (Shape{1, 4096}));
  EXPECT_EQ(op_kinds(g), (std::vector<OpKind>{OpKind::RmsNorm, OpKind::Sub, OpKind::Mul,
                                              OpKind::Add, OpKind::RmsNorm}));
  // sub(rms_norm(H), X): the nested rms_norm feeds sub's first operand
  const KernelOp& sub = g.op(4);
  EXPECT_EQ(sub.inputs[0], g.op(3).outputs[0]);
  EXPECT_EQ(sub.inputs[1], g.find_tensor("X"));
}

// ---- attributes, nesting, statements ---------------------------------------------------

TEST(Parser, InputsKeepDtypesAndOrder) {
  KernelGraph g = parse_ok(
      "input A: f32[3]\ninput B: bf16[1, 2, 3, 4]\ninput C: f16[7, 5]\n"
      "D = exp(B)\noutput D\n");
  ASSERT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(g.tensor(g.inputs()[0]).dtype, DType::f32);
  EXPECT_EQ(g.tensor(g.inputs()[1]).shape, (Shape{1, 2, 3, 4}));
  EXPECT_EQ(g.tensor(g.inputs()[1]).dtype, DType::bf16);
  EXPECT_EQ(g.tensor(g.inputs()[2]).name, "C");
  EXPECT_EQ(g.tensor(g.outputs()[0]).dtype, DType::bf16);  // follows its input
}

TEST(Parser, ReduceAttributes) {
  KernelGraph g = parse_ok(R"(input X: f16[4, 8, 16]
A = sum(X, dim=2)
B = sum(X, 2)
C = sum(X, dim=-1, to=4)
D = mean(X, 1)
E = mean(X, dim=-2, to=2)
F = sum(X, to=8, dim=1)
G = sum(x=X, dim=0)
output A, B, C, D, E, F, G
)");
  auto attrs = [&](const char* n) { return g.op(g.tensor(g.find_tensor(n)).producer).attrs; };
  EXPECT_EQ(attrs("A").dim, 2);
  EXPECT_EQ(attrs("A").to, 1);
  EXPECT_EQ(attrs("B").dim, 2);
  EXPECT_EQ(attrs("C").dim, 2);
  EXPECT_EQ(attrs("C").to, 4);
  EXPECT_EQ(g.tensor(g.find_tensor("C")).shape, (Shape{4, 8, 4}));
  EXPECT_EQ(g.op(g.tensor(g.find_tensor("D")).producer).kind, OpKind::Mean);
  EXPECT_EQ(g.tensor(g.find_tensor("D")).shape, (Shape{4, 1, 16}));
  EXPECT_EQ(attrs("E").dim, 1);
  EXPECT_EQ(g.tensor(g.find_tensor("E")).shape, (Shape{4, 2, 16}));
  EXPECT_EQ(g.tensor(g.find_tensor("F")).shape, (Shape{4, 8, 16}));
  EXPECT_EQ(g.tensor(g.find_tensor("G")).shape, (Shape{1, 8, 16}));
}

TEST(Parser, NormConcatAndScalarAttributes) {
  KernelGraph g = parse_ok(R"(input X: f16[4, 8]
input Y: f16[4, 2]
N1 = rms_norm(X)
N2 = rms_norm(X, dim=0)
N3 = rms_norm(X, 0)
C1 = concat(X, Y, dim=1)
C2 = concat(X, Y, -1)
S1 = mul_scalar(X, 0.5)
S2 = mul_scalar(X, scalar=1e-3)
S3 = mul_scalar(X, c=-2.5)
S4 = mul_scalar(X, 3)
S5 = mul_scalar(X, +.25)
output N1, N2, N3, C1, C2, S1, S2, S3, S4, S5
)");
  auto attrs = [&](const char* n) { return g.op(g.tensor(g.find_tensor(n)).producer).attrs; };
  EXPECT_EQ(attrs("N1").dim, 1);
  EXPECT_EQ(attrs("N2").dim, 0);
  EXPECT_EQ(attrs("N3").dim, 0);
  EXPECT_EQ(g.tensor(g.find_tensor("C1")).shape, (Shape{4, 10}));
  EXPECT_EQ(attrs("C2").dim, 1);
  EXPECT_DOUBLE_EQ(attrs("S1").scalar, 0.5);
  EXPECT_DOUBLE_EQ(attrs("S2").scalar, 1e-3);
  EXPECT_DOUBLE_EQ(attrs("S3").scalar, -2.5);
  EXPECT_DOUBLE_EQ(attrs("S4").scalar, 3.0);
  EXPECT_DOUBLE_EQ(attrs("S5").scalar, 0.25);
  EXPECT_EQ(g.outputs().size(), 10u);
}

TEST(Parser, NestedCallsCommentsAndLayout) {
  KernelGraph g = parse_ok(
      "# leading comment\r\n"
      "\r\n"
      "   input X: f16[2,8]   # trailing comment, with φ and ∑\r\n"
      "input\tW :f16 [ 8 , 4 ]\n"
      "\n"
      "O = matmul(mul_scalar(rms_norm(X), scalar=2), W)#no space\n"
      "output O");
  EXPECT_EQ(output_shape(g, 0), (Shape{2, 4}));
  EXPECT_EQ(op_kinds(g), (std::vector<OpKind>{OpKind::RmsNorm, OpKind::MulScalar, OpKind::Matmul}));
  // the two nested results are unnamed; the assignment names the outermost call
  EXPECT_EQ(g.tensor(g.op(2).outputs[0]).name, "");
  EXPECT_EQ(g.tensor(g.op(3).outputs[0]).name, "");
  EXPECT_EQ(g.tensor(g.op(4).outputs[0]).name, "O");
}

TEST(Parser, OutputOrderAcrossStatements) {
  KernelGraph g = parse_ok(R"(input X: f16[4]
A = exp(X)
output A
B = sqrt(X)
output X, B
)");
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.tensor_name(g.outputs()[0]), "A");
  EXPECT_EQ(g.tensor_name(g.outputs()[1]), "X");
  EXPECT_EQ(g.tensor_name(g.outputs()[2]), "B");
}

TEST(Parser, NamesMayShadowOpNamesAndUseGeneratedFormWhenFree) {
  // op names are not reserved; `t5` is fine when no unnamed tensor has id 5
  KernelGraph g = parse_ok("input exp: f16[4]\nt5 = exp(exp)\nsum = sum(t5, 0)\noutput sum\n");
  EXPECT_EQ(output_shape(g, 0), (Shape{1}));
}

TEST(Parser, DeepNestingWithinTheLimit) {
  std::string rhs = "X";
  for (int i = 0; i < 64; ++i) rhs = "exp(" + rhs + ")";
  KernelGraph g = parse_ok("input X: f16[4]\nO = " + rhs + "\noutput O\n");
  EXPECT_EQ(op_kinds(g).size(), 64u);
}

// ---- bad inputs: one test per case, exact location and key words --------------------------

/// Parses `text`, expects an error starting with `prog.strata:<line>:<col>: error: ` and
/// containing every one of `words`.
void expect_error(const std::string& text, int line, int col,
                  std::initializer_list<const char*> words) {
  auto g = parse_program(text, kFile);
  ASSERT_FALSE(g.ok()) << "parsed unexpectedly:\n" << text;
  const std::string& msg = g.error().message;
  std::string where =
      std::string(kFile) + ":" + std::to_string(line) + ":" + std::to_string(col) + ": error: ";
  EXPECT_EQ(msg.rfind(where, 0), 0u) << "expected location " << where << " in: " << msg;
  EXPECT_NE(msg.find("; expected"), std::string::npos) << msg;
  for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << w << " in: " << msg;
}

const std::string kXW = "input X: f16[2, 4096]\ninput W: f16[4096, 6144]\n";

TEST(ParserErrors, UnknownOpSuggestsClosest) {
  expect_error(kXW + "O = matmull(X, W)\noutput O\n", 3, 5,
               {"unknown op `matmull`", "did you mean `matmul`"});
  expect_error(kXW + "O = rmsnorm(X)\noutput O\n", 3, 5, {"did you mean `rms_norm`"});
}

TEST(ParserErrors, UnknownOpWithoutCloseMatchListsOps) {
  expect_error(kXW + "O = frobnicate(X)\noutput O\n", 3, 5,
               {"unknown op `frobnicate`", "matmul", "rms_norm", "concat"});
}

TEST(ParserErrors, NonProgramOps) {
  expect_error(kXW + "O = accum_rms_ld(X)\noutput O\n", 3, 5,
               {"`accum_rms_ld`", "not a program op"});
  expect_error(kXW + "O = customized(X)\noutput O\n", 3, 5, {"`customized`"});
  expect_error(kXW + "O = thread_graph(X)\noutput O\n", 3, 5, {"`thread_graph`"});
  expect_error(kXW + "O = input(X)\noutput O\n", 3, 5, {"`input` is a statement"});
}

TEST(ParserErrors, UndefinedName) {
  expect_error(kXW + "O = matmul(X, V)\noutput O\n", 3, 15, {"undefined name `V`"});
  expect_error(kXW + "O = matmul(Xx, W)\noutput O\n", 3, 12,
               {"undefined name `Xx`", "did you mean `X`"});
  // a name is defined only after its statement
  expect_error("input X: f16[4]\nA = add(X, A)\noutput A\n", 2, 12, {"undefined name `A`"});
}

TEST(ParserErrors, DuplicateInputName) {
  expect_error("input X: f16[4]\ninput X: f32[4]\n", 2, 7,
               {"duplicate name `X`", "line 1, column 7"});
}

TEST(ParserErrors, DuplicateAssignedName) {
  expect_error(kXW + "Y = exp(X)\n  Y = exp(X)\noutput Y\n", 4, 3,
               {"duplicate name `Y`", "line 3, column 1"});
  expect_error(kXW + "W = exp(X)\noutput W\n", 3, 1, {"duplicate name `W`"});
}

TEST(ParserErrors, ReservedWordsAsNames) {
  expect_error(kXW + "output = exp(X)\n", 3, 1, {"`output` is a reserved word"});
  expect_error("input input: f16[4]\n", 1, 7, {"`input` is a reserved word"});
}

TEST(ParserErrors, GeneratedNameCollision) {
  expect_error(kXW + "t2 = exp(exp(X))\noutput t2\n", 3, 1,
               {"`t2`", "generated name of an unnamed intermediate"});
}

TEST(ParserErrors, TooFewTensorArguments) {
  expect_error(kXW + "O = add(X)\noutput O\n", 3, 5,
               {"found 1 tensor argument", "`add`", "expected 2", "add(a, b)"});
  expect_error(kXW + "O = exp()\noutput O\n", 3, 5, {"found 0 tensor arguments", "exp(x)"});
}

TEST(ParserErrors, TooManyArguments) {
  expect_error(kXW + "O = exp(X, W)\noutput O\n", 3, 12, {"extra argument", "exp(x)"});
  expect_error(kXW + "O = sum(X, 1, 1, 1)\noutput O\n", 3, 18,
               {"extra argument", "sum(x, dim, to=1)"});
}

TEST(ParserErrors, MissingRequiredAttribute) {
  expect_error(kXW + "O = sum(X)\noutput O\n", 3, 5,
               {"missing argument `dim`", "sum(x, dim, to=1)"});
  expect_error(kXW + "O = concat(X, X)\noutput O\n", 3, 5, {"missing argument `dim`"});
  expect_error(kXW + "O = mul_scalar(X)\noutput O\n", 3, 5, {"missing argument `scalar`"});
}

TEST(ParserErrors, UnknownKeywordArgument) {
  expect_error(kXW + "O = sum(X, dims=1)\noutput O\n", 3, 12,
               {"unknown keyword argument `dims`", "x, dim, to"});
  expect_error(kXW + "O = mul_scalar(X, k=2)\noutput O\n", 3, 19, {"scalar (or c)"});
}

TEST(ParserErrors, KeywordGivenTwice) {
  expect_error(kXW + "O = sum(X, 1, dim=0)\noutput O\n", 3, 15, {"`dim`", "given twice"});
}

TEST(ParserErrors, PositionalAfterKeyword) {
  expect_error(kXW + "O = sum(X, dim=1, 4)\noutput O\n", 3, 19,
               {"positional argument after a keyword"});
}

TEST(ParserErrors, WrongArgumentTypes) {
  expect_error(kXW + "O = exp(3)\noutput O\n", 3, 9, {"number `3`", "tensor name"});
  expect_error(kXW + "O = sum(X, W)\noutput O\n", 3, 12, {"name `W`", "`dim`", "an integer"});
  expect_error(kXW + "O = sum(X, 1.5)\noutput O\n", 3, 12, {"number `1.5`", "an integer"});
  expect_error(kXW + "O = sum(X, dim=exp(X))\noutput O\n", 3, 16, {"call to `exp`"});
  expect_error(kXW + "O = mul_scalar(X, W)\noutput O\n", 3, 19, {"name `W`", "a number"});
}

TEST(ParserErrors, BadDtype) {
  expect_error("input X: f64[4]\n", 1, 10, {"unknown dtype `f64`", "f16, bf16 or f32"});
  expect_error("input X: [4]\n", 1, 10, {"found `[`", "a dtype"});
}

TEST(ParserErrors, NonPositiveDims) {
  expect_error("input X: f16[4, 0]\n", 1, 17, {"dimension 0 is not positive"});
  expect_error("input X: f16[-3]\n", 1, 14, {"dimension -3 is not positive"});
  expect_error("input X: f16[2.5]\n", 1, 14, {"number `2.5`", "positive integer"});
}

TEST(ParserErrors, TooManyOrNoDims) {
  expect_error("input X: f16[1, 2, 3, 4, 5]\n", 1, 26, {"at most 4 dimensions"});
  expect_error("input X: f16[]\n", 1, 14, {"found `]`", "positive integer extent"});
}

TEST(ParserErrors, MalformedInputStatement) {
  expect_error("input X f16[4]\n", 1, 9, {"expected `:`"});
  expect_error("input X: f16 4\n", 1, 14, {"expected `[`"});
  expect_error("input X: f16[4\n", 1, 15, {"found end of line", "`,` or `]`"});
  expect_error("input X: f16[4] 5\n", 1, 17, {"after the end of the statement"});
  expect_error("input X: f16[4 4]\n", 1, 16, {"`,` or `]`"});
}

TEST(ParserErrors, HugeTensors) {
  expect_error("input X: f16[99999999999999999999]\n", 1, 14, {"out of range"});
  expect_error("input X: f16[16777216, 16777216, 2]\n", 1, 7, {"2^48 elements"});
  expect_error(
      "input A: f16[33554432, 8]\ninput B: f16[8, 33554432]\n"
      "C = matmul(A, B)\noutput C\n",
      3, 5, {"2^48 elements", "`matmul`"});
}

TEST(ParserErrors, ShapeMismatchAtTheCall) {
  expect_error(kXW + "O = matmul(W, X)\noutput O\n", 3, 5,
               {"`matmul`", "inner dimensions differ", "[4096, 6144]", "[2, 4096]",
                "; expected A[..., m, k] × B[..., k, n]"});
  expect_error(kXW + "O = add(X, W)\noutput O\n", 3, 5, {"`add`", "do not broadcast"});
  expect_error(kXW + "O = exp(concat(X, W, dim=0))\noutput O\n", 3, 9,
               {"`concat`", "differ in another dimension"});
  expect_error(kXW + "O = sum(X, dim=2)\noutput O\n", 3, 5, {"`sum`", "out of range"});
  expect_error(kXW + "O = sum(X, 1, to=3)\noutput O\n", 3, 5, {"cannot reduce", "to 3"});
  expect_error("input V: f16[8]\nO = matmul(V, V)\noutput O\n", 2, 5, {"rank ≥ 2"});
}

TEST(ParserErrors, OutputOfUnknownName) {
  expect_error(kXW + "O = exp(X)\noutput O, P\n", 4, 11, {"undefined name `P`"});
}

TEST(ParserErrors, OutputTwiceAndMalformedOutput) {
  expect_error(kXW + "output X\noutput X\n", 4, 8, {"already an output"});
  expect_error(kXW + "output X,\n", 3, 10, {"found end of line", "name of a tensor"});
  expect_error(kXW + "output\n", 3, 7, {"found end of line"});
  expect_error(kXW + "output X W\n", 3, 10, {"found name `W`", "`,` or end of line"});
  expect_error(kXW + "output exp(X)\n", 3, 8, {"found a call to `exp`", "tensor name"});
  expect_error(kXW + "output 3\n", 3, 8, {"number `3`"});
}

TEST(ParserErrors, NoOutput) {
  expect_error(kXW + "O = exp(X)\n", 4, 1, {"without an `output` statement"});
  expect_error(kXW + "O = exp(X)", 3, 11, {"without an `output` statement"});
  expect_error("", 1, 1, {"without an `output` statement"});
  expect_error("# only a comment\n", 2, 1, {"without an `output` statement"});
}

TEST(ParserErrors, TrailingGarbage) {
  expect_error(kXW + "O = exp(X) X\noutput O\n", 3, 12, {"found name `X` after the end"});
  expect_error(kXW + "O = exp(X))\noutput O\n", 3, 11, {"found `)` after the end"});
}

TEST(ParserErrors, UnterminatedCall) {
  expect_error(kXW + "O = matmul(X, W\noutput O\n", 3, 16,
               {"unterminated call", "`matmul` opened at column 11"});
  expect_error(kXW + "O = exp(\noutput O\n", 3, 9, {"unterminated call"});
  expect_error(kXW + "O = sum(X, dim=\noutput O\n", 3, 16, {"after `dim=`"});
  expect_error(kXW + "O = exp(X W)\noutput O\n", 3, 11, {"found name `W`", "`,` or `)`"});
}

TEST(ParserErrors, NumberWhereANameWasExpected) {
  expect_error("input 3: f16[4]\n", 1, 7, {"number `3`", "the input's name"});
  expect_error(kXW + "3 = exp(X)\noutput X\n", 3, 1, {"number `3`", "a statement"});
  expect_error(kXW + "O = 3\noutput O\n", 3, 5, {"number `3`", "an op call"});
}

TEST(ParserErrors, MalformedStatements) {
  expect_error(kXW + "exp(X)\n", 3, 1, {"not assigned", "`NAME = exp(...)`"});
  expect_error(kXW + "O exp(X)\n", 3, 3, {"after `O`", "`=`"});
  expect_error(kXW + "O = X\noutput O\n", 3, 5, {"found name `X`", "an op call"});
  expect_error(kXW + "= exp(X)\n", 3, 1, {"found `=`", "a statement"});
  expect_error(kXW + "O = (X)\n", 3, 5, {"found `(`"});
  expect_error(kXW + "O = exp(X,)\noutput O\n", 3, 11, {"found `)`"});
}

TEST(ParserErrors, BadCharactersAndNumbers) {
  expect_error(kXW + "O = X - W\n", 3, 7, {"unexpected character `-`", "sub(a, b)"});
  expect_error(kXW + "O = sum(X, 2x)\noutput O\n", 3, 12, {"malformed number `2x`"});
  expect_error(kXW + "O = mul_scalar(X, 1e999)\noutput O\n", 3, 19, {"out of range"});
  // columns count code points: `φ` is one column
  expect_error("# φ\ninput φX: f16[4]\n", 2, 7, {"unexpected character `φ`"});
  expect_error(std::string("input X: f16[4]\x01\n"), 1, 16, {"byte 0x01"});
}

// A scalar never changes silently: subnormal values are parsed exactly, values that would
// round to zero or overflow are errors.
TEST(Parser, SubnormalScalarsAreExact) {
  for (const char* lit : {"4e-320", "-4.9e-324", "2.2250738585072014e-308", "1e-310", "0e-999"}) {
    auto g = parse_program(kXW + "O = mul_scalar(X, " + lit + ")\noutput O\n", kFile);
    ASSERT_TRUE(g.ok()) << lit << ": " << g.error().message;
    EXPECT_EQ(g->op(2).attrs.scalar, std::strtod(lit, nullptr)) << lit;
  }
  auto sub = parse_program(kXW + "O = mul_scalar(X, 4e-320)\noutput O\n", kFile);
  EXPECT_NE(sub->op(2).attrs.scalar, 0.0);
}

TEST(ParserErrors, ScalarsThatWouldBecomeZeroOrInfinity) {
  expect_error(kXW + "O = mul_scalar(X, 1e-400)\noutput O\n", 3, 19,
               {"number `1e-400` is too small to represent (it would become 0)"});
  expect_error(kXW + "O = mul_scalar(X, -2e-324)\noutput O\n", 3, 19, {"too small"});
  expect_error(kXW + "O = mul_scalar(X, 1.8e308)\noutput O\n", 3, 19, {"out of range"});
}

TEST(Parser, ByteOrderMarkAtTheStartIsSkipped) {
  auto g = parse_program("\xEF\xBB\xBFinput X: f16[4]\nY = exp(X)\noutput Y\n", kFile);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->tensor_name(g->inputs()[0]), "X");
  // columns count from after the mark
  expect_error("\xEF\xBB\xBFinput X: f64[4]\n", 1, 10, {"unknown dtype `f64`"});
  // elsewhere it is a character like any other
  expect_error("input X: f16[4]\n\xEF\xBB\xBFY = exp(X)\n", 2, 1, {"unexpected character"});
}

TEST(ParserErrors, NestingTooDeep) {
  std::string rhs;
  for (int i = 0; i < 100000; ++i) rhs += "exp(";
  rhs += "X";
  expect_error("input X: f16[4]\nO = " + rhs + "\n", 2, 5 + 4 * 64, {"nested more than 64"});
}

// ---- robustness: random mutations never crash ---------------------------------------------

/// Applies 1-4 random edits (character and token insertions, deletions, replacements, line
/// swaps and deletions, truncation) to `text`.
std::string mutate(std::string text, std::mt19937& rng) {
  static const std::string alphabet = "()[],:=#\n\t -+.0123456789eEXYZWabcdfimnostu_\xcf\x86\x01";
  static const std::vector<std::string> tokens = {
      "input ",    "output ",     "sum(",   "concat(", "matmul(",
      "rms_norm(", ")",           "(",      ",",       "dim=",
      "to=",       "scalar=",     "-1",     "0",       "1e309",
      "t3",        "f16[",        "]",      "X",       "=",
      "#",         "mul_scalar(", "accum(", "\n",      "99999999999999999999",
      "[2, 4]"};
  auto pick = [&](size_t n) {
    return n == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    size_t pos = pick(text.size() + 1);
    switch (pick(8)) {
      case 0:
        if (!text.empty() && pos < text.size()) text.erase(pos, 1);
        break;
      case 1:
        text.insert(pos, 1, alphabet[pick(alphabet.size())]);
        break;
      case 2:
        if (pos < text.size()) text[pos] = alphabet[pick(alphabet.size())];
        break;
      case 3:
        text.insert(pos, tokens[pick(tokens.size())]);
        break;
      case 4: {  // duplicate a slice
        size_t len = pick(20);
        text.insert(pick(text.size() + 1), text.substr(pos, len));
        break;
      }
      case 5:
        text.resize(pos);
        break;
      case 6: {  // delete a line
        size_t start = text.rfind('\n', pos == 0 ? 0 : pos - 1);
        start = start == std::string::npos ? 0 : start;
        size_t end = text.find('\n', pos);
        text.erase(start, end == std::string::npos ? std::string::npos : end - start);
        break;
      }
      default: {  // swap two lines
        std::vector<std::string> lines;
        size_t s = 0;
        while (s <= text.size()) {
          size_t n = text.find('\n', s);
          if (n == std::string::npos) n = text.size();
          lines.push_back(text.substr(s, n - s));
          s = n + 1;
        }
        std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
        text.clear();
        for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
      }
    }
  }
  return text;
}

TEST(ParserFuzz, MutatedProgramsParseOrFailWithALocatedError) {
  const std::vector<std::string> seeds = {
      kGqa,
      kQkNorm,
      kRmsNorm,
      kLora,
      kGatedMlp,
      kNTrans,
      "input X: f16[4, 8, 16]\nA = sum(X, dim=-1, to=4)\nB = mean(X, 1)\n"
      "C = concat(A, A, dim=2)\nD = mul_scalar(rms_norm(C, dim=0), c=-2.5e-1)\noutput D, B\n"};
  const std::regex located(R"(^prog\.strata:(\d+):(\d+): error: .+; expected .+)");
  std::mt19937 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = mutate(seeds[i % seeds.size()], rng);
    auto g = parse_program(text, kFile);
    if (g.ok()) {
      ++parsed;
      EXPECT_FALSE(g->outputs().empty());
      continue;
    }
    ++rejected;
    std::smatch m;
    const std::string& msg = g.error().message;
    ASSERT_TRUE(std::regex_search(msg, m, located))
        << "unlocated message: " << msg << "\nfor program:\n"
        << text;
    int line = std::stoi(m[1]);
    int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    EXPECT_GE(line, 1);
    EXPECT_LE(line, lines) << msg;
    EXPECT_GE(std::stoi(m[2]), 1);
  }
  // the mutations must exercise both outcomes
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 1000);
}

TEST(ParserFuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string text(std::uniform_int_distribution<size_t>(0, 200)(rng), '\0');
    for (char& c : text) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    auto g = parse_program(text, kFile);
    ASSERT_FALSE(g.ok());  // random bytes never form a program with an output
    EXPECT_EQ(g.error().message.rfind("prog.strata:", 0), 0u) << g.error().message;
  }
}

/// The signatures front ends read (docs/python.md) are the ones the parser binds to.
TEST(ProgramOpSignature, MatchesWhatTheParserAccepts) {
  for (const OpInfo& info : op_table()) {
    auto sig = program_op_signature(info.kind);
    if (!is_program_op(info.kind)) {
      EXPECT_TRUE(sig.empty()) << info.name;
      continue;
    }
    ASSERT_FALSE(sig.empty()) << info.name;
    int tensors = 0;
    for (const ProgramParam& p : sig) tensors += p.kind == ProgramParam::Kind::Tensor;
    if (info.arity >= 0) EXPECT_EQ(tensors, info.arity) << info.name;
    EXPECT_EQ(program_op_signature_text(info.kind).rfind(std::string(info.name) + "(", 0), 0u);
  }
  auto sum = program_op_signature(OpKind::Sum);
  ASSERT_EQ(sum.size(), 3u);
  EXPECT_EQ(sum[1].name, "dim");
  EXPECT_EQ(sum[1].kind, ProgramParam::Kind::Int);
  EXPECT_TRUE(sum[1].required);
  EXPECT_EQ(sum[2].name, "to");
  EXPECT_FALSE(sum[2].required);
  EXPECT_EQ(sum[2].default_value, 1);
  auto ms = program_op_signature(OpKind::MulScalar);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[1].kind, ProgramParam::Kind::Real);
  EXPECT_EQ(ms[1].alias, "c");
  EXPECT_EQ(program_op_signature_text(OpKind::Sum), "sum(x, dim, to=1)");
  // Every keyword of a signature is accepted by the parser for that op.
  std::string text = "input X: f32[4, 8]\nO = sum(X, dim=1, to=2)\noutput O\n";
  EXPECT_TRUE(parse_program(text, kFile).ok());
}

}  // namespace
}  // namespace strata
