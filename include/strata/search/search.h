// The superoptimizer search (docs/search.md; Mirage §4.1 and Algorithm 1).
//
// superoptimize() enumerates μGraphs equivalent to a program: kernel graphs of predefined
// ops and customized ops whose block graphs are built op by op, pruned by shape validity,
// shared-memory capacity, canonical order, dimension-class consistency and abstract
// subexpressions. Complete graphs are screened by one finite-field trial, ranked by the cost
// model, and the best top_k are verified with an error bound ≤ 2^-60. The input program
// itself is always a candidate, so the answer is never predicted slower than it.
//
// A search is a job with explicit limits (time, states, kernel ops, block ops) and a typed
// stop reason. It runs on all cores and returns the same ranked set whatever the thread
// count; it can be interrupted and resumed from a checkpoint, also inside a task; its results
// are cached on disk keyed by the program, the result-affecting configuration and the strata
// version.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/cost/cost_model.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"
#include "strata/verify/verifier.h"

namespace strata {

/// The largest program (inputs and op results) the search takes; larger ones are refused with
/// an error naming the count (the PyTorch backend splits its partitions to stay within it).
inline constexpr int kMaxProgramTensors = 24;

/// Configuration of one search job. Fields can be set directly or through the chainable
/// setters. The fields marked (key) change the result and are part of the cache key.
struct SearchConfig {
  int threads = 0;  ///< worker threads; 0 = all hardware threads
  /// Bound on the whole search in seconds (setup, enumeration, screening, verification);
  /// 0 = none. Checked between candidates after the enumeration: a screening or verification
  /// in flight finishes first (docs/search.md, "Limits").
  double time_limit_s = 0;
  /// Bound on the enumeration in seconds (from the start of the search); 0 = half of
  /// time_limit_s when that is set (the rest is left to screening and verification), else none.
  double enum_time_limit_s = 0;
  int64_t max_states = 0;        ///< bound on explored states; 0 = none
  int max_kernel_ops = 5;        ///< (key) kernel ops per graph, predefined and customized
  /// (key) ops per block graph, output savers not counted; 0 = from the program:
  /// auto_max_block_ops (a fused kernel holds the program's inputs and compute ops, plus
  /// accumulators).
  int max_block_ops = 0;
  int max_customized_ops = 2;    ///< (key) customized kernels per graph
  int max_block_inputs = 4;      ///< (key) inputs of one customized kernel
  int max_block_outputs = 2;     ///< (key) outputs of one customized kernel
  bool abstract_pruning = true;  ///< (key) abstract pruning (docs/abstract-expressions.md)
  std::string target = "h100";   ///< (key) GPU of the cost model: h100 | h200 | a100
  int top_k = 4;                 ///< (key) candidates verified and returned, besides the program
  /// (key) Search the program's canonical form (canonicalize_program, docs/search.md,
  /// "Canonicalization"); candidates are verified against the program as given either way.
  /// Off: the program as given is the only form searched (no alternative forms either).
  bool canonicalize = true;
  /// (key) With canonicalize: also search the program's alternative forms (alternative_forms,
  /// docs/search.md, "Alternative forms") after the canonical form, in the time it leaves;
  /// their candidates join the one ranking.
  bool alternative_forms = true;
  /// (key) Search a program with more weight layers than max_customized_ops in segments, one
  /// per layer, joined, then the whole program with the time left (docs/search.md, "Layers").
  bool split_layers = true;
  bool resume = false;           ///< continue from the checkpoint of an earlier, stopped run
  bool quiet = false;            ///< no progress line on stderr
  bool use_cache = true;         ///< answer from / store into the result cache
  std::string cache_dir;         ///< "" = $STRATA_CACHE_DIR, else ~/.cache/strata
  std::string checkpoint_path;   ///< "" = <cache dir>/<cache key>.ckpt.json
  /// When non-null and set (e.g. by a SIGINT handler), the search stops, writes a
  /// checkpoint and returns with StopReason::Interrupted.
  const std::atomic<bool>* interrupt = nullptr;
  /// When set, called with every complete candidate the enumeration finds (thread graphs
  /// fused), before ranking — from the worker threads, concurrently. Not called for results
  /// answered from the cache.
  std::function<void(const KernelGraph&)> observer;
  /// When set (and canonicalize is on), replaces canonicalize_program: the search enumerates
  /// the graph it returns. For tests: a wrong rewrite must be caught by the verification of
  /// every candidate against the program as given. A search with it neither reads nor writes
  /// the cache.
  std::function<Result<KernelGraph>(const KernelGraph&)> canonicalizer;
  /// When non-empty (and canonicalize and alternative_forms are on), replaces the alternative
  /// forms: each is a named form made by its function (a name used before, or "canonical", is
  /// ignored: names are unique, they name checkpoints). For tests: a failing or wrong form must
  /// be skipped or caught by verification. A search with it neither reads nor writes the cache.
  std::vector<std::pair<std::string, std::function<Result<KernelGraph>(const KernelGraph&)>>>
      alternative_canonicalizers;

  SearchConfig& with_threads(int n) {
    threads = n;
    return *this;
  }
  SearchConfig& with_time_limit(double s) {
    time_limit_s = s;
    return *this;
  }
  SearchConfig& with_enum_time_limit(double s) {
    enum_time_limit_s = s;
    return *this;
  }
  SearchConfig& with_max_states(int64_t n) {
    max_states = n;
    return *this;
  }
  SearchConfig& with_max_kernel_ops(int n) {
    max_kernel_ops = n;
    return *this;
  }
  /// The limit max_block_ops = 0 stands for: max(11, program inputs + compute ops + 2), at
  /// most 16.
  static int auto_max_block_ops(const KernelGraph& program);
  SearchConfig& with_max_block_ops(int n) {
    max_block_ops = n;
    return *this;
  }
  SearchConfig& with_abstract_pruning(bool on) {
    abstract_pruning = on;
    return *this;
  }
  SearchConfig& with_target(std::string t) {
    target = std::move(t);
    return *this;
  }
  SearchConfig& with_top_k(int k) {
    top_k = k;
    return *this;
  }
  SearchConfig& with_resume(bool on) {
    resume = on;
    return *this;
  }
  SearchConfig& with_quiet(bool on) {
    quiet = on;
    return *this;
  }
  SearchConfig& with_cache(bool on) {
    use_cache = on;
    return *this;
  }
  SearchConfig& with_cache_dir(std::string d) {
    cache_dir = std::move(d);
    return *this;
  }
  SearchConfig& with_checkpoint_path(std::string p) {
    checkpoint_path = std::move(p);
    return *this;
  }
  SearchConfig& with_interrupt(const std::atomic<bool>* flag) {
    interrupt = flag;
    return *this;
  }
  SearchConfig& with_observer(std::function<void(const KernelGraph&)> f) {
    observer = std::move(f);
    return *this;
  }
  SearchConfig& with_canonicalize(bool on) {
    canonicalize = on;
    return *this;
  }
  SearchConfig& with_alternative_forms(bool on) {
    alternative_forms = on;
    return *this;
  }
  SearchConfig& with_alternative_canonicalizers(
      std::vector<std::pair<std::string, std::function<Result<KernelGraph>(const KernelGraph&)>>>
          forms) {
    alternative_canonicalizers = std::move(forms);
    return *this;
  }
  SearchConfig& with_split_layers(bool on) {
    split_layers = on;
    return *this;
  }
  SearchConfig& with_canonicalizer(std::function<Result<KernelGraph>(const KernelGraph&)> f) {
    canonicalizer = std::move(f);
    return *this;
  }
};

/// Why the search ended: it ran to the end (Exhausted), was answered from the cache, or a limit
/// or an interrupt stopped it (in the phase SearchStats::stop_phase names).
enum class StopReason { Exhausted, TimeLimit, StateLimit, Interrupted, CacheHit };
/// "exhausted", "time_limit", "state_limit", "interrupted", "cache_hit".
std::string_view stop_reason_name(StopReason r);

/// The phase a limit or an interrupt stopped: the enumeration, or the screening and
/// verification of the best graphs after it.
enum class SearchPhase { None, Enumeration, Verification };
/// "none", "enumeration", "verification".
std::string_view search_phase_name(SearchPhase p);

/// What one form of the program (docs/search.md, "Alternative forms") contributed to a search.
struct FormStats {
  std::string name;  ///< "canonical" (the form searched first), or the alternative-form rule
  std::map<std::string, int64_t> rewrites_by_rule;  ///< that made the form from the program
  bool searched = false;  ///< false: skipped (`note` says why) or not reached in the time
  std::string note;       ///< why a form was not searched; empty when it was
  int64_t states = 0;
  int64_t candidates_found = 0;
  int64_t candidates_verified = 0;
  int64_t tasks_total = 0;
  int64_t tasks_done = 0;
  int64_t ranked = 0;     ///< entries of the ranking that came from this form
  double start_s = 0;     ///< when its search began, from the start of the whole search
  double elapsed_s = 0;   ///< how long it ran
  double checks_s = 0;    ///< of which screening and verification (its own and derived graphs)
  StopReason stop = StopReason::Exhausted;
  SearchPhase stop_phase = SearchPhase::None;
};

struct SearchStats {
  int64_t states = 0;  ///< graph prefixes explored (each op, block-graph opening or closing)
  std::map<std::string, int64_t> prunes_by_rule;  ///< rejected extensions, by rule
  /// Rewrites of the canonicalization, by rule (empty: the program was searched as given); of
  /// the canonical form (those of each alternative form are in `forms`).
  std::map<std::string, int64_t> rewrites_by_rule;
  int64_t candidates_found = 0;     ///< complete graphs (with extents) that reached ranking
  int64_t candidates_screened = 0;  ///< of which screened by one field trial
  int64_t candidates_verified = 0;  ///< full verifications run
  int64_t tasks_total = 0;          ///< subtrees the enumeration was split into
  int64_t tasks_done = 0;           ///< of which finished (over all resumed runs)
  double elapsed_s = 0;             ///< wall time of this run
  double setup_s = 0;               ///< of which: program analysis, checker construction
  double screen_s = 0;              ///< of which: screening (summed over threads)
  double verify_s = 0;              ///< of which: full verification of the top graphs
  StopReason stop = StopReason::Exhausted;
  SearchPhase stop_phase = SearchPhase::None;  ///< where the limit or interrupt struck first
  /// False when screening and verification were cut short (time limit, interrupt) before
  /// top_k graphs were verified or the candidates ran out: `ranked` then holds only the graphs
  /// verified so far (and the program).
  bool verification_complete = true;
  /// The forms searched, canonical form first (docs/search.md, "Alternative forms"); the
  /// counters above are their sums. Empty for results that predate forms.
  std::vector<FormStats> forms;
};

/// One verified graph of the answer.
struct Candidate {
  KernelGraph graph;          ///< thread graphs fused (fuse_thread_graphs)
  GraphCost cost;             ///< cost model prediction on the configured target
  VerifyResult verification;  ///< for the program itself: equivalent, 0 trials, -inf bound
  bool is_program = false;    ///< the input program itself
  /// How a graph not found by the enumeration was made: "split_kv" (docs/search.md,
  /// "Split-KV"), "pointwise_seed" ("Pointwise seeds"), "prologue_fold" ("Prologue
  /// folding"), "library_form" ("Library forms");
  /// empty for the enumeration's and the program. The cost model cannot rank these against the others (the loop latency a split
  /// removes), so `strata profile --top K` measures them beside the top K.
  std::string derived;
  /// The form of the program whose search found or made the graph: "canonical" or an
  /// alternative-form rule (FormStats::name); empty for the program itself.
  std::string form;
};

struct SearchResult {
  std::vector<Candidate> ranked;  ///< best first; the input program is always included
  SearchStats stats;
  bool from_cache = false;
  std::string cache_key;           ///< hex key of the configuration and program
  std::vector<std::string> notes;  ///< warnings for the user (e.g. a corrupt cache entry)
  /// Index of the input program in `ranked`.
  int program_index() const;
};

/// Runs the search. Errors: programs the search cannot handle (customized ops in the input,
/// no outputs, an output that is an input, unsupported ops, no block-graph configuration that
/// fits the shapes), an unknown target, limits out of range. A corrupt cache entry or a
/// missing or unusable checkpoint is not an error: it is reported on stderr and in `notes`,
/// and the search runs from scratch.
Result<SearchResult> superoptimize(const KernelGraph& program, const SearchConfig& config);

/// A one-paragraph human summary: winner, predicted time vs the program's, bound, statistics.
std::string search_summary(const SearchResult& result);

}  // namespace strata
