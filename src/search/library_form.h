// Library forms (docs/search.md, "Library forms"): a program whose matmuls are large (prefill)
// runs them best as library calls (cuBLAS, docs/codegen.md), and what the search can add is the
// work around them: its enumeration keeps whole-program tilings within `max_blocks` blocks and
// finds nothing at 4096 tokens, so the best candidate was the program itself, every
// elementwise op a kernel of its own. A library form keeps every matmul a predefined op and
// replaces the rest, region by region, with the customized kernels of the pointwise-seed
// builder (pointwise_seed.h):
//
//  - slices of a matmul's result are pushed into its operands first: when every reader of
//    matmul(A, B) is a slice along the last dim (the column blocks of a fused QKV projection)
//    or along the row dim, and the product is no output, each slice becomes
//    matmul(A, slice(B, last, a, b)) or matmul(slice(A, rows, a, b), B) — an identity of the
//    matmul's definition; the slice of the operand is a view cuBLAS reads in place;
//    A product whose slices are all graph outputs that partition one dim (packed outputs,
//    docs/codegen.md) is also offered whole: the forms of the program with that product kept
//    and its slices predefined (one library call, the outputs views of its result) follow the
//    pushed forms;
//  - layout ops read only by matmuls (views of a weight) stay predefined ops;
//  - every other op belongs to a region: an op's level is the number of matmuls on the longest
//    path from the program's inputs to it, and the ops of one level form one region (a convex
//    set: no path between two of them passes through a matmul), its inputs the tensors it reads
//    from outside (program inputs, matmul results), its outputs the tensors read outside it or
//    marked as program outputs. A region becomes the kernels of a pointwise seed of the region
//    as a program of its own (in the form the caller chooses: the search passes the region's
//    canonical form); where the builder refuses a whole level, each connected part of it is
//    tried alone, and a part it refuses keeps its predefined ops, as does a region of one op
//    (one kernel either way).
//
// The proof composes (library_form_proof.h): each region's kernels are proved equivalent to the
// region as the program writes it, the matmuls and views are the program's own, and the
// pushdown is exact, so the form computes the program's function.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// One library form: the graph and, per region it fuses, the kernels that replace the region.
struct LibraryForm {
  KernelGraph graph;
  struct Part {
    int region = -1;      ///< index into LibraryForms::regions
    KernelGraph kernels;  ///< a pointwise seed: the region's inputs, outputs and kernels
  };
  std::vector<Part> parts;
  int64_t rows = 1;  ///< the largest number of rows per block its regions take
  int pushed_slices = 0;  ///< slices of matmul results this form pushed into an operand
};

/// The library forms of a program and the regions they fuse.
struct LibraryForms {
  /// Each fused region as a program of its own (its ops as the program writes them; inputs and
  /// outputs in tensor-id order of the program after the slice pushdown).
  std::vector<KernelGraph> regions;
  /// One form per number of rows per block (1, 2, 4, 8: each region takes the largest of its
  /// pointwise_seed_rows not above it), distinct graphs only.
  std::vector<LibraryForm> forms;
  int pushed_slices = 0;  ///< slices of matmul results pushed into an operand (all pushed)
};

/// The program a region's kernels are built from, given the region as written (the search: its
/// canonical form, or the region itself where that is unusable). It must keep the region's
/// inputs and outputs (order, shapes, dtypes).
using RegionForm = std::function<KernelGraph(const KernelGraph& region)>;

/// The library forms of complete program `program` (docs/search.md, "Library forms"), with
/// `min_blocks` for the rows per block (pointwise_seed_rows: the search passes the target's SM
/// count). None unless the program has a matmul that runs as a library call
/// (library_matmul_supported on its types) and the form differs from the program (a region
/// fused, or a slice pushed). Programs over several ranks get none.
LibraryForms library_forms(const KernelGraph& program, int64_t min_blocks,
                           const RegionForm& region_form = {});

}  // namespace strata::search
