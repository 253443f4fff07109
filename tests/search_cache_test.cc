// Tests of the search's result cache and checked JSON envelopes, the result JSON format, and
// `strata optimize` end to end (run through $STRATA_BIN, set by CTest).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "strata/cost/cost_model.h"
#include "strata/search/dim_classes.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"
#include "strata/util/hash.h"
#include "strata/search/search.h"
#include "strata/search/search_cache.h"
#include "strata/search/search_report.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) /
                 ("strata_search_cache_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

KernelGraph rmsnorm_program() {
  auto g = load_graph("examples/programs/rmsnorm_small.strata");
  EXPECT_TRUE(g.ok());
  return std::move(g).value();
}

// Twelve graphs: rmsnorm_small's ranking then holds a graph with an rms accumulator (its first
// ones compute the norm with a reduction inside one block).
SearchConfig cached_config(const fs::path& dir) {
  return SearchConfig{}.with_threads(2).with_quiet(true).with_cache(true).with_cache_dir(
      dir.string()).with_top_k(12);
}

template <class T>
T must_ok(Result<T> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : T{};
}

std::vector<std::string> ranked_json(const SearchResult& r) {
  std::vector<std::string> out;
  for (const Candidate& c : r.ranked) out.push_back(kernel_graph_to_json(c.graph).dump());
  return out;
}

TEST(SearchCache, KeysAndHashes) {
  KernelGraph p = rmsnorm_program();
  SearchConfig c;
  std::string key = search_cache_key(p, c);
  EXPECT_EQ(key, search_cache_key(p, c));
  EXPECT_EQ(key.size(), 64u);  // SHA-256, the project's one content hash
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
  EXPECT_EQ(program_hash(p), sha256_hex(kernel_graph_to_json(p).dump()));
  // Result-affecting fields change the key; limits and threads do not.
  EXPECT_NE(key, search_cache_key(p, SearchConfig(c).with_max_block_ops(9)));
  EXPECT_NE(key, search_cache_key(p, SearchConfig(c).with_target("a100")));
  // The model's constants and the split tiles are part of the key: a refitted model or other
  // splits must not reuse rankings made with the old ones.
  const Json h100 = search_model_fingerprint("h100"), h200 = search_model_fingerprint("h200");
  EXPECT_EQ(h100["mem_bandwidth_Bps"], Target::by_name("h100")->mem_bandwidth_Bps);
  EXPECT_NE(h100, h200);
  EXPECT_EQ(h100["grid_tiles"], Json(SplitPolicy{}.grid_tiles));
  EXPECT_EQ(search_model_fingerprint("a100")["narrow_bandwidth_Bps"], "inf");  // free: no cost
  EXPECT_NE(key, search_cache_key(p, SearchConfig(c).with_abstract_pruning(false)));
  EXPECT_EQ(key, search_cache_key(p, SearchConfig(c).with_threads(7).with_time_limit(3)));
  auto other = load_graph("examples/programs/rmsnorm_b1.strata");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(key, search_cache_key(*other, c));
  // The sources of the search are part of the key.
  EXPECT_EQ(key, search_cache_key(p, c, search_source_hash()));
  EXPECT_NE(key, search_cache_key(p, c, std::string(64, '0')));
}

/// The hash of the sources that determine search results, recomputed from the files here the
/// way cmake/source_hash.cmake computes it at build time.
std::vector<std::string> current_source_files() {
  std::vector<std::string> files;
  auto add = [&](const fs::path& dir, std::initializer_list<const char*> exts) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
      for (const char* ext : exts)
        if (e.is_regular_file() && e.path().extension() == ext)
          files.push_back(e.path().lexically_relative(".").generic_string());
  };
  add("include/strata", {".h", ".def"});
  for (const char* d : {"search", "expr", "verify", "opt", "cost", "ir", "interp", "util"})
    add(fs::path("src") / d, {".h", ".cc"});
  std::sort(files.begin(), files.end());
  return files;
}

std::string current_source_hash() {
  std::string lines;
  for (const std::string& f : current_source_files())
    lines += f + " " + sha256_hex(slurp(f)) + "\n";
  return sha256_hex(lines);
}

