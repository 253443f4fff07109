#include "strata/verify/verifier.h"
#include "strata/ir/rank_expansion.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "interp/value_domain.h"
#include "strata/interp/interpreter.h"
#include "util/parallel.h"
#include "verify/analysis.h"
#include "verify/exp_safety.h"
#include "verify/demand.h"
#include "verify/field_arith.h"
#include "verify/instance_reduction.h"

namespace strata {
namespace {

using verify::FieldArith;
using verify::FieldTrial;
using verify::GraphAnalysis;
using FTensor = TensorData<ff::F2>;
using interp::for_each_row;

constexpr int kMaxTrials = 64;
constexpr int kTrialsWithoutBound = 8;  // when one trial's bound is 1, more trials cannot help
constexpr int kMaxAttempts = 3;  // draws of one trial before a zero divisor is deemed systematic

/// Fills `out` with the field inputs of trial `t` (reusing its buffers when shapes match):
/// every element, or only the boxes `regions[i]` of input i when `regions` is given (the rest
/// stays unspecified).
void field_inputs_into(const KernelGraph& g, const FieldTrial& t, int threads,
                       std::vector<FTensor>& out, const std::vector<Region>* regions = nullptr) {
  out.resize(g.inputs().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    FTensor& x = out[i];
    const Shape& shape = g.tensor(g.inputs()[i]).shape;
    if (x.shape != shape || x.numel() != shape.numel()) x = FTensor(shape);
    uint64_t kp = t.input_key(static_cast<int>(i), false);
    uint64_t kq = t.input_key(static_cast<int>(i), true);
    auto draw = [&](int64_t j) {
      x[j] = {ff::uniform<ff::ModP>(kp, static_cast<uint64_t>(j)),
              ff::uniform<ff::ModQ>(kq, static_cast<uint64_t>(j))};
    };
    if (!regions) {
      parallel_for_chunks(x.numel(), threads, 1 << 15, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) draw(j);
      });
      continue;
    }
    auto st = padded_strides(padded_dims(shape));
    for (const Box& box : (*regions)[i])
      for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
        int64_t base = i0 * st[0] + i1 * st[1] + i2 * st[2];
        for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) draw(base + j);
      });
  }
}

struct FieldRun {
  std::vector<FTensor> outputs;
  bool zero_division = false;
};

Result<FieldRun> run_field(const KernelGraph& g, const GraphAnalysis& an,
                           const std::vector<FTensor>& inputs, const FieldTrial& t, int threads,
                           const interp::PartialPlan* partial = nullptr,
                           const std::atomic<bool>* stop = nullptr) {
  FieldArith ar(t);
  std::vector<const FTensor*> ptrs;
  for (const FTensor& x : inputs) ptrs.push_back(&x);
  interp::ExecConfig cfg;
  cfg.threads = threads;
  cfg.hints = &an.hints;
  cfg.partial = partial;
  cfg.stop = stop;
  STRATA_ASSIGN_OR_RETURN(std::vector<FTensor> outs, interp::execute(ar, g, ptrs, cfg));
  return FieldRun{std::move(outs), ar.zero_division()};
}

Status check_options(const VerifyOptions& o) {
  if (!std::isfinite(o.target_log2_bound) || o.target_log2_bound >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", o.target_log2_bound);
    return make_error(std::string("the bound target must be a finite negative number of bits "
                                  "(log2 of the error bound, e.g. -60), got ") +
                      buf);
  }
  if (o.trials < 0 || o.trials > kMaxTrials)
    return make_error("the number of trials must be between 0 (automatic) and " +
                      std::to_string(kMaxTrials) + ", got " + std::to_string(o.trials));
  if (o.threads < 0)
    return make_error("the number of threads must not be negative, got " +
                      std::to_string(o.threads));
  return Status::success();
}

