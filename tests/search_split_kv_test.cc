// Tests of the split-KV forms (src/search/split_kv.h, docs/search.md "Split-KV"): an
// online-softmax kernel is split over a free grid axis into per-part kernels and a combine
// kernel; every form is proved equivalent to the one-kernel graph, emits, and a combine that
// drops the rescaling is found out.
#include "search/split_kv.h"

#include <gtest/gtest.h>

#include "strata/codegen/cuda_emitter.h"
#include "strata/verify/verifier.h"
#include "support/ragged_graphs.h"

namespace strata {
namespace {

using testing::attention_ragged;
using testing::attention_ragged_program;

int customized(const KernelGraph& g) {
  int n = 0;
  for (const KernelOp& op : g.ops()) n += op.kind == OpKind::Customized;
  return n;
}

// 1025 keys in 65 iterations (ragged) and 256 keys in 4 (dividing): every split count that
// leaves each part a loop tile gives a form of two kernels, the first with `splits` times the
// blocks, each proved equivalent to the program and emitted.
TEST(SplitKv, FormsAreProvedAndEmitted) {
  struct Case {
    int64_t rows, keys, dim;
    int loops;
  };
  for (const Case& c : {Case{4, 1025, 64, 65}, Case{16, 256, 32, 4}}) {
    const KernelGraph g = attention_ragged(c.rows, c.keys, c.dim, c.loops);
    const KernelGraph program = attention_ragged_program(c.rows, c.keys, c.dim);
    const std::vector<KernelGraph> forms = search::split_kv_forms(g, 528);
    ASSERT_FALSE(forms.empty()) << c.keys;
    for (const KernelGraph& f : forms) {
      EXPECT_EQ(customized(f), 2);
      const BlockGraph& part = *f.ops()[3].body;  // after the three inputs
      EXPECT_GT(part.grid().count(), 2);
      auto v = verify_equivalent(program, f);
      ASSERT_TRUE(v.ok()) << v.error().message;
      EXPECT_TRUE(v->equivalent) << c.keys << ": " << v->detail;
      EXPECT_LE(v->log2_bound, -60.0);
      EXPECT_GE(v->trials, 1);
      auto src = emit_cuda(f);
      EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
    }
  }
}

// Graphs that are not an online softmax over a loop have no split form: the program (no
// customized kernel) and a loop that accumulates without rescaling.
TEST(SplitKv, OnlyOnlineSoftmaxKernelsSplit) {
  EXPECT_TRUE(search::split_kv_forms(attention_ragged_program(4, 1025, 64), 528).empty());
  EXPECT_TRUE(search::split_kv_forms(testing::matmul_ragged(16, 1100, 256, 4, 35), 528).empty());
  // A grid limit that leaves no room for a split.
  EXPECT_TRUE(search::split_kv_forms(attention_ragged(4, 1025, 64, 65), 2).empty());
}

// A combine that mis-rescales one accumulator (the row sums multiplied by the part's max
// instead of e^(m_b − M)) is not equivalent: the verifier finds it.
TEST(SplitKv, AMisRescaledCombineIsRejected) {
  const KernelGraph g = attention_ragged(4, 256, 32, 4);
  const std::vector<KernelGraph> forms = search::split_kv_forms(g, 528);
  ASSERT_FALSE(forms.empty());
  const KernelGraph& f = forms[0];
  KernelGraph bad;
  std::vector<int> map(f.tensors().size(), -1);
  for (const KernelOp& op : f.ops()) {
    if (op.kind == OpKind::Input) {
      const KernelTensor& t = f.tensor(op.outputs[0]);
      map[op.outputs[0]] = testing::must(bad.add_input(t.name, t.shape, t.dtype));
      continue;
    }
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(map[t]);
    BlockGraph body = *op.body;
    if (&op == &f.ops().back()) {  // the combine: inputs l, O, m per part, m whole
      BlockGraph nb =
          testing::must(BlockGraph::make(body.grid(), body.block_threads(), body.forloop()));
      std::vector<int> bm(body.tensors().size(), -1), by_input;
      bool mutated = false;
      for (const BlockOp& b : body.ops()) {
        if (b.kind == OpKind::Input) {
          bm[b.output] = testing::must(
              nb.add_input(body.input_shape(b.attrs.input_index), b.attrs.imap, b.attrs.fmap));
          by_input.push_back(bm[b.output]);
          continue;
        }
        std::vector<int> bi;
        for (int t : b.inputs) bi.push_back(bm[t]);
        if (b.kind == OpKind::Output) {
          testing::must(nb.add_output(bi[0], b.attrs.omap));
          continue;
        }
        if (b.kind == OpKind::Mul && !mutated) {
          bi[1] = by_input[2];  // the part's max, not its weight
          mutated = true;
        }
        bm[b.output] = b.kind == OpKind::ThreadFused
                           ? testing::must(nb.add_thread_graph(bi, b.chain))
                           : testing::must(nb.add_op(b.kind, bi, b.attrs));
      }
      ASSERT_TRUE(mutated);
      body = std::move(nb);
    }
    std::vector<int> outs = testing::must(bad.add_customized(ins, std::move(body)));
    for (size_t o = 0; o < outs.size(); ++o) map[op.outputs[o]] = outs[o];
  }
  for (int t : f.outputs()) testing::must(bad.mark_output(map[t]));
  auto v = verify_equivalent(attention_ragged_program(4, 256, 32), bad);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_FALSE(v->equivalent) << v->detail;
  EXPECT_NE(v->detail.find("differs"), std::string::npos) << v->detail;
}

}  // namespace
}  // namespace strata
