#include "search/search_monitor.h"

#include <cstdio>

namespace strata::search {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double enumeration_deadline(const SearchConfig& c) {
  double d = c.enum_time_limit_s > 0 ? c.enum_time_limit_s : c.time_limit_s / 2;
  if (c.time_limit_s > 0 && (d <= 0 || d > c.time_limit_s)) d = c.time_limit_s;
  return d;
}

void Monitor::loop() {
  auto last_print = Clock::now();
  int64_t last_states = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!finished_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (finished_) break;
    const double t = seconds_since(t0_);
    if ((config_.time_limit_s > 0 && t >= config_.time_limit_s) ||
        (config_.interrupt && config_.interrupt->load()))
      verify_stop_ = true;
    if (phase_ == Phase::Enumeration) {
      double deadline = enum_deadline_;
      if (late_deadline_ > deadline && restored_ == 0 && stop_.live_found.load() == 0)
        deadline = late_deadline_;
      if (deadline > 0 && t >= deadline) {
        if (!stop_.stop.exchange(true)) time_hit_ = true;
      } else if (config_.interrupt && config_.interrupt->load()) {
        stop_for_interrupt();
      }
    }
    const double since = std::chrono::duration<double>(Clock::now() - last_print).count();
    if (!line_.enabled() || since < 1.0) continue;
    char buf[256];
    switch (phase_) {
      case Phase::Setup:
        std::snprintf(buf, sizeof buf,
                      "search: %.0f s, preparing (program analysis, splitting the tree into "
                      "tasks)",
                      t);
        break;
      case Phase::Enumeration: {
        const int64_t states = stop_.live_states.load();
        std::snprintf(buf, sizeof buf,
                      "search: %.0f s, %lld states (%.0f/s), %lld pruned, %lld found, "
                      "%zu/%zu tasks",
                      t, static_cast<long long>(states), (states - last_states) / since,
                      static_cast<long long>(stop_.live_prunes.load()),
                      static_cast<long long>(stop_.live_found.load()), tasks_done_.load(),
                      tasks_total_);
        last_states = states;
        break;
      }
      case Phase::Verification:
        std::snprintf(buf, sizeof buf,
                      "search: %.0f s, candidate %lld of %zu: %s (%lld of %d graphs verified, "
                      "%lld screened)",
                      t, static_cast<long long>(counts_.considered.load()), candidates_,
                      counts_.verifying.load() ? "verifying" : "screening",
                      static_cast<long long>(counts_.verified.load()), config_.top_k,
                      static_cast<long long>(counts_.screened.load()));
        break;
    }
    line_.print(buf);
    last_print = Clock::now();
  }
}

}  // namespace strata::search
