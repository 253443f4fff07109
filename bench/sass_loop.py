"""Instruction mix of a generated kernel's main loop, from its SASS (no GPU needed).

  python3 bench/sass_loop.py KERNEL.sass

KERNEL.sass is `cuobjdump -sass` of a cubin built from `strata emit` output, e.g.
  build/strata emit GRAPH.json --knobs groups=4 -o k.cu
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I runtime -cubin -o k.cubin k.cu
  cuobjdump -sass k.cubin > k.sass
(cuobjdump ships with the CUDA toolkit and inside Triton's wheel, triton/backends/nvidia/bin.)
The loop is taken from the first `DEPBAR.LE SB0, 0x1` (the pipelined loop's wait for its
stage) to the last backward branch that jumps to or before it; its instructions run once per
iteration when the loop body has no inner loops.
"""

import collections
import re
import sys


def main(path):
    code = []
    for line in open(path):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    starts = [i for i, (_, ins) in enumerate(code) if "DEPBAR.LE SB0, 0x1" in ins]
    if not starts:
        sys.exit(f"{path}: no pipelined loop (DEPBAR.LE SB0, 0x1) found")
    first = starts[0]
    top = code[first][0]
    last = None
    for i in range(first, len(code)):
        m = re.search(r"BRA (0x[0-9a-f]+)", code[i][1])
        if m and int(m.group(1), 16) <= top:
            last = i
    if last is None:
        sys.exit(f"{path}: no backward branch closes the loop")
    ops = collections.Counter()
    for _, ins in code[first:last + 1]:
        if ins.startswith("@"):
            ins = ins.split(None, 1)[1]
        ops[ins.split()[0].split(".")[0]] += 1
    print(f"{last - first + 1} instructions per iteration: " +
          ", ".join(f"{k} {v}" for k, v in ops.most_common(16)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
