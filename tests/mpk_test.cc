// The megakernel's task-graph compiler (src/mpk/, docs/megakernel.md): model files and their
// errors, footprint dependencies and event counts, the validator, the memory plan, simulated
// persistent kernels in random interleavings, and the float64 check that the task
// decomposition computes exactly the plain model. The CLI cases run $STRATA_BIN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "strata/mpk/generated_ops.h"
#include "strata/mpk/model_config.h"
#include "strata/mpk/task_exec.h"
#include "strata/mpk/task_graph.h"
#include "strata/mpk/task_graph_check.h"
#include "strata/mpk/task_graph_json.h"
#include "strata/mpk/task_schedule.h"
#include "strata/mpk/task_sim.h"
#include "support/mpk_graphs.h"

namespace strata::mpk {
namespace {

namespace fs = std::filesystem;

ModelConfig tiny(bool qk_norm = false, int64_t batch = 1) {
  ModelConfig m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 40;  // not a multiple of 8 or of the tiles
  m.heads = 6;
  m.kv_heads = 2;
  m.head_dim = 8;
  m.intermediate = 72;
  m.vocab = 37;
  m.eps = 1e-5;
  m.rope_theta = 10000;
  m.qk_norm = qk_norm;
  m.max_kv = 9;
  m.batch = batch;
  return m;
}

CompileOptions opts(int64_t workers, int64_t chunks = 0) {
  CompileOptions o;
  o.workers = workers;
  o.max_tile_bytes = 40 * 2 * 16;  // at most 16 columns of a 40-wide matrix: many tiles
  o.attn_chunks = chunks;
  return o;
}

TaskGraph compiled(const ModelConfig& m, const CompileOptions& o) {
  auto g = compile_task_graph(m, o);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return std::move(g).value();
}

std::string model_text(const std::string& extra_field = "", const std::string& heads = "6") {
  return R"({"format": "strata-mpk-model", "version": 1, "name": "t", "layers": 2,
    "hidden": 40, "heads": )" +
         heads + R"(, "kv_heads": 2, "head_dim": 8, "intermediate": 72, "vocab": 37,
    "eps": 1e-5, "rope_theta": 10000, "qk_norm": true, "max_kv": 9, "batch": 2)" +
         extra_field + "}";
}

Result<ModelConfig> parse_model(const std::string& text) {
  auto doc = parse_json_text(text, "m.json");
  if (!doc.ok()) return doc.error();
  return model_config_from_json(*doc, "m.json");
}

// --- model files -----------------------------------------------------------------------------

TEST(MpkModel, ReadsEveryFieldAndRoundTrips) {
  auto m = parse_model(model_text());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->layers, 2);
  EXPECT_EQ(m->batch, 2);
  EXPECT_TRUE(m->qk_norm);
  EXPECT_DOUBLE_EQ(m->eps, 1e-5);
  auto again = model_config_from_json(model_config_to_json(*m), "x");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(model_config_to_json(*again), model_config_to_json(*m));
}

TEST(MpkModel, BadFilesNameTheFieldAndTheExpectation) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {model_text(", \"colour\": 1"), "unknown field \"colour\""},
      {model_text("", "7"), "multiple of kv_heads"},
      {model_text("", "0"), "heads: 0 is out of range"},
      {model_text("", "2.5"), "heads"},
      {model_text("", "\"6\""), "heads"},
      {R"({"format": "strata-mugraph", "version": 1})", "format: expected \"strata-mpk-model\""},
      {R"({"format": "strata-mpk-model", "version": 2})", "version"},
      {R"({"format": "strata-mpk-model", "version": 1, "hidden": 8})", "layers"},
      {"[1, 2]", "expected a JSON object"},
  };
  for (const Case& c : cases) {
    auto m = parse_model(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.error().message.find(c.expect), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("m.json"), std::string::npos) << m.error().message;
  }
  ModelConfig odd = tiny();
  for (int64_t d : {7, 10, 36}) {  // not a multiple of 8
    odd.head_dim = d;
    auto bad = validate_model_config(odd, "x");
    ASSERT_FALSE(bad.ok()) << d;
    EXPECT_NE(bad.error().message.find("head_dim must be a multiple of 8"), std::string::npos);
  }
  odd.head_dim = 24;
  EXPECT_TRUE(validate_model_config(odd, "x").ok());
  ModelConfig huge = tiny();
  huge.vocab = int64_t{1} << 30;
  huge.hidden = int64_t{1} << 20;
  auto st = validate_model_config(huge, "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("2^48"), std::string::npos);
}

