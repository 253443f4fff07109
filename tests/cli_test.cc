// End-to-end tests of `strata check` and `strata show`: exit codes, messages on stderr,
// and the JSON round trip. Runs the built tool named by $STRATA_BIN (set by CTest).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

const char* kProgram = R"(# RMSNorm followed by a linear layer
input X: f16[2, 4096]
input W: f16[4096, 6144]
Y = rms_norm(X)
O = matmul(Y, W)
output O
)";

/// The RMSNorm + MatMul reference μGraph of docs/mugraph-semantics.md §6 at X[16, 4096], W[4096,
/// 6144].
const char* kMuGraph = R"({
  "format": "strata-mugraph",
  "version": 1,
  "inputs": [{"name": "X", "shape": [16, 4096], "dtype": "f16"},
             {"name": "W", "shape": [4096, 6144], "dtype": "f16"}],
  "ops": [{
    "op": "customized", "inputs": ["X", "W"], "outputs": ["O"],
    "block_graph": {
      "grid": [96, 1, 1], "block": 128, "forloop": 64,
      "ops": [
        {"op": "input", "input": 0, "imap": [null, null, null], "fmap": 1, "output": "Xi"},
        {"op": "input", "input": 1, "imap": [1, null, null], "fmap": 0, "output": "Wi"},
        {"op": "matmul", "inputs": ["Xi", "Wi"], "output": "M"},
        {"op": "accum", "inputs": ["M"], "output": "accM", "fmap": null},
        {"op": "accum_rms_ld", "inputs": ["Xi"], "output": "accX", "fmap": null},
        {"op": "div", "inputs": ["accM", "accX"], "output": "Y"},
        {"op": "output", "inputs": ["Y"], "omap": [1, null, null]}
      ]
    }
  }],
  "outputs": ["O"]
}
)";