TEST(SearchCache, KeyFollowsTheSources) {
  // The build recomputes the hash whenever a source changes: it matches the files here.
  EXPECT_EQ(search_source_hash(), current_source_hash())
      << "the build's source hash is stale (rebuild), or cmake/source_hash.cmake and this "
         "test disagree on the file set";
  // The set (the build's, as the hashes agree) covers the rules of the search, the
  // verifier and the cost model, and the public headers, wherever they live below
  // include/strata/.
  const std::vector<std::string> files = current_source_files();
  auto covers = [&](std::string_view prefix, std::string_view suffix) {
    return std::any_of(files.begin(), files.end(), [&](const std::string& f) {
      return f.starts_with(prefix) && f.ends_with(suffix);
    });
  };
  EXPECT_TRUE(covers("src/search/", "/search.cc"));
  EXPECT_TRUE(covers("src/search/", "/enumerator.cc"));
  EXPECT_TRUE(covers("src/verify/", "/verifier.cc"));
  EXPECT_TRUE(covers("src/cost/", "/cost_model.cc"));
  EXPECT_TRUE(covers("include/strata/", "/search.h"));
  EXPECT_TRUE(covers("include/strata/", "/op_table.def"));
  // A result cached by a build with other sources (a stale key) is not served.
  fs::path dir = fresh_dir("stale");
  KernelGraph p = rmsnorm_program();
  auto first = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(first.ok()) << first.error().message;
  fs::path entry = dir / (first->cache_key + ".json");
  std::string stale_key = search_cache_key(p, cached_config(dir), std::string(64, 'a'));
  fs::rename(entry, dir / (stale_key + ".json"));
  auto second = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->from_cache);
  EXPECT_EQ(second->cache_key, first->cache_key);
}

TEST(SearchCache, CheckedEnvelopeDetectsDamage) {
  fs::path dir = fresh_dir("envelope");
  fs::path p = dir / "sub" / "doc.json";
  Json payload = {{"answer", 42}, {"list", {1, 2, 3}}};
  ASSERT_TRUE(write_checked_json(p.string(), "test-doc", "k1", "prog1", payload).ok());
  auto back = read_checked_json(p.string(), "test-doc", "k1", "prog1");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, payload);
  auto fails_with = [&](const std::string& format, const std::string& key,
                        const std::string& part) {
    auto r = read_checked_json(p.string(), format, key, "prog1");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(part), std::string::npos) << r.error().message;
  };
  fails_with("test-doc", "k2", "key mismatch");
  fails_with("other-doc", "k1", "not a other-doc document");
  auto other_program = read_checked_json(p.string(), "test-doc", "k1", "prog2");
  ASSERT_FALSE(other_program.ok());
  EXPECT_NE(other_program.error().message.find("answers another program"), std::string::npos);
  std::string text = slurp(p);
  spit(p, std::string(text).replace(text.find("42"), 2, "43"));
  fails_with("test-doc", "k1", "checksum mismatch");
  // The checksum covers the key and the program too: editing either is detected.
  spit(p, std::string(text).replace(text.find("\"k1\""), 4, "\"k3\""));
  fails_with("test-doc", "k3", "checksum mismatch");
  // Damage the JSON reader throws on, or rejects, is an error naming the file, never fatal.
  for (const std::string& damaged :
       {std::string(text).replace(text.find("42"), 2, "1e400"),
        std::string(text).replace(text.find("42"), 2, "\"\xff\""),
        std::string(text).replace(text.find("\"k1\""), 4, "\"k\xc3\"")}) {
    spit(p, damaged);
    auto r = read_checked_json(p.string(), "test-doc", "k1", "prog1");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(p.string()), std::string::npos) << r.error().message;
  }
  spit(p, text.substr(0, text.size() / 2));
  fails_with("test-doc", "k1", "invalid JSON");
  spit(p, "");
  fails_with("test-doc", "k1", "empty");
  fails_with("test-doc", "k1", "");
  auto missing = read_checked_json((dir / "none.json").string(), "test-doc", "k1", "prog1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message.rfind("missing: ", 0), 0u);
}