// --- the compiler ----------------------------------------------------------------------------

TEST(MpkCompiler, TilesMinimizeTheBusiestWorker) {
  CompileOptions o;
  o.workers = 132;
  // Llama-3.2-1B QKV: 3072 columns of 2048 inputs: 128 tiles of 24 columns, one wave.
  EXPECT_EQ(choose_matmul_tile(3072, 2048, 1, o), 24);
  EXPECT_EQ(choose_matmul_tile(2048, 8192, 1, o), 16);
  EXPECT_EQ(choose_matmul_tile(5, 100, 1, o), 5);
  for (int64_t n : {9, 37, 1000, 128256}) {
    const int64_t t = choose_matmul_tile(n, 64, 2, o);
    EXPECT_TRUE(t == n || t % 8 == 0) << n;
    EXPECT_LE(t * 64 * 2 * 2, std::max<int64_t>(o.max_tile_bytes, 8 * 64 * 2 * 2));
  }
}

TEST(MpkCompiler, DependenciesFollowTheFootprints) {
  for (int64_t batch : {1, 3}) {
    const ModelConfig m = tiny(true, batch);
    TaskGraph g = compiled(m, opts(5, 3));
    ASSERT_TRUE(validate_task_graph(g).ok()) << validate_task_graph(g).error().message;
    auto producers_of = [&](int t) {
      std::set<int> s;
      for (int e : g.tasks[t].waits)
        s.insert(g.events[e].producers.begin(), g.events[e].producers.end());
      return s;
    };
    auto op_named = [&](const std::string& name) {
      for (size_t o = 0; o < g.ops.size(); ++o)
        if (g.ops[o].name == name) return static_cast<int>(o);
      ADD_FAILURE() << name;
      return 0;
    };
    const OpInfo& qkv = g.ops[op_named("layers.1.norm_qkv")];
    const OpInfo& attn = g.ops[op_named("layers.1.attention")];
    const OpInfo& comb = g.ops[op_named("layers.1.attn_combine")];
    const OpInfo& oproj = g.ops[op_named("layers.1.o_proj_residual")];
    const int64_t D = m.head_dim, G = m.heads / m.kv_heads;
    // The QKV tiles covering columns [c0, c1).
    auto cover = [&](int64_t c0, int64_t c1) {
      std::set<int> s;
      for (int64_t i = 0; i < qkv.ntiles; ++i)
        if (i * qkv.tile < c1 && c0 < (i + 1) * qkv.tile) s.insert(qkv.first_task + i);
      return s;
    };
    auto kv_tiles = [&](int64_t h) {
      std::set<int> s = cover(m.q_width() + h * D, m.q_width() + (h + 1) * D);
      const std::set<int> v =
          cover(m.q_width() + m.kv_width() + h * D, m.q_width() + m.kv_width() + (h + 1) * D);
      s.insert(v.begin(), v.end());
      return s;
    };
    // An attention chunk waits on exactly the QKV tiles covering its q heads (it rotates them
    // itself); chunk 0 also on those of its k head and v head (it scores the step's position).
    for (int t = attn.first_task; t < attn.first_task + attn.num_tasks; ++t) {
      const TaskInfo& k = g.tasks[t];
      std::set<int> expect = cover(k.i1 * G * D, (k.i1 + 1) * G * D);
      if (k.i2 == 0) {
        const std::set<int> kv = kv_tiles(k.i1);
        expect.insert(kv.begin(), kv.end());
      }
      EXPECT_EQ(producers_of(t), expect) << "attention task " << t;
      EXPECT_LT(expect.size(), static_cast<size_t>(qkv.num_tasks));  // tile granularity
    }
    // A combine task waits on the chunks of its head and (it appends k and v to the caches) the
    // QKV tiles of its k and v heads; the output projection on every combine and on its own
    // residual tile.
    for (int t = comb.first_task; t < comb.first_task + comb.num_tasks; ++t) {
      const TaskInfo& k = g.tasks[t];
      std::set<int> expect = kv_tiles(k.i1);
      const int first = attn.first_task + static_cast<int>(
                                              (k.i0 * m.kv_heads + k.i1) * attn.n);
      for (int c = 0; c < attn.n; ++c) expect.insert(first + c);
      EXPECT_EQ(producers_of(t), expect) << "combine task " << t;
    }
    for (int t = oproj.first_task; t < oproj.first_task + oproj.num_tasks; ++t) {
      std::set<int> p = producers_of(t);
      for (int c = comb.first_task; c < comb.first_task + comb.num_tasks; ++c)
        EXPECT_TRUE(p.count(c));
      EXPECT_EQ(p.size(), static_cast<size_t>(comb.num_tasks) + 1);
    }
    // Event counts: the number of tasks that trigger each event.
    std::vector<int> triggers(g.events.size(), 0);
    for (const TaskInfo& t : g.tasks)
      for (int e : t.triggers) triggers[e]++;
    for (size_t e = 0; e < g.events.size(); ++e)
      EXPECT_EQ(triggers[e], static_cast<int>(g.events[e].producers.size()));
  }
}

