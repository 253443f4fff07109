// Tests of the search over several forms of a program (docs/search.md, "Alternative forms"):
// an alternative form is searched when its rule fires and only then, its candidates are
// verified against the program as given and join the one ranking with their form named, a
// form that cannot be set up is skipped with a note, the forms are part of the cache key, and
// their statistics survive the result's JSON and a checkpoint's resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "search/search_monitor.h"
#include "strata/frontend/program_parser.h"
#include "strata/opt/canonicalize.h"
#include "strata/search/search.h"
#include "strata/search/search_cache.h"
#include "strata/search/search_report.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"
#include "support/search_config.h"

namespace strata {
namespace {

using testing::parse;

SearchConfig config(const std::string& name) {
  return testing::search_config("strata-search-forms-test", name).with_top_k(2);
}

SearchResult search(const KernelGraph& p, const SearchConfig& c) {
  auto r = superoptimize(p, c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : SearchResult{};
}

/// K's gain on the product's B side: gain_across_matmul moves it onto Q, so that K's norm is
/// the operand (a small program: each form's search runs to the end in a few seconds).
const std::string kGainedK =
    "input Q: f16[4, 64]\ninput K: f16[32, 64]\ninput G: f16[64]\n"
    "S = matmul(Q, transpose(mul(rms_norm(K, eps=1e-6), G)))\noutput S\n";

/// The same without a gain: no alternative-form rule fires.
const std::string kPlainK =
    "input Q: f16[4, 64]\ninput K: f16[32, 64]\ninput G: f16[64]\n"
    "S = matmul(mul(Q, G), transpose(rms_norm(K, eps=1e-6)))\noutput S\n";

const FormStats* form(const SearchResult& r, const std::string& name) {
  for (const FormStats& f : r.stats.forms)
    if (f.name == name) return &f;
  return nullptr;
}

bool proved(const Candidate& c) {
  return !c.is_program && c.verification.equivalent && c.verification.log2_bound <= -60;
}

TEST(SearchForms, AnAlternativeFormIsSearchedWhenItsRuleFires) {
  const KernelGraph p = parse(kGainedK);
  const SearchResult r = search(p, config("fires"));
  ASSERT_EQ(r.stats.forms.size(), 2u);
  EXPECT_EQ(r.stats.forms[0].name, "canonical");
  EXPECT_TRUE(r.stats.forms[0].rewrites_by_rule.empty());
  const FormStats& g = r.stats.forms[1];
  EXPECT_EQ(g.name, "gain_across_matmul");
  EXPECT_EQ(g.rewrites_by_rule, (std::map<std::string, int64_t>{{"gain_across_matmul", 1}}));
  EXPECT_TRUE(g.searched) << g.note;
  EXPECT_GT(g.states, 0);
  EXPECT_GE(g.start_s, r.stats.forms[0].elapsed_s);
  // The whole search's counters are the forms' sums; it ran to the end, so it is exhausted.
  EXPECT_EQ(r.stats.states, r.stats.forms[0].states + g.states);
  EXPECT_EQ(r.stats.tasks_total, r.stats.forms[0].tasks_total + g.tasks_total);
  EXPECT_EQ(r.stats.stop, StopReason::Exhausted);
  // Every ranked entry names its form; each form's count of them adds up.
  int64_t named = 0;
  for (const Candidate& c : r.ranked) {
    if (c.is_program) {
      EXPECT_TRUE(c.form.empty());
      continue;
    }
    ++named;
    EXPECT_TRUE(c.form == "canonical" || c.form == "gain_across_matmul") << c.form;
  }
  EXPECT_EQ(named, r.stats.forms[0].ranked + g.ranked);
  // The rewrites of the canonical form stay where they were.
  EXPECT_TRUE(r.stats.rewrites_by_rule.empty());
}

TEST(SearchForms, NoSecondFormWhereNoRuleFiresOrCanonicalizationIsOff) {
  const SearchResult plain = search(parse(kPlainK), config("plain"));
  ASSERT_EQ(plain.stats.forms.size(), 1u);
  EXPECT_EQ(plain.stats.forms[0].name, "canonical");
  EXPECT_EQ(plain.stats.states, plain.stats.forms[0].states);
  for (const Candidate& c : plain.ranked)
    if (!c.is_program) EXPECT_EQ(c.form, "canonical");
  // --no-canonicalize: the program as given is the only form.
  const SearchResult off = search(parse(kGainedK), config("off").with_canonicalize(false));
  ASSERT_EQ(off.stats.forms.size(), 1u);
  EXPECT_TRUE(off.stats.forms[0].rewrites_by_rule.empty());
  // --no-alternative-forms: the canonical form only.
  const SearchResult base =
      search(parse(kGainedK), config("base").with_alternative_forms(false));
  ASSERT_EQ(base.stats.forms.size(), 1u);
}

TEST(SearchForms, AlternativeCandidatesAreVerifiedAgainstTheProgram) {
  const KernelGraph p = parse(kGainedK);
  // The real rule: the gain form's candidates are proved against the program as given.
  const SearchResult r = search(p, config("verified"));
  int from_gain = 0;
  for (const Candidate& c : r.ranked) {
    if (c.form != "gain_across_matmul") continue;
    ++from_gain;
    EXPECT_TRUE(proved(c));
    auto v = verify_equivalent(p, c.graph);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
  EXPECT_GT(from_gain, 0);
  // A wrong alternative form (the gain left out): its graphs are found, and every one fails
  // against the program; the canonical form's answer stands.
  const SearchResult wrong = search(
      p, config("wrong").with_alternative_canonicalizers({{"no_gain", [](const KernelGraph&) {
                                                             return parse_program(
                                                                 "input Q: f16[4, 64]\n"
                                                                 "input K: f16[32, 64]\n"
                                                                 "input G: f16[64]\n"
                                                                 "S = matmul(mul(Q, G), "
                                                                 "transpose(rms_norm(K, "
                                                                 "eps=1e-5)))\noutput S\n",
                                                                 "wrong.strata");
                                                           }}}));
  const FormStats* w = form(wrong, "no_gain");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->searched);
  EXPECT_GT(w->candidates_found, 0);
  EXPECT_EQ(w->ranked, 0);
  for (const Candidate& c : wrong.ranked) EXPECT_NE(c.form, "no_gain");
  ASSERT_FALSE(wrong.ranked.empty());
  EXPECT_TRUE(proved(wrong.ranked[0]));
  EXPECT_EQ(wrong.ranked[0].form, "canonical");
}

TEST(SearchForms, AFormThatCannotBeSetUpIsSkippedWithANote) {
  const KernelGraph p = parse(kGainedK);
  auto failing = [](const KernelGraph&) -> Result<KernelGraph> {
    return make_error("planted failure");
  };
  auto other_interface = [](const KernelGraph&) {
    return parse_program("input Q: f16[4, 64]\nS = exp(Q)\noutput S\n", "o.strata");
  };
  auto gained = [](const KernelGraph& g) -> Result<KernelGraph> {
    const std::string_view rule[] = {"gain_across_matmul"};
    auto c = canonicalize_program(g, rule);
    if (!c.ok()) return c.error();
    return std::move(c->program);
  };
  const SearchResult r =
      search(p, config("skipped").with_alternative_canonicalizers({{"failing", failing},
                                                                   {"gained", gained},
                                                                   {"other_interface", other_interface},
                                                                   {"gained", failing}}));
  // In their order, a repeated name once; the good form between the two skipped is searched.
  ASSERT_EQ(r.stats.forms.size(), 4u);
  EXPECT_EQ(r.stats.forms[0].name, "canonical");
  EXPECT_EQ(r.stats.forms[1].name, "failing");
  EXPECT_EQ(r.stats.forms[2].name, "gained");
  EXPECT_EQ(r.stats.forms[3].name, "other_interface");
  EXPECT_TRUE(r.stats.forms[2].searched);
  for (const char* name : {"failing", "other_interface"}) {
    const FormStats* f = form(r, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_FALSE(f->searched);
    EXPECT_NE(f->note.find("skipped"), std::string::npos) << f->note;
    EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) {
      return n.find(std::string("alternative form ") + name) != std::string::npos;
    })) << name;
  }
  EXPECT_NE(form(r, "failing")->note.find("planted failure"), std::string::npos);
  // A skipped form is no reason to call the search unfinished.
  EXPECT_EQ(r.stats.stop, StopReason::Exhausted);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_TRUE(proved(r.ranked[0]));
}

TEST(SearchForms, CacheKeyDependsOnTheForms) {
  const KernelGraph p = parse(kGainedK);
  SearchConfig c;
  c.max_block_ops = 11;
  const std::string with_forms = search_cache_key(p, c, "sources");
  c.alternative_forms = false;
  const std::string canonical_only = search_cache_key(p, c, "sources");
  EXPECT_NE(with_forms, canonical_only);
  // Without canonicalization there are no forms either way: one key.
  c.canonicalize = false;
  const std::string off = search_cache_key(p, c, "sources");
  c.alternative_forms = true;
  EXPECT_EQ(search_cache_key(p, c, "sources"), off);
  EXPECT_NE(off, with_forms);
}

TEST(SearchForms, ACachedSearchWithFormsIsNotServedWithoutThem) {
  const KernelGraph p = parse(kGainedK);
  SearchConfig c = config("cache").with_cache(true);
  const SearchResult first = search(p, c);
  ASSERT_FALSE(first.from_cache);
  const SearchResult again = search(p, c);
  EXPECT_TRUE(again.from_cache);
  ASSERT_EQ(again.stats.forms.size(), first.stats.forms.size());
  EXPECT_EQ(again.stats.forms[1].name, "gain_across_matmul");
  ASSERT_EQ(again.ranked.size(), first.ranked.size());
  for (size_t i = 0; i < first.ranked.size(); ++i)
    EXPECT_EQ(again.ranked[i].form, first.ranked[i].form) << i;
  const SearchResult without = search(p, c.with_alternative_forms(false));
  EXPECT_FALSE(without.from_cache);
  EXPECT_EQ(without.stats.forms.size(), 1u);
}

TEST(SearchForms, StatsAndFormsRoundTripThroughTheResultJson) {
  const KernelGraph p = parse(kGainedK);
  const SearchConfig c = config("json");
  const SearchResult r = search(p, c);
  const Json doc = search_result_to_json(r, c);
  EXPECT_EQ(doc["config"]["alternative_forms"], true);
  auto target = Target::by_name(c.target);
  ASSERT_TRUE(target.ok());
  auto back = search_result_from_json(doc, *target);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->stats.forms.size(), r.stats.forms.size());
  for (size_t i = 0; i < r.stats.forms.size(); ++i) {
    const FormStats &a = r.stats.forms[i], &b = back->stats.forms[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.rewrites_by_rule, a.rewrites_by_rule);
    EXPECT_EQ(b.searched, a.searched);
    EXPECT_EQ(b.note, a.note);
    EXPECT_EQ(b.states, a.states);
    EXPECT_EQ(b.candidates_found, a.candidates_found);
    EXPECT_EQ(b.candidates_verified, a.candidates_verified);
    EXPECT_EQ(b.tasks_total, a.tasks_total);
    EXPECT_EQ(b.tasks_done, a.tasks_done);
    EXPECT_EQ(b.ranked, a.ranked);
    EXPECT_DOUBLE_EQ(b.start_s, a.start_s);
    EXPECT_DOUBLE_EQ(b.elapsed_s, a.elapsed_s);
    EXPECT_DOUBLE_EQ(b.checks_s, a.checks_s);
    EXPECT_EQ(b.stop, a.stop);
    EXPECT_EQ(b.stop_phase, a.stop_phase);
  }
  EXPECT_EQ(back->stats.stop, r.stats.stop);
  ASSERT_EQ(back->ranked.size(), r.ranked.size());
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    EXPECT_EQ(back->ranked[i].form, r.ranked[i].form) << i;
    EXPECT_TRUE(back->ranked[i].graph.structurally_equal(r.ranked[i].graph)) << i;
  }
  // The ranked entries carry "form"; the program's does not.
  for (const Json& e : doc["ranked"])
    EXPECT_EQ(e.contains("form"), !e["is_program"].get<bool>());
}

