// Tests of the dimension classes that drive the search's grid, for-loop and map candidates:
// the union–find over programs, provenance of reductions, propagation through ops (with the
// rejections), derived classes, and the split candidates.
#include <gtest/gtest.h>

#include <filesystem>

#include "strata/frontend/graph_loader.h"
#include "strata/frontend/program_parser.h"
#include "strata/ir/dim_links.h"
#include "strata/search/dim_classes.h"

namespace strata {
namespace {

KernelGraph parse(const std::string& text) {
  auto g = parse_program(text, "test.strata");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

ClassTable analyze(const KernelGraph& g) {
  auto t = ClassTable::analyze(g);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return std::move(t).value();
}

DimClass cls(const ClassTable& t, const KernelGraph& g, const std::string& name, int dim) {
  return t.tensor_classes(g.find_tensor(name))[dim];
}

const char* kRmsNorm = R"(
input X: f16[8, 256]
input W: f16[256, 512]
Y = rms_norm(X)
O = matmul(Y, W)
output O
)";

const char* kGqa = R"(
input Q: f16[2, 32, 32]
input K: f16[2, 32, 512]
input V: f16[2, 512, 32]
S = matmul(Q, K)
E = exp(S)
Z = sum(E, dim=2)
P = div(E, Z)
O = matmul(P, V)
output O
)";

TEST(DimClasses, RmsNormMatmulLinksRowsInnerAndColumns) {
  KernelGraph g = parse(kRmsNorm);
  ClassTable t = analyze(g);
  EXPECT_EQ(t.num_plain(), 3);
  DimClass m = cls(t, g, "X", 0), k = cls(t, g, "X", 1), n = cls(t, g, "W", 1);
  EXPECT_EQ(cls(t, g, "Y", 0), m);
  EXPECT_EQ(cls(t, g, "O", 0), m);
  EXPECT_EQ(cls(t, g, "W", 0), k);
  EXPECT_EQ(cls(t, g, "Y", 1), k);
  EXPECT_EQ(cls(t, g, "O", 1), n);
  EXPECT_NE(m, k);
  EXPECT_NE(k, n);
  EXPECT_TRUE(t.info(k).sum_reduced);
  EXPECT_TRUE(t.info(k).norm_reduced);
  EXPECT_FALSE(t.info(m).sum_reduced || t.info(m).norm_reduced);
  EXPECT_FALSE(t.info(n).sum_reduced || t.info(n).norm_reduced);
  EXPECT_EQ(t.info(k).extent, 256);
  EXPECT_EQ(t.info(m).label, "X.0");
  EXPECT_EQ(t.reduced_mask(), class_bit(k));
}

TEST(DimClasses, ReductionsRecordTheirKindAndProvenance) {
  KernelGraph g = parse(kRmsNorm);
  ClassTable t = analyze(g);
  DimClass k = cls(t, g, "X", 1);
  const ProvMask x = 1, w = 2;                              // program inputs by position
  EXPECT_TRUE(t.has_reduction(k, RedKind::Norm, x));        // rms_norm(X) over k
  EXPECT_TRUE(t.has_reduction(k, RedKind::Linear, x | w));  // Y·W over k: X (via Y) and W
  EXPECT_FALSE(t.has_reduction(k, RedKind::Linear, x));     // Σ_k X alone: not in the program
  EXPECT_FALSE(t.has_reduction(k, RedKind::Linear, w));     // Σ_k W alone
  EXPECT_EQ(t.reductions().size(), 2u);
  // Provenance propagates through elementwise ops and matmuls.
  EXPECT_EQ(t.tensor_provenance(g.find_tensor("Y"))[1], x);
  EXPECT_EQ(t.tensor_provenance(g.find_tensor("O"))[1], w);
}

TEST(DimClasses, AttentionClasses) {
  KernelGraph g = parse(kGqa);
  ClassTable t = analyze(g);
  DimClass batch = cls(t, g, "Q", 0), rows = cls(t, g, "Q", 1), head = cls(t, g, "Q", 2),
           seq = cls(t, g, "K", 2), vhead = cls(t, g, "V", 2);
  for (const char* name : {"K", "V", "S", "E", "Z", "P", "O"}) EXPECT_EQ(cls(t, g, name, 0), batch);
  EXPECT_EQ(cls(t, g, "K", 1), head);
  EXPECT_EQ(cls(t, g, "V", 1), seq);  // P·V contracts the KV sequence
  EXPECT_EQ(cls(t, g, "P", 2), seq);
  EXPECT_EQ(cls(t, g, "Z", 2), kNoClass);  // reduced to extent 1
  EXPECT_EQ(cls(t, g, "O", 2), vhead);
  EXPECT_EQ(cls(t, g, "O", 1), rows);
  EXPECT_NE(head, vhead);  // both 32, but nothing links them
  EXPECT_TRUE(t.info(seq).sum_reduced);
  EXPECT_TRUE(t.info(head).sum_reduced);
  EXPECT_FALSE(t.info(rows).sum_reduced);
}

TEST(DimClasses, ConcatAndGroupedSumsGiveDerivedClasses) {
  KernelGraph g = parse(R"(
input A: f16[4, 64]
input B: f16[4, 16]
C = concat(A, B, dim=1)
D = sum(A, dim=1, to=8)
output C
output D
)");
  ClassTable t = analyze(g);
  DimClass c = cls(t, g, "C", 1);
  EXPECT_EQ(t.info(c).kind, ClassKind::Concat);
  EXPECT_EQ(t.info(c).extent, 80);
  EXPECT_FALSE(t.info(c).splittable());
  EXPECT_EQ(t.plain_mask(c), class_bit(cls(t, g, "A", 1)) | class_bit(cls(t, g, "B", 1)));
  EXPECT_EQ(cls(t, g, "C", 0), cls(t, g, "A", 0));
  DimClass d = cls(t, g, "D", 1);
  EXPECT_EQ(t.info(d).kind, ClassKind::Grouped);
  EXPECT_EQ(t.info(d).extent, 8);
  // interning: the same derivation gives the same class
  EXPECT_EQ(t.concat(cls(t, g, "A", 1), cls(t, g, "B", 1)), c);
  DimClass p = t.partial(cls(t, g, "A", 1), kNoClass, 1, 4, 0, 1);
  EXPECT_EQ(t.partial(cls(t, g, "A", 1), kNoClass, 1, 4, 0, 1), p);
  EXPECT_EQ(t.info(p).extent, 4);
  EXPECT_EQ(t.name(p), "part(A.1/4)");
}

TEST(DimClasses, ConcatMetInAnInputIsAnchoredToItsPlainClass) {
  // Decode attention over a value cache with the new token appended: V's rows are contracted
  // with K's columns, so the concat's dim is K's plain class (splittable), and the program's
  // concat maps its operands' classes onto it.
  KernelGraph g = parse(R"(
input Q: f16[8, 4, 64]
input K: f16[8, 64, 256]
input Vc: f16[8, 255, 64]
input v: f16[8, 1, 64]
V = concat(Vc, v, dim=1)
O = matmul(softmax(matmul(Q, K), dim=2), V)
output O
)");
  ClassTable t = analyze(g);
  DimClass keys = cls(t, g, "K", 2);
  EXPECT_EQ(t.info(keys).kind, ClassKind::Plain);
  EXPECT_TRUE(t.info(keys).splittable());
  EXPECT_EQ(cls(t, g, "V", 1), keys);
  EXPECT_EQ(t.concat_class(cls(t, g, "Vc", 1), kNoClass), keys);
  // another pair of operand classes still makes a derived concat class
  EXPECT_EQ(t.info(t.concat_class(kNoClass, cls(t, g, "Vc", 1))).kind, ClassKind::Concat);
}

TEST(DimClasses, FlowRejectsMismatchedClasses) {
  KernelGraph g = parse(kRmsNorm);
  ClassTable t = analyze(g);
  DimClass m = cls(t, g, "X", 0), k = cls(t, g, "X", 1), n = cls(t, g, "W", 1);
  const ProvMask x = 1, w = 2;
  // X[8,256] · W[256,512]: contracts k with k.
  ClassFlow ok = flow_classes(t, OpKind::Matmul, {}, std::vector<Shape>{{8, 256}, {256, 512}},
                              std::vector<DimClassVec>{{m, k}, {k, n}},
                              std::vector<DimProvVec>{{x, x}, {w, w}}, Shape{8, 512});
  EXPECT_TRUE(ok.mismatch.empty());
  EXPECT_EQ(ok.out[0], m);
  EXPECT_EQ(ok.out[1], n);
  EXPECT_EQ(ok.reduced, k);
  EXPECT_EQ(ok.reduced_prov, x | w);
  EXPECT_EQ(ok.red, RedKind::Linear);
  // A tile [8,256] of (m, n) would contract n with k: rejected although the shapes fit.
  ClassFlow bad = flow_classes(t, OpKind::Matmul, {}, std::vector<Shape>{{8, 256}, {256, 512}},
                               std::vector<DimClassVec>{{m, n}, {k, n}}, {}, Shape{8, 512});
  EXPECT_FALSE(bad.mismatch.empty());
  // Elementwise: a dim with a class may not be broadcast ([1, 256] of (m, k) against [8, 256]).
  ClassFlow bcast = flow_classes(t, OpKind::Add, {}, std::vector<Shape>{{1, 256}, {8, 256}},
                                 std::vector<DimClassVec>{{m, k}, {m, k}}, {}, Shape{8, 256});
  EXPECT_FALSE(bcast.mismatch.empty());
  // … but a dim of extent 1 without a class may.
  ClassFlow scale =
      flow_classes(t, OpKind::Div, {}, std::vector<Shape>{{8, 256}, {8, 1}},
                   std::vector<DimClassVec>{{m, k}, {m, kNoClass}}, {}, Shape{8, 256});
  EXPECT_TRUE(scale.mismatch.empty());
  EXPECT_EQ(scale.out[1], k);
  // Norms reduce their dim and report it as a normalization.
  OpAttrs dim1;
  dim1.dim = 1;
  ClassFlow norm = flow_classes(t, OpKind::RmsNorm, dim1, std::vector<Shape>{{8, 256}},
                                std::vector<DimClassVec>{{m, k}}, std::vector<DimProvVec>{{x, x}},
                                Shape{8, 256});
  EXPECT_EQ(norm.red, RedKind::Norm);
  EXPECT_EQ(norm.reduced, k);
  EXPECT_EQ(norm.reduced_prov, x);
  // Sums to 1 drop the class of their dim.
  ClassFlow sum = flow_classes(t, OpKind::Sum, dim1, std::vector<Shape>{{8, 256}},
                               std::vector<DimClassVec>{{m, k}}, {}, Shape{8, 1});
  EXPECT_EQ(sum.out[1], kNoClass);
  EXPECT_EQ(sum.reduced, k);
}

// The program's classes are dim_links' relation (strata/ir/dim_links.h) closed over the
// program: dims an op aligns, combines along but keeps (a norm's), or contracts together (a
// matmul's inner dims) are one class; a dim an op slices, reduces or concatenates is not linked
// through it.
TEST(DimClasses, ProgramClassesAreTheClosureOfDimLinks) {
  KernelGraph g = parse(kGqa);
  ClassTable t = analyze(g);
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    std::vector<Shape> in;
    for (int x : op.inputs) in.push_back(g.tensor(x).shape);
    const int out = op.outputs[0];
    auto links = dim_links(op.kind, op.attrs, in, g.tensor(out).shape);
    ASSERT_TRUE(links.has_value());
    for (int d = 0; d < g.tensor(out).shape.rank(); ++d) {
      for (auto [i, di] : links->aligned[d])
        EXPECT_EQ(t.tensor_classes(op.inputs[i])[di], t.tensor_classes(out)[d]);
      for (auto [i, di] : links->combined[d])
        EXPECT_EQ(t.tensor_classes(op.inputs[i])[di], t.tensor_classes(out)[d]);
    }
    for (const auto& [p, q] : links->contracted)
      EXPECT_EQ(t.tensor_classes(op.inputs[p.first])[p.second],
                t.tensor_classes(op.inputs[q.first])[q.second]);
  }
  // S = Q·K contracts the head dim of Q with K's rows; Z sums S's last dim, which P keeps.
  EXPECT_EQ(cls(t, g, "Q", 2), cls(t, g, "K", 1));
  EXPECT_EQ(cls(t, g, "S", 2), cls(t, g, "E", 2));
  EXPECT_EQ(cls(t, g, "Z", 2), kNoClass);
  EXPECT_EQ(cls(t, g, "P", 2), cls(t, g, "V", 1));
  KernelGraph n = parse(kRmsNorm);
  ClassTable tn = analyze(n);
  EXPECT_EQ(cls(tn, n, "X", 1), cls(tn, n, "Y", 1));  // the norm's dim: combined, kept
}