TEST(MpkCompiler, ValidatorCatchesBrokenGraphs) {
  const TaskGraph good = compiled(tiny(), opts(4));
  ASSERT_TRUE(validate_task_graph(good).ok());
  int waiting = -1;
  for (size_t t = 0; t < good.tasks.size(); ++t)
    if (good.ops[good.tasks[t].op].kind == MPK_ATTN_COMBINE) waiting = static_cast<int>(t);
  ASSERT_GE(waiting, 0);
  {
    TaskGraph g = good;  // a dropped wait: a read not covered
    g.tasks[waiting].waits.clear();
    auto st = validate_task_graph(g);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("without waiting"), std::string::npos) << st.error().message;
  }
  {
    // A write not ordered after the reads of an earlier op: a combine that no longer reads its
    // head's partials (nor waits) still appends to the cache rows the chunks read.
    TaskGraph g = good;
    g.tasks[waiting].reads.clear();
    g.tasks[waiting].waits.clear();
    auto st = validate_task_graph(g);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("cache read by"), std::string::npos) << st.error().message;
  }
  {
    TaskGraph g = good;  // a count that no longer matches the triggers
    const int e = g.tasks[waiting].waits[0];
    g.tasks[g.events[e].producers[0]].triggers.clear();
    auto st = validate_task_graph(g);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("count"), std::string::npos) << st.error().message;
  }
  {
    TaskGraph g = good;  // an order that is not topological
    std::reverse(g.order.begin(), g.order.end());
    auto st = validate_task_graph(g);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("does not precede"), std::string::npos);
  }
  {
    TaskGraph g = good;  // a worker list out of order
    for (auto& l : g.worker_lists)
      if (l.size() > 1) {
        std::swap(l[0], l[1]);
        break;
      }
    EXPECT_FALSE(validate_task_graph(g).ok());
  }
  {
    TaskGraph g = good;  // every workspace tensor at offset 0
    for (TensorInfo& t : g.tensors)
      if (t.storage == Storage::Workspace) t.offset = 0;
    auto st = validate_task_graph(g);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("share workspace memory"), std::string::npos);
  }
}

