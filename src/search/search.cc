// superoptimize(): the search job around the enumeration — program checks, the result cache,
// tasks on a thread pool, limits and progress, checkpoints, verification and ranking.
#include "strata/search.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <mutex>
#include <map>
#include <thread>

#include "search/candidate_pool.h"
#include "search/enumerator.h"
#include "strata/abstract_expr.h"
#include "strata/graph_optimizer.h"
#include "strata/search_cache.h"
#include "strata/search_report.h"
#include "strata/subexpr_oracle.h"
#include "strata/thread_fusion.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;
using search::TaskStats;

constexpr std::string_view kCacheFormat = "strata-search-cache";
constexpr std::string_view kCheckpointFormat = "strata-search-checkpoint";
/// Decision depth at which the tree is split into tasks: deep enough for a few hundred
/// subtrees on the benchmarks (load balance, checkpoint granularity), shallow enough that
/// replaying a task's path costs nothing.
constexpr int kSplitDepth = 2;
/// Best graphs kept for screening and verification after the enumeration: enough that
/// top_k of them pass even when the abstract pruning lets some non-equivalent graphs through.
size_t pool_capacity(const SearchConfig& c) {
  return std::max<size_t>(256, 32 * static_cast<size_t>(c.top_k));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
  if (program.tensors().size() > 24)
    return make_error("the program has " + std::to_string(program.tensors().size()) +
                      " tensors; the search handles programs of at most 24 tensors");
  return Status::success();
}

Status check_config(const SearchConfig& c) {
  if (c.max_kernel_ops < 1 || c.max_kernel_ops > 8)
    return make_error("max kernel ops must be between 1 and 8, got " +
                      std::to_string(c.max_kernel_ops));
  if (c.max_block_ops < 2 || c.max_block_ops > 16)
    return make_error("max block ops must be between 2 and 16, got " +
                      std::to_string(c.max_block_ops));
  if (c.top_k < 1) return make_error("top must be at least 1, got " + std::to_string(c.top_k));
  if (c.max_block_inputs < 1 || c.max_block_outputs < 1 || c.max_customized_ops < 0)
    return make_error("block input/output and customized-op limits must be positive");
  if (c.time_limit_s < 0 || c.max_states < 0)
    return make_error("time and state limits must not be negative");
  return Status::success();
}

void warn(SearchResult& r, const std::string& msg) {
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

Json task_stats_json(const TaskStats& t) {
  Json j;
  j["states"] = t.states;
  j["recipes"] = t.recipes;
  j["candidates"] = t.candidates;
  j["prunes"] = Json(std::vector<int64_t>(t.prunes.begin(), t.prunes.end()));
  return j;
}

/// Reads the counters of task_stats_json; a missing counter is 0, a malformed one an error.
Result<TaskStats> task_stats_from_json(const Json& j, const std::string& path) {
  TaskStats t;
  if (!j.is_object()) return make_error(path + ": expected an object, got " + json_brief(j));
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (auto [key, dst] : {std::pair{"states", &t.states}, std::pair{"recipes", &t.recipes},
                          std::pair{"candidates", &t.candidates}})
    if (auto it = j.find(key); it != j.end()) {
      STRATA_ASSIGN_OR_RETURN(*dst, json_int(*it, path + "." + key, 0, kMax));
    }
  if (auto p = j.find("prunes"); p != j.end()) {
    if (!p->is_array()) return make_error(path + ".prunes: expected an array of counts");
    for (size_t i = 0; i < p->size() && i < t.prunes.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(
          t.prunes[i], json_int((*p)[i], path + ".prunes[" + std::to_string(i) + "]", 0, kMax));
    }
  }
  return t;
}

/// Prints the progress line at most once a second, and enforces the time limit and the
/// interrupt flag, while the workers run.
class Monitor {
 public:
  Monitor(const SearchConfig& config, search::StopControl& stop, Clock::time_point t0,
          size_t tasks_total, const std::atomic<size_t>& tasks_done)
      : config_(config),
        stop_(stop),
        t0_(t0),
        total_(tasks_total),
        done_(tasks_done),
        tty_(isatty(fileno(stderr))) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Monitor() { finish(); }

  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      finished_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (printed_ && tty_) std::cerr << "\n";
  }
  bool time_limit_hit() const { return time_hit_; }
  bool interrupted() const { return interrupted_; }

 private:
  void loop() {
    auto last_print = Clock::now();
    int64_t last_states = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (!finished_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (finished_) break;
      double t = seconds_since(t0_);
      if (config_.time_limit_s > 0 && t >= config_.time_limit_s && !stop_.stop.load()) {
        time_hit_ = true;
        stop_.stop.store(true);
      }
      if (config_.interrupt && config_.interrupt->load() && !stop_.stop.load()) {
        interrupted_ = true;
        stop_.stop.store(true);
      }
      double since = std::chrono::duration<double>(Clock::now() - last_print).count();
      if (config_.quiet || since < 1.0) continue;
      int64_t states = stop_.live_states.load();
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "search: %.0f s, %lld states (%.0f/s), %lld pruned, %lld found, "
                    "%zu/%zu tasks",
                    t, static_cast<long long>(states), (states - last_states) / since,
                    static_cast<long long>(stop_.live_prunes.load()),
                    static_cast<long long>(stop_.live_found.load()), done_.load(), total_);
      std::cerr << (tty_ ? "\r\033[K" : "") << buf << (tty_ ? "" : "\n") << std::flush;
      printed_ = true;
      last_print = Clock::now();
      last_states = states;
    }
  }

  const SearchConfig& config_;
  search::StopControl& stop_;
  Clock::time_point t0_;
  size_t total_;
  const std::atomic<size_t>& done_;
  bool tty_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  bool printed_ = false;
  bool time_hit_ = false;
  bool interrupted_ = false;
  std::thread thread_;
};

