// strata device runtime: the side streams and events of concurrent launches (host side only;
// docs/codegen.md, "Concurrent launches"). A generated launcher whose launch plan
// (include/strata/codegen/launch_streams.h) puts launches on side streams includes this header;
// a launcher with every launch on the caller's stream does not.
//
// LaunchStreams holds, per device, the side streams (cudaStreamNonBlocking) and events
// (cudaEventDisableTiming) of one generated graph; the graph's strata_init creates the current
// device's (so that none is created during a CUDA-graph capture), and a launch on another device
// creates that device's on first use. StreamFork is one strata_launch's use of them: it holds
// LaunchStreams' lock for the whole launch (the events are shared, so two host threads launching
// one graph at once are serialized on the host), gives each plan stream its cudaStream_t
// (stream 0 is the caller's), records and waits events, and keeps the first error, which
// finish() returns. Under capture the records and waits become the graph's fork and join edges.
//
// Under STRATA_RT_EMULATE the same calls run on the CPU emulator: the launches of every stream
// are queued, not run (emu::enqueue), a wait runs the waited stream's queue up to the event's
// record point, and finish() runs the streams' queues to the end (emu::streams_end), failing
// when a side stream's launches are not all ordered before the end of the caller's stream. So a
// consumer that does not wait for its producer's event runs before the producer and reads what
// the buffer held before (0xff bytes in the tests: NaN).
#pragma once

#if !defined(__CUDACC_RTC__)

#include "strata_rt/host.cuh"

#if !defined(STRATA_RT_EMULATE)
#include <mutex>
#include <vector>
#endif

namespace strata_rt {
namespace host {

/// Side streams a launch plan may use (EmitOptions::max_side_streams is at most this).
constexpr int kMaxSideStreams = 4;

#if defined(STRATA_RT_EMULATE)

class LaunchStreams {
 public:
  LaunchStreams(int side, int events) : side_(side), events_(events) {}
  int init() { return side_ >= 0 && side_ <= kMaxSideStreams && events_ >= 0 ? 0 : 1; }
  int side() const { return side_; }
  int events() const { return events_; }
  /// Distinct stand-ins for the side streams' handles.
  cudaStream_t token(int s) { return reinterpret_cast<cudaStream_t>(&tokens_[s]); }

 private:
  int side_, events_;
  char tokens_[kMaxSideStreams + 1] = {};
};

class StreamFork {
 public:
  StreamFork(LaunchStreams& ls, cudaStream_t caller) : err_(ls.init()) {
    streams_.push_back(caller);
    for (int s = 1; s <= ls.side(); ++s) streams_.push_back(ls.token(s));
    marks_.assign(ls.events(), emu::StreamMark{-1, 0});
    emu::streams_begin(streams_);
  }
  ~StreamFork() {
    if (!finished_) emu::streams_end();
  }
  int error() const { return err_; }
  cudaStream_t stream(int s) const { return streams_[s]; }
  void record(int event, int s) { marks_[event] = emu::stream_mark(s); }
  void wait(int s, int event) {
    if (marks_[event].queue < 0) emu::fail("a stream waits on an event never recorded");
    emu::stream_wait(s, marks_[event]);
  }
  int finish(int last) {
    finished_ = true;
    emu::streams_end();
    return err_ ? err_ : last;
  }

 private:
  int err_;
  bool finished_ = false;
  std::vector<cudaStream_t> streams_;
  std::vector<emu::StreamMark> marks_;
};

#else

class LaunchStreams {
 public:
  static constexpr int kDevices = 64;
  struct Device {
    bool ready = false;
    cudaStream_t side[kMaxSideStreams] = {};
    std::vector<cudaEvent_t> events;
  };
  LaunchStreams(int side, int events) : side_(side), events_(events) {}
  /// Creates the current device's side streams and events if it has none; a cudaError_t.
  int init() {
    std::lock_guard<std::mutex> lock(mu_);
    Device* d = nullptr;
    return device_locked(&d);
  }

 private:
  friend class StreamFork;
  /// The current device's streams and events, created on first use; mu_ held.
  int device_locked(Device** out) {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return static_cast<int>(err);
    if (device < 0 || device >= kDevices || side_ < 0 || side_ > kMaxSideStreams)
      return static_cast<int>(cudaErrorInvalidValue);
    Device& d = dev_[device];
    if (!d.ready) {
      for (int s = 0; s < side_ && err == cudaSuccess; ++s)
        if (!d.side[s]) err = cudaStreamCreateWithFlags(&d.side[s], cudaStreamNonBlocking);
      d.events.resize(events_, nullptr);
      for (int e = 0; e < events_ && err == cudaSuccess; ++e)
        if (!d.events[e]) err = cudaEventCreateWithFlags(&d.events[e], cudaEventDisableTiming);
      if (err != cudaSuccess) return static_cast<int>(err);
      d.ready = true;  // never destroyed: teardown at exit may run after the context's
    }
    *out = &d;
    return 0;
  }
  std::mutex mu_;
  int side_, events_;
  Device dev_[kDevices];
};

class StreamFork {
 public:
  StreamFork(LaunchStreams& ls, cudaStream_t caller) : lock_(ls.mu_), caller_(caller) {
    err_ = ls.device_locked(&d_);
  }
  int error() const { return err_; }
  cudaStream_t stream(int s) const { return s == 0 ? caller_ : d_->side[s - 1]; }
  /// Records `event` on plan stream s (after what is enqueued there so far).
  void record(int event, int s) {
    if (err_ == 0) err_ = static_cast<int>(cudaEventRecord(d_->events[event], stream(s)));
  }
  /// Plan stream s waits for `event`'s last record before what is enqueued there next.
  void wait(int s, int event) {
    if (err_ == 0) err_ = static_cast<int>(cudaStreamWaitEvent(stream(s), d_->events[event], 0));
  }
  /// The first error of the records and waits, else `last`.
  int finish(int last) { return err_ ? err_ : last; }

 private:
  std::lock_guard<std::mutex> lock_;
  cudaStream_t caller_;
  LaunchStreams::Device* d_ = nullptr;
  int err_ = 0;
};

#endif

}  // namespace host
}  // namespace strata_rt

#endif  // !__CUDACC_RTC__
