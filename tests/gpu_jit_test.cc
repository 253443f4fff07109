// Tests of the GPU runtime that need no GPU: hashes, element codecs, result documents, the
// error measure of the profiler, and the JIT with its binary cache (compiles small sources
// with nvcc, which must be installed: CI machines have the CUDA toolkit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sys/wait.h>

#include "gpu_test_sources.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/frontend/graph_loader.h"
#include "strata/frontend/program_parser.h"
#include "strata/gpu/candidate_profiler.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/gpu_jit.h"
#include "strata/gpu/profiler.h"
#include "strata/gpu/runtime_api.h"
#include "strata/gpu/search_profile.h"
#include "strata/gpu/variant_profile.h"
#include "strata/ir/dtype_codec.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/result_graphs.h"
#include "strata/search/search.h"
#include "strata/util/hash.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under the build's test cache (or /tmp), removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const char* root = std::getenv("STRATA_CACHE_DIR");
    fs::path base = root && *root ? fs::path(root) : fs::temp_directory_path();
    fs::create_directories(base);
    std::string templ = (base / "jit-test-XXXXXX").string();
    EXPECT_NE(mkdtemp(templ.data()), nullptr);
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

JitOptions sm80_options(const fs::path& cache) {
  JitOptions o;
  o.arch = "sm_80";
  o.cache_dir = cache.string();
  o.threads = 2;
  return o;
}

void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << file;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(at);
  f.write(&c, 1);
}

// Candidates × emitter variants (variant_profile.h): the expansion, the selection, emitter
// failures and the choice of the fastest, without a GPU.
TEST(VariantProfile, ExpandsCandidatesTimesVariants) {
  auto a = load_graph("examples/programs/rmsnorm_small.strata");
  ASSERT_TRUE(a.ok()) << a.error().message;
  std::vector<VariantCandidate> candidates = {
      {*a, std::nullopt}, {*a, std::string("// given source")}, {*a, std::nullopt}};
  int calls = 0;
  std::vector<EmitterVariant> variants = {
      {"one",
       [&](const KernelGraph&) -> Result<std::string> {
         return "// one " + std::to_string(++calls);
       }},
      {"two", [&](const KernelGraph&) -> Result<std::string> { return make_error("rejected"); }}};
  // Runs: c0·one, c0·two, c1 (source), c2·one, c2·two; run 3 is left out.
  std::vector<VariantRun> runs =
      emit_variant_runs(candidates, variants, [](size_t i) { return i != 3; });
  ASSERT_EQ(runs.size(), 5u);
  const int expected[5][2] = {{0, 0}, {0, 1}, {1, -1}, {2, 0}, {2, 1}};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].candidate, expected[i][0]) << i;
    EXPECT_EQ(runs[i].variant, expected[i][1]) << i;
    EXPECT_EQ(runs[i].selected, i != 3) << i;
    EXPECT_FALSE(runs[i].outcome) << i;
  }
  EXPECT_EQ(calls, 1);  // "one" emitted c0 only: c2·one was left out
  EXPECT_EQ(runs[0].source, std::optional<std::string>("// one 1"));
  EXPECT_EQ(runs[1].source, std::nullopt);
  EXPECT_EQ(runs[1].emit_error, "CUDA emitter: rejected");
  EXPECT_EQ(runs[2].source, std::optional<std::string>("// given source"));
  EXPECT_EQ(runs[3].source, std::nullopt);
  EXPECT_TRUE(runs[3].emit_error.empty());
  EXPECT_EQ(runs[4].emit_error, "CUDA emitter: rejected");

  // No run with a source: nothing to profile, no GPU needed.
  std::vector<VariantRun> none = {runs[1], runs[3]};
  EXPECT_TRUE(profile_variant_runs(candidates, none, ProfileOptions{}).ok());
  EXPECT_FALSE(none[0].outcome);

  // The fastest: the least median among timed runs, the first of equals.
  EXPECT_EQ(fastest_variant_run(runs), -1);
  auto timed = [](double us) {
    ProfiledCandidate pc;
    pc.status = CandidateStatus::Ok;
    pc.timing = Timing{};
    pc.timing->median_us = us;
    return pc;
  };
  runs[0].outcome = timed(5);
  runs[2].outcome = timed(3);
  runs[4].outcome = timed(3);
  runs[1].outcome = ProfiledCandidate{};  // not timed
  EXPECT_EQ(fastest_variant_run(runs), 2);
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Incremental updates across block boundaries give the one-shot digest.
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + i % 26));
  Sha256 h;
  for (size_t pos = 0, step = 1; pos < text.size(); pos += step, step = step * 3 % 97 + 1)
    h.update(std::string_view(text).substr(pos, step));
  EXPECT_EQ(h.finish_hex(), sha256_hex(text));
}

TEST(DtypeCodec, HalfRoundsToNearestEven) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);         // halfway to 2^16: rounds to infinity
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);         // tie → even (zero)
  EXPECT_EQ(float_to_half_bits(0x3p-25f), 0x0002);         // 1.5 ulp → 2
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3C00);  // tie → even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x3p-11f), 0x3C02);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  // Every finite half value survives decode → encode.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF)) continue;  // NaN payloads
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(bits))), bits) << bits;
  }
}

TEST(DtypeCodec, Bf16AndBuffers) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80);  // tie → even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x3p-8f), 0x3F82);
  EXPECT_EQ(bf16_bits_to_float(0x4049), 3.140625f);
  std::vector<double> v = {0.1, -2.5, 1e-3, 3.0};
  std::vector<uint8_t> f32 = encode_elements(DType::f32, v);
  ASSERT_EQ(f32.size(), 16u);
  EXPECT_EQ(decode_elements(DType::f32, f32.data(), 4)[1], -2.5);
  std::vector<double> h = round_to_dtype(DType::f16, v);
  EXPECT_EQ(h[1], -2.5);
  EXPECT_NEAR(h[0], 0.1, 1e-4);
  EXPECT_NE(h[0], 0.1);
}

TEST(Profiler, RelativeL2Error) {
  EXPECT_EQ(relative_l2_error({1, 2, 3}, {1, 2, 3}), 0.0);
  EXPECT_NEAR(relative_l2_error({3, 4}, {0, 0}), 5.0, 1e-12);  // absolute when want = 0
  EXPECT_NEAR(relative_l2_error({1.1, 0}, {1, 0}), 0.1, 1e-12);
  EXPECT_TRUE(std::isinf(relative_l2_error({1, NAN}, {1, 2})));
  EXPECT_TRUE(std::isinf(relative_l2_error({1, INFINITY}, {1, 2})));
  EXPECT_TRUE(std::isinf(relative_l2_error({1}, {1, 2})));
}

// emit_graph_source applies emitter knobs (as recorded by strata optimize's GPU profile) and
// rejects knobs that do not parse, naming them.
TEST(Profiler, PassesPerReplayByCountOrByTime) {
  TimingOptions o;  // ≥ 100 launches or ≥ 2000 µs of work per replay, whichever is fewer
  EXPECT_EQ(passes_for(4, 0, o), 25);        // unknown launch time: by count
  EXPECT_EQ(passes_for(4, 3.0, o), 25);      // short launches: by count (167 by time)
  EXPECT_EQ(passes_for(4, 100.0, o), 5);     // 5 passes × 4 sets × 100 µs = 2 ms
  EXPECT_EQ(passes_for(2, 4600.0, o), 1);    // a long launch: one pass
  EXPECT_EQ(passes_for(300, 1.0, o), 1);     // more sets than launches wanted
  EXPECT_EQ(passes_for(0, 50.0, o), 40);     // sets < 1 count as one: 40 × 50 µs = 2 ms
  o.min_replay_us = 0;
  EXPECT_EQ(passes_for(4, 100.0, o), 1);
}

TEST(ResultGraphs, EmitsWithKnobs) {
  const KernelGraph g = testing::add_graph();
  auto plain = emit_graph_source(g, "sm_90a");
  auto named = emit_graph_source(g, "sm_90a", "default");
  auto threads = emit_graph_source(g, "sm_90a", "threads=64");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(named.ok()) << named.error().message;
  ASSERT_TRUE(threads.ok()) << threads.error().message;
  EXPECT_EQ(*plain, *named);
  auto bad = emit_graph_source(g, "sm_90a", "groups=x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("groups=x"), std::string::npos) << bad.error().message;
}

TEST(ResultGraphs, ReadsMuGraphsAndRankedResults) {
  Json g1 = kernel_graph_to_json(testing::add_graph());
  KernelGraph other;
  int a = *other.add_input("A", Shape{4, 256}, DType::f16);
  int b = *other.add_input("B", Shape{4, 256}, DType::f16);
  (void)other.mark_output(*other.add_op(OpKind::Sub, {a, b}, {}, "O"));
  Json g2 = kernel_graph_to_json(other);

  auto single = graphs_in_document(g1, "g.json");
  ASSERT_TRUE(single.ok()) << single.error().message;
  ASSERT_EQ(single->size(), 1u);
  EXPECT_FALSE((*single)[0].predicted_us.has_value());

  Json result = {
      {"program", g2},
      {"best", g1},
      {"ranked", Json::array({Json{{"graph", g1}, {"cost", {{"predicted_us", 3.5}}}},
                              Json{{"predicted_us", 4.0}, {"graph", g2}, {"derived", "split_kv"}},
                              Json{{"graph", g1}}})}};
  auto ranked = graphs_in_document(result, "r.json");
  ASSERT_TRUE(ranked.ok()) << ranked.error().message;
  ASSERT_EQ(ranked->size(), 2u);  // the duplicate third entry is dropped
  EXPECT_EQ((*ranked)[0].where, "r.json: ranked[0].graph");
  EXPECT_EQ(*(*ranked)[0].predicted_us, 3.5);
  EXPECT_EQ(op_name((*ranked)[1].graph.op(2).kind), "sub");
  EXPECT_EQ(*(*ranked)[1].predicted_us, 4.0);
  EXPECT_EQ((*ranked)[0].derived, "");  // found by the enumeration
  EXPECT_EQ((*ranked)[1].derived, "split_kv");

  EXPECT_EQ((*ranked)[0].knobs, "default");
  EXPECT_FALSE((*ranked)[1].profiled_fastest);
  EXPECT_EQ(preferred_graph(*ranked), 0);

  // A GPU profile of strata optimize marks its fastest rank and the knobs it was timed with.
  Json profiled = result;
  profiled["gpu_profile"] = {{"fastest", 1}, {"fastest_variant", "groups=4"}};
  auto fast = graphs_in_document(profiled, "p.json");
  ASSERT_TRUE(fast.ok()) << fast.error().message;
  ASSERT_EQ(fast->size(), 2u);
  EXPECT_FALSE((*fast)[0].profiled_fastest);
  EXPECT_EQ((*fast)[0].knobs, "default");
  EXPECT_TRUE((*fast)[1].profiled_fastest);
  EXPECT_EQ((*fast)[1].knobs, "groups=4");
  EXPECT_EQ(preferred_graph(*fast), 1);
  profiled["gpu_profile"] = {{"fastest", nullptr}};  // no correct candidate
  EXPECT_EQ(preferred_graph(*graphs_in_document(profiled, "p.json")), 0);

  Json best_only = {{"best", g2}};
  auto best = graphs_in_document(best_only, "b.json");
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->size(), 1u);

  auto none = graphs_in_document(Json{{"stats", 1}}, "n.json");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("n.json: holds no μGraph"), std::string::npos);

  Json broken = g1;
  broken["ops"][0]["op"] = "addd";
  Json bad = {{"ranked", Json::array({Json{{"graph", g1}}, Json{{"graph", broken}}})}};
  auto err = graphs_in_document(bad, "x.json");
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message.find("x.json: ranked[1].graph: ops[0].op"), std::string::npos)
      << err.error().message;
}

TEST(Jit, CacheKeyCoversSourceArchFlagsAndHeaders) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "inc");
  std::ofstream(dir.path() / "inc" / "rt.cuh") << "// v1\n";
  JitOptions o = sm80_options(dir.path());
  o.include_dirs = {(dir.path() / "inc").string()};
  auto k1 = binary_cache_key("src", o);
  ASSERT_TRUE(k1.ok()) << k1.error().message;
  EXPECT_EQ(k1->size(), 64u);
  EXPECT_EQ(*binary_cache_key("src", o), *k1);
  EXPECT_NE(*binary_cache_key("src2", o), *k1);
  JitOptions arch = o;
  arch.arch = "sm_90a";
  EXPECT_NE(*binary_cache_key("src", arch), *k1);
  JitOptions flags = o;
  flags.extra_flags = {"-lineinfo"};
  EXPECT_NE(*binary_cache_key("src", flags), *k1);
  std::ofstream(dir.path() / "inc" / "rt.cuh") << "// v2\n";
  EXPECT_NE(*binary_cache_key("src", o), *k1);

  auto version = toolkit_version(o);
  ASSERT_TRUE(version.ok()) << version.error().message;
  EXPECT_NE(version->find("release"), std::string::npos);
  EXPECT_EQ(binary_cache_dir(o), (dir.path() / "bin").string());
}

TEST(Jit, CompilesCachesAndRebuildsCorruptEntries) {
  ScratchDir dir;
  JitOptions o = sm80_options(dir.path());
  auto first = compile_cuda(testing::add_source(), o);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->cache_hit);
  EXPECT_EQ(first->miss_reason, "absent");
  EXPECT_GT(first->compile_seconds, 0);
  EXPECT_NE(first->log.find("Used"), std::string::npos);  // ptxas resource report
  fs::path so = first->path, meta = fs::path(first->path).replace_extension(".json");
  ASSERT_TRUE(fs::exists(so));
  ASSERT_TRUE(fs::exists(meta));

  auto hit = compile_cuda(testing::add_source(), o);
  ASSERT_TRUE(hit.ok());
  EXPECT_TRUE(hit->cache_hit);
  EXPECT_EQ(hit->path, first->path);

  flip_byte(so, static_cast<std::streamoff>(fs::file_size(so) / 2));
  auto rebuilt = compile_cuda(testing::add_source(), o);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_FALSE(rebuilt->cache_hit);
  EXPECT_EQ(rebuilt->miss_reason, "checksum mismatch");
  EXPECT_TRUE(compile_cuda(testing::add_source(), o)->cache_hit);

  fs::resize_file(meta, fs::file_size(meta) / 2);
  auto truncated = compile_cuda(testing::add_source(), o);
  ASSERT_TRUE(truncated.ok());
  EXPECT_EQ(truncated->miss_reason, "metadata is not valid JSON");

  fs::remove(meta);
  auto incomplete = compile_cuda(testing::add_source(), o);
  ASSERT_TRUE(incomplete.ok());
  EXPECT_EQ(incomplete->miss_reason, "incomplete entry (metadata missing)");
  EXPECT_TRUE(compile_cuda(testing::add_source(), o)->cache_hit);
  // No temporary directories are left behind.
  for (const auto& e : fs::directory_iterator(dir.path() / "bin"))
    EXPECT_EQ(e.path().filename().string().rfind("tmp-", 0), std::string::npos) << e.path();

  // The library loads without a GPU; its host entry points answer.
  auto graph = testing::add_graph();
  auto cg = CompiledGraph::from_binary(*hit, &graph);
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  EXPECT_EQ(cg->workspace_bytes(), 0u);
  ASSERT_EQ(cg->inputs().size(), 2u);
  EXPECT_EQ(cg->outputs()[0].shape, (Shape{4, 256}));
  EXPECT_EQ(cg->inputs()[1].name, "B");
  if (gpu_count() == 0) {
    // Launching without a driver is an Error from strata_launch, not a crash.
    int dummy = 0;
    std::vector<const void*> in = {&dummy, &dummy};
    std::vector<void*> out = {&dummy};
    Status st = cg->run(in.data(), out.data(), nullptr);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("strata_launch failed"), std::string::npos)
        << st.error().message;
  }
  std::vector<const void*> no_inputs = {nullptr, nullptr};
  std::vector<void*> no_outputs = {nullptr};
  Status null_ptr = cg->run(no_inputs.data(), no_outputs.data(), nullptr);
  ASSERT_FALSE(null_ptr.ok());
  EXPECT_NE(null_ptr.error().message.find("input 0 (A) is a null pointer"), std::string::npos);
}

