"""``torch.compile(model, backend="strata")`` (docs/python.md, "torch.compile backend").

The backend receives Dynamo's FX graph (static shapes per compile by default: a new shape is a
new compile), partitions it into the largest subgraphs strata supports — a node is supported
exactly when its rule in the op table of ``torch_ops`` lowers it, the same check as
``strata.capture`` — superoptimizes each partition (results cached in memory by program and
configuration, and on disk by the search's cache) and replaces it with a strata kernel called
through the custom op ``strata::launch``. Everything else, and every partition that fails
(unsupported after all, no GPU, a search or compile error), is compiled by Inductor
(``compile_fx``) or run eagerly, with the reason logged on the ``strata`` logger.

Options (``torch.compile(..., backend="strata", options={...})``):

``fallback``     "inductor" (default) or "eager": what runs the rest of the graph;
``cpu``          without a GPU: "fallback" (default; partitions fall back, reason "no GPU")
                 or "interpret" (for testing only: partitions run in the float64 reference
                 interpreter through ``strata::interpret``);
``time_limit``   seconds per partition search (default 30);
``target``, ``top_k``, ``use_cache``, ``cache_dir``, ``variants``: as ``strata.optimize``;
``min_ops``      smallest partition (call nodes) worth a kernel (default 1).
"""
import functools
import json
import logging

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from . import _core
from .errors import StrataError
from .lowering import Lowering, lower_graph, lower_node, tensor_meta
from .program import ProgramBuilder
from .torch_ops import Unsupported

log = logging.getLogger("strata")

_DEFAULTS = {"fallback": "inductor", "cpu": "fallback", "time_limit": 30.0, "target": None,
             "top_k": 4, "use_cache": True, "cache_dir": None, "variants": None, "min_ops": 1}
_SEARCHES = {}  # (program JSON, configuration) → OptimizeResult


def node_supported(node, root=None):
    """None when strata can lower `node` on its own (its tensor arguments as inputs), else the
    reason. Nodes that produce no tensor (shape queries) are left outside partitions."""
    reason, _ = _lower_alone(node, root)
    return reason


def _lower_alone(node, root):
    """(reason, tensors): the reason `node` cannot be lowered (None when it can) and how many
    program tensors its lowering adds besides its tensor arguments (op results, constants)."""
    if node.op not in ("call_function", "call_method", "call_module"):
        return f"{node.op} nodes are not partitioned", 0
    if tensor_meta(node) is None:
        return "produces no tensor (or its shape is unknown)", 0
    b = ProgramBuilder()
    cx = Lowering(b, root=root)
    try:
        for arg in node.all_input_nodes:
            meta = tensor_meta(arg)
            if meta is None:
                raise Unsupported(f"argument {arg.name} is not a tensor of known shape")
            cx.env[arg] = cx._input(arg.name, meta, where=f"argument {arg.name}")
        args = b.statement_count
        lower_node(cx, node)
    except Unsupported as e:
        return str(e), 0
    return None, b.statement_count - args


class _Support(OperatorSupportBase):
    def __init__(self, root):
        self.root = root
        self.reasons = {}
        self.tensors = {}  # supported node -> program tensors its lowering adds

    def is_node_supported(self, submodules, node):
        reason, tensors = _lower_alone(node, self.root)
        if reason is not None:
            self.reasons[node.name] = reason
        else:
            self.tensors[node] = tensors
        return reason is None


def split_partition(nodes, tensors, limit):
    """Splits a partition (its nodes in graph order) into consecutive runs whose programs stay
    within `limit` tensors: a run counts its distinct outside arguments once and each node's
    own tensors (`tensors[node]`). Consecutive runs of a convex partition are convex (a path
    between two nodes of a run that left it would pass a node of the partition between them,
    or leave the partition), so each run can be fused on its own. A node too large alone is a
    run of its own (its search then refuses it and it falls back)."""
    runs, run, members, outside, size = [], [], set(), set(), 0
    for n in nodes:
        new = {a for a in n.all_input_nodes if a not in members and a not in outside}
        if run and size + len(new) + tensors[n] > limit:
            runs.append(run)
            run, members, outside, size = [], set(), set(), 0
            new = set(n.all_input_nodes)
        run.append(n)
        members.add(n)
        outside |= new
        size += len(new) + tensors[n]
    if run:
        runs.append(run)
    return runs


class StrataPartition(torch.nn.Module):
    """Replaces a fused partition: calls a strata kernel (or the interpreter) and returns the
    outputs in the partition's structure (one tensor, or a tuple). `views` makes a kernel's
    outputs of the allocations strata::launch returns (views of one allocation where the
    kernel packs outputs, docs/python.md "Outputs"); None: the op returns the outputs."""

    def __init__(self, op, key, single, views=None):
        super().__init__()
        self.op, self.key, self.single, self.views = op, key, single, views

    def forward(self, *args):
        outs = self.op(self.key, [a.contiguous() for a in args])
        if self.views is not None:
            outs = self.views(outs)
        return outs[0] if self.single else tuple(outs)


def _options(options):
    opts = dict(_DEFAULTS)
    unknown = set(options or {}) - set(_DEFAULTS)
    if unknown:
        raise StrataError(f"strata backend: unknown option(s) {sorted(unknown)}; expected "
                          f"some of {sorted(_DEFAULTS)}")
    opts.update(options or {})
    if opts["fallback"] not in ("inductor", "eager"):
        raise StrataError("strata backend: option fallback must be 'inductor' or 'eager'")
    if opts["cpu"] not in ("fallback", "interpret"):
        raise StrataError("strata backend: option cpu must be 'fallback' or 'interpret'")
    return opts