TEST(MpkCompiler, MemoryPlanReusesDeadActivations) {
  const TaskGraph g = compiled(tiny(false, 2), opts(6));
  int64_t total = 0;
  for (const TensorInfo& t : g.tensors)
    if (t.storage == Storage::Workspace) total += (t.bytes() + 255) / 256 * 256;
  EXPECT_LT(g.workspace_bytes, total / 2);  // two layers of activations fit in less than one pass
  EXPECT_TRUE(g.workspace_reuse);
  EXPECT_TRUE(validate_task_graph(g).ok());
  // The logits (a step output) never share memory.
  for (const TensorInfo& t : g.tensors) {
    if (!t.keep) continue;
    for (const TensorInfo& u : g.tensors)
      if (&u != &t && u.storage == Storage::Workspace)
        EXPECT_TRUE(u.offset + u.bytes() <= t.offset || t.offset + t.bytes() <= u.offset) << u.name;
  }
}

TEST(MpkCompiler, RefusesGraphsBeyondTheTaskLimitBeforeBuildingThem) {
  ModelConfig m = tiny();
  m.layers = int64_t{1} << 30;  // a valid model file, but billions of tasks
  auto g = build_task_graph(m, opts(8));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("tasks, more than the 262144"), std::string::npos)
      << g.error().message;
  CompileOptions o = opts(8, 65536);
  m = tiny();
  m.max_kv = 1 << 20;
  m.batch = 64;
  EXPECT_FALSE(build_task_graph(m, o).ok());  // 2 layers · 64 · 2 heads · 65536 chunks
}

TEST(MpkCompiler, RealShapesCompileAndValidate) {
  ModelConfig m;  // Qwen3-0.6B at batch 8 (qk-norm, head dim 128)
  m.layers = 28;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.intermediate = 3072;
  m.vocab = 151936;
  m.qk_norm = true;
  m.max_kv = 8256;
  m.batch = 8;
  CompileOptions o;
  TaskGraph g = compiled(m, o);
  auto st = validate_task_graph(g);
  EXPECT_TRUE(st.ok()) << st.error().message;
  const Json j = task_graph_to_json(g);
  EXPECT_EQ(j["tasks"].size(), g.tasks.size() * MPK_TASK_FIELDS);
  EXPECT_EQ(j["ops"].size(), g.ops.size());
  EXPECT_EQ(j["worker_lists"].size(), 132u);
}

TEST(MpkCompiler, BundledModelsCompileAndValidate) {
  // Every model file of examples/models (the benchmark's shapes, an 8B-class one included) at
  // batch 1 and 8 on 132 workers.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator("examples/models")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    auto m = load_model_config(e.path().string());
    ASSERT_TRUE(m.ok()) << m.error().message;
    for (int64_t batch : {1, 8}) {
      ModelConfig mb = *m;
      mb.batch = batch;
      CompileOptions o;
      TaskGraph g = compiled(mb, o);
      auto st = validate_task_graph(g);
      EXPECT_TRUE(st.ok()) << e.path() << " batch " << batch << ": " << st.error().message;
      EXPECT_EQ(g.worker_lists.size(), 132u);
    }
  }
  EXPECT_GE(files, 3);
}

// --- simulated persistent kernels ------------------------------------------------------------

TEST(MpkSim, RandomInterleavingsRespectEventsAndComplete) {
  for (int64_t workers : {1, 3, 7}) {
    const TaskGraph g = compiled(tiny(true, 2), opts(workers));
    for (SchedulePolicy p : {SchedulePolicy::StaticLists, SchedulePolicy::GlobalQueue})
      for (uint64_t seed = 0; seed < 8; ++seed) {
        auto r = simulate(g, p, seed);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_EQ(r->size(), g.tasks.size());
      }
  }
}