TEST(SearchForms, AStoppedSearchResumesEachFormFromItsOwnCheckpoint) {
  const KernelGraph p = parse(kGainedK);
  const SearchResult full = search(p, config("full"));
  // A state budget per form: each form stops early and leaves a checkpoint of its own.
  SearchConfig c = config("resume").with_max_states(20);
  const SearchResult stopped = search(p, c);
  ASSERT_EQ(stopped.stats.forms.size(), 2u);
  EXPECT_EQ(stopped.stats.stop, StopReason::StateLimit);
  for (const FormStats& f : stopped.stats.forms) {
    EXPECT_TRUE(f.searched);
    EXPECT_LT(f.tasks_done, f.tasks_total) << f.name;
  }
  int checkpoints = 0;
  for (const auto& e : std::filesystem::directory_iterator(c.cache_dir))
    if (e.path().string().find(".ckpt") != std::string::npos) ++checkpoints;
  EXPECT_EQ(checkpoints, 2);
  // Resumed without the budget, each form continues its own tasks: the answer and the forms'
  // task counts are those of an uninterrupted search, and the checkpoints are gone.
  c.max_states = 0;
  const SearchResult resumed = search(p, c.with_resume(true));
  EXPECT_EQ(resumed.stats.stop, StopReason::Exhausted);
  ASSERT_EQ(resumed.stats.forms.size(), full.stats.forms.size());
  for (size_t i = 0; i < full.stats.forms.size(); ++i) {
    EXPECT_EQ(resumed.stats.forms[i].tasks_total, full.stats.forms[i].tasks_total);
    EXPECT_EQ(resumed.stats.forms[i].tasks_done, full.stats.forms[i].tasks_done);
    EXPECT_EQ(resumed.stats.forms[i].states, full.stats.forms[i].states);
  }
  ASSERT_EQ(resumed.ranked.size(), full.ranked.size());
  for (size_t i = 0; i < full.ranked.size(); ++i) {
    EXPECT_TRUE(resumed.ranked[i].graph.structurally_equal(full.ranked[i].graph)) << i;
    EXPECT_EQ(resumed.ranked[i].form, full.ranked[i].form) << i;
  }
  checkpoints = 0;
  for (const auto& e : std::filesystem::directory_iterator(c.cache_dir))
    if (e.path().string().find(".ckpt") != std::string::npos) ++checkpoints;
  EXPECT_EQ(checkpoints, 0);
}