def _ensure_meta(gm, example_inputs):
    """Every node needs its output's shape and dtype; Dynamo records them as example values.
    Otherwise they are computed on fake tensors shaped like the examples."""
    if all(tensor_meta(n) is not None for n in gm.graph.nodes if n.op == "placeholder"):
        return
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    FakeTensorProp(gm, mode).propagate(*fakes)


def _gpu_present():
    """Whether strata's kernels can run here: a CUDA build, a device, and PyTorch with CUDA."""
    return bool(_core.cuda_built and _core.gpu_count() > 0 and torch.cuda.is_available())


def _on_gpu(sub):
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val", n.meta.get("example_value"))
            if isinstance(v, torch.Tensor) and v.device.type != "cuda":
                return False
    return True


def _strata_module(name, sub, opts):
    """The replacement of one fused partition, or (None, reason) to leave it to the fallback."""
    from . import kernel as kernels

    program = lower_graph(sub, what=f"backend ({name})")
    out = sub.graph.output_node().args[0]
    single = not isinstance(out, (tuple, list))
    gpu = _gpu_present()
    if not gpu or not _on_gpu(sub):
        if opts["cpu"] == "interpret":
            key = kernels.register_interpreted(program)
            return StrataPartition(torch.ops.strata.interpret, key, single), \
                "runs in the reference interpreter (testing mode, no GPU)"
        return None, "no GPU" if not gpu else "inputs are not CUDA tensors"
    from .search import optimize

    config = (opts["time_limit"], opts["target"], opts["top_k"], opts["use_cache"],
              opts["cache_dir"], tuple(opts["variants"] or ()))
    cache_key = (program.to_json(), json.dumps(program.bound, default=id), config)
    result = _SEARCHES.get(cache_key)
    if result is None:
        result = optimize(program, time_limit=opts["time_limit"], target=opts["target"],
                          top_k=opts["top_k"], use_cache=opts["use_cache"],
                          cache_dir=opts["cache_dir"], variants=opts["variants"])
        _SEARCHES[cache_key] = result
    if result.gpu_profile and result.gpu_profile.get("fastest") is None:
        return None, "no candidate passed the GPU check"
    if result.fastest.is_program:
        # strata's value is the fused graph; its plain program (one predefined kernel per op)
        # is no match for Inductor's kernels, so the partition stays with the fallback.
        return None, (f"strata found no graph faster than the program itself "
                      f"({result.stats.get('candidates_found', 0)} graphs found)")
    k = result.kernel()
    views = functools.partial(kernels.output_views, k.outputs, k.placement)
    return StrataPartition(torch.ops.strata.launch, k.key, single, views), \
        f"strata kernel #{result.fastest.rank} ({result.fastest.predicted_us:.2f} µs predicted)"


def strata_backend(gm, example_inputs, *, options=None, mode=None):
    """The torch.compile backend ``"strata"`` (see the module documentation)."""
    opts = _options(options)
    _ensure_meta(gm, example_inputs)
    support = _Support(gm)
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    partitions = []
    for p in partitioner.propose_partitions():
        nodes = sorted(p.nodes, key=order.get)
        runs = split_partition(nodes, support.tensors, _core.max_program_tensors)
        if len(runs) > 1:
            log.info("strata backend: %d nodes (%s … %s) split into %d partitions of at most "
                     "%d program tensors each (the search's limit)", len(nodes), nodes[0].name,
                     nodes[-1].name, len(runs), _core.max_program_tensors)
        partitions += [Partition(id=len(partitions) + i, nodes=run) for i, run in enumerate(runs)]
    partitions = [p for p in partitions
                  if sum(1 for n in p.nodes if n.op.startswith("call_")) >= opts["min_ops"]]
    for name, reason in support.reasons.items():
        log.debug("strata backend: node %s stays with %s: %s", name, opts["fallback"], reason)
    if partitions:
        # Fusing re-creates the graph's nodes; Inductor reads Dynamo's input sources from the
        # placeholders, so they are carried over by name.
        sources = {n.name: n._dynamo_source for n in gm.graph.nodes
                   if n.op == "placeholder" and hasattr(n, "_dynamo_source")}
        gm = partitioner.fuse_partitions(partitions, prefix="strata_part_")
        for n in gm.graph.nodes:
            if n.op == "placeholder" and n.name in sources:
                n._dynamo_source = sources[n.name]
    replaced = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("strata_part_"):
            continue
        sub = gm.get_submodule(node.target)
        ops = [n.name for n in sub.graph.nodes if n.op.startswith("call_")]
        try:
            module, why = _strata_module(node.target, sub, opts)
        except Exception as e:  # noqa: BLE001 - any failure falls back, with its reason
            module, why = None, f"{type(e).__name__}: {e}"
        if module is None:
            log.warning("strata backend: partition %s (%d ops: %s) falls back to %s: %s",
                        node.target, len(ops), ", ".join(ops), opts["fallback"], why)
            continue
        log.info("strata backend: partition %s (%d ops: %s): %s", node.target, len(ops),
                 ", ".join(ops), why)
        setattr(gm, node.target, module)
        replaced += 1
    gm.recompile()
    log.info("strata backend: %d partition(s), %d run by strata, the rest by %s",
             len(partitions), replaced, opts["fallback"])
    if opts["fallback"] == "eager":
        return gm.forward
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def register():
    """Registers the backend name "strata" with torch._dynamo (the installed package does this
    through its torch_dynamo_backends entry point; call it when running from a source tree)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if "strata" not in _COMPILER_FNS:
        register_backend(compiler_fn=strata_backend, name="strata")