TEST(MpkSim, DetectsADeadlockingScheduleAndAnEarlyStart) {
  TaskGraph g = compiled(tiny(), opts(2));
  // Static lists not in a topological order can deadlock: put the last task first on one list
  // and everything else on the other.
  {
    TaskGraph bad = g;
    bad.worker_lists.assign(2, {});
    bad.worker_lists[0].push_back(bad.order.back());
    for (size_t i = 0; i + 1 < bad.order.size(); ++i) bad.worker_lists[0].push_back(bad.order[i]);
    auto r = simulate(bad, SchedulePolicy::StaticLists, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("deadlock"), std::string::npos);
  }
  // A graph whose events miss a dependency lets a task start before its producer finished.
  {
    TaskGraph bad = g;
    for (TaskInfo& t : bad.tasks)
      if (bad.ops[t.op].kind == MPK_ATTN_COMBINE) t.waits.clear();
    bool caught = false;
    for (uint64_t seed = 0; seed < 20 && !caught; ++seed)
      caught = !simulate(bad, SchedulePolicy::GlobalQueue, seed).ok();
    EXPECT_TRUE(caught);
  }
  // Likewise a write that may overtake an earlier op's read of the same region: combines that
  // neither read the partials nor wait append to the caches while chunks may still read them.
  {
    TaskGraph bad = g;
    for (TaskInfo& t : bad.tasks)
      if (bad.ops[t.op].kind == MPK_ATTN_COMBINE) {
        t.reads.clear();
        t.waits.clear();
      }
    std::string message;
    for (uint64_t seed = 0; seed < 40 && message.empty(); ++seed) {
      auto r = simulate(bad, SchedulePolicy::GlobalQueue, seed);
      if (!r.ok()) message = r.error().message;
    }
    EXPECT_NE(message.find("reads what it writes"), std::string::npos) << message;
  }
}

// --- float64: the task decomposition is the model --------------------------------------------

// Runs `steps` decode steps task by task in a random interleaving (each task reads at its start
// and writes at its finish) and directly; compares logits and tokens.
void check_decomposition(const ModelConfig& m, const CompileOptions& o, SchedulePolicy p,
                         uint64_t seed, int steps) {
  TaskGraph g = compiled(m, o);
  ModelBuffers tasks_buf = random_buffers(g, seed), ref_buf = tasks_buf;
  TaskExecutor ex(g, tasks_buf);
  std::vector<int64_t> tokens, ref_tokens;
  for (int64_t b = 0; b < m.batch; ++b) tokens.push_back((b * 7 + 3) % m.vocab);
  ref_tokens = tokens;
  for (int s = 0; s < steps; ++s) {
    ex.begin_step(tokens, s);
    std::vector<std::vector<Write>> pending(g.tasks.size());
    SimHooks hooks;
    hooks.on_start = [&](int t) { pending[t] = ex.run(t); };
    hooks.on_finish = [&](int t) { ex.apply(pending[t]); };
    auto r = simulate(g, p, seed * 100 + s, hooks);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::vector<double> got = ex.logits();
    const std::vector<double> want = reference_step(g, ref_buf, ref_tokens, s);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-9 * (1 + std::abs(want[i])))
          << "step " << s << " logit " << i;
    ref_tokens = argmax_rows(want, m.vocab);
    EXPECT_EQ(ex.next_tokens(), ref_tokens) << "step " << s;
    tokens = ex.next_tokens();
  }
}

TEST(MpkFloat64, TaskDecompositionMatchesThePlainModel) {
  check_decomposition(tiny(false, 1), opts(3), SchedulePolicy::StaticLists, 1, 5);
  check_decomposition(tiny(true, 2), opts(5, 4), SchedulePolicy::GlobalQueue, 2, 5);
  check_decomposition(tiny(true, 3), opts(7, 1), SchedulePolicy::StaticLists, 3, 4);
  // More chunks than cached positions: empty chunks must not disturb the softmax.
  ModelConfig m = tiny(false, 1);
  m.max_kv = 40;
  check_decomposition(m, opts(4, 16), SchedulePolicy::GlobalQueue, 4, 3);
}