/// `text` with the first occurrence of `from` replaced by `to` (which must exist).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t p = text.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) text.replace(p, from.size(), to);
  return text;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct RunResult {
  int code = -1;
  std::string out, err;
};

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("STRATA_BIN");
    ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
    bin_ = bin;
    ASSERT_TRUE(fs::exists(bin_)) << bin_;
    dir_ = fs::path(testing::TempDir()) /
           ("strata_cli_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Writes `text` to a file named `name` in the test's directory; returns its path.
  std::string file(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  /// Runs `strata <args>` with stdout and stderr captured to files; `env` (e.g. "A=1 B=2")
  /// is set for the command.
  RunResult strata(const std::string& args, const std::string& env = "") {
    fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    std::string cmd = (env.empty() ? "" : "env " + env + " ") + "'" + bin_ + "' " + args + " >'" +
                      out.string() + "' 2>'" + err.string() + "'";
    int status = std::system(cmd.c_str());
    RunResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  /// Runs `strata check` on a file and expects exit 2 with every part on stderr.
  void expect_check_fails(const std::string& path, std::initializer_list<std::string> parts) {
    RunResult r = strata("check '" + path + "'");
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    for (const std::string& p : parts)
      EXPECT_NE(r.err.find(p), std::string::npos) << p << " in: " << r.err;
  }

  std::string bin_;
  fs::path dir_;
};

TEST_F(Cli, CheckValidProgram) {
  std::string p = file("rms.strata", kProgram);
  RunResult r = strata("check '" + p + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("ok: plain program"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 inputs, 1 output, 2 kernel ops"), std::string::npos) << r.out;
}

TEST_F(Cli, CheckValidMuGraph) {
  std::string p = file("rms.json", kMuGraph);
  RunResult r = strata("check '" + p + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("μGraph with customized kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 customized kernel, 7 block ops"), std::string::npos) << r.out;
}

TEST_F(Cli, MalformedTextReportsLineAndColumn) {
  std::string p = file("bad.strata", "input X: f16[2, 4096]\n\nY = rms_norm(X\noutput Y\n");
  expect_check_fails(p, {p + ":3:15: error: ", "unterminated call"});
}

TEST_F(Cli, MalformedJsonReportsLineAndColumn) {
  std::string p = file("bad.json", "{\n  \"inputs\": [\n    {\"name\": \"X\",, \"shape\": [4]}\n");
  expect_check_fails(p, {p + ":3:18: invalid JSON"});
}

TEST_F(Cli, ShapeMismatch) {
  std::string p = file("mm.strata", replaced(kProgram, "O = matmul(Y, W)", "O = matmul(W, Y)"));
  expect_check_fails(p, {p + ":5:5: error: ", "inner dimensions differ"});
  std::string j =
      file("mm.json", replaced(kMuGraph, "\"shape\": [4096, 6144]", "\"shape\": [4160, 6144]"));
  expect_check_fails(j, {"ops[0].block_graph.ops[2]", "matmul"});
}

TEST_F(Cli, SplitThatLeavesAPartEmpty) {
  // 6144 columns in 4097 parts of 2: the last part would be empty. (A split that does not
  // divide but leaves every part non-empty is ragged, which is allowed.)
  std::string p =
      file("split.json", replaced(kMuGraph, "\"grid\": [96, 1, 1]", "\"grid\": [4097, 1, 1]"));
  expect_check_fails(p, {"ops[0].block_graph.ops[1]", "leaves the last part empty"});
}

TEST_F(Cli, OmapOnAReplicatedAxis) {
  std::string p = file(
      "omap.json", replaced(kMuGraph, "\"omap\": [1, null, null]", "\"omap\": [null, null, null]"));
  expect_check_fails(p, {"ops[0].block_graph.ops[6]", "replicated axis"});
}

TEST_F(Cli, UnknownOp) {
  std::string p = file("op.strata", replaced(kProgram, "matmul", "matmull"));
  expect_check_fails(p, {p + ":5:5: error: ", "unknown op `matmull`", "did you mean `matmul`"});
  std::string j = file("op.json", replaced(kMuGraph, "\"op\": \"div\"", "\"op\": \"divide\""));
  expect_check_fails(j, {"ops[0].block_graph.ops[5].op", "unknown op `divide`"});
}

TEST_F(Cli, DuplicateName) {
  std::string p = file("dup.strata", replaced(kProgram, "Y = rms_norm(X)", "W = rms_norm(X)"));
  expect_check_fails(p, {p + ":4:1: error: ", "duplicate name `W`"});
  std::string j = file("dup.json", replaced(kMuGraph, "\"output\": \"M\"", "\"output\": \"Wi\""));
  expect_check_fails(j, {"duplicate tensor name `Wi`"});
}

TEST_F(Cli, MissingOutput) {
  std::string p = file("noout.strata", replaced(kProgram, "output O\n", ""));
  expect_check_fails(p, {p + ":6:1: error: ", "`output`"});
}

TEST_F(Cli, MissingFile) {
  std::string p = (dir_ / "does_not_exist.strata").string();
  expect_check_fails(p, {p, "cannot open"});
}

TEST_F(Cli, BadArguments) {
  EXPECT_EQ(strata("").code, 2);
  EXPECT_EQ(strata("frobnicate").code, 2);
  EXPECT_EQ(strata("check").code, 2);
  std::string p = file("rms.strata", kProgram);
  RunResult r = strata("show '" + p + "' --json --dot -");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("choose one"), std::string::npos) << r.err;
}

TEST_F(Cli, ShowListsTheGraph) {
  RunResult r = strata("show '" + file("rms.json", kMuGraph) + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* part : {"input X: f16[16, 4096]", "O[16, 6144] = customized(X, W)",
                           "grid (96, 1, 1), block 128, forloop 64", "imap={x:1, y:φ, z:φ} fmap=0",
                           "accum accX[16, 1] = accum_rms_ld(Xi, fmap=φ)",
                           "save  Y -> O[16, 6144]  omap={x:1, y:φ, z:φ}", "output O"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " in:\n" << r.out;
  r = strata("show '" + file("bad.strata", "input X: f16[4]\nY = exp(Z)\noutput Y\n") + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.strata:2:9: error: undefined name `Z`"), std::string::npos) << r.err;
}

TEST_F(Cli, ShowWritesDot) {
  std::string p = file("rms.json", kMuGraph);
  std::string dot = (dir_ / "g.dot").string();
  RunResult r = strata("show '" + p + "' --dot '" + dot + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("customized(X, W)"), std::string::npos);  // listing still printed
  std::string text = read_file(dot);
  EXPECT_EQ(text.rfind("digraph strata {", 0), 0u) << text;
  EXPECT_NE(text.find("subgraph cluster_k2"), std::string::npos) << text;
  EXPECT_NE(text.find("omap={x:1, y:φ, z:φ}"), std::string::npos) << text;
  r = strata("show '" + p + "' --dot -");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text);  // `-`: DOT on stdout instead of the listing
}

TEST_F(Cli, ShowJsonRoundTrips) {
  for (auto [name, text] : {std::pair{"rms.strata", kProgram}, std::pair{"rms.json", kMuGraph}}) {
    std::string p = file(name, text);
    RunResult r = strata("show '" + p + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    std::string back = file(std::string("back_") + name + ".json", r.out);
    auto original = load_graph(p);
    auto reloaded = load_graph(back);
    ASSERT_TRUE(original.ok()) << original.error().message;
    ASSERT_TRUE(reloaded.ok()) << reloaded.error().message;
    EXPECT_TRUE(reloaded->structurally_equal(*original)) << name;
    for (size_t t = 0; t < original->tensors().size(); ++t)
      EXPECT_EQ(reloaded->tensor_name(static_cast<int>(t)),
                original->tensor_name(static_cast<int>(t)));
    // canonical: printing the reloaded graph gives the same text
    RunResult again = strata("show '" + back + "' --json");
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.out, r.out) << name;
  }
}

// Where emitted CUDA's runtime headers are found (docs/gpu-runtime.md, "Finding the runtime
// headers and nvcc"): a tool in its build tree uses the source tree's runtime/;
// STRATA_RUNTIME_DIR overrides that, and a directory without the headers is an error naming it.
TEST_F(Cli, DeviceNamesTheRuntimeHeaders) {
  RunResult r = strata("device", "-u STRATA_RUNTIME_DIR");
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.out << r.err;  // 1: no GPU
  const std::string source = fs::canonical("runtime").string();
  EXPECT_NE(r.out.find("runtime headers: " + source + "\n"), std::string::npos) << r.out;

  fs::create_directories(dir_ / "rt" / "strata_rt");
  file("rt/strata_rt/strata_rt.cuh", "// a stand-in\n");
  const std::string rt = fs::canonical(dir_ / "rt").string();
  r = strata("device", "STRATA_RUNTIME_DIR='" + rt + "'");
  EXPECT_NE(r.out.find("runtime headers: " + rt + "\n"), std::string::npos) << r.out;

  r = strata("device", "STRATA_RUNTIME_DIR='" + (dir_ / "none").string() + "'");
  EXPECT_NE(r.out.find("STRATA_RUNTIME_DIR="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not hold strata_rt/strata_rt.cuh"), std::string::npos) << r.out;
}

// `strata equiv` prints a progress line once a second on stderr while it checks; --quiet
// silences it (and nothing else is printed there on success).
TEST_F(Cli, EquivQuietPrintsNothingOnStderr) {
  RunResult r = strata(
      "equiv --quiet examples/programs/rmsnorm_small.strata examples/reference/rmsnorm_small.json");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("equivalent: "), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  r = strata("equiv --help");
  EXPECT_NE(r.out.find("--quiet"), std::string::npos) << r.out;
}

// ---- search result documents: every command that takes a graph takes one ------------------

/// A search result document (the format `strata optimize -o` writes) ranking the reference
/// μGraph of rmsnorm_small first and the program itself second.
Json result_document() {
  auto mugraph = load_graph("examples/reference/rmsnorm_small.json");
  auto program = load_graph("examples/programs/rmsnorm_small.strata");
  EXPECT_TRUE(mugraph.ok() && program.ok());
  Json doc = {
      {"format", "strata-search-result"}, {"version", 1}, {"best", 0}, {"program_index", 1}};
  doc["ranked"] = Json::array();
  doc["ranked"].push_back({{"rank", 0},
                           {"is_program", false},
                           {"predicted_us", 3.0},
                           {"graph", kernel_graph_to_json(*mugraph)}});
  doc["ranked"].push_back({{"rank", 1},
                           {"is_program", true},
                           {"predicted_us", 9.0},
                           {"graph", kernel_graph_to_json(*program)}});
  return doc;
}

TEST_F(Cli, EveryGraphCommandTakesAResultDocument) {
  std::string r = file("r.json", result_document().dump(2));
  std::string prog = "examples/programs/rmsnorm_small.strata";
  // default: best (ranked[0], the μGraph); --rank 1: the program
  RunResult c = strata("check '" + r + "'");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find(r + ": ranked[0].graph: ok: μGraph with customized kernels"),
            std::string::npos)
      << c.out;
  c = strata("check '" + r + "' --rank 1");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find(r + ": ranked[1].graph: ok: plain program"), std::string::npos) << c.out;
  // show, cost, run, equiv, emit
  RunResult show = strata("show '" + r + "' --json");
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("\"customized\""), std::string::npos);
  RunResult show1 = strata("show '" + r + "' --rank 1");
  EXPECT_EQ(show1.code, 0) << show1.err;
  EXPECT_EQ(show1.out.find("customized"), std::string::npos) << show1.out;
  RunResult cost = strata("cost '" + r + "' --json");
  EXPECT_EQ(cost.code, 0) << cost.err;
  EXPECT_NE(cost.out.find("customized"), std::string::npos) << cost.out;
  RunResult run0 = strata("run '" + r + "' --seed 3");
  RunResult run1 = strata("run '" + r + "' --seed 3 --rank 1");
  RunResult runp = strata("run " + prog + " --seed 3");
  EXPECT_EQ(run0.code, 0) << run0.err;
  EXPECT_EQ(run1.code, 0) << run1.err;
  EXPECT_NE(run1.out.find("ranked[1].graph: reference interpreter"), std::string::npos) << run1.out;
  // the same program: the same checksums after the first line
  EXPECT_EQ(run1.out.substr(run1.out.find('\n')), runp.out.substr(runp.out.find('\n')));
  RunResult eq = strata("equiv " + prog + " '" + r + "'");
  EXPECT_EQ(eq.code, 0) << eq.err;
  EXPECT_NE(eq.out.find("equivalent"), std::string::npos) << eq.out;
  EXPECT_EQ(strata("equiv " + prog + " '" + r + "' --rank 1").code, 0);
  RunResult emit = strata("emit '" + r + "'");
  EXPECT_EQ(emit.code, 0) << emit.err;
  EXPECT_NE(emit.out.find("__global__"), std::string::npos);
  // profile loads the result (and --rank) before it looks for a GPU
  RunResult prof = strata("profile '" + r + "' --rank 7");
  EXPECT_EQ(prof.code, 2) << prof.err;
  // --rank beyond the list, and --rank for files that are not results
  RunResult far = strata("check '" + r + "' --rank 2");
  EXPECT_EQ(far.code, 2);
  EXPECT_NE(far.err.find(r + ": --rank 2: the document ranks 2 graph(s) (ranks 0 to 1)"),
            std::string::npos)
      << far.err;
  RunResult not_result = strata("check " + prog + " --rank 0");
  EXPECT_EQ(not_result.code, 2);
  EXPECT_NE(not_result.err.find("--rank 0 selects an entry of a search result document, but " +
                                prog + " is not one"),
            std::string::npos)
      << not_result.err;
}

TEST_F(Cli, TheProfiledFastestEntryIsTheDefault) {
  Json doc = result_document();
  doc["gpu_profile"] = {{"fastest", 1}, {"fastest_variant", "groups=4"}};
  std::string r = file("r.json", doc.dump());
  RunResult c = strata("check '" + r + "'");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("ranked[1].graph: ok: plain program"), std::string::npos) << c.out;
  EXPECT_EQ(strata("check '" + r + "' --rank 0").out.find("ranked[1]"), std::string::npos);
  doc["gpu_profile"]["fastest"] = nullptr;  // no correct candidate: back to best
  c = strata("check '" + file("r2.json", doc.dump()) + "'");
  EXPECT_NE(c.out.find("ranked[0].graph: ok"), std::string::npos) << c.out;
}

// ---- inputs at the edges ---------------------------------------------------------------

TEST_F(Cli, DirectoryIsNotAProgram) {
  fs::create_directories(dir_ / "prog.strata");
  expect_check_fails((dir_ / "prog.strata").string(), {"is a directory; expected a file"});
}

TEST_F(Cli, ByteOrderMarkIsSkipped) {
  RunResult t =
      strata("check '" + file("bom.strata", "\xEF\xBB\xBF" + std::string(kProgram)) + "'");
  EXPECT_EQ(t.code, 0) << t.err;
  RunResult j = strata("check '" + file("bom.json", "\xEF\xBB\xBF" + std::string(kMuGraph)) + "'");
  EXPECT_EQ(j.code, 0) << j.err;
}

TEST_F(Cli, BadNumbersInJsonAreBadInput) {
  std::string big = file("big.json", replaced(kMuGraph, "\"forloop\": 64", "\"forloop\": 1e400"));
  expect_check_fails(big, {big + ":9:52: invalid JSON: number 1e400 is out of range"});
  std::string wrap =
      file("wrap.json", replaced(kMuGraph, "\"grid\": [96, 1, 1]", "\"grid\": [4294967392, 1, 1]"));
  expect_check_fails(wrap, {"ops[0].block_graph.grid[0]: 4294967392 is out of range"});
  std::string empty =
      file("empty.json", replaced(kMuGraph, "\"outputs\": [\"O\"],", "\"outputs\": [],"));
  expect_check_fails(empty, {"ops[0].outputs: the block graph has 1 output saver(s)"});
  std::string deep =
      file("deep.json", "{\"inputs\": " + std::string(80000, '[') + std::string(80000, ']') + "}");
  expect_check_fails(deep, {deep + ":1:75: invalid JSON: arrays and objects nested more than 64"});
}

// Shapes within the 2^48 bound load; evaluating them on the CPU needs more memory than a host
// has, which is reported (exit 2) instead of crashing; the cost model stays non-negative.
TEST_F(Cli, HugeShapes) {
  const std::string huge = "input X: f16[16777216, 16777216]\nY = exp(X)\noutput Y\n";
  std::string p = file("huge.strata", huge);
  EXPECT_EQ(strata("check '" + p + "'").code, 0);
  RunResult run = strata("run '" + p + "'");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_NE(run.err.find("host memory"), std::string::npos) << run.err;
  // The verifier checks elementwise programs on a reduced instance (docs/verifier.md §7): the
  // independent dims shrink to two elements each. On the program's own instance it cannot.
  RunResult eq = strata("equiv '" + p + "' '" + p + "'");
  EXPECT_EQ(eq.code, 0) << eq.err;
  EXPECT_NE(eq.out.find("reduced instance X.0 16777216 → 2, X.1 16777216 → 2"), std::string::npos)
      << eq.out;
  RunResult full = strata("equiv '" + p + "' '" + p + "' --full-instance");
  EXPECT_EQ(full.code, 2) << full.err;
  EXPECT_NE(full.err.find("host memory"), std::string::npos) << full.err;
  RunResult cost = strata("cost '" + p + "' --json");
  ASSERT_EQ(cost.code, 0) << cost.err;
  Json c = Json::parse(cost.out);
  for (const char* key : {"load_bytes", "store_bytes", "blocks", "predicted_us"})
    EXPECT_GT(c["kernels"][0][key].get<double>(), 0) << key << ": " << cost.out;
  EXPECT_EQ(c["kernels"][0]["load_bytes"], int64_t{1} << 49);  // 2^48 f16 elements
  std::string over = file("over.json", replaced(kMuGraph, "\"shape\": [16, 4096]",
                                                "\"shape\": [4294967296, 4294967296]"));
  expect_check_fails(over, {"inputs[0].shape", "more than 2^48 elements"});
}

// The emitter's tilings enumerate divisors of extents; with extents up to 2^48 that must not
// take one step per unit (a [64, 2^40] operand used to keep `emit` busy for hours). The time
// limit only catches a hang: the command answers in milliseconds.
TEST_F(Cli, EmitOfHugeExtentsAnswers) {
  std::string g = file("wide.json", R"({
  "inputs": [{"name": "X", "shape": [16, 64]}, {"name": "W", "shape": [64, 1099511627776]}],
  "ops": [{"op": "customized", "inputs": ["X", "W"], "outputs": ["O"],
    "block_graph": {"grid": [1, 1, 1], "block": 128, "forloop": 1, "ops": [
      {"op": "input", "input": 0, "imap": [null, null, null], "output": "Xi"},
      {"op": "input", "input": 1, "imap": [null, null, null], "output": "Wi"},
      {"op": "matmul", "inputs": ["Xi", "Wi"], "output": "M"},
      {"op": "accum", "inputs": ["M"], "output": "A"},
      {"op": "output", "inputs": ["A"], "omap": [null, null, null]}]}}],
  "outputs": ["O"]})");
  fs::path err = dir_ / "stderr.txt";
  int status = std::system(
      ("timeout -s KILL 120 '" + bin_ + "' emit '" + g + "' >/dev/null 2>'" + err.string() + "'")
          .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2) << read_file(err);  // 137 when killed
  EXPECT_NE(read_file(err).find("shared memory"), std::string::npos) << read_file(err);
}

TEST_F(Cli, DeadTensorsAreWarnedAbout) {
  std::string p = file("dead.strata", replaced(kProgram, "output O", "Z = exp(X)\noutput O"));
  RunResult r = strata("check '" + p + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("strata: warning: " + p +
                       ": tensor `Z` (computed by kernel op #4, exp) is never used and is not an "
                       "output"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(strata("check '" + file("live.strata", kProgram) + "'").err.empty());
}

// Numeric flags are validated: a negative, malformed, non-finite or out-of-range value is a
// bad argument that names the flag, never a wrapped value or a 300-digit bound.
TEST_F(Cli, NumericFlagsAreValidated) {
  std::string p = file("rms.strata", kProgram);
  for (const std::string& args :
       {"optimize '" + p + "' --time-limit -1", "optimize '" + p + "' --time-limit nan",
        "optimize '" + p + "' --threads -1", "optimize '" + p + "' --top 0",
        "optimize '" + p + "' --max-states -3", "optimize '" + p + "' --max-kernel-ops 99",
        "optimize '" + p + "' --max-block-ops 4294967298", "run '" + p + "' --seed -1",
        "run '" + p + "' --seed 18446744073709551616", "run '" + p + "' --threads 4294967297",
        "equiv '" + p + "' '" + p + "' --target 3", "equiv '" + p + "' '" + p + "' --trials -2",
        "equiv '" + p + "' '" + p + "' --seed 1.5", "emit '" + p + "' --threads -32",
        "profile '" + p + "' --top 0", "profile '" + p + "' --runs 0",
        "check '" + p + "' --rank -1", "cost '" + p + "' --target tpu"}) {
    RunResult r = strata(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    std::string flag = args.substr(args.rfind(" --") + 1);
    flag = flag.substr(0, flag.find(' '));
    EXPECT_NE(r.err.find(flag == "--target" && args.rfind("cost", 0) == 0 ? "tpu" : flag),
              std::string::npos)
        << args << "\n"
        << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
  }
  // run --seed: "010" is ten, not octal eight
  RunResult a = strata("run '" + p + "' --seed 010");
  RunResult b = strata("run '" + p + "' --seed 10");
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(Cli, NoLayerSplitSearchesTheWholeProgramOnly) {
  // Three weight layers: searched layer by layer (docs/search.md, "Layers") unless turned off.
  const std::string p = file("chain.strata",
                             "input X: f16[8, 64]\ninput W1: f16[64, 64]\ninput W2: f16[64, 64]\n"
                             "input W3: f16[64, 64]\n"
                             "O = matmul(relu(matmul(relu(matmul(X, W1)), W2)), W3)\noutput O\n");
  const std::string common = " --no-cache --no-gpu --quiet --no-show --top 1 --max-states 4000 ";
  for (bool split : {true, false}) {
    const std::string out = (dir_ / (split ? "split.json" : "whole.json")).string();
    RunResult r = strata("optimize '" + p + "'" + common + (split ? "" : "--no-layer-split ") +
                         "-o '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string doc = read_file(out);
    EXPECT_EQ(doc.find("searched in 3 segments") != std::string::npos, split) << doc.substr(0, 400);
    EXPECT_NE(doc.find(split ? "\"split_layers\": true" : "\"split_layers\": false"),
              std::string::npos);
  }
}

// No GPU is an environment condition, not an internal error: `device` and `profile` exit 1.
TEST_F(Cli, NoGpuIsNotAnInternalError) {
  RunResult d = strata("device");
  EXPECT_TRUE(d.code == 0 || d.code == 1) << d.code << d.err;
  std::string p = file("rms.strata", kProgram);
  RunResult prof = strata("profile '" + p + "'");
  if (d.code == 1) {
    EXPECT_EQ(prof.code, 1) << prof.err;
    EXPECT_NE(prof.err.find("GPU"), std::string::npos) << prof.err;
  } else {
    EXPECT_NE(prof.code, 3) << prof.err;
  }
}

TEST_F(Cli, Help) {
  RunResult r = strata("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("check"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Validate a program or μGraph file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("show"), std::string::npos) << r.out;
  r = strata("show --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--dot"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--json"), std::string::npos) << r.out;
  r = strata("check --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("FILE"), std::string::npos) << r.out;
}

// ---- strata equiv: verdicts, exit codes and options ----------------------------------------

/// A μGraph of one input X: f16[2, 3] (or `dtype`) whose output is X multiplied by n through
/// doublings and additions of the running value (`combine` = "add"), or X^n (`combine` = "mul").
std::string doubling_graph(uint64_t n, const std::string& combine,
                           const std::string& dtype = "f16") {
  std::string ops, cur = "X";
  int top = 63, k = 0;
  while (!((n >> top) & 1)) --top;
  auto step = [&](const std::string& rhs) {
    std::string out = "T" + std::to_string(k++);
    ops += std::string(ops.empty() ? "" : ", ") + "{\"op\": \"" + combine + "\", \"inputs\": [\"" +
           cur + "\", \"" + rhs + "\"], \"output\": \"" + out + "\"}";
    cur = out;
  };
  for (int b = top - 1; b >= 0; --b) {
    step(cur);
    if ((n >> b) & 1) step("X");
  }
  return "{\"inputs\": [{\"name\": \"X\", \"shape\": [2, 3], \"dtype\": \"" + dtype +
         "\"}], \"ops\": [" + ops + "], \"outputs\": [\"" + cur + "\"]}";
}

TEST_F(Cli, EquivVerdictsAndExitCodes) {
  std::string big = file("big.json", doubling_graph(uint64_t{1} << 62, "add"));
  std::string small = file("small.json", doubling_graph(10565, "add"));
  std::string small2 = file("small2.json", doubling_graph(10565, "add"));
  // 2^62·X and 10565·X agree modulo p on every trial: not a yes.
  RunResult r = strata("equiv '" + big + "' '" + small + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("unknown: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("not a proof of equivalence"), std::string::npos) << r.out;
  // X^p against X (Fermat): the degree bound gives nothing either.
  const uint64_t p = (uint64_t{1} << 62) - 10565;
  r = strata("equiv '" + file("xp.json", doubling_graph(p, "mul")) + "' '" +
             file("x.json",
                  "{\"inputs\": [{\"name\": \"X\", \"shape\": [2, 3]}], \"ops\": [{\"op\": "
                  "\"mul_scalar\", \"inputs\": [\"X\"], \"output\": \"Y\", \"scalar\": 1}], "
                  "\"outputs\": [\"Y\"]}") +
             "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("unknown: ", 0), 0u) << r.out;
  r = strata("equiv '" + small + "' '" + small2 + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("equivalent: 1 trial(s)", 0), 0u) << r.out;
  // Interfaces that differ are a "no", naming the pair.
  r = strata("equiv '" + small + "' '" + file("f32.json", doubling_graph(10565, "add", "f32")) +
             "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("not equivalent: input 0 differs in dtype: `X` is f16"), std::string::npos)
      << r.out;
  std::string wide = doubling_graph(10565, "add");
  wide.replace(wide.find("[2, 3]"), 6, "[3, 2]");
  r = strata("equiv '" + small + "' '" + file("wide.json", wide) + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("not equivalent: input 0 differs in shape: `X` is [2, 3]"),
            std::string::npos)
      << r.out;
  // Options: any target is safe; a bad one is bad input naming the flag.
  r = strata("equiv '" + small + "' '" + small2 + "' --target -1e12");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("equivalent: 64 trial(s)", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("misses the target"), std::string::npos) << r.err;
  for (const char* bad : {"--target -inf", "--target 0", "--target nan", "--target 5",
                          "--trials 65", "--trials -1", "--threads -2"}) {
    r = strata("equiv '" + small + "' '" + small2 + "' " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out << r.err;
    std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(r.err.find(flag + ": expected"), std::string::npos) << bad << ": " << r.err;
  }
}

}  // namespace
}  // namespace strata
