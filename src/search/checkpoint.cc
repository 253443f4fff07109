#include "search/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "strata/ir/graph_json.h"
#include "strata/ir/json_read.h"
#include "strata/search/search_cache.h"

namespace strata::search {
namespace {

constexpr std::string_view kCheckpointFormat = "strata-search-checkpoint";

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

/// The resume point of an unfinished task from a checkpoint: a path below the task's own.
Result<search::TaskResume> read_resume_point(const Json& e, const std::string& where,
                                             const std::vector<search::TaskPath>& tasks,
                                             const std::vector<char>& done, size_t& task) {
  auto id = e.is_object() ? e.find("task") : e.end();
  if (!e.is_object() || id == e.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
      id->get<int64_t>() >= static_cast<int64_t>(tasks.size()))
    return make_error(where + ": expected {\"task\": a task id below " +
                      std::to_string(tasks.size()) + ", \"after\": [...], \"stats\": {...}}");
  task = id->get<size_t>();
  if (done[task]) return make_error(where + ": task " + std::to_string(task) + " is finished");
  search::TaskResume r;
  auto after = e.find("after");
  if (after == e.end() || !after->is_array())
    return make_error(where + ": \"after\" must be an array of child indices");
  for (const Json& v : *after) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      return make_error(where + ": bad child index " + v.dump() + " in \"after\"");
    r.after.push_back(v.get<int>());
  }
  const search::TaskPath& root = tasks[task];
  if (r.after.size() <= root.size() || !std::equal(root.begin(), root.end(), r.after.begin()))
    return make_error(where + ": \"after\" does not lie below task " + std::to_string(task));
  if (auto st = e.find("stats"); st != e.end()) {
    STRATA_ASSIGN_OR_RETURN(r.stats, task_stats_from_json(*st, where + ".stats"));
  }
  return r;
}

Status read_checkpoint_impl(const std::string& path, const std::string& key,
                            const std::string& program, const std::vector<search::TaskPath>& tasks,
                            Progress& p) {
  STRATA_ASSIGN_OR_RETURN(Json j, read_checked_json(path, kCheckpointFormat, key, program));
  const size_t tasks_total = tasks.size();
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
  if (auto part = j.find("partial"); part != j.end() && part->is_array())
    for (size_t i = 0; i < part->size(); ++i) {
      size_t task = 0;
      STRATA_ASSIGN_OR_RETURN(
          search::TaskResume r,
          read_resume_point((*part)[i], path + ": partial[" + std::to_string(i) + "]", tasks,
                            q.done, task));
      q.partial[task] = std::move(r);
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

}  // namespace

Status write_checkpoint(const std::string& path, const std::string& key, const std::string& program,
                        const Progress& p, const std::vector<search::PoolEntry>& pool) {
  Json j;
  j["tasks_total"] = p.done.size();
  std::vector<int64_t> done;
  for (size_t i = 0; i < p.done.size(); ++i)
    if (p.done[i]) done.push_back(static_cast<int64_t>(i));
  j["completed"] = done;
  j["stats"] = task_stats_json(p.done_stats);
  Json partial = Json::array();
  for (const auto& [task, r] : p.partial)
    partial.push_back({{"task", task}, {"after", r.after}, {"stats", task_stats_json(r.stats)}});
  j["partial"] = partial;
  Json graphs = Json::array();
  for (const search::PoolEntry& e : pool) graphs.push_back(kernel_graph_to_json(e.graph));
  j["pool"] = graphs;
  return write_checked_json(path, kCheckpointFormat, key, program, j);
}

Status read_checkpoint(const std::string& path, const std::string& key, const std::string& program,
                       const std::vector<search::TaskPath>& tasks, Progress& p) {
  try {
    return read_checkpoint_impl(path, key, program, tasks, p);
  } catch (const std::exception& e) {
    return make_error(path + ": " + e.what());
  }
}

}  // namespace strata::search
