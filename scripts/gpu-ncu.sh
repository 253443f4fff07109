#!/usr/bin/env bash
# Hardware counters of one candidate's kernels, per emitter variant, in one invocation on a GPU
# machine with Nsight Compute (bench/README.md, "Kernel counters"):
#   1. build the `strata` tool (Release) in build-gpu/ like scripts/gpu-sweep.sh;
#   2. for each variant, `strata profile PROGRAM CANDIDATE --variants V` (a few CUDA-graph
#      replays; the benchmark's inputs when PROGRAM is examples/programs/<bench>_b<b>.strata
#      and PyTorch is installed) under `ncu --clock-control none --cache-control none` on the
#      kernels of one rotated input set of a replay (as in the benchmark): duration,
#      registers, occupancy, tensor-pipe, shared-memory-pipe, special-function (exp) and DRAM
#      utilization, stall reasons;
#   3. writes OUT_DIR/ncu-<n>.txt per variant and prints a summary table.
# With STRATA_NCU_FULL=1, step 2 collects Nsight Compute's full set instead and writes per
# variant OUT_DIR/ncu-<n>.ncu-rep, the report's details page (ncu-<n>-details.txt: speed of
# light, occupancy, warp states, memory tables) and its per-instruction SASS page with stall
# samples (ncu-<n>-sass.csv); no summary table. STRATA_NCU_KERNEL (a regular expression,
# default `strata_`) limits the profiled kernels, e.g. `_k4_` for one kernel of the graph.
#
# Usage: scripts/gpu-ncu.sh OUT_DIR PROGRAM CANDIDATE [VARIANT ...]
#   CANDIDATE: a μGraph JSON or a `strata optimize` result (then STRATA_NCU_RANK picks the
#   ranked entry, default 0). VARIANT: emitter knob specs (default: "default").
# Exit: 0 every variant was measured; 1 one failed; 3 the build failed or ncu is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
[ $# -ge 3 ] || { echo "usage: scripts/gpu-ncu.sh OUT_DIR PROGRAM CANDIDATE [VARIANT ...]"; exit 2; }
out=$1 program=$2 candidate=$3
shift 3
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(default)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v ncu >/dev/null || { echo "gpu-ncu: ncu not found"; exit 3; }
. "$root/scripts/lib/devdeps.sh"
build=${STRATA_BUILD_DIR:-$root/build-gpu}
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" >/dev/null ||
   ! cmake --build "$build" -j"$(nproc)" --target strata >/dev/null; then
  echo "gpu-ncu: the build failed"
  exit 3
fi
rank=${STRATA_NCU_RANK:-0}
graph=$candidate
if python3 -c 'import json,sys; sys.exit(0 if "ranked" in json.load(open(sys.argv[1])) else 1)' \
     "$candidate" 2>/dev/null; then
  graph=$out/candidate.json
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
json.dump(d["ranked"][int(sys.argv[2])]["graph"], open(sys.argv[3], "w"))' \
    "$candidate" "$rank" "$graph" || exit 1
fi
inputs=()  # the benchmark's own input recipe where PyTorch is there (bench/benchmarks.py)
key=$(basename "$program" .strata)
if python3 bench/benchmarks.py inputs "$key" "$out/inputs" 2>/dev/null; then
  inputs=(--inputs "$out/inputs")
fi
metrics=gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__average_warp_latency_issue_stalled_barrier.ratio
metrics+=,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio
metrics+=,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio
metrics+=,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio
metrics+=,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
kernel=${STRATA_NCU_KERNEL:-strata_}
full=${STRATA_NCU_FULL:-0}
failed=0
n=0
for v in "${variants[@]}"; do
  report=$out/ncu-$n.txt
  echo "== variant $n: $v" | tee "$report"
  # Launches: the correctness check, the eager first launch, then CUDA-graph replays over
  # rotated input sets; set 1 of the warm-up replay is profiled (its inputs are not in L2).
  nk=$("$build/strata" emit "$graph" -o "$out/k.cu" --knobs "$v" 2>&1 |
       grep 'strata emit:' | grep -c -E "$kernel")
  what=(--metrics "$metrics" --csv)
  [ "$full" = 1 ] && what=(--set full --import-source no -f -o "$out/ncu-$n")
  if ! timeout -k 10 300 ncu --clock-control none --cache-control none -k "regex:$kernel" \
         --launch-skip $((3 * nk)) --launch-count "$nk" "${what[@]}" \
         "$build/strata" profile "$program" "$graph" --runs 1 --warmup 1 --variants "$v" \
         "${inputs[@]}" -q >>"$report" 2>&1; then
    echo "gpu-ncu: variant $v failed (see $report)"
    failed=1
  elif [ "$full" = 1 ]; then
    ncu -i "$out/ncu-$n.ncu-rep" --page details >"$out/ncu-$n-details.txt" 2>&1
    ncu -i "$out/ncu-$n.ncu-rep" --page source --print-source sass --csv >"$out/ncu-$n-sass.csv" 2>&1
  fi
  n=$((n + 1))
done
[ "$full" = 1 ] && exit $failed
python3 - "$out" <<'EOF'
import csv, io, pathlib, sys
out = pathlib.Path(sys.argv[1])
short = {
    "gpu__time_duration.sum": "us", "launch__registers_per_thread": "regs",
    "launch__grid_size": "grid", "launch__block_size": "block",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor%",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed": "smem%",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "xu%",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
    "smsp__average_warp_latency_issue_stalled_barrier.ratio": "st_bar",
    "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio": "st_long",
    "smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio": "st_short",
    "smsp__average_warp_latency_issue_stalled_mio_throttle.ratio": "st_mio",
    "smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio": "st_math",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
}
cols = list(short.values())
print("variant | kernel | " + " | ".join(cols))
for f in sorted(out.glob("ncu-*.txt")):
    text = f.read_text()
    variant = text.splitlines()[0].removeprefix("== ")
    lines = [l for l in text.splitlines() if l.startswith('"')]
    rows = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines))):
        key = (r.get("ID"), r.get("Kernel Name"))
        name = short.get(r.get("Metric Name"))
        if name:
            val = r.get("Metric Value", "").replace(",", "")
            # Nsight Compute names the unit "nsecond" or "ns" (and so on) by version.
            per_us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
                      "msecond": 1e3, "ms": 1e3}.get(r.get("Metric Unit"))
            if name == "us" and per_us is not None:
                val = f"{float(val) * per_us:.2f}"
            rows.setdefault(key, {})[name] = val
    for (i, k), m in rows.items():
        print(f"{variant} | {k} | " + " | ".join(m.get(c, "?") for c in cols))
EOF
exit $failed
