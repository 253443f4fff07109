// A small fork-join helper over std::thread.
//
// Contract: parallel_for(n, threads, fn) calls fn(i) exactly once for every i in [0, n), on up to
// `threads` threads (0 = all hardware threads), and returns when all calls have finished. Work is
// handed out in contiguous chunks from a shared counter, so which thread runs an index varies
// between runs; callers keep results deterministic by making fn(i) write only what index i owns.
// Exceptions escaping fn terminate the program (library code reports errors through Result).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace strata {

/// The number of worker threads a request for `threads` means: `threads` itself when positive,
/// otherwise the hardware concurrency (at least 1).
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

/// Calls fn(begin, end) over disjoint chunks covering [0, n), each of at least `grain` indices
/// (except possibly the last), on up to `threads` threads.
template <class Fn>
void parallel_for_chunks(int64_t n, int threads, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int workers =
      static_cast<int>(std::min<int64_t>(resolve_threads(threads), (n + grain - 1) / grain));
  if (workers <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  // Chunks several times smaller than n / workers balance uneven work without much overhead.
  int64_t chunk = std::max(grain, n / (int64_t{workers} * 8));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (;;) {
      int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= n) return;
      fn(b, std::min(n, b + chunk));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (int t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

/// Calls fn(i) for every i in [0, n) on up to `threads` threads.
template <class Fn>
void parallel_for(int64_t n, int threads, Fn&& fn) {
  parallel_for_chunks(n, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

}  // namespace strata