// Cache entries and checkpoints are JSON read by the same parser as every other document: a
// value nested 80,000 deep (which used to overflow the stack when the payload was hashed) is an
// error naming the file and the limit, and the envelope's version is never truncated.
TEST(SearchCache, EnvelopesObeyTheJsonLimits) {
  fs::path dir = fresh_dir("limits");
  fs::path p = dir / "doc.json";
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  spit(p,
       "{\"format\": \"test-doc\", \"version\": 1, \"key\": \"k\", \"checksum\": \"c\", "
       "\"payload\": " +
           deep + "}");
  auto r = read_checked_json(p.string(), "test-doc", "k", "prog");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(p.string() + ":1:"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("nested more than 64 deep"), std::string::npos)
      << r.error().message;
  ASSERT_TRUE(write_checked_json(p.string(), "test-doc", "k", "prog", Json{{"a", 1}}).ok());
  std::string text = slurp(p);
  spit(p, std::string(text).replace(text.find("\"version\":2"), 11, "\"version\":4294967298"));
  auto v = read_checked_json(p.string(), "test-doc", "k", "prog");
  ASSERT_FALSE(v.ok());  // 2^32 + 2 is not version 2
  EXPECT_NE(v.error().message.find("unsupported version"), std::string::npos) << v.error().message;
  spit(p, "\xEF\xBB\xBF" + text);  // a byte-order mark is skipped
  EXPECT_TRUE(read_checked_json(p.string(), "test-doc", "k", "prog").ok());
}

// A checkpoint whose fields have the wrong types (valid checksum) used to throw out of the
// search; now it is reported and ignored, and the search starts afresh.
TEST(SearchCache, MalformedCheckpointIsReportedAndIgnored) {
  fs::path dir = fresh_dir("ckpt");
  KernelGraph p = rmsnorm_program();
  SearchConfig config = cached_config(dir).with_cache(false);
  config.checkpoint_path = (dir / "ckpt.json").string();
  config.resume = true;
  const std::string key = search_cache_key(p, config);
  for (const Json& payload :
       {Json{{"tasks_total", "many"}}, Json{{"tasks_total", 4294967297}},
        Json{{"tasks_total", 3}, {"stats", "x"}}, Json::array({1, 2}),
        Json{{"tasks_total", 1}, {"completed", {Json::parse("18446744073709551615")}}}}) {
    ASSERT_TRUE(
        write_checked_json(config.checkpoint_path, "strata-search-checkpoint", key,
                           program_hash(p), payload)
            .ok());
    auto r = superoptimize(p, config);
    ASSERT_TRUE(r.ok()) << payload.dump() << ": " << r.error().message;
    EXPECT_EQ(r->stats.stop, StopReason::Exhausted) << payload.dump();
    bool reported = false;
    for (const std::string& n : r->notes)
      reported = reported || n.find("ckpt.json") != std::string::npos;
    EXPECT_TRUE(reported) << payload.dump();
  }
}

TEST(SearchCache, RepeatedRunAnswersFromTheCache) {
  fs::path dir = fresh_dir("hit");
  KernelGraph p = rmsnorm_program();
  auto first = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->stats.stop, StopReason::Exhausted);
  EXPECT_TRUE(fs::exists(dir / (first->cache_key + ".json")));
  auto t0 = std::chrono::steady_clock::now();
  auto second = superoptimize(p, cached_config(dir));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->stats.stop, StopReason::CacheHit);
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(ranked_json(*second), ranked_json(*first));
  EXPECT_EQ(second->stats.states, first->stats.states);
  for (size_t i = 0; i < first->ranked.size(); ++i) {
    EXPECT_EQ(second->ranked[i].is_program, first->ranked[i].is_program);
    EXPECT_EQ(second->ranked[i].verification.equivalent, first->ranked[i].verification.equivalent);
    EXPECT_DOUBLE_EQ(second->ranked[i].cost.predicted_us, first->ranked[i].cost.predicted_us);
  }
  // A different configuration is a different entry.
  auto other = superoptimize(p, cached_config(dir).with_max_block_ops(9));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->from_cache);
}

