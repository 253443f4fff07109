"""Where one megakernel step spends its time, from a trace (docs/megakernel.md, "Tracing").

A trace is what the persistent kernel writes with MpkParams::trace set: per task id four
numbers — the worker, and the global timer in ns when the worker took the task, when the task's
events had fired (its body began) and when its body ended. `summarize` turns it into per-op-kind
figures; the ops of a kind are the layers' copies of one op ("layers.3.norm_qkv" is of kind
"norm_qkv").

Definitions (all in µs):
- span: from the first task taken to the last body ended;
- stage: for each op in the compiled order, how far its last body end lies past the latest body
  end of every op before it (0 when it ends earlier, i.e. it hid completely behind its
  predecessors); the stages of all ops sum to the span minus the first op's start. A kind's
  stage is the sum over its ops: the step's time attributed to that kind;
- body: a task's body time (end − ready); wait: from taken to ready (event waits, and the L2
  prefetch issue);
- busy: the sum of all bodies over (workers · span).
"""


def op_kind(name):
    """"layers.3.norm_qkv" -> "norm_qkv"; a name outside the layers is its own kind."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[0] == "layers" and parts[1].isdigit():
        return ".".join(parts[2:])
    return name


def summarize(tasks, trace, workers):
    """Per-op-kind figures of one traced step. `tasks` is the task file (its "tasks",
    "task_fields", "op_names"), `trace` a flat sequence of 4 integers per task, `workers` the
    grid size. Raises ValueError when the trace does not match the task file or a task was not
    run (a timestamp missing or out of order)."""
    nf = tasks["task_fields"]
    tab = tasks["tasks"]
    n = len(tab) // nf
    if len(trace) != 4 * n:
        raise ValueError(f"the trace has {len(trace)} numbers, the task file {n} tasks (4 each)")
    names = tasks["op_names"]
    ops = [{"end": None, "bodies": [], "waits": []} for _ in names]
    t_first, t_last, busy = None, None, 0
    stamps = set()
    for i in range(n):
        w, taken, ready, end = trace[4 * i:4 * i + 4]
        if not (0 <= w < workers) or not (0 < taken <= ready <= end):
            raise ValueError(f"task {i}: trace entry {[w, taken, ready, end]} is not a run task "
                             f"(worker < {workers}, 0 < taken <= ready <= end)")
        o = ops[tab[i * nf]]
        o["end"] = end if o["end"] is None else max(o["end"], end)
        o["bodies"].append(end - ready)
        o["waits"].append(ready - taken)
        busy += end - ready
        t_first = taken if t_first is None else min(t_first, taken)
        t_last = end if t_last is None else max(t_last, end)
        stamps.update((taken, ready, end))
    span = t_last - t_first
    kinds, order = {}, []
    latest = t_first
    for name, o in zip(names, ops):
        if o["end"] is None:
            continue
        stage = max(0, o["end"] - latest)
        latest = max(latest, o["end"])
        k = op_kind(name)
        if k not in kinds:
            kinds[k] = {"kind": k, "ops": 0, "tasks": 0, "stage_ns": 0, "body_ns": 0,
                        "body_max_ns": 0, "wait_ns": 0}
            order.append(k)
        r = kinds[k]
        r["ops"] += 1
        r["tasks"] += len(o["bodies"])
        r["stage_ns"] += stage
        r["body_ns"] += sum(o["bodies"])
        r["body_max_ns"] = max(r["body_max_ns"], max(o["bodies"]))
        r["wait_ns"] += sum(o["waits"])
    srt = sorted(stamps)
    steps = [b - a for a, b in zip(srt, srt[1:]) if b > a]
    rows = []
    for k in order:
        r = kinds[k]
        rows.append({"kind": k, "ops": r["ops"], "tasks": r["tasks"],
                     "stage_us": round(r["stage_ns"] / 1e3, 2),
                     "stage_share": round(r["stage_ns"] / span, 4) if span else 0.0,
                     "body_mean_us": round(r["body_ns"] / r["tasks"] / 1e3, 3),
                     "body_max_us": round(r["body_max_ns"] / 1e3, 3),
                     "wait_mean_us": round(r["wait_ns"] / r["tasks"] / 1e3, 3)})
    return {"span_us": round(span / 1e3, 2),
            "busy": round(busy / (workers * span), 4) if span else 0.0,
            "timer_resolution_ns": min(steps) if steps else None,
            "by_kind": rows}


def table(summary):
    """The summary as markdown lines."""
    out = [f"span {summary['span_us']} µs, workers busy {100 * summary['busy']:.0f} % "
           f"(timer steps of {summary['timer_resolution_ns']} ns)", "",
           "| op | ops | tasks | stage µs | share | body mean µs | body max µs | wait mean µs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in summary["by_kind"]:
        out.append(f"| {r['kind']} | {r['ops']} | {r['tasks']} | {r['stage_us']:.1f} | "
                   f"{100 * r['stage_share']:.0f} % | {r['body_mean_us']:.2f} | "
                   f"{r['body_max_us']:.2f} | {r['wait_mean_us']:.2f} |")
    return out