/// The "not equivalent" verdict when candidate `b` cannot compute the same function as
/// program `a` by its interface alone (inputs and outputs matched by position: counts, shapes,
/// dtypes; the detail names the pair), or nullopt when the interfaces match.
std::optional<VerifyResult> interface_difference(const KernelGraph& a, const KernelGraph& b) {
  VerifyResult r;
  auto count = [&](const char* what, size_t na, size_t nb) {
    r.detail = std::string("the graphs have different numbers of ") + what + ": " +
               std::to_string(na) + " in the first graph, " + std::to_string(nb) + " in the second";
    return r;
  };
  if (a.inputs().size() != b.inputs().size())
    return count("inputs", a.inputs().size(), b.inputs().size());
  if (a.outputs().size() != b.outputs().size())
    return count("outputs", a.outputs().size(), b.outputs().size());
  auto differs = [&](const char* what, size_t i, int ta, int tb) {
    const KernelTensor &x = a.tensor(ta), &y = b.tensor(tb);
    std::string head = std::string(what) + " " + std::to_string(i) + " differs in ";
    std::string ours = "`" + a.tensor_name(ta) + "` is ",
                theirs = "`" + b.tensor_name(tb) + "` is ";
    if (x.shape != y.shape)
      r.detail = head + "shape: " + ours + x.shape.str() + " in the first graph but " + theirs +
                 y.shape.str() + " in the second";
    else if (x.dtype != y.dtype)
      r.detail = head + "dtype: " + ours + std::string(dtype_name(x.dtype)) +
                 " in the first graph but " + theirs + std::string(dtype_name(y.dtype)) +
                 " in the second";
    else
      return false;
    return true;
  };
  for (size_t i = 0; i < a.inputs().size(); ++i)
    if (differs("input", i, a.inputs()[i], b.inputs()[i])) return r;
  for (size_t i = 0; i < a.outputs().size(); ++i)
    if (differs("output", i, a.outputs()[i], b.outputs()[i])) {
      r.output = static_cast<int>(i);
      return r;
    }
  return std::nullopt;
}

/// First (output, flat element) whose p-components differ, within `regions` when given.
std::pair<int, int64_t> first_difference(const std::vector<FTensor>& x,
                                         const std::vector<FTensor>& y,
                                         const std::vector<Region>* regions = nullptr) {
  for (size_t o = 0; o < x.size(); ++o) {
    if (!regions) {
      for (int64_t e = 0; e < x[o].numel(); ++e)
        if (x[o][e].p != y[o][e].p) return {static_cast<int>(o), e};
      continue;
    }
    auto st = padded_strides(padded_dims(x[o].shape));
    int64_t best = -1;
    for (const Box& b : (*regions)[o])
      for (int64_t i0 = b.lo[0]; i0 < b.hi[0]; ++i0)
        for (int64_t i1 = b.lo[1]; i1 < b.hi[1]; ++i1)
          for (int64_t i2 = b.lo[2]; i2 < b.hi[2]; ++i2)
            for (int64_t i3 = b.lo[3]; i3 < b.hi[3]; ++i3) {
              int64_t e = i0 * st[0] + i1 * st[1] + i2 * st[2] + i3;
              if (x[o][e].p != y[o][e].p && (best < 0 || e < best)) best = e;
            }
    if (best >= 0) return {static_cast<int>(o), best};
  }
  return {-1, -1};
}

}  // namespace

/// `g` as the verifier evaluates it: a graph over several ranks in its unsharded form
/// (expand_ranks, docs/tensor-parallel.md), any other graph as it is (*g, not copied).
struct Evaluated {
  KernelGraph expanded;
  const KernelGraph* graph = nullptr;
  static Result<Evaluated> of(const KernelGraph& g) {
    Evaluated e;
    e.graph = &g;
    if (g.ranks() > 1) {
      STRATA_ASSIGN_OR_RETURN(e.expanded, expand_ranks(g));
      e.graph = &e.expanded;
    }
    return e;
  }
  Evaluated() = default;
  Evaluated(Evaluated&& o) noexcept : expanded(std::move(o.expanded)) {
    graph = o.graph == &o.expanded ? &expanded : o.graph;
  }
  Evaluated& operator=(Evaluated&& o) noexcept {
    expanded = std::move(o.expanded);
    graph = o.graph == &o.expanded ? &expanded : o.graph;
    return *this;
  }
  Evaluated(const Evaluated&) = delete;
};

/// One instance of the program — the program itself or a reduced instance of it
/// (verify/instance_reduction.h) — with its analysis and the field evaluations done so far.
struct ProgramInstance {
  KernelGraph program;
  GraphAnalysis analysis;
  const VerifyOptions* options = nullptr;
  int threads = 1;

  struct Entry {
    std::once_flag once;
    Result<FieldRun> run = make_error("not evaluated");
  };
  std::mutex mu;
  std::map<std::pair<int, int>, std::shared_ptr<Entry>> runs;  // (trial, attempt) → program run

  FieldTrial trial(int t, int attempt) const {
    return FieldTrial::make(options->seed, static_cast<uint64_t>(t),
                            static_cast<uint64_t>(attempt));
  }
  /// The program's outputs for (t, attempt), computed on first use from the inputs that
  /// `inputs()` returns (the trial's full inputs).
  const Result<FieldRun>& program_run(int t, int attempt,
                                      const std::function<const std::vector<FTensor>&()>& inputs,
                                      const FieldTrial& ft) {
    std::shared_ptr<Entry> e;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto& slot = runs[{t, attempt}];
      if (!slot) slot = std::make_shared<Entry>();
      e = slot;
    }
    std::call_once(e->once, [&] {
      e->run = run_field(program, analysis, inputs(), ft, threads, nullptr, options->stop);
    });
    return e->run;
  }
};

/// What one check evaluates: a program instance and the candidate on the same instance.
struct CheckPair {
  std::shared_ptr<ProgramInstance> program;
  std::optional<verify::ReducedPair> reduced;  // set when the instance is reduced
  const KernelGraph* original = nullptr;       // the candidate as given
  /// The candidate on the program instance's shapes.
  const KernelGraph& candidate() const { return reduced ? reduced->candidate : *original; }
};

/// The checker's shared state: the program, its independent classes, and its instances (the
/// program itself and the reduced instances candidates asked for, by reduced extents).
struct EquivalenceChecker::State {
  KernelGraph program;
  GraphAnalysis analysis;
  verify::ProgramClasses classes;
  VerifyOptions options;
  int threads = 1;
  std::mutex mu;
  std::map<std::vector<int64_t>, std::shared_ptr<ProgramInstance>> instances;

  /// The instance with the given extents per class (the program's own: `reduced` null),
  /// made on first use. Errors: an instance too large for this machine's memory.
  Result<std::shared_ptr<ProgramInstance>> instance(const verify::ReducedPair* reduced) {
    std::vector<int64_t> key = reduced ? reduced->extents : classes.extent;
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = instances[key];
    if (!slot) {
      const KernelGraph& g = reduced ? reduced->program : program;
      STRATA_RETURN_IF_ERROR(check_host_size(g, sizeof(ff::F2)));
      auto inst = std::make_shared<ProgramInstance>();
      inst->program = g;
      if (reduced) {
        STRATA_ASSIGN_OR_RETURN(inst->analysis, verify::analyze_graph(g));
      } else {
        inst->analysis = analysis;
      }
      inst->options = &options;
      inst->threads = threads;
      slot = std::move(inst);
    }
    return slot;
  }

  /// The pair for `candidate` (whose interface matches the program's): reduced where the
  /// options allow and the candidate respects an independent class of the program.
  Result<CheckPair> check_pair(const KernelGraph& candidate) {
    CheckPair c;
    c.original = &candidate;
    if (options.reduce_instances) c.reduced = verify::reduce_instance(program, classes, candidate);
    STRATA_RETURN_IF_ERROR(check_host_size(c.candidate(), sizeof(ff::F2)));
    STRATA_ASSIGN_OR_RETURN(c.program, instance(c.reduced ? &*c.reduced : nullptr));
    return c;
  }
};

Result<EquivalenceChecker> EquivalenceChecker::make(const KernelGraph& program,
                                                    const VerifyOptions& opts) {
  STRATA_RETURN_IF_ERROR(check_options(opts));
  auto s = std::make_shared<State>();
  STRATA_ASSIGN_OR_RETURN(Evaluated ev, Evaluated::of(program));
  STRATA_ASSIGN_OR_RETURN(s->analysis, verify::analyze_graph(*ev.graph));
  s->program = *ev.graph;
  s->options = opts;
  s->threads = resolve_threads(opts.threads);
  if (opts.reduce_instances) s->classes = verify::independent_classes(s->program);
  // A program that no candidate can shrink must fit in memory as it is.
  if (s->classes.empty()) STRATA_RETURN_IF_ERROR(check_host_size(s->program, sizeof(ff::F2)));
  return EquivalenceChecker(std::move(s));
}

Result<bool> EquivalenceChecker::screen(const KernelGraph& per_rank) const {
  State& s = *state_;
  STRATA_RETURN_IF_ERROR(per_rank.check_complete());
  auto ev = Evaluated::of(per_rank);
  if (!ev.ok()) return false;  // a replicated output that differs between ranks
  if (interface_difference(s.program, *ev->graph)) return false;
  if (!verify::exp_safety_violation(s.program, *ev->graph).empty()) return false;
  STRATA_ASSIGN_OR_RETURN(CheckPair pair, s.check_pair(*ev->graph));
  ProgramInstance& pi = *pair.program;
  const KernelGraph& candidate = pair.candidate();
  STRATA_ASSIGN_OR_RETURN(GraphAnalysis an, verify::analyze_graph(candidate));
  FieldTrial ft = pi.trial(0, 0);
  std::vector<FTensor> full;  // the trial's full inputs, drawn only to evaluate the program
  const Result<FieldRun>& prog = pi.program_run(
      0, 0,
      [&]() -> const std::vector<FTensor>& {
        field_inputs_into(pi.program, ft, s.threads, full);
        return full;
      },
      ft);
  std::vector<FTensor>().swap(full);
  if (!prog.ok()) return prog.error();
  // Only the input elements the sampled blocks read are drawn.
  verify::DemandPlan dp = verify::plan_demand(candidate, s.options.seed);
  std::vector<FTensor> inputs;
  field_inputs_into(pi.program, ft, s.threads, inputs, &dp.inputs);
  STRATA_ASSIGN_OR_RETURN(FieldRun cand, run_field(candidate, an, inputs, ft, s.threads, &dp.plan, s.options.stop));
  auto [o, e] = first_difference(prog->outputs, cand.outputs, &dp.compare);
  if (o < 0) return true;
  // A zero divisor may explain a difference between equivalent graphs: let verify() decide.
  return prog->zero_division || cand.zero_division;
}

Result<bool> EquivalenceChecker::screen_once(const KernelGraph& per_rank) const {
  State& s = *state_;
  STRATA_RETURN_IF_ERROR(per_rank.check_complete());
  auto ev = Evaluated::of(per_rank);
  if (!ev.ok()) return false;
  if (interface_difference(s.program, *ev->graph)) return false;
  // The program instance is evaluated on demand here, never kept: only its graph is needed.
  std::optional<verify::ReducedPair> reduced;
  if (s.options.reduce_instances) reduced = verify::reduce_instance(s.program, s.classes, *ev->graph);
  const KernelGraph& candidate = reduced ? reduced->candidate : *ev->graph;
  const KernelGraph& program = reduced ? reduced->program : s.program;
  GraphAnalysis pa;
  if (reduced) {
    STRATA_ASSIGN_OR_RETURN(pa, verify::analyze_graph(program));
  }
  const GraphAnalysis& program_analysis = reduced ? pa : s.analysis;
  STRATA_ASSIGN_OR_RETURN(GraphAnalysis an, verify::analyze_graph(candidate));
  FieldTrial ft = FieldTrial::make(s.options.seed, 0, 0);
  // The candidate's sampled elements, and the program restricted to the same elements; each
  // graph draws only the input elements it reads (the streams make them agree where both do).
  verify::DemandPlan dc = verify::plan_demand(candidate, s.options.seed);
  verify::DemandPlan dp = verify::plan_for_compare(program, dc.compare);
  std::vector<FTensor> in_c, in_p;
  field_inputs_into(program, ft, s.threads, in_c, &dc.inputs);
  STRATA_ASSIGN_OR_RETURN(FieldRun cand, run_field(candidate, an, in_c, ft, s.threads, &dc.plan, s.options.stop));
  std::vector<FTensor>().swap(in_c);
  field_inputs_into(program, ft, s.threads, in_p, &dp.inputs);
  STRATA_ASSIGN_OR_RETURN(FieldRun prog,
                          run_field(program, program_analysis, in_p, ft, s.threads, &dp.plan, s.options.stop));
  auto [o, e] = first_difference(prog.outputs, cand.outputs, &dc.compare);
  if (o < 0) return true;
  return prog.zero_division || cand.zero_division;
}

Result<VerifyResult> EquivalenceChecker::verify(const KernelGraph& per_rank) const {
  State& s = *state_;
  STRATA_RETURN_IF_ERROR(per_rank.check_complete());
  auto ev = Evaluated::of(per_rank);
  if (!ev.ok()) {
    VerifyResult differs;
    differs.detail = ev.error().message;
    return differs;
  }
  if (auto differs = interface_difference(s.program, *ev->graph)) return *differs;
  if (std::string why = verify::exp_safety_violation(s.program, *ev->graph); !why.empty()) {
    VerifyResult unsafe;
    unsafe.detail = why;
    return unsafe;
  }
  STRATA_ASSIGN_OR_RETURN(CheckPair pair, s.check_pair(*ev->graph));
  ProgramInstance& pi = *pair.program;
  const KernelGraph& candidate = pair.candidate();
  STRATA_ASSIGN_OR_RETURN(GraphAnalysis an, verify::analyze_graph(candidate));
  // log2 of the per-trial bound: the weakest output's. A bound of 1 (log2 0) means that the
  // analysis proves nothing about one trial; `limit` says why.
  verify::OutputBound per_trial{-1000, ""};
  for (size_t o = 0; o < pi.program.outputs().size() && per_trial.log2 < 0; ++o) {
    verify::OutputBound b = verify::output_bound(pi.analysis.kernel[pi.program.outputs()[o]],
                                                 an.kernel[candidate.outputs()[o]]);
    if (b.log2 >= 0) {
      per_trial = b;
      per_trial.limit = "output " + std::to_string(o) + " (" +
                        candidate.tensor_name(candidate.outputs()[o]) + "): " + b.limit;
    } else {
      per_trial.log2 = std::max(per_trial.log2, b.log2);
    }
  }
  const bool vacuous = per_trial.log2 >= 0;
  int trials = s.options.trials;
  if (trials <= 0) {
    // In double, clamped before the conversion: any finite negative target is safe.
    double need = vacuous ? kTrialsWithoutBound
                          : std::ceil(s.options.target_log2_bound / per_trial.log2 - 1e-9);
    trials = need >= kMaxTrials ? kMaxTrials : std::max(1, static_cast<int>(need));
  }
  VerifyResult res;
  if (pair.reduced) res.instance = pair.reduced->description;
  std::vector<FTensor> fresh;  // one buffer for the inputs of every trial
  for (int t = 0; t < trials; ++t) {
    res.trials = t + 1;
    for (int attempt = 0;; ++attempt) {
      FieldTrial ft = pi.trial(t, attempt);
      field_inputs_into(pi.program, ft, s.threads, fresh);
      const Result<FieldRun>& prog = pi.program_run(
          t, attempt, [&]() -> const std::vector<FTensor>& { return fresh; }, ft);
      if (!prog.ok()) return prog.error();
      STRATA_ASSIGN_OR_RETURN(FieldRun cand, run_field(candidate, an, fresh, ft, s.threads, nullptr, s.options.stop));
      bool zero = prog->zero_division || cand.zero_division;
      auto [o, e] = first_difference(prog->outputs, cand.outputs);
      if (!zero && o >= 0) {
        // The element of the original output that the differing one stands for.
        if (pair.reduced) e = verify::original_element(s.program, s.classes, *pair.reduced, o, e);
        res.output = o;
        res.element = e;
        int tb = ev->graph->outputs()[o];
        res.detail = "output " + std::to_string(o) + " (" + ev->graph->tensor_name(tb) +
                     ") differs at " + index_str(ev->graph->tensor(tb).shape, e);
        if (pair.reduced) res.detail += " (on the reduced instance " + res.instance + ")";
        return res;
      }
      if (!zero) break;
      if (attempt + 1 == kMaxAttempts) {
        res.detail = "inconclusive: a divisor evaluated to zero in " +
                     std::to_string(kMaxAttempts) + " independent draws of trial " +
                     std::to_string(t) + " (is a denominator identically zero?)";
        return res;
      }
    }
  }
  if (vacuous) {  // agreement proves nothing: never a yes
    res.unknown = true;
    res.detail = "every trial agreed, but no error bound below 1 holds: " + per_trial.limit;
    return res;
  }
  res.equivalent = true;
  res.log2_bound = std::max(-1e9, per_trial.log2 * trials);
  return res;
}

bool is_stopped_error(const std::string& message) {
  return message == interp::kStoppedMessage;
}

Result<VerifyResult> verify_equivalent(const KernelGraph& per_rank_a,
                                       const KernelGraph& per_rank_b,
                                       const VerifyOptions& options) {
  STRATA_RETURN_IF_ERROR(per_rank_a.check_complete());
  STRATA_RETURN_IF_ERROR(per_rank_b.check_complete());
  // Graphs over several ranks are compared in their unsharded forms: the same function of
  // the full inputs (docs/tensor-parallel.md).
  Evaluated ea, eb;
  for (auto [g, e] : {std::pair{&per_rank_a, &ea}, std::pair{&per_rank_b, &eb}}) {
    auto r = Evaluated::of(*g);
    if (!r.ok()) {
      VerifyResult differs;
      differs.detail = r.error().message;
      return differs;
    }
    *e = std::move(*r);
  }
  const KernelGraph &a = *ea.graph, &b = *eb.graph;
  if (auto differs = interface_difference(a, b)) return *differs;
  // Safety is asked of both directions: whichever graph shifts its exponentials by their max,
  // the other must too.
  if (std::string why = verify::exp_safety_violation(b, a); !why.empty()) {
    VerifyResult unsafe;
    unsafe.detail = why;
    return unsafe;
  }
  STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker, EquivalenceChecker::make(a, options));
  return checker.verify(b);
}

}  // namespace strata