// A program built in memory with an input added after an op (as the megakernel's op programs
// are): its JSON form, which the cache stores, lists the inputs first, so read back its tensors
// are numbered differently. The entry is still this program's: served, with no warning.
TEST(SearchCache, ProgramWithAnInputAfterAnOpIsServedFromTheCache) {
  fs::path dir = fresh_dir("late_input");
  KernelGraph p;
  int x = must_ok(p.add_input("x", Shape{4, 64}, DType::f16));
  OpAttrs norm;
  norm.dim = 1;
  norm.scalar = 1e-5;
  int n = must_ok(p.add_op(OpKind::RmsNorm, {x}, norm));
  int w = must_ok(p.add_input("w", Shape{64, 32}, DType::f16));
  ASSERT_TRUE(p.mark_output(must_ok(p.add_op(OpKind::Matmul, {n, w})), "y").ok());
  auto reread = kernel_graph_from_json(kernel_graph_to_json(p), "p");
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  ASSERT_FALSE(reread->structurally_equal(p));  // the case: the numbering changes
  auto first = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->from_cache);
  for (int run = 0; run < 2; ++run) {
    auto again = superoptimize(p, cached_config(dir));
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(again->from_cache);
    EXPECT_TRUE(again->notes.empty()) << again->notes[0];
    EXPECT_EQ(ranked_json(*again), ranked_json(*first));
  }
  // Another program under this program's entry is still refused (same interface, no norm).
  KernelGraph q;
  int qx = must_ok(q.add_input("x", Shape{4, 64}, DType::f16));
  int qn = must_ok(q.add_op(OpKind::Exp, {qx}));
  int qw = must_ok(q.add_input("w", Shape{64, 32}, DType::f16));
  ASSERT_TRUE(q.mark_output(must_ok(q.add_op(OpKind::Matmul, {qn, qw})), "y").ok());
  Json doc = search_result_to_json(*first, cached_config(dir));
  for (Json& c : doc["ranked"])
    if (c["is_program"].get<bool>()) c["graph"] = kernel_graph_to_json(q);
  ASSERT_TRUE(write_checked_json((dir / (first->cache_key + ".json")).string(),
                                 "strata-search-cache", first->cache_key, program_hash(p), doc)
                  .ok());
  auto doctored = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(doctored.ok());
  EXPECT_FALSE(doctored->from_cache);
  ASSERT_FALSE(doctored->notes.empty());
  EXPECT_NE(doctored->notes[0].find("is marked as the program but is not this program"),
            std::string::npos)
      << doctored->notes[0];
}

/// Runs the search on `p` and expects a bad cache entry to be reported (stderr and notes, with
/// `part` in the message), ignored and rewritten: the answer equals `expected`, and the next run
/// is answered from the cache.
void expect_bad_entry_replaced(const KernelGraph& p, const fs::path& dir,
                               const std::vector<std::string>& expected, const std::string& part) {
  auto r = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->from_cache);
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes[0].find("bad cache entry ignored"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find(part), std::string::npos) << r->notes[0];
  EXPECT_EQ(ranked_json(*r), expected);
  // The result (notes included) is valid JSON even when the message quotes damaged bytes.
  EXPECT_NO_THROW(search_result_to_json(*r, cached_config(dir)).dump());
  auto again = superoptimize(p, cached_config(dir));  // rewritten: a hit again
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(ranked_json(*again), expected);
}

TEST(SearchCache, CorruptEntryIsReportedIgnoredAndRewritten) {
  fs::path dir = fresh_dir("corrupt");
  KernelGraph p = rmsnorm_program();
  auto first = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(first.ok());
  fs::path entry = dir / (first->cache_key + ".json");
  std::string good = slurp(entry);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() / 3), "invalid JSON"},  // truncated
      {std::string(good).replace(good.find("\"states\":"), 9, "\"stateZ\":"),
       "checksum mismatch"},  // edited
      {std::string("{not json"), "invalid JSON"},
      // one byte that is not UTF-8 (the parser's message quotes it)
      {std::string(good).replace(good.find("\"detail\":\"\""), 11, "\"detail\":\"\xff\""),
       "invalid JSON"},
      // a number beyond double range (the JSON reader throws on it)
      {std::string(good).replace(good.find("\"elapsed_s\":") + 12, 1, "1e400,\"x\":"), "1e400"},
  };
  for (const auto& [damaged, part] : cases) {
    spit(entry, damaged);
    expect_bad_entry_replaced(p, dir, ranked_json(*first), part);
  }
}

TEST(SearchCache, EntryForAnotherProgramIsNotServed) {
  fs::path dir = fresh_dir("transplant");
  KernelGraph p = rmsnorm_program();
  auto mine = superoptimize(p, cached_config(dir));
  ASSERT_TRUE(mine.ok());
  fs::path entry = dir / (mine->cache_key + ".json");
  auto gated = load_graph("examples/programs/gatedmlp_small.strata");
  ASSERT_TRUE(gated.ok());
  auto theirs = superoptimize(*gated, cached_config(dir));
  ASSERT_TRUE(theirs.ok());
  std::string their_text = slurp(dir / (theirs->cache_key + ".json"));
  auto their_doc = parse_json_text(their_text, "theirs");
  ASSERT_TRUE(their_doc.ok());
  const Json& their_payload = (*their_doc)["payload"];

  // 1. Copied over with its key edited: it records the program it answers (and the checksum,
  //    which covers the key, no longer matches either).
  std::string copied = their_text;
  copied.replace(copied.find(theirs->cache_key), theirs->cache_key.size(), mine->cache_key);
  spit(entry, copied);
  expect_bad_entry_replaced(p, dir, ranked_json(*mine), "answers another program");
  // 2. Re-signed for this key (checksum valid): it still records the program it answers.
  ASSERT_TRUE(write_checked_json(entry.string(), "strata-search-cache", mine->cache_key,
                                 program_hash(*gated), their_payload)
                  .ok());
  expect_bad_entry_replaced(p, dir, ranked_json(*mine), "answers another program");
  // 3. Re-signed for this key and this program: the served graphs are screened against the
  //    program, and a gatedmlp graph is not an rmsnorm graph.
  ASSERT_TRUE(write_checked_json(entry.string(), "strata-search-cache", mine->cache_key,
                                 program_hash(p), their_payload)
                  .ok());
  expect_bad_entry_replaced(p, dir, ranked_json(*mine), "ranked[");
  // 4. This program's own entry, cut to its graph with an rms accumulator and the program,
  //    with that graph changed to compute something else (a mean of squares where the rms is
  //    due) at the same cost: the screen of the winner catches it.
  Json doctored = search_result_to_json(*mine, cached_config(dir));
  Json rms, program_entry;
  for (const Json& e : doctored["ranked"]) {
    if (e["is_program"].get<bool>())
      program_entry = e;
    else if (rms.is_null() && e["graph"].dump().find("accum_rms_ld") != std::string::npos)
      rms = e;
  }
  ASSERT_FALSE(rms.is_null()) << "no ranked graph with an rms accumulator";
  doctored["ranked"] = Json::array({rms, program_entry});
  doctored["program_index"] = 1;
  std::string winner = doctored["ranked"][0]["graph"].dump();
  winner.replace(winner.find("accum_rms_ld"), 12, "accum_mean_ld");
  doctored["ranked"][0]["graph"] = Json::parse(winner);
  auto target = Target::by_name("h100");
  ASSERT_TRUE(target.ok());
  auto reread = search_result_from_json(doctored, *target);
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  ASSERT_EQ(kernel_graph_to_json(reread->ranked[0].graph).dump(), winner);  // still the winner
  ASSERT_TRUE(write_checked_json(entry.string(), "strata-search-cache", mine->cache_key,
                                 program_hash(p), doctored)
                  .ok());
  expect_bad_entry_replaced(p, dir, ranked_json(*mine), "fails the equivalence screen");
}