TEST(MpkGenerated, OpsFromMuGraphsValidateAndWaitOnTheirBlocks) {
  const ModelConfig m = tiny(true, 2);
  CompileOptions o = opts(5, 2);
  o.generated = testing::mpk_generated_set(m);
  ASSERT_EQ(o.generated->size(), 4u);
  TaskGraph g = compiled(m, o);
  ASSERT_TRUE(validate_task_graph(g).ok()) << validate_task_graph(g).error().message;
  int generated = 0;
  for (const OpInfo& op : g.ops) {
    EXPECT_NE(op.kind, MPK_NORM_MATMUL);
    EXPECT_NE(op.kind, MPK_MATMUL_RESIDUAL);
    EXPECT_NE(op.kind, MPK_NORM_GATED);
    if (op.kind != MPK_GENERATED) continue;
    ++generated;
    // One task per block of the kernel (ragged: 80 QKV columns in tiles of 16, 72 in 5 tiles).
    const GeneratedKernel& k = o.generated->at(g.functions[op.func].op).kernels[0];
    EXPECT_EQ(op.num_tasks, k.grid.x * k.grid.y * k.grid.z) << op.name;
    const std::vector<int64_t> rec = op_record(g, static_cast<int>(&op - g.ops.data()));
    EXPECT_EQ(rec[MPK_OP_FUNC], op.func);
    for (size_t a = 0; a < op.args.size(); ++a) EXPECT_NE(rec[MPK_OP_ARG0 + a], MPK_ARG_NONE);
  }
  EXPECT_EQ(generated, 4 * m.layers);
  EXPECT_EQ(g.functions.size(), 4u);  // one entry per op program, shared by the layers
  // An attention chunk waits on the QKV blocks that write its head group's columns only: with
  // tiles of 16 columns, q of a kv head (24 columns) and, for chunk 0, its k and v (8 each)
  // touch at most 4 blocks.
  for (const TaskInfo& t : g.tasks) {
    if (g.ops[t.op].kind != MPK_ATTN_CHUNK) continue;
    std::set<int> producers;
    for (int e : t.waits)
      for (int p : g.events[e].producers) producers.insert(p);
    const OpInfo& qkv = g.ops[t.op - 1];
    ASSERT_EQ(qkv.kind, MPK_GENERATED);
    EXPECT_LE(producers.size(), 4u);
    EXPECT_LT(producers.size(), static_cast<size_t>(qkv.num_tasks));
    for (int p : producers) EXPECT_EQ(g.tasks[p].op, t.op - 1);
  }
  // Simulated persistent kernels respect the footprints.
  for (SchedulePolicy p : {SchedulePolicy::StaticLists, SchedulePolicy::GlobalQueue}) {
    auto r = simulate(g, p, 11);
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
  // The task file lists the entries; the header has them and their dispatch.
  const Json doc = task_graph_to_json(g);
  EXPECT_EQ(doc["abi_version"], STRATA_MPK_ABI_VERSION);
  ASSERT_EQ(doc["generated"].size(), 4u);
  const std::string header = generated_header(g);
  for (const auto& f : doc["generated"]) {
    const std::string entry = f["entry"];
    EXPECT_NE(header.find("__device__ void " + entry + "("), std::string::npos) << entry;
    EXPECT_NE(header.find(entry + "(bx, by, bz"), std::string::npos) << entry;
  }
  EXPECT_NE(header.find("mpk_generated_dispatch"), std::string::npos);
  // STRATA_MPK_HEADER_OUT=FILE keeps the header (to build runtime/mpk/megakernel.cu with it).
  if (const char* out = std::getenv("STRATA_MPK_HEADER_OUT")) std::ofstream(out) << header;
}

TEST(MpkGenerated, TaskDecompositionMatchesThePlainModel) {
  for (int64_t batch : {1, 2}) {
    const ModelConfig m = tiny(batch == 2, batch);
    CompileOptions o = opts(4, 2);
    o.generated = testing::mpk_generated_set(m, batch == 1 ? 16 : 24);
    check_decomposition(m, o, SchedulePolicy::StaticLists, 5 + batch, 3);
    check_decomposition(m, o, SchedulePolicy::GlobalQueue, 7 + batch, 2);
  }
}

TEST(MpkGenerated, AGraphOfAnotherProgramIsRefused) {
  const ModelConfig m = tiny();
  auto graphs = testing::mpk_generated_graphs(m);
  // The residual op's μGraph given for the QKV op: other inputs; o_proj given for down: other K.
  auto a = prepare_generated(m, "norm_qkv", graphs.at("o_proj_residual"), "file A");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("file A"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("does not compute norm_qkv"), std::string::npos)
      << a.error().message;
  // Right interface, wrong arithmetic: no epsilon in the norm.
  auto wrong = testing::mpk_norm_matmul_graph(m.batch, m.hidden, m.qkv_width(), 0.25, 16, 8);
  auto b = prepare_generated(m, "norm_qkv", wrong, "file B");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("does not compute"), std::string::npos) << b.error().message;
  auto c = op_program(m, "lm_head");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("expected one of norm_qkv"), std::string::npos);
}

