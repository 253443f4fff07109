#!/usr/bin/env python3
"""Search times of the suite (bench/suite/README.md): `strata optimize` on every program (or
the selected ones), one after the other, each under `/usr/bin/time` and a time limit; writes
a record `<out>/cpu-<date>-suite-search.md` and `.json` (bench/README.md, "The suite").

  python3 bench/suite_search.py [NAME ...] [--match REGEX] [--time-limit 60] [--top K]
      [--strata build/strata] [--out bench/results] [--stem STEM] [--keep DIR] [--cache]
      [--kill-after 600]

Per program it records the wall and user CPU time, the states explored, the stop reason,
whether the best graph is fused (fewer kernels than the program, some of them customized), its
predicted speedup over the program and, when it is the program itself, the reason the tool's
summary gives. `--keep DIR` also keeps each result document as DIR/<name>.json: the
precomputed searches that scripts/gpu-suite.sh profiles instead of searching on the GPU
machine (bench/search/suite/). With a selection, the entries of an existing record of the same
stem are kept and the selected ones replaced; the record's header (revision, time limit,
machine) stays that of the run it describes, and every entry carries the revision, time limit
and load of its own search, so that entries re-made later with other ones are listed as such. Searches run without the result cache unless
`--cache` is given, so that the times are those of a search. A search still running after
`--kill-after` seconds (a search that overruns its time limit) is ended and recorded as such.
Exit: 0 when every search ran
(whatever it found), 1 when one failed (its error is in the record), 2 bad arguments.
"""

import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITE = HERE / "suite"
sys.path.insert(0, str(HERE))
import strata_program  # noqa: E402

NO_FASTER = "no faster equivalent graph was found: "


def programs(names, match):
    """The suite programs to search, sorted by name; unknown names are an error."""
    every = {p.stem: p for p in sorted(SUITE.glob("*.strata"))}
    if names:
        missing = [n for n in names if n not in every]
        if missing:
            raise SystemExit(f"suite_search: no program {', '.join(missing)} in {SUITE} "
                             f"(names are file stems, e.g. {next(iter(every))})")
        chosen = [every[n] for n in names]
    else:
        chosen = list(every.values())
    if match:
        chosen = [p for p in chosen if re.search(match, p.stem)]
    if not chosen:
        raise SystemExit("suite_search: no program selected")
    return chosen


def parse_time(stderr):
    """(wall s, user s) from the last line of /usr/bin/time -f "%e %U"."""
    for line in reversed(stderr.strip().splitlines()):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?) (\d+(?:\.\d+)?)\s*", line)
        if m:
            return float(m.group(1)), float(m.group(2))
    return None, None


def summarize(doc):
    """The record's fields taken from a result document (docs/search.md, "Result format")."""
    best = doc["ranked"][doc["best"]]
    prog = doc["ranked"][doc["program_index"]]
    st = doc["stats"]
    fused = (not best["is_program"] and best["kernels"] < prog["kernels"]
             and best["customized_kernels"] > 0)
    return {
        "states": st["states"], "pruned": st["pruned"], "found": st["candidates_found"],
        "screened": st["candidates_screened"], "verified": st["candidates_verified"],
        "stop": st["stop"], "stop_phase": st["stop_phase"],
        "verification_complete": st["verification_complete"],
        "program_kernels": prog["kernels"], "best_kernels": best["kernels"],
        "best_customized": best["customized_kernels"], "best_is_program": best["is_program"],
        "fused": fused, "predicted_us": best["predicted_us"],
        # The form of the program whose search found the winner (docs/search.md, "Alternative
        # forms"); None for the program itself and for documents that predate forms.
        "best_form": best.get("form"),
        "program_predicted_us": prog["predicted_us"],
        "speedup": best["speedup_vs_program"],
        "codegen_unsupported": st["prunes_by_rule"].get("codegen_unsupported", 0),
        "codegen_shared_memory": st["prunes_by_rule"].get("codegen_shared_memory", 0),
        "notes": [portable(n) for n in doc.get("notes", [])],
    }


def portable(text):
    """`text` with this machine's home directory written as `~` (the search notes name the
    checkpoint file in the user's cache), so that kept documents and records name no machine."""
    return text.replace(str(Path.home()) + "/", "~/")


def repo_path(path):
    """`path` relative to the repository root when it lies inside it, else absolute."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def search_one(path, args, keep_dir):
    """Runs one search; returns its record entry."""
    prog = strata_program.load(path)
    entry = {"program": path.stem, "origin": prog.origin, "time_limit_s": args.time_limit,
             "load_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="strata-suite-search-") as tmp:
        result = Path(tmp) / "result.json"
        # Run from the repository root with the program's relative path, so that messages
        # (and the record) name it as the repository does.
        cmd = ["/usr/bin/time", "-f", "%e %U", str(Path(args.strata).resolve()), "optimize",
               repo_path(path), "--no-gpu",
               "--quiet", "--no-show", "--time-limit", str(args.time_limit), "-o", str(result)]
        if args.top:
            cmd += ["--top", str(args.top)]
        if not args.cache:
            cmd.append("--no-cache")
        t0 = time.time()
        # A session of its own, so that a search past --kill-after is ended with /usr/bin/time.
        proc = subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, cwd=ROOT)
        try:
            stdout, stderr = proc.communicate(timeout=args.kill_after or None)
            entry["load_end"] = load_average()
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            entry["load_end"] = load_average()
            entry["wall_s"] = round(time.time() - t0, 1)
            entry["exit"] = None
            entry["error"] = (f"killed after {args.kill_after:g} s: the search did not stop at "
                              f"its {args.time_limit:g} s time limit")
            return entry
        entry["wall_s"], entry["user_s"] = parse_time(stderr)
        entry["exit"] = proc.returncode
        r = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        summary = r.stdout.strip().splitlines()
        entry["summary"] = summary[0] if summary else ""
        if NO_FASTER in entry["summary"]:
            entry["reason"] = entry["summary"].split(NO_FASTER, 1)[1]
        if r.returncode != 0 or not result.exists():
            err = [l for l in r.stderr.strip().splitlines()
                   if not re.fullmatch(r"\s*[\d.]+ [\d.]+\s*", l)]
            entry["error"] = " ".join(err)[-800:] or f"exit {r.returncode}, no result"
            return entry
        doc = json.loads(result.read_text())
        entry.update(summarize(doc))
        if keep_dir:
            keep_dir.mkdir(parents=True, exist_ok=True)
            (keep_dir / f"{path.stem}.json").write_text(portable(result.read_text()))
    return entry


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "—"


def best_text(e):
    if "error" in e:
        return "error: " + e["error"]
    # An alternative form's winner says so (docs/search.md, "Alternative forms").
    form = e.get("best_form")
    of_form = f", form {form}" if form not in (None, "canonical") else ""
    if e["fused"]:
        return (f"fused: {e['best_kernels']} kernel(s) ({e['best_customized']} customized) "
                f"vs {e['program_kernels']}{of_form}")
    if not e["best_is_program"]:
        return (f"not fused: {e['best_kernels']} kernel(s) ({e['best_customized']} customized)"
                f" vs {e['program_kernels']}{of_form}")
    return "the program: " + e.get("reason", "(no reason printed)")


def markdown(doc):
    m = doc["machine"]
    out = ["# Suite search times on the CPU", "",
           f"`strata optimize PROGRAM --no-gpu --quiet --no-show --time-limit "
           f"{doc['time_limit_s']:g}{' --no-cache' if not doc['cache'] else ''}"
           f"{' --top ' + str(doc['top']) if doc['top'] else ''} -o OUT.json` on every program "
           "of bench/suite/ (bench/suite/README.md), one at a time under "
           "`/usr/bin/time -f \"%e %U\"`, made by `python3 bench/suite_search.py`.", "",
           f"Machine: {m['cpus']} cores ({m['platform']}), shared with other work: load "
           f"average {m['load_start']} at the start, {m['load_end']} at the end; strata "
           f"{doc['revision']}. Wall and user CPU seconds per program; user time counts every "
           "thread, so on a loaded machine wall time overstates the search and user time is "
           "the steadier figure.", "",
           "| program | wall s | user s | states | stop | best graph | predicted µs (program) "
           "| speedup |",
           "|---|---:|---:|---:|---|---|---:|---:|"]
    for e in doc["programs"]:
        stop = e.get("stop", "—")
        if e.get("stop_phase") not in (None, "none"):
            stop += f" ({e['stop_phase']})"
        if e.get("verification_complete") is False:
            stop += ", verification cut short"
        pred = (f"{fmt(e.get('predicted_us'), '.2f')} ({fmt(e.get('program_predicted_us'), '.2f')})"
                if "predicted_us" in e else "—")
        speed = f"{e['speedup']:.2f}×" if isinstance(e.get("speedup"), (int, float)) else "—"
        out.append(f"| {e['program']} | {fmt(e.get('wall_s'), '.1f')} | "
                   f"{fmt(e.get('user_s'), '.1f')} | {fmt(e.get('states'), ',d')} | {stop} | "
                   f"{best_text(e)} | {pred} | {speed} |")
    remade = [e for e in doc["programs"] if remade_text(e, doc)]
    if remade:
        out += ["", "Re-made after that run (the table shows these searches):", ""]
        out += [f"- {e['program']}: {remade_text(e, doc)}" for e in remade]
    s = doc["summary"]
    out += ["", f"{s['programs']} programs: {s['fused']} fused, {s['not_fused']} not fused, "
            f"{s['errors']} failed; stop reasons {s['stops']}; wall {s['wall_s']:.0f} s, user "
            f"{s['user_s']:.0f} s in all.", ""]
    if s["reasons"]:
        out += ["Why the best graph is the program (the summary line's reason, by kind):", ""]
        out += [f"- {k}: {v}" for k, v in s["reasons"].items()]
        out.append("")
    return "\n".join(out)


def remade_text(e, doc):
    """How entry `e` was searched when its revision or time limit differs from the record's
    header (a program re-made later), else ""."""
    rev, limit = e.get("revision", doc["revision"]), e.get("time_limit_s", doc["time_limit_s"])
    if rev == doc["revision"] and limit == doc["time_limit_s"]:
        return ""
    return (f"strata {rev}, `--time-limit {limit:g}`, load average "
            f"{e.get('load_start', 'n/a')} at the start, {e.get('load_end', 'n/a')} at the end")


def reason_kind(reason):
    for key in ("no tiling fits", "cannot emit", "failed the equivalence screen",
                "none of the verified ones", "found no other complete graph"):
        if key in reason:
            return key
    return "other"


def summary(entries):
    ok = [e for e in entries if "error" not in e]
    stops, reasons = {}, {}
    for e in ok:
        stops[e["stop"]] = stops.get(e["stop"], 0) + 1
        if e["best_is_program"]:
            k = reason_kind(e.get("reason", ""))
            reasons[k] = reasons.get(k, 0) + 1
    return {"programs": len(entries), "fused": sum(e["fused"] for e in ok),
            "not_fused": sum(not e["fused"] for e in ok), "errors": len(entries) - len(ok),
            "stops": stops, "reasons": reasons,
            "wall_s": sum(e.get("wall_s") or 0 for e in entries),
            "user_s": sum(e.get("user_s") or 0 for e in entries)}


def load_average():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def revision():
    """The commit the tool was presumably built from, marked when files that build it (all
    but bench/ and the docs) have uncommitted changes."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          text=True, capture_output=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src",
                            "include", "tools", "CMakeLists.txt", "cmake", "runtime"],
                           text=True, capture_output=True).stdout.strip()
    return head + (" with uncommitted changes to the sources" if dirty else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("names", nargs="*", help="program names (file stems); default: all")
    p.add_argument("--match", default="", help="only programs whose name matches this regex")
    p.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    p.add_argument("--time-limit", type=float, default=60.0, help="--time-limit of each search")
    p.add_argument("--top", type=int, default=0, help="--top of each search (0: the tool's)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--stem", default="", help="record name (default cpu-<date>-suite-search)")
    p.add_argument("--keep", default="", help="keep each result document as KEEP/<name>.json")
    p.add_argument("--cache", action="store_true", help="let searches use the result cache")
    p.add_argument("--kill-after", type=float, default=600.0,
                   help="end a search still running after this many seconds and record it as "
                        "killed (0: never)")
    args = p.parse_args()
    if not Path(args.strata).exists():
        p.error(f"no strata tool at {args.strata} (build it: make build)")
    if not Path("/usr/bin/time").exists():
        p.error("no /usr/bin/time (GNU time; Debian package `time`, scripts/install-deps.sh)")
    chosen = programs(args.names, args.match)
    stem = Path(args.out) / (args.stem or f"cpu-{datetime.date.today().isoformat()}-suite-search")
    keep = Path(args.keep) if args.keep else None
    run_revision = revision()
    doc = {"format": "strata-suite-search", "version": 1, "revision": run_revision,
           "time_limit_s": args.time_limit, "top": args.top, "cache": args.cache,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "load_start": load_average()}}
    previous = {}
    if (args.names or args.match) and Path(f"{stem}.json").exists():
        old = json.loads(Path(f"{stem}.json").read_text())
        previous = {e["program"]: e for e in old["programs"]}
        # The header describes the run that made the record; entries re-made now carry their own.
        for key in ("revision", "time_limit_s", "top", "cache", "machine"):
            doc[key] = old.get(key, doc[key])
    done = dict(previous)
    failed = False
    for i, path in enumerate(chosen, 1):
        t0 = time.time()
        entry = search_one(path, args, keep)
        entry["revision"] = run_revision
        failed |= "error" in entry
        done[path.stem] = entry
        print(f"[{i}/{len(chosen)}] {path.stem}: {best_text(entry)} "
              f"({time.time() - t0:.1f} s)", flush=True)
        doc["programs"] = [done[k] for k in sorted(done)]
        if not previous:
            doc["machine"]["load_end"] = load_average()
        doc["summary"] = summary(doc["programs"])
        Path(stem).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
        Path(f"{stem}.md").write_text(markdown(doc))
    print(f"wrote {stem}.md and {stem}.json")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
