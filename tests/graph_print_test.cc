// Tests of the graph listing, summary and Graphviz DOT rendering.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "strata/ir/graph_dot.h"
#include "strata/ir/graph_print.h"
#include "strata/frontend/program_parser.h"

namespace strata {
namespace {

/// The RMSNorm + MatMul block graph of docs/mugraph-semantics.md §6 at X[16,4096], W[4096,6144],
/// with a
/// thread graph `(div · 0.5) · rms` as epilogue before the saver.
BlockGraph rmsnorm_body() {
  BlockGraph b = *BlockGraph::make({96, 1, 1}, 128, 64);
  int x = *b.add_input(Shape{16, 4096}, kAllReplicated, 1);
  int w = *b.add_input(Shape{4096, 6144}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {x, w});
  int am = *b.add_op(OpKind::AccumSum, {mm});
  int ax = *b.add_op(OpKind::AccumRmsLd, {x});
  int d = *b.add_op(OpKind::Div, {am, ax});
  auto tg = b.add_thread_graph(
      {d, ax}, {ThreadStep{OpKind::MulScalar, {0, 0}, 0.5}, ThreadStep{OpKind::Mul, {2, 1}, 0.0}});
  EXPECT_TRUE(tg.ok()) << tg.error().message;
  EXPECT_TRUE(b.add_output(*tg, {1, kReplicate, kReplicate}).ok());
  return b;
}

/// A small second kernel: exp of R[16, 1] split over 4 blocks along dim 0.
BlockGraph exp_body() {
  BlockGraph b = *BlockGraph::make({4, 1, 1}, 32, 1);
  int r = *b.add_input(Shape{16, 1}, {0, kReplicate, kReplicate}, kReplicate);
  int e = *b.add_op(OpKind::Exp, {r});
  int a = *b.add_op(OpKind::AccumSum, {e});
  EXPECT_TRUE(b.add_output(a, {0, kReplicate, kReplicate}).ok());
  return b;
}

KernelGraph two_kernel_graph() {
  KernelGraph g;
  int x = *g.add_input("X", Shape{16, 4096}, DType::f16);
  int w = *g.add_input("W", Shape{4096, 6144}, DType::bf16);
  OpAttrs s;
  s.scalar = 0.125;
  int xs = *g.add_op(OpKind::MulScalar, {x}, s, "Xs");
  auto o = g.add_customized({xs, w}, rmsnorm_body(), {"O"});
  EXPECT_TRUE(o.ok()) << o.error().message;
  OpAttrs red;
  red.dim = -1;
  int r = *g.add_op(OpKind::Sum, {(*o)[0]}, red, "R");
  auto e = g.add_customized({r}, exp_body(), {"E"});
  EXPECT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(g.mark_output((*e)[0]).ok());
  EXPECT_TRUE(g.mark_output(r).ok());
  return g;
}

TEST(GraphPrint, ListsEveryLevel) {
  KernelGraph g = two_kernel_graph();
  const std::string expected =
      "input X: f16[16, 4096]\n"
      "input W: bf16[4096, 6144]\n"
      "Xs[16, 4096] = mul_scalar(X, scalar=0.125)\n"
      "O[16, 6144] = customized(Xs, W)\n"
      "    grid (96, 1, 1), block 128, forloop 64\n"
      "    in    b0[16, 64] = Xs  imap={x:φ, y:φ, z:φ} fmap=1\n"
      "    in    b1[64, 64] = W  imap={x:1, y:φ, z:φ} fmap=0\n"
      "    loop  b2[16, 64] = matmul(b0, b1)\n"
      "    accum b3[16, 64] = accum(b2, fmap=φ)\n"
      "    accum b4[16, 1] = accum_rms_ld(b0, fmap=φ)\n"
      "    post  b5[16, 64] = div(b3, b4)\n"
      "    post  b6[16, 64] = thread_graph(b5, b4) { s0 = mul_scalar(b5, scalar=0.5); "
      "s1 = mul(s0, b4) }\n"
      "    save  b6 -> O[16, 6144]  omap={x:1, y:φ, z:φ}\n"
      "R[16, 1] = sum(O, dim=1)\n"
      "E[16, 1] = customized(R)\n"
      "    grid (4, 1, 1), block 32, forloop 1\n"
      "    in    b0[4, 1] = R  imap={x:0, y:φ, z:φ} fmap=φ\n"
      "    loop  b1[4, 1] = exp(b0)\n"
      "    accum b2[4, 1] = accum(b1, fmap=φ)\n"
      "    save  b2 -> E[16, 1]  omap={x:0, y:φ, z:φ}\n"
      "output E, R\n";
  EXPECT_EQ(format_graph(g), expected);
}

TEST(GraphPrint, ListsProgramAttributes) {
  auto g = parse_program(
      "input X: f32[4, 8]\nA = sum(X, dim=0, to=2)\nB = concat(A, A, 0)\n"
      "C = rms_norm(B)\nD = mean(exp(C), -1)\noutput D\n",
      "p.strata");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(format_graph(*g),
            "input X: f32[4, 8]\n"
            "A[2, 8] = sum(X, dim=0, to=2)\n"
            "B[4, 8] = concat(A, A, dim=0)\n"
            "C[4, 8] = rms_norm(B, dim=1)\n"
            "t4[4, 8] = exp(C)\n"
            "D[4, 1] = mean(t4, dim=1)\n"
            "output D\n");
}

TEST(GraphPrint, SummaryCountsAndKind) {
  std::string s = summarize_graph(two_kernel_graph());
  EXPECT_EQ(s.rfind("μGraph with customized kernels", 0), 0u) << s;
  for (const char* part : {"2 inputs", "2 outputs", "4 kernel ops", "2 customized kernels",
                           "12 block ops", "X: f16[16, 4096]", "E: f16[16, 1]"})
    EXPECT_NE(s.find(part), std::string::npos) << part << " in: " << s;
  EXPECT_EQ(s.find('\n'), std::string::npos);

  auto p = parse_program("input X: f16[4]\nY = exp(X)\noutput Y\n", "p.strata");
  ASSERT_TRUE(p.ok());
  std::string ps = summarize_graph(*p);
  EXPECT_EQ(ps.rfind("plain program", 0), 0u) << ps;
  for (const char* part :
       {"1 input,", "1 output,", "1 kernel op,", "0 customized kernels", "0 block ops"})
    EXPECT_NE(ps.find(part), std::string::npos) << part << " in: " << ps;
}

// ---- DOT -----------------------------------------------------------------------------------

/// A small checker of the DOT subset the renderer emits: statements, attribute lists,
/// quoted strings with escapes, nested subgraphs; edges must join declared nodes.
struct DotCheck {
  bool ok = true;
  std::string problem;
  std::set<std::string> nodes;
  std::vector<std::pair<std::string, std::string>> edges;
  std::vector<std::string> edge_labels;
  std::map<std::string, std::string> cluster_labels;  // cluster id -> label
  std::map<std::string, std::string> node_attrs;      // node id -> raw attribute text