TEST(Jit, SharedMemoryFromTheMetaLine) {
  EXPECT_EQ(*source_smem_bytes(testing::big_smem_source()), 1 << 20);
  EXPECT_EQ(
      *source_smem_bytes("// strata-meta: {\"kernels\": [{\"smem\": 4096}, {\"smem\": 512}]}\n"),
      4096);
  EXPECT_FALSE(source_smem_bytes(testing::add_source()).has_value());
  EXPECT_FALSE(source_smem_bytes("// strata-meta: {broken\n").has_value());
}

// A source with predefined matmuls through cuBLAS says "cublas": true in its strata-meta line;
// the JIT then links -lcublas (with the toolkit's library directory as run path), records it in
// the cache entry and keys it, and the library loads without LD_LIBRARY_PATH.
TEST(Jit, CublasSourcesLinkCublas) {
  auto program = parse_program(
      "input X: f16[64, 128]\ninput W: f16[128, 96]\nY = matmul(X, W)\noutput Y\n", "mm.strata");
  ASSERT_TRUE(program.ok()) << program.error().message;
  auto source = emit_cuda(*program);
  ASSERT_TRUE(source.ok()) << source.error().message;
  ScratchDir dir;
  JitOptions o = sm80_options(dir.path());
  const std::vector<std::string> link = source_link_flags(*source, o);
  ASSERT_FALSE(link.empty());
  EXPECT_EQ(link[0], "-lcublas");
  EXPECT_EQ(link[1], "-lcublasLt");  // library epilogues (cublasLtMatmul)
  EXPECT_TRUE(source_link_flags(testing::add_source(), o).empty());
  EmitOptions kernels;
  kernels.library_matmul = false;
  auto generated = emit_cuda(*program, kernels);
  ASSERT_TRUE(generated.ok());
  EXPECT_TRUE(source_link_flags(*generated, o).empty());
  EXPECT_TRUE(source_link_flags("// strata-meta: {\"cublas\": tru\n", o).empty());
  EXPECT_TRUE(source_link_flags("// strata-meta: [true]\n", o).empty());
  EXPECT_EQ(source_link_flags("// strata-meta: {\"cublas\": true}\n", o), link);

  auto bin = compile_cuda(*source, o);
  ASSERT_TRUE(bin.ok()) << bin.error().message;
  auto meta = read_text_file((fs::path(bin->path).replace_extension(".json")).string());
  ASSERT_TRUE(meta.ok());
  EXPECT_NE(meta->find("\"-lcublas\""), std::string::npos) << *meta;
  auto lib = SharedLibrary::open(bin->path);
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  EXPECT_NE(lib->find("strata_launch"), nullptr);
  auto cg = CompiledGraph::from_binary(*bin, &*program);
  EXPECT_TRUE(cg.ok()) << cg.error().message;
}

TEST(Jit, SignatureMismatchIsAnError) {
  ScratchDir dir;
  auto bin = compile_cuda(testing::add_source(), sm80_options(dir.path()));
  ASSERT_TRUE(bin.ok()) << bin.error().message;
  KernelGraph wrong;
  int a = *wrong.add_input("A", Shape{4, 128}, DType::f16);
  int b = *wrong.add_input("B", Shape{4, 128}, DType::f16);
  (void)wrong.mark_output(*wrong.add_op(OpKind::Add, {a, b}, {}, "O"));
  auto cg = CompiledGraph::from_binary(*bin, &wrong);
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.error().message.find("inputs 0 is f16[4, 256] in the library but f16[4, 128]"),
            std::string::npos)
      << cg.error().message;
}

TEST(Jit, CompilerFailuresAreErrors) {
  ScratchDir dir;
  JitOptions o = sm80_options(dir.path());
  auto outcome =
      compile_cuda_many({testing::syntax_error_source(), testing::static_smem_overflow_source(),
                         testing::syntax_error_source()},
                        o);
  ASSERT_EQ(outcome.size(), 3u);
  ASSERT_FALSE(outcome[0].ok());
  EXPECT_NE(outcome[0].error().message.find("nvcc failed"), std::string::npos);
  EXPECT_NE(outcome[0].error().message.find("undeclared_name"), std::string::npos)
      << outcome[0].error().message;
  ASSERT_FALSE(outcome[1].ok());
  EXPECT_NE(outcome[1].error().message.find("too much shared data"), std::string::npos)
      << outcome[1].error().message;
  ASSERT_FALSE(outcome[2].ok());
  EXPECT_EQ(outcome[2].error().message, outcome[0].error().message);
  // Nothing is cached for a failure.
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(dir.path() / "bin", ec));

  JitOptions missing = o;
  missing.nvcc = (dir.path() / "no-such-nvcc").string();
  auto r = compile_cuda(testing::add_source(), missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot start"), std::string::npos) << r.error().message;

  auto not_a_library = SharedLibrary::open((dir.path() / "missing.so").string());
  ASSERT_FALSE(not_a_library.ok());
  EXPECT_NE(not_a_library.error().message.find("cannot load shared library"), std::string::npos);
}

TEST(Jit, ArchitectureComesFromTheDevice) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
  JitOptions o;  // no arch
  auto flags = nvcc_flags(o);
  if (gpu_count() == 0) {
    ASSERT_FALSE(flags.ok());
    EXPECT_NE(flags.error().message.find("no target architecture"), std::string::npos);
  } else {
    ASSERT_TRUE(flags.ok()) << flags.error().message;
    EXPECT_EQ((*flags)[6], "-arch=" + query_device()->arch());
  }
}

