// Where strata keeps its on-disk caches: the one lookup of the cache folder, shared by the
// search's result cache and checkpoints (docs/search.md, "Cache and checkpoints") and the
// GPU runtime's binary cache (<folder>/bin, docs/gpu-runtime.md).
#pragma once

#include <string>

namespace strata {

/// The cache folder: `configured` if non-empty, else $STRATA_CACHE_DIR if set and non-empty,
/// else $HOME/.cache/strata, else (no HOME) `.strata-cache` in the working directory. The
/// folder is not created.
std::string resolve_cache_dir(const std::string& configured);

}  // namespace strata
