// The μGraph JSON format (documented in docs/mugraph-json.md).
//
// One document holds a kernel graph; customized ops nest their block graph, and thread-graph
// ops nest their elementwise chain, so every level round-trips through one file. Reading goes
// through the checking constructors, so a document that violates docs/mugraph-semantics.md is
// rejected with a
// message naming the JSON path of the offending op. Writing emits a canonical form:
// to_json(from_json(to_json(g))) == to_json(g).
#pragma once

#include <string>

#include "strata/ir/json_read.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// Serializes a kernel graph (with nested block and thread graphs).
Json kernel_graph_to_json(const KernelGraph& g);
/// Serializes one block graph (the value of a customized op's "block_graph" key).
Json block_graph_to_json(const BlockGraph& g);

/// Builds a kernel graph from a JSON document. `origin` (a file name) prefixes errors.
Result<KernelGraph> kernel_graph_from_json(const Json& doc, const std::string& origin);
/// Builds a block graph; `input_shapes` are the device shapes of the kernel op's inputs.
Result<BlockGraph> block_graph_from_json(const Json& doc, const std::vector<Shape>& input_shapes,
                                         const std::string& path);

}  // namespace strata
