// `strata mpk compile MODEL.json -o TASKS.json [--workers N] [--batch N] [--max-kv N] ...`:
// compiles a decoder-only transformer (a strata-mpk-model file) into the task graph of one
// decode step for the persistent megakernel, checks its invariants and writes the task file
// (docs/megakernel.md).
#include <iostream>

#include "command.h"
#include "numeric_flags.h"
#include "strata/ir/graph_io.h"
#include "strata/mpk/task_graph.h"
#include "strata/mpk/task_graph_check.h"
#include "strata/mpk/task_graph_json.h"

namespace strata::cli {
namespace {

struct MpkArgs {
  std::string model, out;
  int64_t workers = 132, batch = 0, max_kv = 0, max_tile_bytes = 1 << 19, attn_chunks = 0;
};

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
  c->footer(
      "Writes a strata-mpk-tasks document (docs/megakernel.md, \"The task file\") and a\n"
      "one-line summary on stderr. Exit 0 on success, 2 for a bad model file or flag.");
  return [a] { return run_compile(*a); };
}

CommandRegistrar reg{
    Command{"mpk", "Persistent megakernel: compile a model into a task graph", setup, 90}};

}  // namespace
}  // namespace strata::cli
