// Tests of the access plans of predefined elementwise kernels (src/codegen/elementwise_access.h)
// and of the kernels emit_predefined_kernel writes from them: coalesced dims, vector widths,
// index widths and launches, checked on the emitted statements without running them. Their
// results on the CPU emulator: codegen_emulation_test (PredefinedElementwiseVectors).
#include <gtest/gtest.h>

#include "codegen/elementwise_access.h"
#include "codegen/predefined_emitter.h"
#include "support/kernel_ir.h"

namespace strata::testing {
namespace {

using codegen::elementwise_access;
using codegen::ElementwiseAccess;
using codegen::index_fits_int32;

ElementwiseAccess access(const Shape& out, int out_size, const std::vector<Shape>& in,
                         const std::vector<int>& sizes) {
  return elementwise_access(out, out_size, in, sizes);
}

TEST(ElementwiseAccess, CoalescesDimsOfOneBroadcastPattern) {
  // A bias along the rows: the row dims stay apart from the columns.
  ElementwiseAccess a = access(Shape{512, 3072}, 2, {Shape{512, 3072}, Shape{3072}}, {2, 2});
  EXPECT_EQ(a.out, (Shape{512, 3072}));
  EXPECT_EQ(a.operands[0], (Shape{512, 3072}));
  EXPECT_EQ(a.operands[1], (Shape{1, 3072}));
  // Leading dims read alike merge; extent-1 dims drop.
  a = access(Shape{2, 1, 8, 64}, 2, {Shape{2, 1, 8, 64}, Shape{64}}, {2, 2});
  EXPECT_EQ(a.out, (Shape{16, 64}));
  EXPECT_EQ(a.operands[1], (Shape{1, 64}));
  // A middle dim broadcast stays a dim of its own.
  a = access(Shape{4, 8, 64}, 2, {Shape{4, 8, 64}, Shape{4, 1, 64}}, {2, 2});
  EXPECT_EQ(a.out, (Shape{4, 8, 64}));
  EXPECT_EQ(a.operands[1], (Shape{4, 1, 64}));
  // Two operands broadcast along different dims.
  a = access(Shape{4, 8, 64}, 2, {Shape{4, 8, 1}, Shape{64}}, {2, 2});
  EXPECT_EQ(a.out, (Shape{32, 64}));
  EXPECT_EQ(a.operands[0], (Shape{32, 1}));
  EXPECT_EQ(a.operands[1], (Shape{1, 64}));
  // A unary op reads its output's whole extent: one dim, whatever the extents.
  a = access(Shape{1000, 37}, 2, {Shape{1000, 37}}, {2});
  EXPECT_EQ(a.out, (Shape{37000}));
  EXPECT_EQ(a.operands[0], a.out);
  // A single element (rank 0).
  a = access(Shape{}, 4, {Shape{}, Shape{1}}, {4, 4});
  EXPECT_EQ(a.out, (Shape{1}));
  EXPECT_EQ(a.operands[1], (Shape{1}));
  EXPECT_EQ(a.vector, 1);
}

TEST(ElementwiseAccess, VectorWidthFollowsTheInnermostExtentAndTheTypes) {
  auto width = [](Shape out, int out_size, std::vector<Shape> in, std::vector<int> sizes) {
    return access(out, out_size, in, sizes).vector;
  };
  // 16 bytes of the smallest type read along the innermost dim, when the extent allows.
  EXPECT_EQ(width(Shape{512, 3072}, 2, {Shape{512, 3072}, Shape{3072}}, {2, 2}), 8);
  EXPECT_EQ(width(Shape{512, 3072}, 4, {Shape{512, 3072}, Shape{3072}}, {4, 4}), 4);
  EXPECT_EQ(width(Shape{16, 36}, 2, {Shape{16, 36}, Shape{36}}, {2, 4}), 4);  // 36 = 4 · 9
  EXPECT_EQ(width(Shape{16, 32}, 4, {Shape{16, 32}, Shape{16, 32}}, {4, 2}), 8);
  // An operand broadcast along the innermost dim does not count: f32 output, f16 column.
  EXPECT_EQ(width(Shape{16, 32}, 4, {Shape{16, 32}, Shape{16, 1}}, {4, 2}), 4);
  // Narrower vectors for extents that allow only those, one element for odd ones.
  EXPECT_EQ(width(Shape{6, 20}, 2, {Shape{6, 20}, Shape{20}}, {2, 2}), 4);
  EXPECT_EQ(width(Shape{5, 6}, 2, {Shape{5, 6}, Shape{5, 1}}, {2, 2}), 2);
  EXPECT_EQ(width(Shape{1000, 37}, 2, {Shape{1000, 37}, Shape{37}}, {2, 2}), 1);
  EXPECT_EQ(width(Shape{8, 4097}, 2, {Shape{8, 4097}, Shape{8, 1}}, {2, 2}), 1);
  EXPECT_EQ(width(Shape{8, 4097}, 2, {Shape{8, 4097}}, {2}), 8);  // 32776 elements in one dim
  EXPECT_EQ(width(Shape{3, 5, 7}, 4, {Shape{3, 5, 7}}, {4}), 1);
}

TEST(ElementwiseAccess, IndexFitsInt32WithTheLoopsLastStep) {
  constexpr int64_t k31 = int64_t{1} << 31, stride = int64_t{1} << 20;
  EXPECT_TRUE(index_fits_int32(k31 - stride, stride, k31));
  EXPECT_FALSE(index_fits_int32(k31 - stride + 1, stride, k31));  // the last v += stride
  EXPECT_TRUE(index_fits_int32(k31 / 8, stride, k31));            // vectors of 8
  EXPECT_FALSE(index_fits_int32(k31 / 8, stride, k31 + 1));       // an element offset
}

/// A graph of one op of `kind` on inputs of `shapes` (all of type `t`), its kernel emitted by
/// emit_predefined_kernel.
struct Emitted {
  ir::Stmt root;
  codegen::PredefinedLaunch launch;
  /// The grid-stride loop (the first for-loop).
  const ir::StmtNode* loop = nullptr;
  int calls(const std::string& prefix) const {
    return static_cast<int>(calls_to(root, prefix).size());
  }
  /// Applications of the op table's arithmetic of `op` (scalar_op_expr's text).
  int applies(const std::string& op) const {
    int n = 0;
    for (const ir::ExprNode* e : all_exprs(root))
      n += e->kind == ir::ExprKind::Verbatim && e->name.find("strata_rt::op_" + op + "(") == 0;
    return n;
  }
};

Emitted emit(OpKind kind, const std::vector<Shape>& shapes, DType t = DType::f16,
             OpAttrs attrs = {}) {
  KernelGraph g;
  std::vector<int> ins;
  for (size_t i = 0; i < shapes.size(); ++i)
    ins.push_back(must(g.add_input("I" + std::to_string(i), shapes[i], t)));
  const int out = must(g.add_op(kind, ins, attrs, "O"));
  must(g.mark_output(out));
  std::vector<DType> dtypes;
  for (const KernelTensor& x : g.tensors()) dtypes.push_back(x.dtype);
  codegen::CodeWriter w;
  Emitted e;
  const int op = static_cast<int>(g.ops().size()) - 1;
  must(codegen::emit_predefined_kernel(g, op, dtypes, "k", w, e.launch));
  e.root = w.root();
  for (const ir::StmtNode* s : ir::walk(e.root))
    if (s->kind == ir::StmtKind::For) {
      e.loop = s;
      break;
    }
  if (!e.loop) throw std::runtime_error("no loop");
  return e;
}

int64_t literal(const ir::Expr& e) {
  int64_t v = -1;
  EXPECT_TRUE(e.is_int(&v)) << ir::print_expr(e);
  return v;
}

TEST(PredefinedElementwise, VectorsOfEightAlongABroadcastRow) {
  // The bias add after a library matmul: [512, 3072] + [3072] in f16.
  Emitted k = emit(OpKind::Add, {Shape{512, 3072}, Shape{3072}});
  EXPECT_EQ(k.loop->text, "int");
  EXPECT_EQ(k.loop->names[0], "v");
  EXPECT_EQ(literal(k.loop->exprs[1]->args[1]), 512 * 3072 / 8);  // v < vectors
  EXPECT_EQ(k.launch.threads, 256);
  EXPECT_EQ(k.launch.blocks, 512 * 3072 / 8 / 256);
  EXPECT_EQ(literal(k.loop->exprs[2]), k.launch.blocks * 256);
  EXPECT_EQ(k.calls("strata_rt::load_f32<8>"), 2);
  EXPECT_EQ(k.calls("strata_rt::store_f32<8>"), 1);
  EXPECT_EQ(k.calls("strata_rt::to_f32"), 0);
  EXPECT_EQ(k.applies("add"), 1);
  // The row's vector starts at the column: in1 + e % 3072.
  bool row = false;
  for (const ir::ExprNode* c : calls_to(k.root, "strata_rt::load_f32<8>"))
    row = row || ir::print_expr(c->args[0]) == "in1 + e % 3072";
  EXPECT_TRUE(row);
}

TEST(PredefinedElementwise, OneElementOfAnOperandBroadcastAlongTheInnermostDim) {
  Emitted k = emit(OpKind::Mul, {Shape{512, 3072}, Shape{512, 1}}, DType::f32);
  EXPECT_EQ(k.calls("strata_rt::load_f32<4>"), 1);
  EXPECT_EQ(k.calls("strata_rt::store_f32<4>"), 1);
  bool column = false;
  for (const ir::ExprNode* e : all_exprs(k.root))
    column = column || (e->kind == ir::ExprKind::Index && ir::print_expr(e->args[1]) == "e / 3072");
  EXPECT_TRUE(column);
}

TEST(PredefinedElementwise, OneElementPerStepForOddExtents) {
  Emitted k = emit(OpKind::Sub, {Shape{1000, 37}, Shape{37}});
  EXPECT_EQ(k.loop->text, "int");
  EXPECT_EQ(k.loop->names[0], "e");
  EXPECT_EQ(literal(k.loop->exprs[1]->args[1]), 37000);
  EXPECT_EQ(k.launch.blocks, (37000 + 255) / 256);
  EXPECT_EQ(k.calls("strata_rt::load_f32"), 0);
  EXPECT_EQ(k.calls("strata_rt::to_f32"), 2);
  EXPECT_EQ(k.calls("strata_rt::from_f32<__half>"), 1);
  // Unary ops with attributes go through the op table in either form.
  OpAttrs clamp;
  clamp.scalar = -0.25;
  clamp.scalar2 = 0.5;
  Emitted c = emit(OpKind::Clamp, {Shape{3, 5, 7}}, DType::f32, clamp);
  EXPECT_EQ(c.applies("clamp"), 1);
  EXPECT_EQ(c.loop->names[0], "e");
  Emitted cv = emit(OpKind::Clamp, {Shape{3, 5, 8}}, DType::f32, clamp);
  EXPECT_EQ(cv.applies("clamp"), 1);
  EXPECT_EQ(cv.calls("strata_rt::load_f32<4>"), 1);
}

TEST(PredefinedElementwise, IndexWidthOfTensorsBeyondTwoToThe31) {
  // 2^32 elements: 64-bit indices (LL literals), the grid at its bound, still vectors.
  Emitted big = emit(OpKind::Add, {Shape{65536, 65536}, Shape{65536}});
  EXPECT_EQ(big.loop->text, "long long");
  EXPECT_EQ(big.loop->exprs[2]->type, "LL");
  EXPECT_EQ(big.launch.blocks, 4096);
  EXPECT_EQ(big.calls("strata_rt::load_f32<8>"), 2);
  // 2^31 elements in vectors of 8: every index fits.
  EXPECT_EQ(emit(OpKind::Exp, {Shape{32768, 65536}}).loop->text, "int");
  // 2^31 − 1001 elements one per step: the loop's last step would pass 2^31 − 1.
  Emitted odd = emit(OpKind::Exp, {Shape{2147482647}});
  EXPECT_EQ(odd.loop->names[0], "e");
  EXPECT_EQ(odd.loop->text, "long long");
  // An operand larger than the output decides too (a slice copy of a 2^32-element tensor).
  OpAttrs slice;
  slice.dim = 0;
  slice.start = 0;
  slice.end = 2;
  EXPECT_EQ(emit(OpKind::Slice, {Shape{65536, 65536}}, DType::f16, slice).loop->text, "long long");
  EXPECT_EQ(emit(OpKind::Slice, {Shape{64, 64}}, DType::f16, slice).loop->text, "int");
}

}  // namespace
}  // namespace strata::testing