// flow_classes gives the tensors the search builds their classes by the same relation, on
// tiles too (where a dim of one index may carry a class, so it keeps its own statement): over
// every op of the bundled programs and the benchmark suite it gives each result the classes
// the program's analysis gave it, and meets no mismatch. One difference: the analysis gives
// each slice of the program a class of its own, flow_classes a slice of a class the class of
// the program's first slice alike (slice_class; RoPE slices Q's and K's head dim, one class,
// alike), so classes are compared up to that.
TEST(DimClasses, FlowFollowsTheProgramsLinks) {
  int programs = 0, ops = 0;
  for (const char* dir : {"examples/programs", "bench/suite"}) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() != ".strata") continue;
      auto g = load_graph(e.path().string());
      ASSERT_TRUE(g.ok()) << e.path() << ": " << g.error().message;
      auto analyzed = ClassTable::analyze(*g);
      if (!analyzed.ok()) continue;  // more than 64 classes
      ClassTable t = *analyzed;
      ++programs;
      std::vector<DimClass> alike(t.size());  // a slice's class → the first alike's
      for (int c = 0; c < t.size(); ++c) alike[c] = c;
      for (const KernelOp& op : g->ops())
        if (op.kind == OpKind::Slice) {
          const DimClass c = t.tensor_classes(op.outputs[0])[op.attrs.dim];
          const DimClass first =
              t.slice_class(t.tensor_classes(op.inputs[0])[op.attrs.dim], op.attrs);
          if (c != kNoClass && first != kNoClass) alike[c] = first;
        }
      auto canonical = [&](DimClass c) { return c >= 0 && c < t.size() ? alike[c] : c; };
      for (const KernelOp& op : g->ops()) {
        if (op.kind == OpKind::Input) continue;
        std::vector<Shape> shapes;
        std::vector<DimClassVec> classes;
        std::vector<DimProvVec> prov;
        for (int x : op.inputs) {
          shapes.push_back(g->tensor(x).shape);
          classes.push_back(t.tensor_classes(x));
          prov.push_back(t.tensor_provenance(x));
        }
        const int out = op.outputs[0];
        const ClassFlow f =
            flow_classes(t, op.kind, op.attrs, shapes, classes, prov, g->tensor(out).shape);
        EXPECT_EQ(f.mismatch, "") << e.path() << " " << g->tensor_name(out);
        for (int d = 0; d < g->tensor(out).shape.rank(); ++d)
          EXPECT_EQ(canonical(f.out[d]), canonical(t.tensor_classes(out)[d]))
              << e.path() << " " << g->tensor_name(out) << "." << d;
        ++ops;
      }
    }
  }
  EXPECT_GE(programs, 50);
  EXPECT_GE(ops, 300);
}

