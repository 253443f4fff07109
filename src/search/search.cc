// superoptimize(): the search job around the enumeration, as a list of phases (each a function
// below with its contract): set up the job (checks, resolved limits, cache key and paths) →
// look up the result cache → prepare the enumeration (program analysis, verifier, tasks) and
// restore a checkpoint → enumerate on a thread pool → order the candidates → screen and verify
// them → rank → store the result in the cache (or a checkpoint when stopped). The watcher
// thread (search_monitor.h) enforces limits and prints progress from setup to verification.
#include "strata/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "search/candidate_pool.h"
#include "search/checkpoint.h"
#include "search/cost_ties.h"
#include "search/enumerator.h"
#include "search/layered_search.h"
#include "search/library_form.h"
#include "search/library_form_proof.h"
#include "search/search_monitor.h"
#include "search/segments.h"
#include "search/pointwise_seed.h"
#include "search/prologue_fold.h"
#include "search/split_kv.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/expr/abstract_expr.h"
#include "strata/opt/canonicalize.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/graph_print.h"
#include "strata/opt/kernel_plan.h"
#include "strata/search/search_cache.h"
#include "strata/search/search_report.h"
#include "strata/expr/subexpr_oracle.h"
#include "strata/opt/thread_fusion.h"
#include "strata/util/hash.h"
#include "util/utf8.h"

namespace strata {
namespace {

using search::Clock;
using search::seconds_since;
using search::TaskStats;

constexpr std::string_view kCacheFormat = "strata-search-cache";
/// Decision depth at which the tree is split into tasks: deep enough for a few hundred
/// subtrees on the benchmarks (load balance, checkpoint granularity), shallow enough that
/// replaying a task's path costs nothing.
constexpr int kSplitDepth = 2;
/// Best graphs kept for screening and verification after the enumeration: enough that
/// top_k of them pass even when the abstract pruning lets some non-equivalent graphs through.
size_t pool_capacity(const SearchConfig& c) {
  return std::max<size_t>(256, 32 * static_cast<size_t>(c.top_k));
}

Status check_program(const KernelGraph& program) {
  if (program.outputs().empty())
    return make_error("the program has no outputs; mark the tensors to compute with `output`");
  for (int t : program.outputs())
    if (program.tensor(t).producer >= 0 &&
        program.op(program.tensor(t).producer).kind == OpKind::Input)
      return make_error("output `" + program.tensor_name(t) +
                        "` is a program input; there is nothing to compute");
  for (size_t i = 0; i < program.ops().size(); ++i) {
    const KernelOp& op = program.op(static_cast<int>(i));
    if (op.kind == OpKind::Customized)
      return make_error("kernel op #" + std::to_string(i) +
                        " is a customized kernel; the search takes programs of predefined ops "
                        "only (.strata programs or μGraph JSON without block graphs)");
  }
  if (program.tensors().size() > static_cast<size_t>(kMaxProgramTensors))
    return make_error("the program has " + std::to_string(program.tensors().size()) +
                      " tensors; the search handles programs of at most " +
                      std::to_string(kMaxProgramTensors) + " tensors");
  return Status::success();
}

}  // namespace

int SearchConfig::auto_max_block_ops(const KernelGraph& program) {
  int n = static_cast<int>(program.ops().size());  // inputs and compute ops
  return std::clamp(n + 2, 11, 16);
}

namespace {

Status check_config(const SearchConfig& c) {
  if (c.max_kernel_ops < 1 || c.max_kernel_ops > 8)
    return make_error("max kernel ops must be between 1 and 8, got " +
                      std::to_string(c.max_kernel_ops));
  if (c.max_block_ops != 0 && (c.max_block_ops < 2 || c.max_block_ops > 16))
    return make_error("max block ops must be 0 (from the program) or between 2 and 16, got " +
                      std::to_string(c.max_block_ops));
  if (c.top_k < 1) return make_error("top must be at least 1, got " + std::to_string(c.top_k));
  if (c.max_block_inputs < 1 || c.max_block_outputs < 1 || c.max_customized_ops < 0)
    return make_error("block input/output and customized-op limits must be positive");
  if (c.time_limit_s < 0 || c.enum_time_limit_s < 0 || c.max_states < 0)
    return make_error("time and state limits must not be negative");
  return Status::success();
}

/// Records a warning in the result's notes and prints it. Messages may quote damaged files:
/// bytes that are not UTF-8 are escaped, so that the result stays valid JSON.
void warn(SearchResult& r, const std::string& raw) {
  std::string msg = printable_utf8(raw);
  r.notes.push_back(msg);
  std::cerr << "strata: warning: " << msg << "\n";
}

SearchStats to_stats(const TaskStats& t) {
  SearchStats s;
  s.states = t.states;
  for (int i = 0; i < static_cast<int>(search::Prune::kCount); ++i)
    if (t.prunes[i] > 0)
      s.prunes_by_rule[std::string(search::prune_rule_name(static_cast<search::Prune>(i)))] =
          t.prunes[i];
  s.candidates_found = t.candidates;
  return s;
}

/// The outcome of screening and (if the screen passed) verifying one candidate.
struct CandidateCheck {
  bool verified = false;  ///< the screen passed and verification ran
  VerifyResult verification;
  std::string error;  ///< an error of the screen (verified false) or of verification
  double screen_s = 0, verify_s = 0;
};

/// `verifying` is set while verification runs (for the progress line).
CandidateCheck check_candidate(const EquivalenceChecker& checker, const search::PoolEntry& e,
                               std::atomic<bool>& verifying) {
  CandidateCheck c;
  auto t = Clock::now();
  verifying = false;
  auto ok = checker.screen(e.graph);
  c.screen_s = seconds_since(t);
  if (!ok.ok()) {
    c.error = ok.error().message;
    return c;
  }
  if (!*ok) {
    if (search::trace_screen_failures())
      std::fprintf(stderr, "candidate failed the equivalence screen:\n%s\n",
                   format_graph(e.graph).c_str());
    return c;
  }
  verifying = true;
  t = Clock::now();
  auto v = checker.verify(e.graph);
  c.verify_s = seconds_since(t);
  c.verified = true;
  if (!v.ok())
    c.error = v.error().message;
  else
    c.verification = *v;
  return c;
}

/// The cached answer at `path` for `program`, checked before it is served: the envelope (key,
/// program hash, checksum), the result document, exactly one entry that is the program
/// itself, every other entry marked verified, and the winner passing the equivalence screen
/// against the program (EquivalenceChecker::screen_once: one trial on a few blocks; the GPU
/// profile checks every candidate it runs against the reference interpreter anyway). Any
/// failure is an error naming the file (a missing file's message starts with "missing: ");
/// never throws.
Result<SearchResult> load_cached_result(const std::string& path, const std::string& key,
                                        const KernelGraph& program, const Target& target) {
  try {
    STRATA_ASSIGN_OR_RETURN(Json doc,
                            read_checked_json(path, kCacheFormat, key, program_hash(program)));
    auto r = search_result_from_json(doc, target);
    if (!r.ok()) return make_error(path + ": " + r.error().message);
    STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker,
                            EquivalenceChecker::make(program, VerifyOptions{}));
    // The program's entry is compared in the cache's own form, its μGraph JSON (what
    // program_hash covers): a graph read back from JSON numbers its tensors inputs first, so a
    // program built with an input added after an op is not structurally_equal to its own
    // stored copy, though it is the same program.
    const Json program_json = kernel_graph_to_json(program);
    int programs = 0;
    for (size_t i = 0; i < r->ranked.size(); ++i) {
      const Candidate& c = r->ranked[i];
      std::string where = path + ": ranked[" + std::to_string(i) + "]";
      if (c.is_program) {
        if (++programs > 1 || kernel_graph_to_json(c.graph) != program_json)
          return make_error(where + " is marked as the program but is not this program");
        continue;
      }
      if (!c.verification.equivalent)
        return make_error(where + " is not marked as verified equivalent");
      if (i > 0) continue;  // the winner is screened
      auto passes = checker.screen_once(c.graph);
      if (!passes.ok()) return make_error(where + ": " + passes.error().message);
      if (!*passes) return make_error(where + " fails the equivalence screen against this program");
    }
    return r;
  } catch (const std::exception& e) {
    return make_error(path + ": " + e.what());
  }
}

/// Whether the code generator can build every customized kernel of g on target t: it must
/// support every block op (block_codegen_supports), and the plans the emitter makes
/// (plan_customized_kernels: its storage types and views) must fit the target's shared
/// memory — the enumeration's estimate allows kSmemPruneSlack over the limit and counts
/// intermediates in their graph dtype (the emitter widens those read in odd-length rows to
/// f32), so a candidate can pass it and still not fit. Returns the prune rule that rejects g,
/// or "" if it is emittable.
std::string not_emittable(const KernelGraph& g, const Target& t) {
  for (const KernelOp& op : g.ops())
    if (op.kind == OpKind::Customized && !block_graph_codegen_unsupported(*op.body).empty())
      return "codegen_unsupported";
  EmitOptions options;
  options.plan = PlanOptions::for_arch(t);
  if (Status planned = plan_customized_kernels(g, options); !planned.ok()) {
    if (search::trace_screen_failures())
      std::fprintf(stderr, "screen: not emittable: %s\n", planned.error().message.c_str());
    return "codegen_shared_memory";
  }
  return "";
}

/// The structure of g without its extents: the op kinds of every kernel and of every block
/// graph, in order. Candidates with the same structure differ only in grid, tiles and maps.
std::string structure_signature(const KernelGraph& g) {
  std::string sig;
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    sig += op_name(op.kind);
    if (op.kind == OpKind::Customized) {
      sig += op.body->forloop() > 1 ? "[loop:" : "[";
      for (const BlockOp& b : op.body->ops()) {
        sig += op_name(b.kind);
        sig += ',';
      }
      sig += ']';
    }
    sig += ';';
  }
  return sig;
}

/// Verification order: alternately the cheapest graph not yet taken (entries come in cost
/// order, ties broken by break_cost_ties) and the next graph of a round robin over structures
/// — the cheapest graph of every structure (structures in order of their cheapest graph), then
/// the second cheapest of each, and so on — skipping graphs already taken. With a small top_k
/// the verified set thus holds the model's favourites and also spans different structures and
/// several tilings of each: the cost model is least reliable between structures and between
/// tilings of one structure, and on a GPU the profiler then chooses among them.
void diversify(std::vector<search::PoolEntry>& entries) {
  std::vector<std::string> order;                     // structures, cheapest first
  std::map<std::string, std::vector<size_t>> groups;  // entry indices of each, in cost order
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [it, fresh] = groups.try_emplace(structure_signature(entries[i].graph));
    if (fresh) order.push_back(it->first);
    it->second.push_back(i);
  }
  std::vector<size_t> round_robin;
  for (size_t round = 0; round_robin.size() < entries.size(); ++round)
    for (const std::string& sig : order)
      if (round < groups[sig].size()) round_robin.push_back(groups[sig][round]);
  std::vector<bool> taken(entries.size(), false);
  std::vector<search::PoolEntry> out;
  size_t cheap = 0, diverse = 0;
  while (out.size() < entries.size()) {
    const bool from_cost = out.size() % 2 == 0;
    size_t& cursor = from_cost ? cheap : diverse;
    const auto at = [&](size_t c) { return from_cost ? c : round_robin[c]; };
    while (taken[at(cursor)]) ++cursor;
    taken[at(cursor)] = true;
    out.push_back(std::move(entries[at(cursor)]));
  }
  entries = std::move(out);
}

}  // namespace

int SearchResult::program_index() const {
  for (size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].is_program) return static_cast<int>(i);
  return -1;
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Exhausted:
      return "exhausted";
    case StopReason::TimeLimit:
      return "time_limit";
    case StopReason::StateLimit:
      return "state_limit";
    case StopReason::Interrupted:
      return "interrupted";
    case StopReason::CacheHit:
      return "cache_hit";
  }
  return "?";
}

std::string_view search_phase_name(SearchPhase p) {
  switch (p) {
    case SearchPhase::None:
      return "none";
    case SearchPhase::Enumeration:
      return "enumeration";
    case SearchPhase::Verification:
      return "verification";
  }
  return "?";
}

std::string no_candidate_reason(const SearchResult& r) {
  const SearchStats& st = r.stats;
  auto count = [&](const char* rule) -> int64_t {
    auto it = st.prunes_by_rule.find(rule);
    return it == st.prunes_by_rule.end() ? 0 : it->second;
  };
  std::string limit;
  if (st.stop != StopReason::Exhausted && st.stop != StopReason::CacheHit)
    limit = " (the search stopped early: " + std::string(stop_reason_name(st.stop)) +
            "; a longer run may find more)";
  // The program itself is one of the complete graphs the enumeration finds.
  const int64_t found = st.candidates_found - 1;
  if (found <= 0) {
    if (count("no_extents") > 0)
      return "no tiling fits: no grid, loop and tile extents of the split policy fit the "
             "program's extents within the shared memory of the target" +
             limit;
    return "the enumeration found no other complete graph within the limits (max block ops, "
           "kernel ops; docs/search.md, \"Pruning rules\")" +
           limit;
  }
  std::string s = std::to_string(found) + " other candidate(s) found";
  const int64_t unsupported = count("codegen_unsupported"), smem = count("codegen_shared_memory");
  if (unsupported + smem > 0 && st.candidates_screened == 0)
    return s + ", but the code generator cannot emit the best ones (" +
           std::to_string(unsupported) + " use ops it does not support, " + std::to_string(smem) +
           " do not fit shared memory)" + limit;
  if (st.candidates_screened > 0 && st.candidates_verified == 0)
    return s + "; every one screened (" + std::to_string(st.candidates_screened) +
           ") failed the equivalence screen" + limit;
  if (st.candidates_verified > 0)
    return s + "; none of the verified ones is predicted faster than the program" + limit;
  return s + limit;
}

std::string search_summary(const SearchResult& r) {
  char buf[512];
  std::string out;
  int prog = r.program_index();
  if (r.ranked.empty() || prog < 0) return "no result\n";
  const Candidate& best = r.ranked[0];
  const Candidate& program = r.ranked[prog];
  if (best.is_program) {
    std::snprintf(buf, sizeof buf,
                  "best: the input program itself (%zu kernels), predicted %.2f µs; no faster "
                  "equivalent graph was found: %s\n",
                  program.graph.ops().size() - program.graph.inputs().size(),
                  program.cost.predicted_us, no_candidate_reason(r).c_str());
    out += buf;
  } else {
    std::snprintf(
        buf, sizeof buf,
        "best: %zu kernel(s), %d customized, predicted %.2f µs vs %.2f µs for the "
        "program (%.2fx)\n",
        best.graph.ops().size() - best.graph.inputs().size(), best.graph.num_customized(),
        best.cost.predicted_us, program.cost.predicted_us,
        best.cost.predicted_us > 0 ? program.cost.predicted_us / best.cost.predicted_us : 0.0);
    out += buf;
    std::snprintf(buf, sizeof buf, "verified: %d trial(s), P[not equivalent] ≤ 2^%.1f\n",
                  best.verification.trials, best.verification.log2_bound);
    out += buf;
  }
  int64_t pruned = 0;
  for (const auto& [rule, n] : r.stats.prunes_by_rule) pruned += n;
  std::string stop(stop_reason_name(r.stats.stop));
  if (r.stats.stop_phase != SearchPhase::None)
    stop += " (in the " + std::string(search_phase_name(r.stats.stop_phase)) + ")";
  if (!r.stats.verification_complete) stop += ", verification cut short";
  if (r.from_cache) stop += " (answered from the cache)";
  std::snprintf(buf, sizeof buf,
                "search: %lld states, %lld pruned, %lld found, %lld screened, %lld verified, "
                "%.1f s, stop: %s\n",
                static_cast<long long>(r.stats.states), static_cast<long long>(pruned),
                static_cast<long long>(r.stats.candidates_found),
                static_cast<long long>(r.stats.candidates_screened),
                static_cast<long long>(r.stats.candidates_verified), r.stats.elapsed_s,
                stop.c_str());
  out += buf;
  return out;
}

namespace {

/// A form of the program besides the canonical one (docs/search.md, "Alternative forms"):
/// its name (the alternative-form rule), the program the enumeration works on and the rewrites
/// that made it, or why it cannot be searched (`error`, then it is skipped with a note).
struct AlternativeSpec {
  std::string name;
  KernelGraph program;
  std::map<std::string, int64_t> rewrites;
  std::string error;
};

/// Phase 1, setup: a checked program and configuration, the program's canonical form (what
/// the enumeration searches), the limits that depend on it resolved, the target, and the
/// cache key and paths of the job. A job searches one form of the program: the canonical form
/// (`form` "canonical"), or an alternative form (form_job).
struct SearchJob {
  Clock::time_point t0;  ///< start of this form's search (its limits count from here)
  SearchConfig config;   ///< with max_block_ops resolved
  Target target;
  std::string cache_key, cache_path, ckpt_path;
  /// The key of this form's checkpoint: the cache key for the canonical form, a key of its
  /// own for each alternative form (its tasks are another tree's).
  std::string ckpt_key;
  std::string prog_hash;  ///< program_hash(program): what cache and checkpoint files answer
  /// The program the enumeration works on: its canonical form (the program itself when the
  /// canonicalization is off, changes nothing, or fails: then `canonical_note` says why), or
  /// the alternative form this job searches.
  KernelGraph canonical;
  std::map<std::string, int64_t> rewrites;  ///< of the canonicalization, by rule
  std::string canonical_note;
  std::string form = "canonical";  ///< FormStats::name of this job's form
  /// An alternative form's later enumeration deadline while it has found nothing
  /// (Monitor::set_late_deadline); 0 for the canonical form.
  double late_enum_deadline_s = 0;
  /// The alternative forms to search after the canonical form (canonical form's job only).
  std::vector<AlternativeSpec> alternatives;
};

/// Why a form cannot be searched, or "": its interface must be the program's and the search
/// must take it (check_program).
std::string unusable_form(const KernelGraph& program, const Result<KernelGraph>& form) {
  Status usable = form.ok() ? check_canonical_interface(program, *form) : Status(form.error());
  if (usable.ok()) usable = check_program(*form);
  return usable.ok() ? "" : usable.error().message;
}

/// The canonical form of `program` (docs/search.md, "Canonicalization"): canonicalize_program
/// or the configured replacement. A canonical form that fails, or that the search would not
/// take (check_program), leaves the program as given, with a note saying why. With
/// alternative forms on, also the alternative forms (alternative_forms, or the configured
/// replacements), each with the error that keeps it from being searched, if any.
void canonicalize(const KernelGraph& program, const SearchConfig& config, SearchJob& job) {
  job.canonical = program;
  if (!config.canonicalize) return;
  Result<KernelGraph> canonical = make_error("");
  if (config.canonicalizer) {
    canonical = config.canonicalizer(program);
    if (canonical.ok() && !canonical->structurally_equal(program)) job.rewrites["custom"] = 1;
  } else if (auto c = canonicalize_program(program); c.ok()) {
    for (const auto& [rule, n] : c->rewrites) job.rewrites[rule] = n;
    canonical = std::move(c->program);
  } else {
    canonical = c.error();
  }
  if (config.alternative_forms) {
    if (!config.alternative_canonicalizers.empty()) {
      for (const auto& [name, make] : config.alternative_canonicalizers) {
        const bool taken = name == "canonical" ||
                           std::any_of(job.alternatives.begin(), job.alternatives.end(),
                                       [&](const AlternativeSpec& a) { return a.name == name; });
        if (taken) continue;  // names are unique (they name checkpoints)
        Result<KernelGraph> form = make(program);
        AlternativeSpec spec{name, form.ok() ? *form : program, {{"custom", 1}},
                             unusable_form(program, form)};
        job.alternatives.push_back(std::move(spec));
      }
    } else if (!config.canonicalizer) {
      for (AlternativeForm& a : alternative_forms(program)) {
        AlternativeSpec spec{a.name, program, {}, ""};
        if (a.form.ok()) {
          for (const auto& [rule, n] : a.form->rewrites) spec.rewrites[rule] = n;
          spec.program = a.form->program;
          spec.error = unusable_form(program, spec.program);
        } else {
          spec.error = a.form.error().message;
        }
        job.alternatives.push_back(std::move(spec));
      }
    }
  }
  if (std::string unusable = unusable_form(program, canonical); !unusable.empty()) {
    job.rewrites.clear();
    job.canonical_note =
        "the program is searched as given: its canonical form is unusable (" + unusable + ")";
    return;
  }
  job.canonical = std::move(canonical).value();
}

/// The checkpoint path of an alternative form: the canonical form's with the form's name
/// before its ".json" (or after it, for a path not ending so).
std::string form_checkpoint_path(const std::string& path, const std::string& form) {
  constexpr std::string_view ext = ".json";
  if (path.size() > ext.size() && path.ends_with(ext))
    return path.substr(0, path.size() - ext.size()) + ".form-" + form + std::string(ext);
  return path + ".form-" + form;
}

Result<SearchJob> set_up_job(const KernelGraph& program, const SearchConfig& given) {
  const auto t0 = Clock::now();
  STRATA_RETURN_IF_ERROR(check_config(given));
  STRATA_RETURN_IF_ERROR(check_program(program));
  STRATA_ASSIGN_OR_RETURN(Target target, Target::by_name(given.target));
  SearchJob job{t0, given, std::move(target), "", "", "", "", "", {}, {}, "", "canonical", 0, {}};
  canonicalize(program, given, job);
  SearchConfig& config = job.config;
  // A replaced canonicalization is not part of the cache key: such a search bypasses the cache.
  if (config.canonicalize &&
      (config.canonicalizer || (config.alternative_forms && !config.alternative_canonicalizers.empty())))
    config.use_cache = false;
  if (config.max_block_ops == 0)
    config.max_block_ops = SearchConfig::auto_max_block_ops(job.canonical);
  job.cache_key = search_cache_key(program, job.config);
  job.ckpt_key = job.cache_key;
  const std::string dir = resolve_cache_dir(job.config.cache_dir);
  job.cache_path = dir + "/" + job.cache_key + ".json";
  job.ckpt_path = job.config.checkpoint_path.empty() ? dir + "/" + job.cache_key + ".ckpt.json"
                                                     : job.config.checkpoint_path;
  job.prog_hash = program_hash(program);
  return job;
}

/// Phase 2, cache lookup: the cached answer when the cache is on and holds a valid entry
/// (marked from_cache, stop CacheHit); a damaged entry is a warning in `result`.
std::optional<SearchResult> look_up_cache(const SearchJob& job, const KernelGraph& program,
                                          SearchResult& result) {
  if (!job.config.use_cache) return std::nullopt;
  auto cached = load_cached_result(job.cache_path, job.cache_key, program, job.target);
  if (cached.ok()) {
    cached->from_cache = true;
    cached->cache_key = job.cache_key;
    cached->stats.stop = StopReason::CacheHit;
    cached->stats.elapsed_s = seconds_since(job.t0);
    return std::move(cached).value();
  }
  if (cached.error().message.rfind("missing: ", 0) != 0)
    warn(result, "bad cache entry ignored, it will be rewritten: " + cached.error().message);
  return std::nullopt;
}

/// What the enumeration needs: the search space (program analysis, expressions, oracles),
/// the verifier, and the tasks the tree is split into.
struct Enumeration {
  std::unique_ptr<search::SearchSetup> setup;
  std::optional<EquivalenceChecker> checker;  ///< bound target 2^-60
  std::vector<search::TaskPath> tasks;
  TaskStats collect_stats;  ///< of the pass that split the tree
  double setup_s = 0;
};

/// Phase 3, preparation: the search space of the canonical program (job.canonical) and the
/// checker of the program as given — every candidate is verified against the user's program,
/// so a wrong rewrite costs candidates, never correctness. Errors: the program analysis, and
/// no block-graph configuration that fits the program. The collection pass never stops early,
/// so task ids mean the same in every run (checkpoints refer to them).
Result<Enumeration> prepare_enumeration(const SearchJob& job, const KernelGraph& program,
                                        const std::atomic<bool>* verification_stop) {
  Enumeration en;
  STRATA_ASSIGN_OR_RETURN(en.setup,
                          search::SearchSetup::make(job.canonical, job.config, job.target));
  VerifyOptions verify_options;
  verify_options.stop = verification_stop;
  STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker,
                          EquivalenceChecker::make(program, verify_options));
  en.checker.emplace(std::move(checker));
  search::StopControl collect_stop;
  search::Enumerator root(en.setup->space, collect_stop, nullptr);
  en.tasks = root.collect_tasks(kSplitDepth, en.collect_stats);
  if (root.blocks_opened() == 0)
    return make_error(
        "no block-graph configuration fits the program's shapes: every tile is larger than "
        "the shared memory of " +
        job.target.name +
        " and no dimension splits into the tile sizes "
        "of the split policy (docs/search.md)");
  en.setup_s = seconds_since(job.t0);
  return en;
}

/// Phase 4, restart point: no task done, or (with resume) the checkpoint's progress; a
/// missing or unusable checkpoint is a warning in `result` and the search starts over.
search::Progress restore_progress(const SearchJob& job, const Enumeration& en,
                                  SearchResult& result) {
  search::Progress progress;
  progress.done.assign(en.tasks.size(), 0);
  progress.done_stats = en.collect_stats;
  if (!job.config.resume) return progress;
  Status s =
      search::read_checkpoint(job.ckpt_path, job.ckpt_key, job.prog_hash, en.tasks, progress);
  if (!s.ok()) {
    bool missing = s.error().message.rfind("missing: ", 0) == 0;
    warn(result, missing ? "no checkpoint at " + job.ckpt_path + "; starting from scratch"
                         : "checkpoint ignored: " + s.error().message);
  }
  return progress;
}

/// Phase 5, enumeration: runs the tasks not done in `progress` on the workers, offering
/// complete graphs to `pool`; a task stopped in the middle by an earlier run continues after
/// the last subtree it finished. Updates `progress` (done tasks, partial ones) and sets
/// result.stats: counters of this and earlier runs, tasks, and the stop reason when a limit
/// or the interrupt stopped it. Returns whether every task is done.
bool enumerate(const SearchJob& job, const Enumeration& en, search::StopControl& stop,
               search::Monitor& monitor, search::Progress& progress, search::CandidatePool& pool,
               SearchResult& result) {
  const SearchConfig& config = job.config;
  const std::vector<search::TaskPath>& tasks = en.tasks;
  std::vector<size_t> todo;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!progress.done[i]) todo.push_back(i);
  std::atomic<size_t> next{0};
  std::mutex mu;
  // Statistics of the unfinished tasks as far as they got (reported by a stopped run).
  std::map<size_t, TaskStats> unfinished_stats;
  for (const auto& [task, r] : progress.partial) unfinished_stats[task] = r.stats;
  int threads =
      config.threads > 0 ? config.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(todo.size(), 1))));
  // The monitor's counter: its progress line reads it until the verification begins.
  std::atomic<size_t>& tasks_done =
      monitor.enter_enumeration(tasks.size(), tasks.size() - todo.size());
  auto work = [&] {
    search::Enumerator e(en.setup->space, stop, &pool);
    while (!stop.stop.load()) {
      if (config.interrupt && config.interrupt->load()) {
        monitor.stop_for_interrupt();
        break;
      }
      size_t k = next.fetch_add(1);
      if (k >= todo.size()) break;
      const size_t id = todo[k];
      std::optional<search::TaskResume> from;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = progress.partial.find(id); it != progress.partial.end()) from = it->second;
      }
      search::TaskResume resume = from.value_or(search::TaskResume{});
      TaskStats ts;
      bool finished = e.run_task(tasks[id], ts, from ? &*from : nullptr, &resume);
      std::lock_guard<std::mutex> lock(mu);
      if (finished) {
        progress.done[id] = 1;
        progress.done_stats.add(ts);
        progress.partial.erase(id);
        unfinished_stats.erase(id);
        ++tasks_done;
      } else {
        unfinished_stats[id] = ts;
        if (!resume.after.empty()) progress.partial[id] = std::move(resume);
      }
    }
  };
  std::vector<std::thread> pool_threads;
  for (int i = 1; i < threads; ++i) pool_threads.emplace_back(work);
  work();
  for (std::thread& t : pool_threads) t.join();

  const bool all_done = tasks_done.load() == tasks.size();
  TaskStats run_stats = progress.done_stats;
  for (const auto& [task, ts] : unfinished_stats) run_stats.add(ts);
  result.stats = to_stats(run_stats);
  result.stats.tasks_total = static_cast<int64_t>(tasks.size());
  result.stats.tasks_done = static_cast<int64_t>(tasks_done.load());
  if (!all_done) {
    result.stats.stop = monitor.interrupted()      ? StopReason::Interrupted
                        : monitor.time_limit_hit() ? StopReason::TimeLimit
                                                   : StopReason::StateLimit;
    result.stats.stop_phase = SearchPhase::Enumeration;
  }
  result.stats.setup_s = en.setup_s;
  return all_done;
}

/// Derived forms verified beside the top_k (docs/search.md, "Split-KV").
constexpr size_t kDerivedVerified = 2;

/// A graph not found by the enumeration, and how it was made (Candidate::derived).
struct DerivedEntry {
  search::PoolEntry entry;
  const char* how;
};

/// Blocks a split-KV form may have in all: 4 × SM count, the grids' bound.
int64_t split_kv_max_blocks(const Target& target) {
  return 4 * static_cast<int64_t>(target.sm_count);
}

/// The split-KV forms kept from all the graphs the enumeration offers, beside those of the
/// pool's graphs: a kernel the model ranks out of the pool (few blocks, each holding every
/// query row of its heads: its compute looks underfilled) can make the best split, whose
/// blocks each stream their part of the keys once.
constexpr size_t kOfferedSplitForms = 32;

/// Phase 5b, derived forms: the split-KV forms of the online-softmax kernels of the graphs
/// found (docs/search.md, "Split-KV") — of the pool's graphs and the best `offered_forms` of
/// every graph offered to it — costed; the best of them are verified beside the
/// enumeration's candidates (verify_derived), because the cost model does not see the
/// latency of a long loop in few blocks that the split removes.
std::vector<DerivedEntry> derive_split_kv(const SearchJob& job, const search::CandidatePool& pool,
                                          const search::CandidatePool& offered_forms) {
  // The best of each source: the offered forms join the pool's forms, never displace them
  // (the model ranks splits no better than the graphs they come from).
  search::CandidatePool of_pool(job.target, kDerivedVerified), of_offers(job.target, kDerivedVerified);
  for (const search::PoolEntry& e : pool.entries())
    for (KernelGraph& g : search::split_kv_forms(e.graph, split_kv_max_blocks(job.target)))
      if (not_emittable(g, job.target).empty()) of_pool.offer(std::move(g));
  for (const search::PoolEntry& e : offered_forms.entries())
    if (not_emittable(e.graph, job.target).empty()) of_offers.offer(KernelGraph(e.graph));
  std::vector<DerivedEntry> out;
  for (const search::PoolEntry& e : of_pool.entries()) out.push_back({e, "split_kv"});
  for (const search::PoolEntry& e : of_offers.entries())
    if (std::none_of(out.begin(), out.end(), [&](const DerivedEntry& d) { return d.entry.key == e.key; }))
      out.push_back({e, "split_kv"});
  return out;
}

/// Phase 5d, prologue folds (docs/search.md, "Prologue folding"): the pool's graphs and the
/// derived forms so far (split-KV forms, seeds) with their prologue kernels folded into the
/// kernels that read them; the best that the code generator can emit, verified beside them.
void add_prologue_folds(const SearchJob& job, const search::CandidatePool& pool,
                        std::vector<DerivedEntry>& derived) {
  search::CandidatePool folds(job.target, kDerivedVerified);
  auto offer = [&](const KernelGraph& g) {
    if (std::optional<KernelGraph> f = search::fold_prologues(g))
      if (not_emittable(*f, job.target).empty()) folds.offer(std::move(*f));
  };
  for (const search::PoolEntry& e : pool.entries()) offer(e.graph);
  for (const DerivedEntry& d : derived) offer(d.entry.graph);
  for (const search::PoolEntry& e : folds.entries()) derived.push_back({e, "prologue_fold"});
}

/// Phase 5c, seeds: the pointwise seeds of the canonical program (docs/search.md, "Pointwise
/// seeds") the code generator can emit, costed like the derived forms and verified beside them.
void add_pointwise_seeds(const SearchJob& job, std::vector<DerivedEntry>& derived) {
  std::vector<KernelGraph> seeds = search::pointwise_seeds(job.canonical, job.target.sm_count);
  search::CandidatePool pool(job.target, seeds.size());
  for (KernelGraph& g : seeds)
    if (not_emittable(g, job.target).empty()) pool.offer(std::move(g));
  for (const search::PoolEntry& e : pool.entries()) derived.push_back({e, "pointwise_seed"});
}

/// The form of a library form's region the kernels are built from: its canonical form
/// (docs/search.md, "Canonicalization") as the job computes the program's, or the region as
/// written where that is off, fails or changes its interface.
KernelGraph canonical_region(const SearchConfig& config, const KernelGraph& region) {
  if (!config.canonicalize) return region;
  Result<KernelGraph> canonical = make_error("");
  if (config.canonicalizer) {
    canonical = config.canonicalizer(region);
  } else if (auto c = canonicalize_program(region); c.ok()) {
    canonical = std::move(c->program);
  }
  if (!canonical.ok() || !check_canonical_interface(region, *canonical).ok()) return region;
  return std::move(canonical).value();
}

/// Phase 5d, library forms (docs/search.md, "Library forms"): built from the program as given
/// (so that their composed proofs refer to it), each region in its canonical form; those the
/// code generator can emit are costed (their kernels are fused already) and proved by
/// composition (prove_library_forms), before the enumeration's candidates are verified.
struct LibraryFormJob {
  search::LibraryForms forms;
  std::vector<search::PoolEntry> entries;  ///< per form: its graph and cost
};

LibraryFormJob library_form_job(const SearchJob& job, const KernelGraph& program) {
  LibraryFormJob lf;
  lf.forms = search::library_forms(
      program, job.target.sm_count,
      [&](const KernelGraph& region) { return canonical_region(job.config, region); });
  for (const search::LibraryForm& f : lf.forms.forms) {
    search::PoolEntry e{f.graph, estimate_cost(f.graph, job.target),
                        kernel_graph_to_json(f.graph).dump()};
    lf.entries.push_back(std::move(e));
  }
  return lf;
}

/// Phase 7a: the library forms the code generator can emit, proved by composition
/// (library_form_proof.h), within the time limit; those proved (bound ≤ 2^-60) are returned for
/// the ranking. A form whose composed bound misses the target is verified against the whole
/// program like any candidate (after the others, in verify_derived). Runs before the
/// enumeration's candidates are verified: a composed proof costs a few elementwise passes,
/// where a verification of a prefill program evaluates its products in the fields.
std::vector<Candidate> prove_library_forms(const SearchJob& job, LibraryFormJob& lf,
                                           const std::atomic<bool>* stop,
                                           std::vector<DerivedEntry>& unproved,
                                           SearchResult& result) {
  std::vector<Candidate> proved;
  VerifyOptions options;
  options.stop = stop;
  search::LibraryFormProver prover(lf.forms, options);
  for (size_t i = 0; i < lf.forms.forms.size(); ++i) {
    if (job.config.interrupt && job.config.interrupt->load()) break;
    if (job.config.time_limit_s > 0 && seconds_since(job.t0) >= job.config.time_limit_s) break;
    const search::PoolEntry& e = lf.entries[i];
    if (std::string rule = not_emittable(e.graph, job.target); !rule.empty()) {
      ++result.stats.prunes_by_rule[rule];
      continue;
    }
    const auto t = Clock::now();
    Result<VerifyResult> v = prover.prove(lf.forms.forms[i]);
    result.stats.verify_s += seconds_since(t);
    if (!v.ok()) {
      if (is_stopped_error(v.error().message)) break;
      warn(result, "a library form's composed proof failed with an error: " + v.error().message);
      continue;
    }
    ++result.stats.candidates_screened;
    ++result.stats.candidates_verified;
    if (!v->equivalent || v->unknown) {
      warn(result, "a library form was not proved equivalent (" + v->detail + "); dropped");
      continue;
    }
    if (v->log2_bound > options.target_log2_bound) {
      unproved.push_back({e, "library_form"});
      continue;
    }
    proved.push_back({e.graph, e.cost, *v, false, "library_form"});
  }
  return proved;
}

/// Phase 7b: the derived forms screened and verified (as screen_and_verify does) and, when
/// proved, added to the ranking.
void verify_derived(const SearchJob& job, const EquivalenceChecker& checker,
                    const std::vector<DerivedEntry>& derived, search::Monitor& monitor,
                    SearchResult& result) {
  const VerifyOptions verify_options;
  for (const auto& [e, how] : derived) {
    if (job.config.interrupt && job.config.interrupt->load()) break;
    if (job.config.time_limit_s > 0 && seconds_since(job.t0) >= job.config.time_limit_s) break;
    if (!not_emittable(e.graph, job.target).empty()) continue;
    const CandidateCheck c = check_candidate(checker, e, monitor.verify_counts().verifying);
    result.stats.screen_s += c.screen_s;
    result.stats.verify_s += c.verify_s;
    if (is_stopped_error(c.error)) break;  // the time limit or an interrupt: no verdict
    ++result.stats.candidates_screened;
    if (!c.verified || !c.error.empty()) continue;
    ++result.stats.candidates_verified;
    if (c.verification.equivalent && !c.verification.unknown &&
        c.verification.log2_bound <= verify_options.target_log2_bound)
      result.ranked.push_back({e.graph, e.cost, c.verification, false, how});
  }
}

/// Phase 6, order: the pool's graphs other than the program, in verification order: the
/// pool's cost order with ties of the model broken by the barriers of the kernels' loops
/// (break_cost_ties; barriers counted only for the graphs that tie), then diversify (the cheapest
/// alternating with a round robin over structures).
std::vector<search::PoolEntry> verification_order(std::vector<search::PoolEntry> entries,
                                                  const KernelGraph& program,
                                                  const Target& target) {
  std::erase_if(entries,
                [&](const search::PoolEntry& e) { return e.graph.structurally_equal(program); });
  std::vector<double> predicted;
  for (const search::PoolEntry& e : entries) predicted.push_back(e.cost.predicted_us);
  const std::vector<size_t> order = search::break_cost_ties(predicted, [&](size_t i) {
    return search::loop_barriers_per_sm(entries[i].graph, target);
  });
  std::vector<search::PoolEntry> tied;
  for (size_t i : order) tied.push_back(std::move(entries[i]));
  diversify(tied);
  return tied;
}

/// Phase 7, screening and verification: in order, each candidate the code generator can
/// emit is screened by one field trial and, when it passes, verified, until top_k are proved
/// equivalent (bound ≤ 2^-60); those go to result.ranked. One at a time: checking two
/// candidates at once on two cores was measured to take as long as checking them one after
/// the other. The time limit and the interrupt flag are checked before each candidate; an
/// interrupt during the enumeration ends the search there. Failures and unproved candidates
/// are warnings; result.stats counts what ran.
void screen_and_verify(const SearchJob& job, const EquivalenceChecker& checker,
                       const std::vector<search::PoolEntry>& entries, search::Monitor& monitor,
                       SearchResult& result) {
  const SearchConfig& config = job.config;
  monitor.enter_verification(entries.size());
  search::Monitor::VerifyCounts& counts = monitor.verify_counts();
  if (result.stats.stop == StopReason::Interrupted) {
    result.stats.verification_complete = entries.empty();
    warn(result, "interrupted during the enumeration (" + std::to_string(result.stats.tasks_done) +
                     " of " + std::to_string(result.stats.tasks_total) +
                     " tasks done); the graphs found were not verified");
  }
  bool screen_error = false;
  const VerifyOptions verify_options;  // the checker's: bound target 2^-60
  int64_t unproved = 0;                // passed every trial, but no bound reaching the target
  std::string first_unproved;
  for (const search::PoolEntry& e : entries) {
    if (!result.stats.verification_complete) break;
    if (static_cast<int>(result.ranked.size()) >= config.top_k) break;
    // Checked before each candidate; a check already running is given up by the verifier's
    // stop flag, which the monitor sets at the same moment (is_stopped_error below).
    auto stopped = [&] {
      const bool interrupted = config.interrupt && config.interrupt->load();
      if (!interrupted &&
          !(config.time_limit_s > 0 && seconds_since(job.t0) >= config.time_limit_s))
        return false;
      result.stats.verification_complete = false;
      if (result.stats.stop_phase == SearchPhase::None) {
        result.stats.stop = interrupted ? StopReason::Interrupted : StopReason::TimeLimit;
        result.stats.stop_phase = SearchPhase::Verification;
      }
      warn(result, std::string(interrupted ? "interrupted" : "time limit reached") +
                       " during verification (" + std::to_string(result.ranked.size()) + " of " +
                       std::to_string(config.top_k) +
                       " graphs verified); the ranking holds only the graphs verified so far");
      return true;
    };
    if (stopped()) break;
    ++counts.considered;
    if (std::string rule = not_emittable(e.graph, job.target); !rule.empty()) {
      ++result.stats.prunes_by_rule[rule];
      continue;
    }
    const CandidateCheck c = check_candidate(checker, e, counts.verifying);
    result.stats.screen_s += c.screen_s;
    result.stats.verify_s += c.verify_s;
    if (is_stopped_error(c.error) && stopped()) break;  // given up at the limit: no verdict
    ++result.stats.candidates_screened;
    ++counts.screened;
    if (!c.error.empty() && !c.verified) {
      if (!screen_error) warn(result, "screening failed with an error: " + c.error);
      screen_error = true;
      continue;
    }
    if (!c.verified) continue;
    ++result.stats.candidates_verified;
    if (!c.error.empty()) {
      warn(result, "verification failed with an error: " + c.error);
    } else if (c.verification.unknown ||
               (c.verification.equivalent &&
                c.verification.log2_bound > verify_options.target_log2_bound)) {
      // Not proved: kept out of the ranking (docs/search.md, "Verification").
      if (unproved++ == 0) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "bound 2^%.1f after %d trials", c.verification.log2_bound,
                      c.verification.trials);
        first_unproved = c.verification.unknown ? c.verification.detail : std::string(buf);
      }
    } else if (!c.verification.equivalent) {
      warn(result, "a screened candidate failed full verification (" + c.verification.detail +
                       "); dropped");
    } else {
      result.ranked.push_back({e.graph, e.cost, c.verification, false, {}});
      ++counts.verified;
    }
  }
  if (unproved > 0)
    warn(result, std::to_string(unproved) +
                     " candidate(s) agreed with the program on every trial but could not be "
                     "proved equivalent to 2^" +
                     std::to_string(std::lround(verify_options.target_log2_bound)) +
                     " (first: " + first_unproved + "); not reported");
}

/// Phase 8, ranking: the program joins the verified graphs (as equivalent to itself, bound
/// -inf) and all are sorted best first (sort_candidates).
void rank(const KernelGraph& program, const Target& target, SearchResult& result) {
  VerifyResult identity;
  identity.equivalent = true;
  identity.log2_bound = -INFINITY;
  identity.detail = "the input program itself";
  result.ranked.push_back({program, estimate_cost(program, target), identity, true, {}});
  sort_candidates(result.ranked, target);
}

/// What the search of one form leaves: its verified candidates (result.ranked, without the
/// program), statistics and notes, whether every task is done, and what a checkpoint keeps.
struct FormRun {
  SearchJob job;
  SearchResult result;
  bool all_done = false;
  search::Progress progress;
  std::vector<search::PoolEntry> found;
};

/// Phases 3 to 7 for one form (job.canonical): prepare, restore, enumerate, derive, order,
/// screen and verify, each candidate against the program as given. The library forms, which
/// are built from the program as given, only with `library_forms`. Errors: those of
/// prepare_enumeration.
Result<FormRun> search_form(SearchJob job, const KernelGraph& program, bool library_forms) {
  FormRun run;
  SearchResult& result = run.result;
  search::StopControl stop;
  stop.max_states = job.config.max_states;
  search::Monitor monitor(job.config, stop, job.t0);  // limits and progress until verified
  STRATA_ASSIGN_OR_RETURN(const Enumeration en,
                          prepare_enumeration(job, program, monitor.verification_stop()));
  search::Progress progress = restore_progress(job, en, result);
  monitor.set_late_deadline(job.late_enum_deadline_s, progress.pool.size());
  // Every graph offered is also a source of split-KV forms (derive_split_kv).
  search::CandidatePool offered_forms(job.target, kOfferedSplitForms);
  auto observe = [&](const KernelGraph& g) {
    if (job.config.observer) job.config.observer(g);
    // Only splits that fill the SMs: the others are what the pool's graphs already give.
    for (KernelGraph& f : search::split_kv_forms(g, split_kv_max_blocks(job.target),
                                                 job.target.sm_count))
      offered_forms.offer(std::move(f));
  };
  search::CandidatePool pool(job.target, pool_capacity(job.config), observe);
  for (const KernelGraph& g : progress.pool) pool.restore(g);

  run.all_done = enumerate(job, en, stop, monitor, progress, pool, result);
  std::vector<DerivedEntry> derived = derive_split_kv(job, pool, offered_forms);
  add_pointwise_seeds(job, derived);
  add_prologue_folds(job, pool, derived);
  std::vector<Candidate> proved_forms;
  if (library_forms) {
    LibraryFormJob forms = library_form_job(job, program);
    proved_forms = prove_library_forms(job, forms, monitor.verification_stop(), derived, result);
  }
  run.found = pool.entries();
  screen_and_verify(job, *en.checker, verification_order(run.found, program, job.target), monitor,
                    result);
  verify_derived(job, *en.checker, derived, monitor, result);
  for (Candidate& c : proved_forms) result.ranked.push_back(std::move(c));
  monitor.finish();
  for (Candidate& c : result.ranked) c.form = job.form;
  result.stats.rewrites_by_rule = job.rewrites;
  result.stats.elapsed_s = seconds_since(job.t0);
  run.progress = std::move(progress);
  run.job = job;  // a copy: the enumeration's setup, destroyed after this, was made from job
  return run;
}

/// An alternative form gets no search with less time than this left (it could not even set
/// up): it is recorded as not reached.
constexpr double kMinFormSeconds = 1.0;

/// The job of an alternative form, starting now with the time the whole search has left
/// (`left` seconds; 0 = no time limit). Its enumeration gets that time but a reserve for its
/// screening and verification: three times what the canonical form's took (`checks_s`: its
/// candidates are checked against the same program, and the derived forms, verified last, are
/// lost when the reserve runs out), at least a quarter and at most half of the time left. While
/// it has found no graph (nothing to check), it enumerates on into the reserve, up to a tenth
/// of the time left (at least kMinFormSeconds) before the limit (late_enum_deadline_s). With an
/// explicit enum_time_limit_s, the same share of the time left as the canonical form had of the
/// whole (without a time limit: each form's own), and no later deadline. Its own state budget
/// (max_states), max_block_ops from its own program when automatic, and a checkpoint of its own
/// (key and path).
SearchJob form_job(const SearchJob& base, const AlternativeSpec& spec, const SearchConfig& given,
                   double left, double checks_s) {
  SearchJob job = base;
  job.t0 = Clock::now();
  job.form = spec.name;
  job.canonical = spec.program;
  job.rewrites = spec.rewrites;
  job.canonical_note.clear();
  job.alternatives.clear();
  SearchConfig& c = job.config;
  if (given.time_limit_s > 0) {
    c.time_limit_s = left;
    if (given.enum_time_limit_s > 0) {
      c.enum_time_limit_s = left * std::min(1.0, given.enum_time_limit_s / given.time_limit_s);
    } else {
      c.enum_time_limit_s = left - std::clamp(3 * checks_s, left / 4, left / 2);
      job.late_enum_deadline_s = left - std::max(kMinFormSeconds, left / 10);
    }
  }
  c.max_block_ops = given.max_block_ops == 0 ? SearchConfig::auto_max_block_ops(spec.program)
                                             : given.max_block_ops;
  job.ckpt_key = sha256_hex(base.cache_key + "\nform " + spec.name);
  job.ckpt_path = form_checkpoint_path(base.ckpt_path, spec.name);
  return job;
}

FormStats form_stats(const FormRun& run, const SearchJob& base) {
  const SearchStats& st = run.result.stats;
  FormStats f;
  f.name = run.job.form;
  f.rewrites_by_rule = run.job.rewrites;
  f.searched = true;
  f.states = st.states;
  f.candidates_found = st.candidates_found;
  f.candidates_verified = st.candidates_verified;
  f.tasks_total = st.tasks_total;
  f.tasks_done = st.tasks_done;
  f.start_s = std::chrono::duration<double>(run.job.t0 - base.t0).count();
  f.elapsed_s = st.elapsed_s;
  f.checks_s = st.screen_s + st.verify_s;
  f.stop = st.stop;
  f.stop_phase = st.stop_phase;
  return f;
}

/// Phase 9, persist: a finished search (every form run to the end, none left out for the time
/// or an interrupt) is cached and its checkpoints removed; a stopped one leaves a checkpoint
/// per form searched (the canonical form's under the cache key, each alternative form's under
/// its own key: task ids are per form), with every task done for a form that finished, so
/// that a resumed run only verifies its pool again. Each checkpoint keeps its form's whole pool
/// (program included), so that a resumed run's pool is the one an uninterrupted run would have.
/// Write failures are warnings.
void persist(const SearchJob& job, bool finished, const std::vector<FormRun>& runs,
             SearchResult& result) {
  if (finished) {
    std::error_code ec;
    std::filesystem::remove(job.ckpt_path, ec);
    for (const AlternativeSpec& a : job.alternatives)
      std::filesystem::remove(form_checkpoint_path(job.ckpt_path, a.name), ec);
    if (job.config.use_cache) {
      Status s = write_checked_json(job.cache_path, kCacheFormat, job.cache_key, job.prog_hash,
                                    search_result_to_json(result, job.config));
      if (!s.ok()) warn(result, "could not write the cache: " + s.error().message);
    }
    return;
  }
  for (const FormRun& run : runs) {
    Status s = search::write_checkpoint(run.job.ckpt_path, run.job.ckpt_key, job.prog_hash,
                                        run.progress, run.found);
    if (!s.ok())
      warn(result, "could not write the checkpoint: " + s.error().message);
    else
      result.notes.push_back("checkpoint written to " + run.job.ckpt_path + "; resume with --resume");
  }
}

/// Phase 8b, joining the forms: the ranked candidates of every form (a graph found by two
/// forms kept once, from the first), their notes (an alternative form's prefixed with its
/// name) and statistics summed (add_part_stats), the rewrites those of the canonical form.
/// The stop reason is the first form's that a limit or an interrupt stopped; where every form
/// searched ran to the end but one was not reached in the time, it is time_limit (in the
/// enumeration). Returns whether the whole search finished.
bool join_forms(std::vector<FormRun>& runs, std::vector<FormStats> skipped, bool out_of_time,
                const SearchJob& job, SearchResult& result) {
  std::vector<std::string> keys;
  bool finished = !out_of_time;
  result.stats = SearchStats{};
  for (size_t i = 0; i < runs.size(); ++i) {
    FormRun& run = runs[i];
    FormStats f = form_stats(run, job);
    for (Candidate& c : run.result.ranked) {
      std::string key = kernel_graph_to_json(c.graph).dump();
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      keys.push_back(std::move(key));
      result.ranked.push_back(std::move(c));
      ++f.ranked;
    }
    for (const std::string& n : run.result.notes)
      result.notes.push_back(i == 0 ? n : "form " + run.job.form + ": " + n);
    search::add_part_stats(result.stats, run.result.stats);
    result.stats.forms.push_back(std::move(f));
    finished = finished && run.all_done && run.result.stats.verification_complete;
  }
  // The forms not searched take their places in the order of job.alternatives.
  for (FormStats& f : skipped) {
    auto at = result.stats.forms.begin() + 1;
    for (const AlternativeSpec& a : job.alternatives) {
      if (a.name == f.name) break;
      if (at != result.stats.forms.end() && at->name == a.name) ++at;
    }
    result.stats.forms.insert(at, std::move(f));
  }
  result.stats.rewrites_by_rule = runs.front().job.rewrites;
  if (out_of_time && result.stats.stop == StopReason::Exhausted) {
    result.stats.stop = StopReason::TimeLimit;
    result.stats.stop_phase = SearchPhase::Enumeration;
  }
  return finished;
}

}  // namespace

Result<SearchResult> superoptimize(const KernelGraph& program, const SearchConfig& config) {
  // Communication splits the program: no kernel spans an all_reduce (docs/tensor-parallel.md).
  if (search::has_collectives(program)) {
    STRATA_RETURN_IF_ERROR(check_config(config));
    return search::search_around_collectives(program, config);
  }
  // Many weight layers: searched layer by layer first (docs/search.md, "Layers").
  if (search::searched_by_layers(program, config)) {
    STRATA_RETURN_IF_ERROR(check_config(config));
    STRATA_RETURN_IF_ERROR(check_program(program));
    return search::search_by_layers(program, config);
  }
  STRATA_ASSIGN_OR_RETURN(const SearchJob job, set_up_job(program, config));
  SearchResult result;
  result.cache_key = job.cache_key;
  if (!job.canonical_note.empty()) warn(result, job.canonical_note);
  if (std::optional<SearchResult> cached = look_up_cache(job, program, result)) return *cached;

  // The canonical form first, with the whole search's limits, as if it were the only form (the
  // answer is never worse than without alternative forms); then each alternative form in the
  // time it leaves (docs/search.md, "Alternative forms").
  std::vector<FormRun> runs;
  STRATA_ASSIGN_OR_RETURN(FormRun canonical, search_form(job, program, /*library_forms=*/true));
  runs.push_back(std::move(canonical));
  std::vector<FormStats> skipped;
  bool out_of_time = false;
  for (const AlternativeSpec& spec : job.alternatives) {
    FormStats f;
    f.name = spec.name;
    f.rewrites_by_rule = spec.rewrites;
    f.start_s = seconds_since(job.t0);
    const double left = config.time_limit_s > 0 ? config.time_limit_s - f.start_s : 0;
    const bool interrupted = (config.interrupt && config.interrupt->load()) ||
                             std::any_of(runs.begin(), runs.end(), [](const FormRun& r) {
                               return r.result.stats.stop == StopReason::Interrupted;
                             });
    if (!spec.error.empty()) {
      f.note = "skipped: its setup failed (" + spec.error + ")";
    } else if (interrupted) {
      f.note = "not searched: the search was interrupted";
      out_of_time = true;
    } else if (config.time_limit_s > 0 && left < kMinFormSeconds) {
      f.note = "not searched: the time limit was reached";
      out_of_time = true;
    } else {
      const SearchStats& first = runs.front().result.stats;
      auto run = search_form(form_job(job, spec, config, left, first.screen_s + first.verify_s),
                             program, false);
      if (run.ok()) {
        runs.push_back(std::move(run).value());
        continue;
      }
      f.note = "skipped: its setup failed (" + run.error().message + ")";
    }
    if (f.note.starts_with("skipped"))
      warn(result, "alternative form " + spec.name + " " + f.note);
    else
      result.notes.push_back("alternative form " + spec.name + " " + f.note);
    skipped.push_back(std::move(f));
  }
  const bool finished = join_forms(runs, std::move(skipped), out_of_time, job, result);
  rank(program, job.target, result);
  result.stats.elapsed_s = seconds_since(job.t0);
  persist(job, finished, runs, result);
  return result;
}

}  // namespace strata