TEST(SearchForms, AFormWithNothingFoundEnumeratesIntoItsReserve) {
  // The watcher of an alternative form's search: its own enumeration deadline at 0.2 s, a later
  // one at 0.8 s that holds while nothing is found.
  using namespace std::chrono_literals;
  SearchConfig c;
  c.quiet = true;
  c.time_limit_s = 10;
  c.enum_time_limit_s = 0.2;
  {
    search::StopControl stop;
    search::Monitor m(c, stop, search::Clock::now());
    m.set_late_deadline(0.8, 0);
    m.enter_enumeration(1, 0);
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(stop.stop.load());  // past its own deadline, but nothing found yet
    stop.live_found = 1;             // a graph: the deadline passed is its own
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(stop.stop.load());
    EXPECT_TRUE(m.time_limit_hit());
  }
  {
    search::StopControl stop;  // nothing found at all: stopped at the later deadline
    search::Monitor m(c, stop, search::Clock::now());
    m.set_late_deadline(0.5, 0);
    m.enter_enumeration(1, 0);
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(stop.stop.load());
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(stop.stop.load());
  }
  {
    search::StopControl stop;  // graphs restored from a checkpoint count as found
    search::Monitor m(c, stop, search::Clock::now());
    m.set_late_deadline(5, 3);
    m.enter_enumeration(1, 0);
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(stop.stop.load());
  }
}

TEST(SearchForms, TheProgressLineCountsTasksPastTheEnumerationsScope) {
  // The enumeration advances the monitor's own counter: between the return of the function
  // that ran the workers and the verification, the progress line still reads it (it once held
  // a pointer to that function's local counter and printed garbage such as 282578783305728/118).
  using namespace std::chrono_literals;
  SearchConfig c;
  c.quiet = false;
  ::testing::internal::CaptureStderr();
  {
    search::StopControl stop;
    search::Monitor m(c, stop, search::Clock::now());
    {
      std::atomic<size_t>& done = m.enter_enumeration(7, 2);
      ++done;
      std::vector<size_t> clobber(64, 0xffffffffffff);  // the stack reused after the scope
      EXPECT_EQ(clobber.size(), 64u);
    }
    std::this_thread::sleep_for(2000ms);  // a line at least once a second
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("3/7 tasks"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata
