"""``strata.optimize``: the superoptimizer search from Python (docs/python.md, "Optimize").

The search is the C++ one (include/strata/search/search.h, docs/search.md) with its on-disk result
cache; progress and notes go to the ``strata`` logger (Python ``logging``), and when a GPU is
present the ranked candidates are compiled, checked and timed as ``strata optimize`` does.
"""
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from . import _core
from .program import Program

log = logging.getLogger("strata")

def runtime_dir():
    """The device runtime headers generated CUDA includes: shipped in the package
    (strata/runtime), else those of the source tree the extension was built from."""
    here = os.path.join(os.path.dirname(__file__), "runtime")
    return [here] if os.path.isdir(os.path.join(here, "strata_rt")) else []


def default_target():
    """The cost-model target of the current GPU (h100 when unknown or absent)."""
    if _core.cuda_built and _core.gpu_count() > 0:
        return _core.device_info()["target"]
    return "h100"


@dataclass
class RankedGraph:
    """One graph of a search result: a verified μGraph (or the program itself)."""

    rank: int
    program: Program            #: the μGraph (with the original program's bound inputs)
    predicted_us: float         #: the cost model's prediction on the target
    speedup_vs_program: float
    is_program: bool
    verification: dict          #: equivalent, trials, log2_bound (None: the program), detail
    cost: list = field(default_factory=list)  #: per kernel
    measured_us: Optional[float] = None       #: GPU profile: fastest correct variant's median
    knobs: str = "default"                    #: its emitter knobs
    status: Optional[str] = None              #: GPU profile status (ok, wrong_answer, …)

    @property
    def log2_bound(self):
        return self.verification.get("log2_bound")

    @property
    def json(self):
        """The μGraph as JSON text."""
        return self.program.to_json()

    def to_dict(self):
        """The μGraph JSON as a dict."""
        return self.program.to_dict()


class OptimizeResult:
    """The answer of ``strata.optimize``: the result document of docs/search.md ("Result
    format") and views of it."""

    def __init__(self, program, document):
        self.program = program
        self.document = document
        bound = program.bound
        profile = document.get("gpu_profile") or {}
        by_rank = {c["rank"]: c for c in profile.get("candidates", [])}
        self.ranked = []
        for entry in document["ranked"]:
            graph = Program(_core.Graph.from_json(json.dumps(entry["graph"]),
                                                  f"ranked[{entry['rank']}].graph"),
                            bound=bound)
            c = by_rank.get(entry["rank"], {})
            self.ranked.append(RankedGraph(
                rank=entry["rank"], program=graph, predicted_us=entry["predicted_us"],
                speedup_vs_program=entry.get("speedup_vs_program", 1.0),
                is_program=entry["is_program"], verification=entry["verification"],
                cost=entry.get("cost", []), measured_us=c.get("measured_us"),
                knobs=c.get("knobs", "default"), status=c.get("status")))

    @property
    def best(self):
        """The best-ranked graph (the cost model's choice)."""
        return self.ranked[self.document["best"]]

    @property
    def fastest(self):
        """The GPU-profiled fastest correct graph when there is a profile, else ``best``."""
        f = (self.gpu_profile or {}).get("fastest")
        return self.ranked[f] if f is not None else self.best

    @property
    def program_index(self):
        return self.document["program_index"]

    @property
    def stats(self):
        return self.document["stats"]

    @property
    def gpu_profile(self):
        return self.document.get("gpu_profile")

    @property
    def from_cache(self):
        return self.document.get("from_cache", False)

    @property
    def notes(self):
        return list(self.document.get("notes", []))

    def kernel(self, candidate=None, **kwargs):
        """The compiled ``Kernel`` of ``fastest`` (or of ranked[candidate]) with the emitter
        knobs it was timed with. Raises GpuUnavailableError without CUDA."""
        from .kernel import Kernel

        g = self.fastest if candidate is None else self.ranked[candidate]
        kwargs.setdefault("knobs", g.knobs)
        return Kernel(g.program, **kwargs)

    def save(self, path):
        """Writes the result document (readable by `strata profile` and the C++ API)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.document, f, indent=2)

    def __repr__(self):
        b = self.best
        return (f"<strata.OptimizeResult: {len(self.ranked)} graphs, best #{b.rank} predicted "
                f"{b.predicted_us:.2f} µs ({b.speedup_vs_program:.2f}× the program), stop "
                f"{self.stats.get('stop')}>")


def profile_inputs(program, seed=1, scale=0.5):
    """Inputs for the GPU profile of `program` as float64 arrays: bound inputs take their
    values (a lifted epsilon must stay an epsilon: a random one could make a square root of a
    negative number), free inputs are uniform in ±scale (the profiler's own recipe)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for s in program.inputs:
        v = program.bound.get(s.name)
        if v is None:
            out.append(rng.uniform(-scale, scale, size=s.shape))
        elif isinstance(v, float):
            out.append(np.full(s.shape, v, dtype=np.float64))
        else:
            out.append(np.ascontiguousarray(v.detach().cpu().double().numpy()))
    return out


def _progress(elapsed, found):
    log.info("search: %.0f s, %d complete graphs found", elapsed, found)


def optimize(program_or_fn, example_inputs=None, *, time_limit=None, target=None, top_k=4,
             threads=0, max_states=0, max_kernel_ops=5, max_block_ops=0, max_customized_ops=2,
             abstract_pruning=True, use_cache=True, cache_dir=None, resume=False, profile=None,
             variants=None, inputs=None):
    """Superoptimizes a program.

    ``program_or_fn``: a ``Program``, a ``.strata``/μGraph file path, or a PyTorch function /
    module (then ``example_inputs`` are its example tensors and it is captured first).
    ``time_limit`` bounds the enumeration in seconds (None: no bound); ``target`` is the cost
    model's GPU (h100, h200, a100; default: the current GPU's, else h100). The remaining
    arguments are the fields of SearchConfig (docs/search.md). ``profile`` (default: when a
    GPU is present) compiles, checks and times the ranked graphs once per emitter variant
    (``variants``, knob specs) on ``inputs`` (NumPy arrays or tensors, one per program input;
    default: the bound inputs' values and uniform ±0.5 for the others). Returns an
    ``OptimizeResult``; errors (an unsupported program, bad limits) raise ``StrataError``.
    """
    if isinstance(program_or_fn, Program):
        program = program_or_fn
    elif isinstance(program_or_fn, (str, os.PathLike)):
        program = Program.load(program_or_fn)
    elif callable(program_or_fn):
        from .lowering import capture

        inputs = example_inputs if isinstance(example_inputs, (list, tuple)) else (
            [] if example_inputs is None else [example_inputs])
        program = capture(program_or_fn, *inputs)
    else:
        raise TypeError(f"optimize: expected a Program, a path or a function, got "
                        f"{type(program_or_fn).__name__}")
    target = target or default_target()
    if profile is None:
        profile = bool(_core.cuda_built and _core.gpu_count() > 0)
    log.info("search: %s (target %s)", program._graph.summary(), target)
    given = []
    if profile:
        import numpy as np

        if inputs is not None:
            given = [np.ascontiguousarray(x.detach().cpu().double().numpy() if hasattr(x, "detach")
                                          else np.asarray(x, dtype=np.float64)) for x in inputs]
            if [g.shape for g in given] != [s.shape for s in program.inputs]:
                from .errors import InputError

                raise InputError(f"optimize: inputs have shapes {[g.shape for g in given]}; "
                                 f"expected {[s.shape for s in program.inputs]}")
        elif program.bound:
            given = profile_inputs(program)
    text = _core.superoptimize(
        program._graph, threads=threads, time_limit=float(time_limit or 0),
        max_states=max_states, max_kernel_ops=max_kernel_ops, max_block_ops=max_block_ops,
        max_customized_ops=max_customized_ops, abstract_pruning=abstract_pruning,
        target=target, top_k=top_k, resume=resume, use_cache=use_cache,
        cache_dir=str(cache_dir or ""), profile=profile, variants=list(variants or []),
        include_dirs=runtime_dir(), profile_inputs=given, progress=_progress)
    result = OptimizeResult(program, json.loads(text))
    for note in result.notes:
        log.warning("search: %s", note)
    s, b = result.stats, result.best
    log.info("search: stopped (%s) after %.1f s%s: best #%d predicted %.2f µs, %.2f× the "
             "program", s.get("stop"), s.get("elapsed_s", 0.0),
             " (answered from the cache)" if result.from_cache else "", b.rank, b.predicted_us,
             b.speedup_vs_program)
    p = result.gpu_profile
    if p:
        if p.get("fastest") is not None:
            log.info("profiled on %s: fastest correct #%d [%s] %.2f µs", p["device"],
                     p["fastest"], p.get("fastest_variant"), p.get("fastest_us"))
        else:
            log.warning("profiled on %s: no candidate passed the check", p["device"])
    return result
