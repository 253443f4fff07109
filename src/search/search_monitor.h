// The watcher of a running search (docs/search.md, "Limits" and "Progress"): a thread of
// its own that enforces the enumeration's deadline and the interrupt flag and prints the
// progress line.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "search/enumerator.h"
#include "strata/search/search.h"
#include "util/progress.h"

namespace strata::search {

using Clock = std::chrono::steady_clock;

/// Seconds from t0 to now.
double seconds_since(Clock::time_point t0);

/// The time the enumeration may run (from the start of the search), or 0 for no limit: the
/// enumeration's own limit, else half of the whole search's, and never more than the latter.
double enumeration_deadline(const SearchConfig& c);

/// Watches a search from a thread of its own, from setup to the end of verification: during
/// the enumeration it enforces the enumeration's deadline and the interrupt flag (by setting
/// the stop flag), and in every phase it prints a progress line at most once a second
/// (ProgressLine; none with `quiet`).
class Monitor {
 public:
  enum class Phase { Setup, Enumeration, Verification };
  /// Counters of the verification phase, updated by the verification loop.
  struct VerifyCounts {
    std::atomic<int64_t> considered{0}, screened{0}, verified{0};
    std::atomic<bool> verifying{false};  ///< the current candidate passed its screen
  };

  Monitor(const SearchConfig& config, StopControl& stop, Clock::time_point t0)
      : config_(config),
        stop_(stop),
        t0_(t0),
        enum_deadline_(enumeration_deadline(config)),
        line_(!config.quiet) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Monitor() { finish(); }

  /// Enters the enumeration of `tasks_total` tasks, `tasks_done` of them done already (by an
  /// earlier run). Returns the counter of done tasks the workers advance: the monitor's own, so
  /// that the progress line reads it for as long as the phase lasts (until
  /// enter_verification), past the return of the function that ran the workers.
  std::atomic<size_t>& enter_enumeration(size_t tasks_total, size_t tasks_done) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_total_ = tasks_total;
    tasks_done_ = tasks_done;
    phase_ = Phase::Enumeration;
    return tasks_done_;
  }
  void enter_verification(size_t candidates) {
    std::lock_guard<std::mutex> lock(mu_);
    candidates_ = candidates;
    phase_ = Phase::Verification;
  }
  VerifyCounts& verify_counts() { return counts_; }
  /// A later enumeration deadline (from t0) that holds while the enumeration has found no
  /// graph (StopControl::live_found is 0 and `restored` graphs came from a checkpoint is 0): a
  /// search with nothing to verify spends the time it kept for verification enumerating. 0 or
  /// no later than the enumeration's own deadline: none.
  void set_late_deadline(double late_deadline, size_t restored) {
    std::lock_guard<std::mutex> lock(mu_);
    late_deadline_ = late_deadline;
    restored_ = restored;
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      finished_ = true;
    }
    cv_.notify_all();
    thread_.join();
    line_.finish();
  }
  /// Stops the enumeration for an interrupt (seen by this thread or by a worker).
  void stop_for_interrupt() {
    if (!stop_.stop.exchange(true)) interrupted_ = true;
  }
  /// Set by the watcher once the whole search's time limit has passed or the interrupt flag is
  /// set, in any phase: the verifier's stop flag (VerifyOptions::stop), so that one check of a
  /// large program ends at the limit instead of outlasting it.
  const std::atomic<bool>* verification_stop() const { return &verify_stop_; }
  /// Whether the enumeration was stopped by its deadline / by the interrupt flag.
  bool time_limit_hit() const { return time_hit_; }
  bool interrupted() const { return interrupted_; }

 private:
  /// The watcher thread: enforces the deadline and the interrupt, prints progress.
  void loop();

  const SearchConfig& config_;
  StopControl& stop_;
  Clock::time_point t0_;
  const double enum_deadline_;
  double late_deadline_ = 0;
  size_t restored_ = 0;
  ProgressLine line_;
  std::mutex mu_;
  std::condition_variable cv_;
  Phase phase_ = Phase::Setup;
  size_t tasks_total_ = 0;
  std::atomic<size_t> tasks_done_{0};
  size_t candidates_ = 0;
  VerifyCounts counts_;
  bool finished_ = false;
  std::atomic<bool> time_hit_{false};
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> verify_stop_{false};
  std::thread thread_;
};

}  // namespace strata::search
