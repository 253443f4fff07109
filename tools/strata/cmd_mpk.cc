// `strata mpk compile MODEL.json -o TASKS.json [--workers N] [--batch N] [--max-kv N] ...`:
// compiles a decoder-only transformer (a strata-mpk-model file) into the task graph of one
// decode step for the persistent megakernel, checks its invariants and writes the task file
// (docs/megakernel.md).
#include <filesystem>
#include <iostream>

#include "command.h"
#include "numeric_flags.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/graph_json.h"
#include "strata/mpk/generated_ops.h"
#include "strata/mpk/task_graph.h"
#include "strata/mpk/task_graph_check.h"
#include "strata/mpk/task_graph_json.h"

namespace strata::cli {
namespace {

struct MpkArgs {
  std::string model, out, cuda, generated, save_ugraphs;
  std::vector<std::string> ugraphs;  ///< OP=FILE
  double search_seconds = 60;
  int64_t workers = 132, batch = 0, max_kv = 0, max_tile_bytes = 1 << 19, attn_chunks = 0;
};

// The generated μGraphs the flags ask for: --generated names the ops (or "all"); each comes
// from its --ugraph file (verified) or from the search.
Result<mpk::GeneratedSet> generated_ops(const MpkArgs& a, const mpk::ModelConfig& m) {
  std::map<std::string, std::string> files;
  for (const std::string& u : a.ugraphs) {
    const size_t eq = u.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == u.size())
      return make_error("--ugraph " + u + ": expected OP=FILE");
    const std::string op = u.substr(0, eq);
    STRATA_RETURN_IF_ERROR(mpk::op_program(m, op));
    files[op] = u.substr(eq + 1);
  }
  std::vector<std::string> ops;
  if (a.generated == "all") {
    ops = mpk::generated_op_names();
  } else {
    std::string rest = a.generated;
    while (!rest.empty()) {
      const size_t c = rest.find(',');
      const std::string op = rest.substr(0, c);
      STRATA_RETURN_IF_ERROR(mpk::op_program(m, op));
      ops.push_back(op);
      rest = c == std::string::npos ? "" : rest.substr(c + 1);
    }
  }
  for (const auto& [op, file] : files)
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  mpk::GeneratedSet set;
  for (const std::string& op : ops) {
    if (auto it = files.find(op); it != files.end()) {
      STRATA_ASSIGN_OR_RETURN(KernelGraph g, load_graph(it->second));
      STRATA_ASSIGN_OR_RETURN(mpk::GeneratedGraph gg,
                              mpk::prepare_generated(m, op, g, it->second + " (" + op + ")"));
      set.emplace(op, std::move(gg));
    } else {
      SearchConfig sc;
      sc.with_time_limit(a.search_seconds);
      STRATA_ASSIGN_OR_RETURN(mpk::GeneratedGraph gg, mpk::search_generated(m, op, sc));
      set.emplace(op, std::move(gg));
    }
  }
  return set;
}

int run_compile(const MpkArgs& a) {
  auto model = mpk::load_model_config(a.model);
  if (!model.ok()) return fail_bad_input(model.error().message);
  if (a.batch > 0) model->batch = a.batch;
  if (a.max_kv > 0) model->max_kv = a.max_kv;
  auto valid = mpk::validate_model_config(*model, a.model);
  if (!valid.ok()) return fail_bad_input(valid.error().message);
  mpk::CompileOptions o;
  o.workers = a.workers;
  o.max_tile_bytes = a.max_tile_bytes;
  o.attn_chunks = a.attn_chunks;
  if (!a.save_ugraphs.empty() && a.generated.empty() && a.ugraphs.empty())
    return fail_bad_input("--save-ugraphs: no generated ops; give --generated or --ugraph");
  if (!a.generated.empty() || !a.ugraphs.empty()) {
    if (a.cuda.empty())
      return fail_bad_input(
          "--generated / --ugraph: --cuda FILE is required (the header of the "
          "generated task entries the megakernel is built with)");
    auto set = generated_ops(a, *model);
    if (!set.ok()) return fail_bad_input(a.model + ": " + set.error().message);
    if (!a.save_ugraphs.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a.save_ugraphs, ec);
      if (ec)
        return fail_bad_input("--save-ugraphs " + a.save_ugraphs +
                              ": cannot create the directory (" + ec.message() + ")");
      for (const auto& [op, gg] : *set) {
        Status st = write_text_file(a.save_ugraphs + "/" + op + ".json",
                                    kernel_graph_to_json(gg.graph).dump() + "\n");
        if (!st.ok()) return fail_bad_input(st.error().message);
      }
    }
    o.generated = std::make_shared<const mpk::GeneratedSet>(std::move(*set));
  }
  auto g = mpk::compile_task_graph(*model, o);
  if (!g.ok()) return fail_bad_input(a.model + ": " + g.error().message);
  auto check = mpk::validate_task_graph(*g);
  if (!check.ok()) {
    std::cerr << "strata: internal error: the compiled task graph is invalid: "
              << check.error().message << "\n";
    return kExitInternal;
  }
  const Json doc = mpk::task_graph_to_json(*g);
  if (a.out.empty() || a.out == "-") {
    std::cout << doc.dump() << "\n";
  } else {
    Status st = write_text_file(a.out, doc.dump() + "\n");
    if (!st.ok()) return fail_bad_input(st.error().message);
  }
  if (!a.cuda.empty()) {
    Status st = write_text_file(a.cuda, mpk::generated_header(*g));
    if (!st.ok()) return fail_bad_input(st.error().message);
  }
  std::cerr << "strata mpk: " << model->name << ": " << g->ops.size() << " ops, " << g->tasks.size()
            << " tasks, " << g->events.size() << " events, workspace " << g->workspace_bytes
            << " bytes, " << g->options.workers << " workers\n";
  return kExitOk;
}

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<MpkArgs>();
  app.require_subcommand(1);
  CLI::App* c = app.add_subcommand("compile", "Compile a model file into a task file");
  c->add_option("MODEL", a->model, "a strata-mpk-model JSON file (docs/megakernel.md)")->required();
  c->add_option("-o,--output", a->out, "the task file to write (default: stdout)");
  c->add_option("--workers", a->workers, "persistent worker blocks, one per SM (default 132)")
      ->transform(integer_in(1, 4096));
  c->add_option("--batch", a->batch, "override the model's batch")
      ->transform(integer_in(1, 1 << 20));
  c->add_option("--max-kv", a->max_kv, "override the model's cache capacity")
      ->transform(integer_in(1, int64_t{1} << 30));
  c->add_option("--max-tile-bytes", a->max_tile_bytes,
                "most weight bytes one matmul task reads (default 524288)")
      ->transform(integer_in(1, int64_t{1} << 40));
  c->add_option("--attn-chunks", a->attn_chunks,
                "KV chunks per (batch row, kv head); 0: workers / (batch · kv heads)")
      ->transform(integer_in(0, 65536));
  c->add_option("--generated", a->generated,
                "ops computed by generated μGraphs: all, or a comma list of norm_qkv, "
                "o_proj_residual, norm_gate_up_silu, down_residual (the rest hand-written)");
  c->add_option("--ugraph", a->ugraphs,
                "OP=FILE: the μGraph of a generated op (verified against its program); an op "
                "without one is searched")
      ->take_all();
  c->add_option("--search-seconds", a->search_seconds,
                "time limit of each op's search (results are cached)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  c->add_option("--save-ugraphs", a->save_ugraphs,
                "write each generated op's μGraph to DIR/OP.json (a later compilation takes it "
                "with --ugraph OP=DIR/OP.json instead of searching)");
  c->add_option("--cuda", a->cuda,
                "write the generated header (task entries and their dispatch) to this file");
  c->footer(
      "Writes a strata-mpk-tasks document (docs/megakernel.md, \"The task file\") and a\n"
      "one-line summary on stderr. Exit 0 on success, 2 for a bad model file or flag.");
  return [a] { return run_compile(*a); };
}

CommandRegistrar reg{
    Command{"mpk", "Persistent megakernel: compile a model into a task graph", setup, 90}};

}  // namespace
}  // namespace strata::cli