TEST(SearchCache, DamagedCheckpointIsNotFatal) {
  fs::path dir = fresh_dir("checkpoint");
  KernelGraph p = rmsnorm_program();
  fs::path ckpt = dir / "run.ckpt.json";
  SearchConfig stopped =
      cached_config(dir).with_cache(false).with_max_states(5).with_checkpoint_path(ckpt.string());
  auto partial = superoptimize(p, stopped);
  ASSERT_TRUE(partial.ok()) << partial.error().message;
  ASSERT_EQ(partial->stats.stop, StopReason::StateLimit);
  std::string good = slurp(ckpt);
  ASSERT_FALSE(good.empty());
  auto full = superoptimize(p, cached_config(dir).with_cache(false));
  ASSERT_TRUE(full.ok());
  SearchConfig resume =
      cached_config(dir).with_cache(false).with_resume(true).with_checkpoint_path(ckpt.string());
  for (const std::string& damaged :
       {std::string(good).replace(good.find("\"tasks_total\":"), 14,
                                  "\"tasks_total\":1e400,\"y\":"),
        std::string(good).replace(good.find("\"completed\":"), 12, "\"completed\":\"\xfe\",\"z\":"),
        good.substr(0, good.size() / 2)}) {
    spit(ckpt, damaged);
    auto r = superoptimize(p, resume);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
    ASSERT_FALSE(r->notes.empty());
    EXPECT_NE(r->notes[0].find("checkpoint ignored"), std::string::npos) << r->notes[0];
    EXPECT_NO_THROW(search_result_to_json(*r, resume).dump());
    EXPECT_EQ(ranked_json(*r), ranked_json(*full));
  }
  // A checkpoint of another program (re-signed for this key) is refused too.
  auto doc = parse_json_text(good, "ckpt");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(write_checked_json(ckpt.string(), "strata-search-checkpoint",
                                 (*doc)["key"].get<std::string>(), std::string(64, 'b'),
                                 (*doc)["payload"])
                  .ok());
  auto r = superoptimize(p, resume);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes[0].find("answers another program"), std::string::npos) << r->notes[0];
}

TEST(SearchReport, ResultJsonRoundTrips) {
  fs::path dir = fresh_dir("report");
  KernelGraph p = rmsnorm_program();
  SearchConfig config = cached_config(dir).with_cache(false);
  auto r = superoptimize(p, config);
  ASSERT_TRUE(r.ok());
  Json j = search_result_to_json(*r, config);
  EXPECT_EQ(j["format"], "strata-search-result");
  EXPECT_EQ(j["best"], 0);
  EXPECT_EQ(j["ranked"].size(), r->ranked.size());
  EXPECT_EQ(j["stats"]["stop"], "exhausted");
  EXPECT_TRUE(j["stats"]["prunes_by_rule"].contains("abstract_expr"));
  const Json& best = j["ranked"][0];
  for (const char* key : {"predicted_us", "speedup_vs_program", "cost", "verification", "graph"})
    EXPECT_TRUE(best.contains(key)) << key;
  EXPECT_LE(best["verification"]["log2_bound"].get<double>(), -60.0);
  EXPECT_TRUE(j["ranked"][r->program_index()]["verification"]["log2_bound"].is_null());
  auto target = Target::by_name("h100");
  ASSERT_TRUE(target.ok());
  auto back = search_result_from_json(Json::parse(j.dump()), *target);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(ranked_json(*back), ranked_json(*r));
  EXPECT_EQ(back->stats.states, r->stats.states);
  EXPECT_EQ(back->stats.prunes_by_rule, r->stats.prunes_by_rule);
  EXPECT_FALSE(search_result_from_json(Json::parse("{\"format\": \"x\"}"), *target).ok());
}

// ---- strata optimize -------------------------------------------------------------------

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun strata(const fs::path& dir, const std::string& args) {
  const char* bin = std::getenv("STRATA_BIN");
  EXPECT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
  if (!bin) return {};
  fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string cmd = "STRATA_CACHE_DIR='" + (dir / "cache").string() + "' '" + bin + "' " + args +
                    " >'" + out.string() + "' 2>'" + err.string() + "'";
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Informational integers of a result document are never truncated: 2^32 + 3 trials is not 3.
TEST(SearchReport, IntegersOutOfRangeFallBackInsteadOfWrapping) {
  fs::path dir = fresh_dir("report_ints");
  KernelGraph p = rmsnorm_program();
  SearchConfig config = cached_config(dir).with_cache(false);
  auto r = superoptimize(p, config);
  ASSERT_TRUE(r.ok());
  Json doc = search_result_to_json(*r, config);
  doc["ranked"][0]["verification"]["trials"] = (int64_t{1} << 32) + 3;
  doc["stats"]["states"] = Json::parse("18446744073709551615");
  auto back = search_result_from_json(doc, *Target::by_name("h100"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  for (const Candidate& c : back->ranked) EXPECT_NE(c.verification.trials, 3);
  EXPECT_EQ(back->stats.states, 0);
}

TEST(OptimizeCli, WritesTheResultAndSummary) {
  fs::path dir = fresh_dir("cli");
  fs::path result = dir / "result.json";
  CliRun r = strata(dir, "optimize examples/programs/lora_small.strata -o '" + result.string() +
                             "' --threads 2 --top 3");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("best: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stop: exhausted"), std::string::npos) << r.out;
  // not a TTY: progress lines are plain (no carriage returns)
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  auto doc = parse_json_text(slurp(result), result.string());
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  EXPECT_LE((*doc)["ranked"].size(), 4u);  // top 3 + the program
  EXPECT_TRUE(kernel_graph_from_json((*doc)["ranked"][0]["graph"], "best").ok());
  // Second run: from the cache, and says so.
  CliRun again = strata(dir, "optimize examples/programs/lora_small.strata --top 3 --quiet");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("answered from the cache"), std::string::npos) << again.out;
  EXPECT_TRUE(again.err.empty()) << again.err;
}

TEST(OptimizeCli, BadCacheEntryIsNotFatal) {
  fs::path dir = fresh_dir("cli_bad_entry");
  const std::string args = "optimize examples/programs/lora_small.strata --top 1 --quiet";
  CliRun first = strata(dir, args);
  ASSERT_EQ(first.code, 0) << first.err;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir / "cache"))
    if (e.path().extension() == ".json") entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  std::string good = slurp(entries[0]);
  for (const std::string& damaged :
       {std::string(good).replace(good.find("\"detail\":\"\""), 11, "\"detail\":\"\xff\""),
        std::string(good).replace(good.find("\"elapsed_s\":") + 12, 1, "1e400,\"x\":")}) {
    spit(entries[0], damaged);
    CliRun r = strata(dir, args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("bad cache entry ignored"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), first.out.substr(0, first.out.find('\n')));
    CliRun again = strata(dir, args);
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_NE(again.out.find("answered from the cache"), std::string::npos) << again.out;
  }
}

TEST(OptimizeCli, CtrlCCheckpointsAndResumeFinishes) {
  fs::path dir = fresh_dir("cli_sigint");
  // SIGINT after one second to a one-thread search of qknorm_small (about five seconds on an
  // idle 2-core machine; gqa_small's search became fast enough, under two seconds, to finish
  // before a signal at two): the search stops, reports and leaves a checkpoint. `--foreground`
  // makes timeout signal the search alone: without it timeout also signals its process group,
  // the search gets SIGINT twice, and the second one (as a second Ctrl-C is meant to) kills it.
  CliRun stopped =
      strata(dir, "optimize examples/programs/qknorm_small.strata --threads 2 --top 2");
  (void)stopped;
  fs::remove_all(dir / "cache");
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr);
  std::string cmd = "STRATA_CACHE_DIR='" + (dir / "cache").string() +
                    "' timeout --foreground --preserve-status -s INT 1 '" + bin +
                    "' optimize examples/programs/qknorm_small.strata --threads 1 --top 2 >'" +
                    (dir / "out.txt").string() + "' 2>'" + (dir / "err.txt").string() + "'";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(dir / "err.txt");
  std::string out = slurp(dir / "out.txt"), err = slurp(dir / "err.txt");
  EXPECT_NE(out.find("stop: interrupted (in the enumeration)"), std::string::npos) << out;
  EXPECT_NE(out.find("checkpoint written"), std::string::npos) << out;
  // The message names the phase that was interrupted.
  EXPECT_NE(err.find("interrupted during the enumeration"), std::string::npos) << err;
  EXPECT_EQ(err.find("during verification"), std::string::npos) << err;
  CliRun resumed = strata(dir,
                          "optimize examples/programs/qknorm_small.strata --threads 1 --top 2 "
                          "--resume --quiet");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("stop: exhausted"), std::string::npos) << resumed.out;
  // the uninterrupted run of the first line and the resumed one agree on the winner
  EXPECT_EQ(resumed.out.substr(0, resumed.out.find('\n')),
            stopped.out.substr(0, stopped.out.find('\n')));
}

