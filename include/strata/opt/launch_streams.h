// The plan of the launch order (docs/codegen.md, "Concurrent launches"): which stream each
// launch of strata_launch runs on, and which events order the streams, so that launches that
// do not depend on each other run at the same time (the K and V products beside Q, a LoRA's
// X·A beside X·W) instead of one after another on the caller's stream.
//
// The emitter describes every launch by the storages it reads and writes (LaunchAccess) and
// prints what plan_launch_streams decides: nothing here depends on the emitter's types.
#pragma once

#include <string>
#include <vector>

namespace strata {

/// What one launch touches: storage ids (any integers naming disjoint memory; the emitter uses
/// the kernel tensor that owns the bytes — a view's storage, a routed tensor's parts).
struct LaunchAccess {
  std::vector<int> reads;
  std::vector<int> writes;
  /// A full barrier (an NCCL all_reduce): it runs on the caller's stream after every earlier
  /// launch, and every later launch runs after it.
  bool barrier = false;
};

/// Stream and event decisions for a list of launches in program order.
///
/// Contract (check_launch_streams verifies it):
///  - launch j depends on launch i < j when j reads a storage i writes, writes one i reads or
///    writes, or either is a barrier; every launch also depends on the entry (the caller's
///    stream as strata_launch finds it);
///  - stream 0 is the caller's stream; streams 1 … side_streams are side streams; launches on
///    one stream keep program order;
///  - entry_event (or -1) is recorded on stream 0 before the first launch; event records[j] (or
///    -1) is recorded on launch j's stream right after launch j; waits[j] are the events launch
///    j's stream waits on right before launch j; joins are the events stream 0 waits on after
///    the last launch. Each event is recorded once, events are numbered in the order they are
///    recorded, and only events some stream waits on are recorded;
///  - every dependency is covered: i happens before j through program order on one stream and
///    the waits, transitively; every side stream's last launch happens before the end of stream
///    0 (so the caller's stream reaching the end means all work is done);
///  - no wait is redundant: a launch waits on an event only when what it brings is not already
///    ordered before the launch (through earlier waits on its stream and program order);
///  - a chain (every launch depending on the one before) gets no side streams and no events.
struct LaunchStreamPlan {
  int side_streams = 0;
  int events = 0;                       ///< events recorded (0 without side streams)
  int entry_event = -1;                 ///< recorded on stream 0 before the first launch, or -1
  std::vector<int> stream;              ///< per launch
  std::vector<std::vector<int>> waits;  ///< per launch, events waited on before it
  std::vector<int> records;             ///< per launch, the event recorded after it, or -1
  std::vector<int> joins;               ///< events stream 0 waits on at the end
};

/// The plan: greedy in program order, at most `max_side_streams` side streams (0: everything
/// on the caller's stream, no events). A launch runs on the caller's stream when that stream's
/// last launch is already ordered before it (one of its producers, transitively: no false
/// serialization; a chain stays there); else on the side stream with the latest such last
/// launch; else on a new side stream while fewer than max_side_streams exist; else on the
/// stream whose last launch is the earliest (a serialization the cap forces). Barriers always
/// run on stream 0. The waits of a launch are taken latest producer first, each only when the
/// stream is not yet ordered after that producer.
LaunchStreamPlan plan_launch_streams(const std::vector<LaunchAccess>& launches,
                                     int max_side_streams);

/// An empty string when `plan` meets the contract above for `launches` (every dependency
/// covered, side streams joined, events recorded before they are waited on and once, no
/// redundant wait); else what is violated.
std::string check_launch_streams(const std::vector<LaunchAccess>& launches,
                                 const LaunchStreamPlan& plan);

}  // namespace strata
