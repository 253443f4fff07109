// The interpreter's interface for other value domains: what a module outside src/interp/ may
// use to run a μGraph in an arithmetic of its own (the verifier's finite fields,
// src/verify/field_arith.h). The executor and the tensor ops are templates over an "Arith"
// (the concept elementwise.h documents), so this interface is a set of headers, not a
// compiled API:
//   - interp::execute<Arith>, with ExecHints (per-tensor ValueHints), PartialPlan (the blocks
//     and output regions to evaluate), ExecConfig and live_block_ops (executor.h);
//   - interp::for_each_row, the row iteration over a Box every tensor op uses (ops.h);
//   - the per-op arithmetic a domain implements and the double reference DoubleArith
//     (elementwise.h).
// Other modules include this header only; the headers behind it are private to src/interp/
// and may change shape as long as this list holds (docs/architecture.md, "Module order").
#pragma once

#include "interp/elementwise.h"
#include "interp/executor.h"
#include "interp/ops.h"