TEST(MpkFloat64, AnUnsafeMemoryPlanChangesTheResult) {
  // The executor poisons and overwrites shared memory, so a plan that overlaps live tensors is
  // visible numerically (here: the residual stream shares memory with the MLP activations).
  const ModelConfig m = tiny(false, 1);
  TaskGraph g = compiled(m, opts(3));
  for (TensorInfo& t : g.tensors)
    if (t.storage == Storage::Workspace && !t.keep) t.offset = 0;
  ModelBuffers a = random_buffers(g, 9), b = a;
  TaskExecutor ex(g, a);
  ex.begin_step({3}, 0);
  for (int t : g.order) ex.apply(ex.run(t));
  const std::vector<double> got = ex.logits(), want = reference_step(g, b, {3}, 0);
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    diff = std::max(diff, std::isnan(got[i]) ? 1e9 : std::abs(got[i] - want[i]));
  EXPECT_GT(diff, 1e-6);
}

// --- the command line ------------------------------------------------------------------------

int run(const std::string& cmd, std::string& err) {
  const std::string errf = (fs::path(::testing::TempDir()) / "mpk_err.txt").string();
  const int rc = std::system((cmd + " 2>" + errf + " >/dev/null").c_str());
  std::ifstream in(errf);
  err.assign(std::istreambuf_iterator<char>(in), {});
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(MpkCli, CompilesAModelFileAndRejectsBadOnes) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
  const fs::path dir = fs::path(::testing::TempDir()) / ("mpk_cli_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path model = dir / "m.json", out = dir / "tasks.json", bad = dir / "bad.json";
  std::ofstream(model) << model_text();
  std::ofstream(bad) << model_text("", "7");
  std::string err;
  ASSERT_EQ(
      run(std::string(bin) + " mpk compile " + model.string() + " --workers 6 -o " + out.string(),
          err),
      0)
      << err;
  std::ifstream in(out);
  auto doc = parse_json_text(std::string(std::istreambuf_iterator<char>(in), {}), "t");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ((*doc)["format"], "strata-mpk-tasks");
  EXPECT_EQ((*doc)["worker_lists"].size(), 6u);
  EXPECT_EQ((*doc)["model"]["batch"], 2);
  EXPECT_EQ(run(std::string(bin) + " mpk compile " + bad.string(), err), 2);
  EXPECT_NE(err.find("bad.json: heads (7) must be a multiple of kv_heads"), std::string::npos)
      << err;
  EXPECT_EQ(run(std::string(bin) + " mpk compile " + (dir / "missing.json").string(), err), 2);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
  EXPECT_EQ(run(std::string(bin) + " mpk compile " + model.string() + " --workers 0", err), 2);
  EXPECT_NE(err.find("--workers"), std::string::npos) << err;
  std::ofstream(bad) << "{\"format\": \"strata-mpk-model\", \"version\": 1, \"layers\": ";
  EXPECT_EQ(run(std::string(bin) + " mpk compile " + bad.string(), err), 2);
  EXPECT_NE(err.find("bad.json:1:"), std::string::npos) << err;
  fs::remove_all(dir);
}

// Searched generated ops through the result cache: a second compilation is answered from the
// cache (no search, no warning about its entries) and gives the same task graph and entries.
TEST(MpkCli, GeneratedOpsFromTheCacheGiveTheSameGraph) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
  const fs::path dir = fs::path(::testing::TempDir()) / ("mpk_cache_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path model = dir / "m.json";
  std::ofstream(model) << R"({"format": "strata-mpk-model", "version": 1, "name": "c",
    "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 96,
    "vocab": 50, "eps": 1e-5, "max_kv": 16, "batch": 1})";
  std::vector<Json> docs;
  std::vector<std::string> headers;
  // Runs 0-2 search (0: saving the μGraphs), runs 3-4 take the saved μGraphs.
  std::string given;
  for (const char* op : {"norm_qkv", "o_proj_residual", "norm_gate_up_silu", "down_residual"})
    given += std::string(" --ugraph ") + op + "=" + (dir / "ug" / op).string() + ".json";
  for (int i = 0; i < 5; ++i) {
    const fs::path out = dir / ("t" + std::to_string(i) + ".json"),
                   cuda = dir / ("h" + std::to_string(i) + ".cuh");
    const std::string ops =
        i == 0  ? " --generated all --search-seconds 20 --save-ugraphs " + (dir / "ug").string()
        : i < 3 ? " --generated all --search-seconds 20"
                : given;
    std::string err;
    ASSERT_EQ(run("STRATA_CACHE_DIR=" + (dir / "cache").string() + " " + bin + " mpk compile " +
                      model.string() + " --workers 6" + ops + " --cuda " + cuda.string() +
                      " -o " + out.string(),
                  err),
              0)
        << err;
    EXPECT_EQ(err.find("warning"), std::string::npos) << "run " << i << ": " << err;
    std::ifstream in(out), hin(cuda);
    auto doc = parse_json_text(std::string(std::istreambuf_iterator<char>(in), {}), "t");
    ASSERT_TRUE(doc.ok());
    ASSERT_EQ((*doc)["generated"].size(), 4u);
    for (Json& f : (*doc)["generated"]) {
      // The first run searches, the next two are answered from the cache.
      const std::string from = f["from"];
      EXPECT_EQ(from.find("(cached)") != std::string::npos, i == 1 || i == 2) << from;
      if (i >= 3) EXPECT_NE(from.find(dir.string() + "/ug/"), std::string::npos) << from;
      f.erase("from");
    }
    docs.push_back(*doc);
    headers.emplace_back(std::istreambuf_iterator<char>(hin), std::istreambuf_iterator<char>{});
  }
  EXPECT_TRUE(docs[1] == docs[0]) << "the task graph changed when served from the cache";
  EXPECT_TRUE(docs[2] == docs[0]);
  EXPECT_EQ(headers[2], headers[1]);
  EXPECT_TRUE(docs[3] == docs[0]) << "the saved μGraphs give another task graph";
  EXPECT_EQ(headers[4], headers[3]);
  // --save-ugraphs without generated ops is a bad flag.
  std::string err;
  EXPECT_EQ(run(std::string(bin) + " mpk compile " + model.string() + " --save-ugraphs " +
                    (dir / "x").string(),
                err),
            2);
  EXPECT_NE(err.find("--save-ugraphs"), std::string::npos) << err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::mpk
