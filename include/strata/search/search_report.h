// The search result as a JSON document (RESULT.json of `strata optimize`, and the payload of
// the result cache). The format is documented in docs/search.md, "Result format".
#pragma once

#include "strata/ir/graph_json.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata {

/// Serializes a result: every ranked graph as μGraph JSON with its predicted time, cost
/// breakdown and verification, the index of the best graph and of the program, the
/// statistics and the result-affecting configuration.
Json search_result_to_json(const SearchResult& result, const SearchConfig& config);

/// Rebuilds a result written by search_result_to_json. Graphs go through the checking
/// constructors; costs are re-estimated on `target` and the ranking re-sorted by them.
/// Statistics, notes and verification results are taken as written.
Result<SearchResult> search_result_from_json(const Json& doc, const Target& target);

/// Sorts candidates best first: by predicted time, equal times by canonical μGraph JSON; then
/// graphs predicted within 6 % of each other by the barriers of their kernels' loops as planned
/// for `target`, fewer first (docs/search.md, "Ranking, screening, verification"). `target`
/// must be the one the costs were predicted for.
void sort_candidates(std::vector<Candidate>& ranked, const Target& target);

}  // namespace strata
