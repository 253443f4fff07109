"""The timing method of bench/README.md, shared by every system the harness measures.

- Enough input/output sets that one pass over them moves more than 4× the L2 cache, so no
  weight is timed while resident in L2.
- One launch per set captured into a CUDA graph, the pass over the sets repeated until the graph
  holds at least MIN_LAUNCHES launches or MIN_REPLAY_US of work (whichever comes first; one
  timed eager launch estimates the work); after warm-up replays, each replay is bracketed by CUDA
  events; the time of a replay divided by its launches is one sample. (A replay boundary costs
  a few µs: the launch of the graph itself and the event. Spread over only the 4–5 launches of
  a pass over large inputs, it added 0.3–1 µs to every call of rmsnorm and gatedmlp, and none
  to the launch floor, which is timed over 1024 launches; bench/results/h200-2026-11-24-sets.md.)
- Statistics over ≥ 100 replays; the median is reported.
- Systems compared head to head run in interleaved replays (time_head_to_head): a GPU's clocks
  drift under sustained load, so systems timed one after the other are not timed alike.
The C++ profiler (src/gpu/profiler.cc) implements the same method.
"""

import ctypes
import math
import statistics

import torch

import output_placement

MAX_SETS = 8192
MIN_LAUNCHES = 100
# ... or a replay of at least this much work (µs), whichever needs fewer passes: a replay of
# milliseconds amortizes its own cost without a hundred launches of a long program.
MIN_REPLAY_US = 2000.0


def l2_bytes():
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 50 * 2**20))


def sets_for(bytes_per_set, l2_multiple=4.0, max_sets=MAX_SETS):
    """Sets per pass: the smallest count whose traffic exceeds l2_multiple × L2."""
    return max(1, min(max_sets, int(l2_multiple * l2_bytes()) // max(1, bytes_per_set) + 1))


def relative_l2_error(got, want):
    """‖got − want‖₂ / ‖want‖₂ in float64; inf if got holds a NaN or an infinity. For sequences
    of tensors (a program's outputs), the largest error of corresponding outputs."""
    if isinstance(got, (list, tuple)) or isinstance(want, (list, tuple)):
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        want = list(want) if isinstance(want, (list, tuple)) else [want]
        if len(got) != len(want):
            return float("inf")
        return max(relative_l2_error(g, w) for g, w in zip(got, want))
    got = got.double()
    want = want.double()
    if got.shape != want.shape or not torch.isfinite(got).all():
        return float("inf")
    norm = torch.linalg.vector_norm(want).item()
    diff = torch.linalg.vector_norm(got - want).item()
    return diff / norm if norm > 0 else diff


def summarize(samples):
    s = sorted(samples)
    q = statistics.quantiles(s, n=10, method="inclusive")
    return {"median_us": statistics.median(s), "mean_us": statistics.fmean(s), "min_us": s[0],
            "p10_us": q[0], "p90_us": q[-1], "runs": len(s)}


def passes_for(sets, min_launches=MIN_LAUNCHES, launch_us=0.0, min_replay_us=MIN_REPLAY_US):
    """Passes over the sets per replay: enough that a replay holds ≥ min_launches launches or
    ≥ min_replay_us of work at launch_us per launch (≤ 0: unknown, by count only), whichever is
    fewer; at least 1. (As passes_for of src/gpu/profiler.cc.)"""
    sets = max(1, sets)
    by_count = max(1, -(-min_launches // sets))
    if not launch_us > 0:
        return by_count
    by_time = math.ceil(min_replay_us / (launch_us * sets))
    return max(1, min(by_count, by_time))


def capture_launches(launch, sets, min_launches=MIN_LAUNCHES):
    """launch(i) for i in range(sets), repeated passes_for(sets, min_launches) times, captured as
    one CUDA graph; returns (graph, launches per replay, passes).

    `launch(i)` must enqueue the work for set i on the current stream and be capturable
    (it is run once eagerly per set first, which also triggers lazy compilation).
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(sets):
            launch(i)
        # A second eager launch of set 0, timed, estimates one launch (the first pass also
        # triggered lazy compilation).
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        launch(0)
        end.record()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    passes = passes_for(sets, min_launches, 1000.0 * begin.elapsed_time(end))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(passes):
            for i in range(sets):
                launch(i)
    torch.cuda.synchronize()
    return graph, sets * passes, passes


def time_launches(launch, sets, runs=100, warmup=5, min_launches=MIN_LAUNCHES):
    """Times launch(i) for i in range(sets) as captured by capture_launches; returns
    per-launch statistics (with "sets" and "passes")."""
    graph, launches, passes = capture_launches(launch, sets, min_launches)
    for _ in range(warmup):
        graph.replay()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(runs + 1)]
    events[0].record()
    for r in range(runs):
        graph.replay()
        events[r + 1].record()
    torch.cuda.synchronize()
    samples = [1000.0 * events[r].elapsed_time(events[r + 1]) / launches for r in range(runs)]
    del graph
    stats = summarize(samples)
    stats["sets"] = sets
    stats["passes"] = passes
    return stats


def time_head_to_head(contenders, runs=100, warmup=5, min_launches=MIN_LAUNCHES):
    """Times systems against each other in interleaved replays: `contenders` maps a name to
    (launch, sets) as time_launches takes them; each is captured as its own graph, and round r
    replays every graph once, back to back, in an order rotated by r, so that a drift of the
    clocks under sustained load falls on every system alike (bench/README.md, "Measurement
    pitfalls"). Returns {name: statistics as time_launches's} and, under "ratios", per pair
    (a, b) of names the median over rounds of a's sample / b's sample of the same round."""
    names = list(contenders)
    captured = {n: capture_launches(launch, sets, min_launches)
                for n, (launch, sets) in contenders.items()}
    for _ in range(warmup):
        for n in names:
            captured[n][0].replay()
    # events[r][n]: (begin, end) of name n's replay in round r.
    events = []
    for r in range(runs):
        marks = {}
        for n in round_order(names, r):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            captured[n][0].replay()
            end.record()
            marks[n] = (begin, end)
        events.append(marks)
    torch.cuda.synchronize()
    samples = {n: [1000.0 * events[r][n][0].elapsed_time(events[r][n][1]) / captured[n][1]
                   for r in range(runs)] for n in names}
    out = {}
    for n in names:
        stats = summarize(samples[n])
        stats["sets"] = contenders[n][1]
        stats["passes"] = captured[n][2]
        out[n] = stats
    out["ratios"] = paired_ratios(samples)
    del captured
    return out


def round_order(names, r):
    """The order in which round r of time_head_to_head replays the systems: `names` rotated by
    r, so that over len(names) rounds each system comes at each position once."""
    k = r % len(names)
    return names[k:] + names[:k]


def paired_ratios(samples):
    """Per ordered pair (a, b) of systems, "a/b": the median over rounds of a's sample divided
    by b's sample of the same round (`samples`: name → one sample per round)."""
    return {f"{a}/{b}": statistics.median(x / y for x, y in zip(samples[a], samples[b]))
            for a in samples for b in samples if a != b}


def measure_bandwidth(bytes_each=1 << 30, runs=20):
    """DRAM bandwidth of a large device-to-device copy: (read + write bytes) / median time."""
    src = torch.empty(bytes_each, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    times = []
    for _ in range(runs + 2):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    del src, dst
    return 2 * bytes_each / statistics.median(times[2:])


def measure_tensor_peak(n=8192, runs=20):
    """fp16 tensor-core rate of a large square matmul: 2n³ / median time (FLOP/s)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    times = []
    for _ in range(runs + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.mm(a, b)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    del a, b
    return 2.0 * n**3 / statistics.median(times[3:])


def measure_launch_floor(runs=100):
    """Per-launch time of a trivial kernel inside a CUDA graph: the floor's "one launch"."""
    xs = [torch.zeros(1, device="cuda") for _ in range(64)]
    return time_launches(lambda i: xs[i % 64].add_(1.0), 1024, runs=runs)["median_us"]


def output_shapes(output_shape):
    """A list of output shapes from one shape (a sequence of ints) or a list of shapes."""
    shapes = list(output_shape)
    if shapes and isinstance(shapes[0], (list, tuple)):
        return [tuple(s) for s in shapes]
    return [tuple(shapes)]


def placed_outputs(shapes, placement, fill=None):
    """f16 output tensors on the GPU placed as `placement` (output_placement.read) says: one
    allocation per output that has its own (filled with `fill` when given: all of it, so an
    element the library leaves unwritten shows), every other output a view into its base's
    (torch.as_strided), as a caller of the library must place them for its fast path."""
    own = {}
    for i, (s, p) in enumerate(zip(shapes, placement)):
        if p["base"] == i:
            size = s if output_placement.is_dense(placement, i, s) else (p["alloc"],)
            own[i] = (torch.empty(size, dtype=torch.float16, device="cuda") if fill is None
                      else torch.full(size, fill, dtype=torch.float16, device="cuda"))
    outs = []
    for i, (s, p) in enumerate(zip(shapes, placement)):
        a = own[p["base"]]
        outs.append(a if p["base"] == i and tuple(a.shape) == tuple(s)
                    else torch.as_strided(a, s, p["strides"], p["offset"]))
    return outs


def check_library(lib, inputs, output_shape, ref):
    """Runs a StrataLibrary once on `inputs` into NaN-poisoned f16 outputs (`output_shape`: one
    shape, or a list of shapes with `ref` the list of their references) placed as the library
    declares (views of one allocation where it packs them); returns the relative L2 error
    against `ref` (inf if any output element was left unwritten)."""
    shapes = output_shapes(output_shape)
    outs = placed_outputs(shapes, lib.placement(shapes), fill=float("nan"))
    lib.binder(inputs, outs)()
    torch.cuda.synchronize()
    return relative_l2_error(outs if len(outs) > 1 else outs[0], ref)


def library_launch(lib, sets_inputs, output_shape):
    """launch(i) of a StrataLibrary over the input sets as time_launches takes it: one launch per
    set, each with its own outputs, placed as the library declares."""
    shapes = output_shapes(output_shape)
    placement = lib.placement(shapes)
    outputs = [placed_outputs(shapes, placement) for _ in sets_inputs]
    launches = [lib.binder(x, o) for x, o in zip(sets_inputs, outputs)]
    return lambda i: launches[i]()


def time_library(lib, sets_inputs, output_shape, runs, min_launches=MIN_LAUNCHES):
    """Times a StrataLibrary over the input sets (library_launch) by time_launches."""
    return time_launches(library_launch(lib, sets_inputs, output_shape), len(sets_inputs),
                         runs=runs, min_launches=min_launches)


class StrataLibrary:
    """A compiled strata graph (a shared library from the binary cache) called through ctypes:
    int strata_launch(const void* const* inputs, void* const* outputs, void* workspace,
    cudaStream_t stream) and size_t strata_workspace_bytes(void); where its outputs lie from
    strata_output_base / _offset / _stride / _alloc when it exports them (output_placement.py)."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_LOCAL", 0))
        self.lib.strata_launch.restype = ctypes.c_int
        self.lib.strata_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_void_p]
        self.lib.strata_workspace_bytes.restype = ctypes.c_size_t
        self.lib.strata_workspace_bytes.argtypes = []
        size = int(self.lib.strata_workspace_bytes())
        self.workspace = torch.empty(max(size, 256), dtype=torch.uint8, device="cuda")

    def placement(self, shapes):
        """Per output (of shapes `shapes`) its base, offset, strides and alloc
        (output_placement.read)."""
        return output_placement.read(self.lib, shapes)

    def binder(self, inputs, outputs):
        """A function that launches on (inputs, outputs) on the current stream; the pointer
        arrays are built once so that capture records the same addresses."""
        ins = (ctypes.c_void_p * len(inputs))(*[t.data_ptr() for t in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[t.data_ptr() for t in outputs])
        keep = (inputs, outputs, ins, outs)

        def launch():
            _ = keep
            rc = self.lib.strata_launch(ctypes.addressof(ins), ctypes.addressof(outs),
                                        self.workspace.data_ptr(),
                                        torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise RuntimeError(f"{self.path}: strata_launch returned CUDA error {rc}")

        return launch