TEST(Profiler, CandidateErrorsWithoutAGpu) {
  KernelGraph g = testing::add_graph();
  auto mismatched = profile_candidates({g, g}, {testing::add_source()}, {});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.error().message.find("2 graphs but 1 sources"), std::string::npos);
  auto none = profile_candidates({}, {}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  if (gpu_count() == 0) {
    auto r = profile_candidates({g}, {testing::add_source()}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no CUDA device"), std::string::npos) << r.error().message;
  }
}

/// `strata profile --variants`: every graph candidate once per emitter knob spec, a .cu source
/// once; a malformed spec is bad input.
TEST(ProfileCommand, VariantsExpandGraphCandidates) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set";
  ScratchDir dir;
  fs::path program = dir.path() / "add.json", good = dir.path() / "good.cu",
           report = dir.path() / "report.json";
  ASSERT_TRUE(save_graph_json(testing::add_graph(), program.string()).ok());
  ASSERT_TRUE(write_text_file(good.string(), testing::add_source()).ok());
  std::string cmd = std::string(bin) + " profile " + program.string() + " " + program.string() +
                    " " + good.string() +
                    " --variants 'default;inline=0;f32mid=1' --groups 1 --compile-only "
                    "--arch sm_80 -q -o " +
                    report.string();
  int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc)) << cmd;
  EXPECT_EQ(WEXITSTATUS(rc), 0) << cmd;
  auto text = read_text_file(report.string());
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto doc = parse_json_text(*text, report.string());
  ASSERT_TRUE(doc.ok());
  const Json& c = (*doc)["candidates"];
  ASSERT_EQ(c.size(), 4u) << c.dump(2);
  // The --groups flag is part of every variant's name (the knobs that differ from defaults).
  EXPECT_EQ(c[0]["variant"], "groups=1");
  EXPECT_EQ(c[1]["variant"], "groups=1,inline=0");
  EXPECT_EQ(c[2]["variant"], "groups=1,f32mid=1");
  EXPECT_EQ(c[3]["variant"], "source");
  for (const Json& r : c) EXPECT_EQ(r["status"], "compiled") << r.dump(2);

  std::string bad = std::string(bin) + " profile " + program.string() +
                    " --variants 'default;groups=x' --compile-only --arch sm_80 2>/dev/null";
  rc = std::system(bad.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

/// `strata profile --compile-only` needs no GPU: it emits (or takes) sources and compiles them.
TEST(ProfileCommand, CompileOnlyReportsEachCandidate) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set";
  ScratchDir dir;
  fs::path program = dir.path() / "add.json", good = dir.path() / "good.cu",
           bad = dir.path() / "bad.cu", report = dir.path() / "report.json";
  ASSERT_TRUE(save_graph_json(testing::add_graph(), program.string()).ok());
  ASSERT_TRUE(write_text_file(good.string(), testing::add_source()).ok());
  ASSERT_TRUE(write_text_file(bad.string(), testing::syntax_error_source()).ok());
  std::string cmd = std::string(bin) + " profile " + program.string() + " " + good.string() + " " +
                    bad.string() + " --compile-only --arch sm_80 -q -o " + report.string();
  int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc)) << cmd;
  EXPECT_EQ(WEXITSTATUS(rc), 1) << cmd;  // one candidate failed
  auto text = read_text_file(report.string());
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto doc = parse_json_text(*text, report.string());
  ASSERT_TRUE(doc.ok());
  const Json& c = (*doc)["candidates"];
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["status"], "compiled") << c[0].dump(2);
  EXPECT_TRUE(fs::exists(c[0]["library"].get<std::string>()));
  EXPECT_GT(c[0]["predicted_us"].get<double>(), 0.0);
  EXPECT_EQ(c[1]["status"], "compile_error");
  EXPECT_NE(c[1]["error"].get<std::string>().find("undeclared_name"), std::string::npos);

  // Bad input: a missing candidate file is exit 2 with the path in the message.
  std::string missing = std::string(bin) + " profile " + program.string() + " " +
                        (dir.path() / "nope.json").string() +
                        " --compile-only --arch sm_80 2>/dev/null";
  rc = std::system(missing.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);

  // Input files of the wrong size are bad input (checked before anything needs a GPU).
  fs::create_directories(dir.path() / "in");
  ASSERT_TRUE(
      write_text_file((dir.path() / "in" / "A.f64").string(), std::string(8 * 1024, '\0')).ok());
  ASSERT_TRUE(
      write_text_file((dir.path() / "in" / "B.f64").string(), std::string(8 * 1000, '\0')).ok());
  fs::path err = dir.path() / "err.txt";
  std::string sized = std::string(bin) + " profile " + program.string() + " --inputs " +
                      (dir.path() / "in").string() + " 2>" + err.string();
  rc = std::system(sized.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  auto message = read_text_file(err.string());
  ASSERT_TRUE(message.ok());
  EXPECT_NE(message->find("B.f64: expected 1024 float64 values for B[4, 256], found 8000 bytes"),
            std::string::npos)
      << *message;
}

// The emitter variants of a search profile: normalized, repeats dropped, bad specs named.
TEST(SearchProfile, VariantsAreNormalized) {
  auto v = normalize_variants({"default", "", "groups=4", "groups=4", "minblocks=2"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(*v, (std::vector<std::string>{"default", "groups=4", "minblocks=2"}));
  auto none = normalize_variants({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, std::vector<std::string>{"default"});
  auto bad = normalize_variants({"default", "groups=x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("variant \"groups=x\""), std::string::npos)
      << bad.error().message;
  auto defaults = normalize_variants(default_tuning_variants());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, default_tuning_variants());
}

// Without a GPU, profiling a search result is an Error (the search's answer stands).
TEST(SearchProfile, NoDeviceIsAnError) {
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is present (runtime_gpu_test covers it)";
  auto program = load_graph("examples/programs/rmsnorm_small.strata");
  ASSERT_TRUE(program.ok()) << program.error().message;
  auto result =
      superoptimize(*program, SearchConfig{}.with_quiet(true).with_cache(false).with_top_k(1));
  ASSERT_TRUE(result.ok()) << result.error().message;
  auto report = profile_search_result(*program, *result, {});
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.error().message.find("no CUDA device"), std::string::npos)
      << report.error().message;
}

}  // namespace
}  // namespace strata