TEST(DimClasses, SplitCandidatesComeFromExtents) {
  SplitPolicy policy;
  DimClassInfo cols;  // a class that is not reduced: tiles 16..128, no unit tiles above 64
  cols.extent = 6144;
  EXPECT_EQ(grid_extent_candidates(cols, policy), (std::vector<int64_t>{48, 96, 192, 384}));
  DimClassInfo batch;
  batch.extent = 16;  // small: one block per index, or two halves
  EXPECT_EQ(grid_extent_candidates(batch, policy), (std::vector<int64_t>{2, 16}));
  DimClassInfo pair;
  pair.extent = 2;  // its halves are its unit tiles
  EXPECT_EQ(grid_extent_candidates(pair, policy), (std::vector<int64_t>{2}));
  DimClassInfo rows;
  rows.extent = 128;  // above max_unit_tile_extent: tiles only (16, 32, 64)
  EXPECT_EQ(grid_extent_candidates(rows, policy), (std::vector<int64_t>{2, 4, 8}));
  DimClassInfo kv;  // a summed class: split-K tiles 128..1024
  kv.extent = 4096;
  kv.sum_reduced = true;
  EXPECT_EQ(grid_extent_candidates(kv, policy), (std::vector<int64_t>{4, 8, 16, 32}));
  // Normalized only: split like a kept class (the enumeration offers the split only to kernels
  // reading a weight, and no block normalizes a part: rule reduce_class).
  DimClassInfo normed;
  normed.extent = 4096;
  normed.norm_reduced = true;
  EXPECT_EQ(grid_extent_candidates(normed, policy), (std::vector<int64_t>{32, 64, 128, 256}));
  DimClassInfo maxed;  // maxed only: not split (per-block maxima need the softmax's sums)
  maxed.extent = 4096;
  maxed.max_reduced = true;
  EXPECT_TRUE(grid_extent_candidates(maxed, policy).empty());
  DimClassInfo prime;
  prime.extent = 97;
  EXPECT_TRUE(grid_extent_candidates(prime, policy).empty());
  // The tiles larger than the largest that divides are offered raggedly: 2000 query rows by
  // 16 (125 blocks) and by 32, 64 and 128 (63, 32 and 16 blocks, the last one shorter).
  DimClassInfo rows2000;
  rows2000.extent = 2000;
  EXPECT_EQ(grid_extent_candidates(rows2000, policy), (std::vector<int64_t>{16, 32, 63, 125}));
  policy.max_blocks = 100;
  EXPECT_EQ(grid_extent_candidates(cols, policy), (std::vector<int64_t>{48, 96}));
  EXPECT_EQ(loop_extent_candidates(4096, 4096, policy), (std::vector<int64_t>{32, 64, 128, 256}));
  EXPECT_EQ(loop_extent_candidates(64, 64, policy), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(loop_extent_candidates(16, 16, policy).empty());
  // Ragged loops keep the listed tile where some F does: 4097 keys in 257, 129 or 65
  // iterations of 16, 32, 64 (33 iterations would make tiles of 125, not 128).
  EXPECT_EQ(loop_extent_candidates(4097, 4097, policy), (std::vector<int64_t>{65, 129, 257}));
  // A short extent that no F keeps a listed tile for: every F of a listed tile (tiles of 34,
  // 23 and 14 for 67).
  EXPECT_EQ(loop_extent_candidates(67, 67, policy), (std::vector<int64_t>{2, 3, 5}));
}

// A matmul's batch dims form batch classes (one index per block is offered whatever the
// extent); its rows, columns and contraction do not.
TEST(DimClasses, MatmulBatchClasses) {
  KernelGraph g = parse(kGqa);
  ClassTable t = analyze(g);
  EXPECT_TRUE(t.info(cls(t, g, "Q", 0)).matmul_batch);
  for (int d : {1, 2}) EXPECT_FALSE(t.info(cls(t, g, "Q", d)).matmul_batch) << d;
  EXPECT_FALSE(t.info(cls(t, g, "K", 2)).matmul_batch);
  KernelGraph rows = parse(kRmsNorm);
  ClassTable rt = analyze(rows);
  for (int d : {0, 1}) EXPECT_FALSE(rt.info(cls(rt, rows, "X", d)).matmul_batch) << d;
  SplitPolicy policy;
  DimClassInfo heads;  // decode attention's batch × KV heads
  heads.extent = 128;
  heads.matmul_batch = true;
  EXPECT_EQ(grid_extent_candidates(heads, policy), (std::vector<int64_t>{2, 4, 8, 128}));
  heads.extent = 2048;  // one block per index only within max_blocks
  EXPECT_EQ(grid_extent_candidates(heads, policy), (std::vector<int64_t>{16, 32, 64, 128}));
}

TEST(DimClasses, CustomizedProgramsAreRejected) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{4, 64}, DType::f16);
  auto body = *BlockGraph::make({1, 1, 1}, 128, 1);
  int tx = *body.add_input(Shape{4, 64}, kAllReplicated, kReplicate);
  int e = *body.add_op(OpKind::Exp, {tx});
  int a = *body.add_op(OpKind::AccumSum, {e});
  ASSERT_TRUE(body.add_output(a, kAllReplicated).ok());
  auto outs = g.add_customized({x}, std::move(body));
  ASSERT_TRUE(outs.ok());
  ASSERT_TRUE(g.mark_output((*outs)[0]).ok());
  auto t = ClassTable::analyze(g);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("customized"), std::string::npos) << t.error().message;
}

}  // namespace
}  // namespace strata