// --time-limit bounds the whole search (enumeration, screening, verification): a run past its
// limit reports the time limit, exits 0 and leaves a checkpoint; --enum-time-limit is checked.
TEST(OptimizeCli, TimeLimitBoundsTheWholeSearch) {
  fs::path dir = fresh_dir("cli_time");
  CliRun r = strata(dir,
                    "optimize examples/programs/gatedmlp_small.strata --threads 2 --top 2 "
                    "--time-limit 0.000001 --no-show");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("stop: time_limit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint written"), std::string::npos) << r.out;
  CliRun bad = strata(dir, "optimize examples/programs/gatedmlp_small.strata --enum-time-limit -1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.err.find("--enum-time-limit"), std::string::npos) << bad.err;
  CliRun help = strata(dir, "optimize --help");
  EXPECT_NE(help.out.find("--enum-time-limit"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("bound on the whole search"), std::string::npos) << help.out;
}

TEST(OptimizeCli, BadInputExitsTwo) {
  fs::path dir = fresh_dir("cli_bad");
  CliRun missing = strata(dir, "optimize '" + (dir / "nope.strata").string() + "'");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
  CliRun target = strata(dir, "optimize examples/programs/lora_small.strata --target tpu");
  EXPECT_EQ(target.code, 2);
  EXPECT_NE(target.err.find("tpu"), std::string::npos) << target.err;
  spit(dir / "noout.strata", "input X: f16[4, 4]\nY = exp(X)\n");
  CliRun noout = strata(dir, "optimize '" + (dir / "noout.strata").string() + "'");
  EXPECT_EQ(noout.code, 2);
  EXPECT_FALSE(noout.err.empty());
}

// --inputs: the GPU profile's input files are read before the search; a missing file or one
// of the wrong size stops the run with exit 2 and names the file. (Without a GPU, or with
// --no-gpu, valid files are read and the search runs.)
TEST(OptimizeCli, InputFilesAreCheckedBeforeTheSearch) {
  fs::path dir = fresh_dir("cli_inputs");
  const std::string prog = "optimize examples/programs/rmsnorm_small.strata --no-gpu --top 1 ";
  CliRun missing = strata(dir, prog + "--inputs '" + (dir / "in").string() + "'");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("X.f64"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out.find("best: "), std::string::npos) << "searched anyway: " << missing.out;
  fs::create_directories(dir / "in");
  spit(dir / "in" / "X.f64", std::string(4 * 256 * 8, '\0'));  // X f16[4, 256]
  spit(dir / "in" / "W.f64", std::string(8, '\0'));            // W f16[256, 512]: too short
  CliRun short_w = strata(dir, prog + "--inputs '" + (dir / "in").string() + "'");
  EXPECT_EQ(short_w.code, 2);
  EXPECT_NE(short_w.err.find("W.f64: expected 131072 float64 values"), std::string::npos)
      << short_w.err;
  spit(dir / "in" / "W.f64", std::string(256 * 512 * 8, '\0'));
  CliRun ok = strata(dir, prog + "--inputs '" + (dir / "in").string() + "'");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("best: "), std::string::npos) << ok.out;
  CliRun scale = strata(dir, prog + "--input-scale 0");
  EXPECT_EQ(scale.code, 2);
  EXPECT_NE(scale.err.find("--input-scale"), std::string::npos) << scale.err;
}

}  // namespace
}  // namespace strata
