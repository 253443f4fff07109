#include "util/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

namespace strata {

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr))) {}

void ProgressLine::print(const std::string& text) {
  if (!enabled_) return;
  if (tty_) {
    std::cerr << "\r\033[K" << text << std::flush;
    open_ = true;
  } else {
    std::cerr << text << "\n" << std::flush;
  }
}

void ProgressLine::finish() {
  if (open_) std::cerr << "\n" << std::flush;
  open_ = false;
}

ProgressTicker::ProgressTicker(bool enabled, std::function<std::string(double)> status,
                               double first_after_s)
    : line_(enabled), status_(std::move(status)) {
  if (!enabled) return;
  thread_ = std::thread([this, first_after_s] {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto next = t0 + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(first_after_s));
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_until(lock, next, [this] { return stopping_; })) {
      std::string text = status_(std::chrono::duration<double>(Clock::now() - t0).count());
      if (!text.empty()) line_.print(text);
      next += std::chrono::seconds(1);
    }
  });
}

void ProgressTicker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  line_.finish();
}

}  // namespace strata
