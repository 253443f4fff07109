// Progress lines on stderr for long phases (docs/search.md, "Progress").
//
// ProgressLine prints status lines: rewritten in place ("\r", erase line) when stderr is a
// terminal, plain lines otherwise (logs, pipes). ProgressTicker calls a status function once a
// second on a thread of its own and prints what it returns, so that a phase that runs for
// seconds without reporting by itself (a verification, say) still shows that it is alive. Both
// print nothing when disabled (--quiet).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace strata {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  /// Prints `text` as the current status (the caller limits the rate).
  void print(const std::string& text);
  /// Ends a line rewritten in place, so that later output starts on a fresh line.
  void finish();

 private:
  bool enabled_;
  bool tty_;
  bool open_ = false;  // a line rewritten in place has not been ended yet
};

class ProgressTicker {
 public:
  /// `status(elapsed seconds)` is called once a second from `first_after_s` on; an empty
  /// result prints nothing. Disabled: no thread, nothing printed.
  ProgressTicker(bool enabled, std::function<std::string(double)> status,
                 double first_after_s = 1.0);
  ~ProgressTicker() { stop(); }
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

  /// Stops the thread (waits for it) and ends the line; idempotent.
  void stop();

 private:
  ProgressLine line_;
  std::function<std::string(double)> status_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace strata