/// The outcome of screening and (if the screen passed) verifying one candidate.
struct CandidateCheck {
  bool verified = false;  ///< the screen passed and verification ran
  VerifyResult verification;
  std::string error;  ///< an error of the screen (verified false) or of verification
  double screen_s = 0, verify_s = 0;
};

CandidateCheck check_candidate(const EquivalenceChecker& checker, const search::PoolEntry& e) {
  CandidateCheck c;
  auto t = Clock::now();
  auto ok = checker.screen(e.graph);
  c.screen_s = seconds_since(t);
  if (!ok.ok()) {
    c.error = ok.error().message;
    return c;
  }
  if (!*ok) return c;
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

/// State carried from one run to the next through a checkpoint.
struct Progress {
  std::vector<char> done;  ///< per task
  TaskStats done_stats;    ///< collection pass + finished tasks
  std::vector<KernelGraph> pool;
};

Status write_checkpoint(const std::string& path, const std::string& key, const Progress& p,
                        const std::vector<search::PoolEntry>& pool) {
  Json j;
  j["tasks_total"] = p.done.size();
  std::vector<int64_t> done;
  for (size_t i = 0; i < p.done.size(); ++i)
    if (p.done[i]) done.push_back(static_cast<int64_t>(i));
  j["completed"] = done;
  j["stats"] = task_stats_json(p.done_stats);
  Json graphs = Json::array();
  for (const search::PoolEntry& e : pool) graphs.push_back(kernel_graph_to_json(e.graph));
  j["pool"] = graphs;
  return write_checked_json(path, kCheckpointFormat, key, j);
}

/// Loads a checkpoint into `p`; errors leave `p` untouched.
Status read_checkpoint(const std::string& path, const std::string& key, size_t tasks_total,
                       Progress& p) {
  STRATA_ASSIGN_OR_RETURN(Json j, read_checked_json(path, kCheckpointFormat, key));
  STRATA_ASSIGN_OR_RETURN(const Json* total, json_member(j, "tasks_total", path + ": payload"));
  auto total_value =
      json_int(*total, path + ": payload.tasks_total", 0, std::numeric_limits<int64_t>::max());
  if (!total_value.ok()) return total_value.error();
  if (*total_value != static_cast<int64_t>(tasks_total))
    return make_error(path + ": written by a different enumeration (task count differs)");
  Progress q;
  q.done.assign(tasks_total, 0);
  if (auto c = j.find("completed"); c != j.end() && c->is_array())
    for (size_t i = 0; i < c->size(); ++i) {
      auto id = json_int((*c)[i], path + ": payload.completed[" + std::to_string(i) + "]", 0,
                         static_cast<int64_t>(tasks_total) - 1);
      if (!id.ok()) return make_error("bad task id: " + id.error().message);
      q.done[static_cast<size_t>(*id)] = 1;
    }
  if (auto s = j.find("stats"); s != j.end()) {
    STRATA_ASSIGN_OR_RETURN(q.done_stats, task_stats_from_json(*s, path + ": payload.stats"));
  }
  if (auto g = j.find("pool"); g != j.end() && g->is_array())
    for (size_t i = 0; i < g->size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(
          KernelGraph graph,
          kernel_graph_from_json((*g)[i], path + ": pool[" + std::to_string(i) + "]"));
      q.pool.push_back(std::move(graph));
    }
  p = std::move(q);
  return Status::success();
}

/// Whether the code generator can build every customized kernel of g on target t: its plan
/// (graph_optimizer.h) must fit the target's shared memory. The enumeration's estimate allows
/// kSmemPruneSlack over the limit, so a candidate can pass it and still not fit.
bool emittable(const KernelGraph& g, const Target& t) {
  PlanOptions options;
  options.smem_limit = t.smem_per_block_bytes;
  options.sm_count = t.sm_count;
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    std::vector<DType> in, out;
    for (int x : op.inputs) in.push_back(g.tensor(x).dtype);
    for (int x : op.outputs) out.push_back(g.tensor(x).dtype);
    if (!optimize_block_graph(op.body, in, out, options).ok()) return false;
  }
  return true;
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
/// order) and the next graph of a round robin over structures — the cheapest graph of every
/// structure (structures in order of their cheapest graph), then the second cheapest of each,
/// and so on — skipping graphs already taken. With a small top_k the verified set thus holds
/// the model's favourites and also spans different structures and several tilings of each:
/// the cost model is least reliable between structures and between tilings of one structure,
/// and on a GPU the profiler then chooses among them.
void diversify(std::vector<search::PoolEntry>& entries) {
  std::vector<std::string> order;                    // structures, cheapest first
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
                  "equivalent graph was found\n",
                  program.graph.ops().size() - program.graph.inputs().size(),
                  program.cost.predicted_us);
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
  std::snprintf(buf, sizeof buf,
                "search: %lld states, %lld pruned, %lld found, %lld screened, %lld verified, "
                "%.1f s, stop: %s%s\n",
                static_cast<long long>(r.stats.states), static_cast<long long>(pruned),
                static_cast<long long>(r.stats.candidates_found),
                static_cast<long long>(r.stats.candidates_screened),
                static_cast<long long>(r.stats.candidates_verified), r.stats.elapsed_s,
                std::string(stop_reason_name(r.stats.stop)).c_str(),
                r.from_cache ? " (answered from the cache)" : "");
  out += buf;
  return out;
}


Result<SearchResult> superoptimize(const KernelGraph& program, const SearchConfig& config) {
  const auto t0 = Clock::now();
  STRATA_RETURN_IF_ERROR(check_config(config));
  STRATA_RETURN_IF_ERROR(check_program(program));
  STRATA_ASSIGN_OR_RETURN(Target target, Target::by_name(config.target));

  SearchResult result;
  result.cache_key = search_cache_key(program, config);
  const std::string dir = resolve_cache_dir(config.cache_dir);
  const std::string cache_path = dir + "/" + result.cache_key + ".json";
  const std::string ckpt_path = config.checkpoint_path.empty()
                                    ? dir + "/" + result.cache_key + ".ckpt.json"
                                    : config.checkpoint_path;
  if (config.use_cache) {
    auto cached = read_checked_json(cache_path, kCacheFormat, result.cache_key);
    if (cached.ok()) {
      auto r = search_result_from_json(*cached, target);
      if (r.ok()) {
        r->from_cache = true;
        r->cache_key = result.cache_key;
        r->stats.stop = StopReason::CacheHit;
        r->stats.elapsed_s = seconds_since(t0);
        return r;
      }
      warn(result, "cache entry " + cache_path + " is unusable (" + r.error().message +
                       "); ignored, it will be rewritten");
    } else if (cached.error().message.rfind("missing: ", 0) != 0) {
      warn(result, "corrupt cache entry ignored, it will be rewritten: " + cached.error().message);
    }
  }

  // Search space (program analysis, expressions, oracles) and the verifier.
  STRATA_ASSIGN_OR_RETURN(auto setup, search::SearchSetup::make(program, config, target));
  const search::SearchSpace& space = setup->space;
  STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker,
                          EquivalenceChecker::make(program, VerifyOptions{}));
  const double setup_s = seconds_since(t0);
  // Tasks: the collection pass never stops early, so task ids mean the same in every run.
  search::StopControl collect_stop;
  TaskStats collect_stats;
  search::Enumerator root(space, collect_stop, nullptr);
  std::vector<search::TaskPath> tasks = root.collect_tasks(kSplitDepth, collect_stats);
  if (root.blocks_opened() == 0)
    return make_error(
        "no block-graph configuration fits the program's shapes: every tile is larger than "
        "the shared memory of " +
        target.name +
        " and no dimension splits into the tile sizes "
        "of the split policy (docs/search.md)");

  Progress progress;
  progress.done.assign(tasks.size(), 0);
  progress.done_stats = collect_stats;
  if (config.resume) {
    Status s = read_checkpoint(ckpt_path, result.cache_key, tasks.size(), progress);
    if (!s.ok()) {
      bool missing = s.error().message.rfind("missing: ", 0) == 0;
      warn(result, missing ? "no checkpoint at " + ckpt_path + "; starting from scratch"
                           : "checkpoint ignored: " + s.error().message);
    }
  }
  search::CandidatePool cpool(target, pool_capacity(config), config.observer);
  for (const KernelGraph& g : progress.pool) cpool.restore(g);

  // Run the remaining tasks on the workers.
  search::StopControl stop;
  stop.max_states = config.max_states;
  std::vector<size_t> todo;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!progress.done[i]) todo.push_back(i);
  std::atomic<size_t> next{0};
  std::atomic<size_t> tasks_done{tasks.size() - todo.size()};
  std::mutex mu;
  TaskStats partial_stats;
  int threads =
      config.threads > 0 ? config.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(todo.size(), 1))));
  Monitor monitor(config, stop, t0, tasks.size(), tasks_done);
  auto work = [&] {
    search::Enumerator e(space, stop, &cpool);
    while (!stop.stop.load()) {
      size_t k = next.fetch_add(1);
      if (k >= todo.size()) break;
      TaskStats ts;
      bool finished = e.run_task(tasks[todo[k]], ts);
      std::lock_guard<std::mutex> lock(mu);
      if (finished) {
        progress.done[todo[k]] = 1;
        progress.done_stats.add(ts);
        ++tasks_done;
      } else {
        partial_stats.add(ts);
      }
    }
  };
  std::vector<std::thread> pool_threads;
  for (int i = 1; i < threads; ++i) pool_threads.emplace_back(work);
  work();
  for (std::thread& t : pool_threads) t.join();
  monitor.finish();

  const bool all_done = tasks_done.load() == tasks.size();
  TaskStats run_stats = progress.done_stats;
  run_stats.add(partial_stats);
  result.stats = to_stats(run_stats);
  result.stats.tasks_total = static_cast<int64_t>(tasks.size());
  result.stats.tasks_done = static_cast<int64_t>(tasks_done.load());
  result.stats.stop = all_done                   ? StopReason::Exhausted
                      : monitor.interrupted()    ? StopReason::Interrupted
                      : monitor.time_limit_hit() ? StopReason::TimeLimit
                                                 : StopReason::StateLimit;
  result.stats.setup_s = setup_s;

  // Best first: screen by one field trial, then verify, until top_k are proved equivalent.
  // One at a time: checking two candidates at once on two cores was measured to take as
  // long as checking them one after the other.
  std::vector<search::PoolEntry> entries = cpool.entries();
  std::erase_if(entries,
                [&](const search::PoolEntry& e) { return e.graph.structurally_equal(program); });
  diversify(entries);
  bool screen_error = false, cut = false;
  for (const search::PoolEntry& e : entries) {
    if (static_cast<int>(result.ranked.size()) >= config.top_k) break;
    if (config.interrupt && config.interrupt->load()) {
      warn(result, "interrupted during verification; the ranking is incomplete");
      result.stats.stop = StopReason::Interrupted;
      cut = true;
      break;
    }
    if (!emittable(e.graph, target)) {
      ++result.stats.prunes_by_rule["codegen_shared_memory"];
      continue;
    }
    const CandidateCheck c = check_candidate(checker, e);
    result.stats.screen_s += c.screen_s;
    result.stats.verify_s += c.verify_s;
    ++result.stats.candidates_screened;
    if (!c.error.empty() && !c.verified) {
      if (!screen_error) warn(result, "screening failed with an error: " + c.error);
      screen_error = true;
      continue;
    }
    if (!c.verified) continue;
    ++result.stats.candidates_verified;
    if (!c.error.empty()) {
      warn(result, "verification failed with an error: " + c.error);
    } else if (!c.verification.equivalent) {
      warn(result, "a screened candidate failed full verification (" + c.verification.detail +
                       "); dropped");
    } else {
      result.ranked.push_back({e.graph, e.cost, c.verification, false});
    }
  }
  VerifyResult identity;
  identity.equivalent = true;
  identity.log2_bound = -INFINITY;
  identity.detail = "the input program itself";
  result.ranked.push_back({program, estimate_cost(program, target), identity, true});
  sort_candidates(result.ranked);
  result.stats.elapsed_s = seconds_since(t0);

  // Persist: a finished search is cached and its checkpoint removed; a stopped one leaves a
  // checkpoint to resume from (with every task done when verification was cut short).
  if (all_done && !cut) {
    std::error_code ec;
    std::filesystem::remove(ckpt_path, ec);
    if (config.use_cache) {
      Status s = write_checked_json(cache_path, kCacheFormat, result.cache_key,
                                    search_result_to_json(result, config));
      if (!s.ok()) warn(result, "could not write the cache: " + s.error().message);
    }
  } else {
    Status s = write_checkpoint(ckpt_path, result.cache_key, progress, entries);
    if (!s.ok())
      warn(result, "could not write the checkpoint: " + s.error().message);
    else
      result.notes.push_back("checkpoint written to " + ckpt_path + "; resume with --resume");
  }
  return result;
}

}  // namespace strata