  explicit DotCheck(const std::string& text) {
    tokenize(text);
    if (!ok) return;
    expect("digraph");
    if (kind() != 'i') fail("graph name");
    ++pos;
    block("");
    if (pos != toks.size()) fail("text after the graph");
    for (auto& [a, b] : edges)
      if (!nodes.count(a) || !nodes.count(b))
        fail("edge " + a + " -> " + b + " to undeclared node");
  }

 private:
  std::vector<std::string> toks;  // quoted strings keep their quotes
  size_t pos = 0;

  void fail(const std::string& why) {
    if (ok) problem = why + " at token " + std::to_string(pos);
    ok = false;
  }
  char kind() const {
    if (pos >= toks.size()) return 0;
    char c = toks[pos][0];
    return c == '"'                                                           ? 'q'
           : (isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '#') ? 'i'
                                                                              : c;
  }
  void expect(const std::string& t) {
    if (pos < toks.size() && toks[pos] == t) {
      ++pos;
    } else {
      fail("expected " + t);
    }
  }
  void tokenize(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
      char c = s[i];
      if (isspace(static_cast<unsigned char>(c))) {
        ++i;
      } else if (c == '"') {
        size_t j = i + 1;
        while (j < s.size() && s[j] != '"') {
          if (s[j] == '\n') return fail("raw newline in a quoted string");
          if (s[j] == '\\') {
            if (j + 1 >= s.size()) return fail("dangling escape");
            ++j;
          }
          ++j;
        }
        if (j >= s.size()) return fail("unterminated string");
        toks.push_back(s.substr(i, j + 1 - i));
        i = j + 1;
      } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
        toks.push_back("->");
        i += 2;
      } else if (std::string("{}[];=,").find(c) != std::string::npos) {
        toks.push_back(std::string(1, c));
        ++i;
      } else if (isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
        size_t j = i;
        while (j < s.size() &&
               (isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' || s[j] == '.'))
          ++j;
        toks.push_back(s.substr(i, j - i));
        i = j;
      } else {
        return fail(std::string("unexpected character ") + c);
      }
    }
  }
  /// Parses `[k=v, ...]`, returning the attributes.
  std::map<std::string, std::string> attr_list() {
    std::map<std::string, std::string> attrs;
    expect("[");
    while (ok && kind() != ']') {
      if (kind() != 'i') return fail("attribute name"), attrs;
      std::string k = toks[pos++];
      expect("=");
      if (kind() != 'i' && kind() != 'q') return fail("attribute value"), attrs;
      attrs[k] = toks[pos++];
      if (kind() == ',') ++pos;
    }
    expect("]");
    return attrs;
  }
  void block(const std::string& cluster) {
    expect("{");
    while (ok && kind() != '}' && kind() != 0) {
      std::string id = toks[pos];
      if (kind() != 'i') return fail("statement");
      ++pos;
      if (id == "subgraph") {
        if (kind() != 'i') return fail("subgraph name");
        std::string name = toks[pos++];
        cluster_labels[name] = "";
        block(name);
        continue;
      }
      if (id == "graph" || id == "node" || id == "edge") {
        attr_list();
      } else if (kind() == '=') {
        ++pos;
        if (kind() != 'i' && kind() != 'q') return fail("value");
        if (id == "label" && !cluster.empty()) cluster_labels[cluster] = toks[pos];
        ++pos;
      } else if (kind() == '-') {
        ++pos;
        if (kind() != 'i') return fail("edge target");
        std::string to = toks[pos++];
        edges.emplace_back(id, to);
        if (kind() == '[') {
          auto a = attr_list();
          if (a.count("label")) edge_labels.push_back(a["label"]);
        }
      } else {
        if (nodes.count(id)) fail("node " + id + " declared twice");
        nodes.insert(id);
        std::string raw;
        if (kind() == '[')
          for (auto& [k, v] : attr_list()) raw += k + "=" + v + " ";
        node_attrs[id] = raw;
      }
      expect(";");
    }
    expect("}");
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(GraphDot, ClustersLabelsAndEdges) {
  KernelGraph g = two_kernel_graph();
  std::string dot = kernel_graph_to_dot(g);
  DotCheck c(dot);
  ASSERT_TRUE(c.ok) << c.problem << "\n" << dot;
  // one cluster per customized op, labelled with grid, block size and forloop
  ASSERT_EQ(c.cluster_labels.size(), 2u) << dot;
  ASSERT_TRUE(c.cluster_labels.count("cluster_k3")) << dot;
  ASSERT_TRUE(c.cluster_labels.count("cluster_k5")) << dot;
  EXPECT_TRUE(contains(c.cluster_labels["cluster_k3"], "grid (96, 1, 1)"));
  EXPECT_TRUE(contains(c.cluster_labels["cluster_k3"], "block 128"));
  EXPECT_TRUE(contains(c.cluster_labels["cluster_k3"], "forloop 64"));
  EXPECT_TRUE(contains(c.cluster_labels["cluster_k5"], "grid (4, 1, 1)"));
  // kernel tensors: 2 inputs, Xs, O, R, E; kernel ops mul_scalar and sum; 8 + 4 block ops
  EXPECT_EQ(c.nodes.size(), 6u + 2u + 12u);
  // iterator edges from kernel tensors carry imap/fmap; saver edges carry omap
  std::set<std::string> labels(c.edge_labels.begin(), c.edge_labels.end());
  EXPECT_TRUE(labels.count("\"imap={x:φ, y:φ, z:φ} fmap=1\"")) << dot;
  EXPECT_TRUE(labels.count("\"imap={x:1, y:φ, z:φ} fmap=0\"")) << dot;
  EXPECT_TRUE(labels.count("\"imap={x:0, y:φ, z:φ} fmap=φ\"")) << dot;
  EXPECT_TRUE(labels.count("\"omap={x:1, y:φ, z:φ}\"")) << dot;
  std::set<std::pair<std::string, std::string>> edges(c.edges.begin(), c.edges.end());
  EXPECT_TRUE(edges.count({"t2", "k3_b0"}));     // Xs -> iterator 0
  EXPECT_TRUE(edges.count({"t1", "k3_b1"}));     // W -> iterator 1
  EXPECT_TRUE(edges.count({"k3_b7", "t3"}));     // saver -> O
  EXPECT_TRUE(edges.count({"k3_b2", "k3_b3"}));  // matmul -> accum
  EXPECT_TRUE(edges.count({"t3", "k4"}));        // O -> sum
  // accumulators and post-loop ops look different from loop-body ops
  EXPECT_TRUE(contains(c.node_attrs["k3_b3"], "shape=hexagon"));
  EXPECT_TRUE(contains(c.node_attrs["k3_b4"], "shape=hexagon"));
  EXPECT_TRUE(contains(c.node_attrs["k3_b2"], "shape=box"));
  EXPECT_FALSE(contains(c.node_attrs["k3_b2"], "filled"));
  EXPECT_TRUE(contains(c.node_attrs["k3_b5"], "fillcolor"));
  EXPECT_NE(c.node_attrs["k3_b5"], c.node_attrs["k3_b3"]);
  // the thread graph shows its chain
  EXPECT_TRUE(contains(c.node_attrs["k3_b6"], "s0 = mul_scalar(b5, scalar=0.5)\\ns1 = mul(s0, b4)"))
      << c.node_attrs["k3_b6"];
  // outputs are double-bordered
  EXPECT_TRUE(contains(c.node_attrs["t5"], "peripheries=2"));
  EXPECT_TRUE(contains(c.node_attrs["t4"], "peripheries=2"));
}

TEST(GraphDot, EscapesNames) {
  KernelGraph g;
  int x = *g.add_input("we\"ird\\name", Shape{4}, DType::f16);
  int y = *g.add_op(OpKind::Exp, {x}, {}, "line\nbreak");
  ASSERT_TRUE(g.mark_output(y).ok());
  std::string dot = kernel_graph_to_dot(g);
  DotCheck c(dot);
  ASSERT_TRUE(c.ok) << c.problem << "\n" << dot;
  EXPECT_TRUE(contains(dot, "we\\\"ird\\\\name")) << dot;
  EXPECT_TRUE(contains(dot, "line\\nbreak")) << dot;
  EXPECT_TRUE(c.cluster_labels.empty());
}

TEST(GraphDot, CheckerRejectsBrokenDot) {
  // the structural checker above must itself catch what it is there to catch
  EXPECT_TRUE(DotCheck("digraph g {\n  a [label=\"x\\\"y\"];\n  a -> a;\n}\n").ok);
  EXPECT_FALSE(DotCheck("digraph g {\n  a [label=\"x];\n}\n").ok);       // open quote
  EXPECT_FALSE(DotCheck("digraph g {\n  a [label=\"x\"];\n").ok);        // open brace
  EXPECT_FALSE(DotCheck("digraph g {\n  a;\n  a -> b;\n}\n").ok);        // undeclared
  EXPECT_FALSE(DotCheck("digraph g {\n  a [label=\"x\ny\"];\n}\n").ok);  // raw newline
  EXPECT_FALSE(DotCheck("digraph g {\n  a [label=x y];\n}\n").ok);       // bad list
}

TEST(GraphDot, AcceptedByGraphviz) {
  // Graphviz is a test dependency (scripts/install-deps.sh installs it).
  ASSERT_EQ(std::system("command -v dot >/dev/null 2>&1"), 0) << "Graphviz `dot` is not installed";
  std::string path = testing::TempDir() + "strata_graph_print_test.dot";
  {
    std::ofstream out(path);
    out << kernel_graph_to_dot(two_kernel_graph());
  }
  EXPECT_EQ(std::system(("dot -Tsvg -o /dev/null '" + path + "'").c_str()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata
