// The search of a program with collectives (all_reduce; docs/tensor-parallel.md, docs/search.md
// "Tensor parallelism"): communication splits the program into segments that no kernel spans,
// each segment is searched as a program of its own, and the best graphs of the segments are
// joined with the collectives between them.
#pragma once

#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata::search {

/// One segment of a program: its ops (program op ids, in order), the program tensors it reads
/// from outside (its inputs, in order of first use) and those read after it or marked as
/// program outputs (its outputs, in order of production).
struct Segment {
  std::vector<int> ops;
  std::vector<int> inputs;
  std::vector<int> outputs;
  KernelGraph program;  ///< the segment as a program of its own (segment_program)
};

/// Segments of `p` from an assignment of its ops to segments: seg_of[i] is op i's segment
/// (0 to nseg - 1), or -1 for ops that belong to no segment (inputs, collectives). An op's
/// segment must not be below the segments of the ops whose results it reads (then segments
/// in order form a valid order of the program, and each is convex). A segment's outputs are
/// its results read by ops of other segments or by ops outside any segment, and program
/// outputs.
std::vector<Segment> make_segments(const KernelGraph& p, const std::vector<int>& seg_of, int nseg);

/// The segment as a program: inputs and results named after the program's tensors.
Result<KernelGraph> segment_program(const KernelGraph& p, const Segment& s);

/// A graph holding only the inputs of `program` (same names, shapes and types), the start of
/// a join of segment graphs; `map` (sized to the program's tensors, -1 elsewhere) maps each
/// program input to its tensor in the new graph.
Result<KernelGraph> join_start(const KernelGraph& program, std::vector<int>& map);

/// Appends graph `c` (a graph equivalent to s.program) to `out`, its inputs bound through
/// `map` (program tensor → tensor of `out`); records its outputs in `map`.
Status append_segment(const KernelGraph& c, const Segment& s, KernelGraph& out,
                      std::vector<int>& map);

/// Adds the statistics of a search of a part of a program (a segment, or the whole program)
/// to those of the search of the program: counts and times add up, the first stop other than
/// exhausted (or a cache hit) is kept, verification is complete when it is in every part.
/// elapsed_s is not added (the caller measures the whole).
void add_part_stats(SearchStats& into, const SearchStats& part);

/// True when the program holds an op of category Collective.
bool has_collectives(const KernelGraph& program);

/// superoptimize for a program with collectives. Each segment (the ops between collectives,
/// with the tensors they read from outside as inputs and the tensors read later as outputs)
/// is searched by superoptimize with `config` (its time limit shared among the segments);
/// the i-th candidate joins the i-th best graph of every segment (the last one where a
/// segment has fewer), and each joined graph is verified against the whole program.
Result<SearchResult> search_around_collectives(const KernelGraph& program,
                                               const SearchConfig& config);

}  // namespace strata::search
